"""One entry point per stage whose *inputs* depend on the profile (stages 1–3).

A profile changes inputs, never the stages: the notebooks call these functions, which dispatch
to ``aiplib.corpora.demo``, ``aiplib.corpora.paper`` or ``aiplib.corpora.custom``; everything
from stage 3's curation onwards is the same code for every profile.
"""
from __future__ import annotations

from .corpora import get_profile
from .errors import AiplibParameterError

__all__ = ["SIZES", "stage_sizes", "corpus_module", "gather_raw", "build_item_banks", "battery_specs"]

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


def corpus_module(profile: str):
    """The ``aiplib.corpora.<profile>`` module (an ``aiplib.corpora.Profile``)."""
    return get_profile(profile)


def gather_raw(ws, **params):
    """Stage 1: get the raw inputs of ``ws.profile`` into ``ws.raw`` (install, download or validate)."""
    return corpus_module(ws.profile).gather_raw(ws, **params)


def build_item_banks(ws, **params):
    """Stage 2: write ``itembanks/asr.jsonl`` and ``itembanks/kws.jsonl`` for ``ws.profile``."""
    return corpus_module(ws.profile).build_item_banks(ws, **params)


def battery_specs(ws, **params):
    """Stage 3 input: the background specs of ``ws.profile`` (see ``aiplib.backgrounds``)."""
    return corpus_module(ws.profile).battery_specs(ws, **params)
