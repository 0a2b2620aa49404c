"""One entry point per stage whose *inputs* depend on the profile (stages 1–3).

A profile changes inputs, never the stages: the notebooks call these functions, which dispatch
to ``aiplib.corpora.demo``, ``aiplib.corpora.paper`` or ``aiplib.corpora.custom``; everything
from stage 3's curation onwards is the same code for every profile.
"""
from __future__ import annotations

import logging

from . import stamps
from .corpora import get_profile
from .errors import AiplibParameterError
from .tasks import FAMILIES

log = logging.getLogger(__name__)

__all__ = ["SIZES", "stage_sizes", "gather_raw", "build_item_banks", "battery_specs"]

SIZES = {
    "demo": dict(n_asr_real=12, n_asr_synth=16, n_kws_target=20, n_kws_nontarget=10),
    "demo_smoke": dict(n_asr_real=2, n_asr_synth=2, n_kws_target=2, n_kws_nontarget=1),
    "paper": dict(),
    "paper_smoke": dict(n_librispeech=5, n_common_voice=5, n_kws=5),  # the authors' --smoke-test: 5 per bank
    "custom": dict(),
    "custom_smoke": dict(max_items=3),
}
"""Default item-bank sizes per profile (``<profile>_smoke`` when ``$AIP_SMOKE=1``)."""


def stage_sizes(profile: str, smoke: bool = False) -> dict:
    """Item-bank size parameters of ``profile`` (small ones when ``smoke``)."""
    key = f"{profile}_smoke" if smoke else profile
    if key not in SIZES:
        raise AiplibParameterError(f"unknown profile {profile!r}")
    return dict(SIZES[key])


def gather_raw(ws, **params):
    """Stage 1: get the raw inputs of ``ws.profile`` into ``ws.raw`` (install, download or validate).

    Always runs (it re-reads the sources, so a file added to a custom folder is seen); then writes
    ``raw/raw.stamp.json`` (:mod:`aiplib.stamps`) with the parameters and ``raw/inventory.csv``.
    """
    mod = get_profile(ws.profile)
    out = mod.gather_raw(ws, **params)
    inv = ws.raw / "inventory.csv"
    stamps.write_stamp(stamps.stamp_path(ws.raw, "raw"),
                       stamps.make_stamp("01_download_data", params=dict(profile=ws.profile, **params), ws=ws,
                                         module=mod.__name__),
                       outputs=[inv] if inv.is_file() else [], ws=ws)
    return out


def _item_bank_stamp(ws, params: dict, mod) -> dict:
    inv = ws.raw / "inventory.csv"
    return stamps.make_stamp("02_build_item_banks", params=dict(profile=ws.profile, **params), ws=ws,
                             inputs=[inv] if inv.is_file() else [], module=mod.__name__)


def build_item_banks(ws, *, overwrite: bool = False, **params):
    """Stage 2: write ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl`` for ``ws.profile``.

    The item banks are rebuilt (``overwrite=True`` is passed to the profile) when
    ``itembanks/itembanks.stamp.json`` (:mod:`aiplib.stamps`) records other parameters
    (``seed``, sizes …) or another ``raw/inventory.csv`` — for ``custom`` the inventory holds the
    SHA-256 of every user file and every transcript and label, so an added utterance, a corrected
    transcript or a replaced clip rebuilds them; item banks without a stamp are rebuilt too. A
    warning names what changed. Otherwise the existing item banks are read back.

    Parameters
    ----------
    ws : Workspace
    overwrite : bool
        Rebuild whatever the stamp says.
    **params
        The profile's ``build_item_banks`` parameters (``seed``, sizes).

    Returns
    -------
    dict of str → pandas.DataFrame
        ``{"asr": …, "kws": …}``, as the profile's ``build_item_banks``.
    """
    mod = get_profile(ws.profile)
    stamp = _item_bank_stamp(ws, params, mod)
    stamp_file = stamps.stamp_path(ws.itembanks, "itembanks")
    banks = [ws.item_bank(f) for f in FAMILIES]
    if not overwrite and any(p.is_file() for p in banks):
        changed = stamps.differences(stamps.read_stamp(stamp_file), stamp, ws=ws)
        if changed:
            log.warning("item banks are rebuilt: %s", "; ".join(changed[:5]))
            overwrite = True
    out = mod.build_item_banks(ws, overwrite=overwrite, **params)
    stamps.write_stamp(stamp_file, stamp, outputs=[p for p in banks if p.is_file()], ws=ws)
    return out


def battery_specs(ws, **params):
    """Stage 3 input: the background specs of ``ws.profile`` (see ``aiplib.backgrounds``)."""
    return get_profile(ws.profile).battery_specs(ws, **params)
