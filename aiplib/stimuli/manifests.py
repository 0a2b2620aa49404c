"""Stimulus manifests in the authors' schema: one row per (item, background, SNR) plus each item's
clean row.

Rows, ids, seeds and columns are those of ``build_manifests`` in the authors'
``scripts/05_inference.py`` (IvLabs/AIP-Speech), for every profile. KWS injection probes
(``probe_id`` set) get no row and no seed (:func:`foreground_items`). Per item, in item-bank order:
the clean row, then every background in battery order at each SNR (61 rows for 20 backgrounds × 3
SNRs).

Ids: ``<item_id>_clean`` and ``<item_id>_<bg_id>_snr<N>`` (N the integer SNR in dB). Seeds: a
counter over the rows from :data:`SEED_START`; the background offset follows from it
(:func:`aiplib.stimuli.mixing.bg_offset`). Clean rows: ``background_id = "clean"``, ``snr_db = 99``,
``condition = "clean"``, ``bg_path``, ``bg_offset``, ``bg_active`` empty.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.stamps import differences, read_stamp
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.io.audio import load_audio_cached

# read_manifest and TASK_FAMILIES are also imported from here by aiplib/inference/runner.py and
# aiplib/stimuli/checks.py
from aiplib.io.formats import read_battery_csv, read_item_bank, read_manifest, write_manifest_csv
from aiplib.stimuli.mixing import BG_SILENCE_POWER, background_segment, segment_active

log = logging.getLogger(__name__)

SNRS_DB = (10, 5, 0)
"""The paper's SNRs in dB (integers: they are part of the ids)."""
CLEAN_SNR_DB = 99
"""``snr_db`` written on clean rows (the authors' value)."""
SEED_START = {"asr": 0, "kws": 10000}
"""First seed of each manifest's row counter (the authors' values)."""
AUTHOR_COLUMNS = {
    "asr": [
        "id",
        "speech_id",
        "background_id",
        "snr_db",
        "condition",
        "seed",
        "speech_path",
        "bg_path",
        "accent",
        "gender",
        "transcript",
    ],
    "kws": [
        "id",
        "speech_id",
        "background_id",
        "snr_db",
        "condition",
        "seed",
        "speech_path",
        "bg_path",
        "keyword",
        "is_target",
    ],
}
"""The authors' manifest columns, in their order."""
EXTRA_COLUMNS = [
    "family",
    "accent_group",
    "bg_offset",
    "bg_active",
    "duration_s",
    "n_samples",
    "condition_family",
]
"""Our columns after the authors': ``family`` (asr or kws), ``accent_group``, ``bg_offset`` (start
sample of the segment, informational), ``bg_active`` (False for a digitally silent segment; empty on
clean rows), ``duration_s`` (s), ``n_samples``, ``condition_family`` (a family manifest's own
columns follow: :data:`aiplib.stimuli.families.FAMILY_COLUMNS`).
"""


@dataclass(frozen=True)
class ManifestPlan:
    """A condition family's manifest beyond the items' clean rows (a family's ``manifest_plan``
    hook).

    Attributes
    ----------
    params : dict
        Enter the stamp and the sidecar ``manifests/<cf>/<task>.json``.
    inputs : list of Path
        Files the rows depend on besides the item bank and the speech.
    item_rows : callable
        ``item_rows(item, spec, extra, n_samples, seed) -> (rows, n_seeds)``: one item's rows after
        its clean row, seeds from ``seed``; ``n_seeds`` is how far the counter moves.
    skipped : pandas.DataFrame or None
        ``condition, reason`` of the conditions that cannot run here
        (``manifests/<cf>/skipped.csv``).
    """

    params: dict
    inputs: list
    item_rows: Callable
    skipped: pd.DataFrame | None = None


def compact_json(obj) -> str:
    """Compact sorted JSON, as a manifest's ``condition_params``."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def manifest_columns(family: str) -> list[str]:
    """All columns of ``manifests/<family>.csv``, in order."""
    if family not in TASK_FAMILIES:
        raise AiplibParameterError(
            f"unknown family {family!r}; choose one of {tuple(TASK_FAMILIES)}"
        )
    return AUTHOR_COLUMNS[family] + EXTRA_COLUMNS


def _snr_int(snr) -> int:
    v = float(snr)
    if not v.is_integer():
        raise AiplibParameterError(
            f"SNR {snr!r} dB is not an integer; stimulus ids need integer SNRs"
        )
    return int(v)


def stimulus_id(item_id: str, bg_id: str, snr_db=None) -> str:
    """The authors' stimulus id: ``<item_id>_clean`` or ``<item_id>_<bg_id>_snr<N>``.

    Examples
    --------
    >>> stimulus_id("1089-134686-0000", "esc_rain", 5), stimulus_id("a01", "clean")
    ('1089-134686-0000_esc_rain_snr5', 'a01_clean')
    >>> stimulus_id("a01", "talker_fr", -5)
    'a01_talker_fr_snr-5'
    """
    return f"{item_id}_clean" if bg_id == "clean" else f"{item_id}_{bg_id}_snr{_snr_int(snr_db)}"


def foreground_items(items: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The items that get manifest rows: all but the injection probes (``probe_id`` set), left out
    before the seed counter moves, as the authors' ``build_manifests``.

    Returns
    -------
    (pandas.DataFrame, int)
        The kept items (bank order, index reset) and the number of probes left out.
    """
    if "probe_id" not in items.columns:
        return items.reset_index(drop=True), 0
    pid = items["probe_id"]
    probe = pid.notna() & (pid.astype(str).str.strip() != "")
    return items[~probe].reset_index(drop=True), int(probe.sum())


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)


def _n_samples(ws, rel) -> int:
    import soundfile as sf

    p = ws.path(rel)
    info = sf.info(str(p))
    return int(info.frames) if info.samplerate == 16000 else int(load_audio_cached(p).shape[0])


def _item_spec(it: dict, family: str, n: int, condition_family: str) -> tuple[dict, dict]:
    """The task columns and our extra columns of an item's rows (every condition family alike)."""
    if family == "asr":
        accent = _text(it.get("accent")) or _text(it.get("accent_group"))
        spec = dict(accent=accent, gender=_text(it.get("gender")), transcript=_text(it.get("text")))
    else:
        spec = dict(keyword=_text(it.get("label")), is_target=bool(it.get("is_target")))
    extra = dict(
        family=family,
        accent_group=_text(it.get("accent_group")),
        duration_s=round(n / 16000, 4),
        n_samples=n,
        condition_family=condition_family,
    )
    return spec, extra


def _row(it: dict, spec: dict, extra: dict, seed: int, **condition) -> dict:
    """A row of item ``it``: its clean row with the ``condition``'s columns (``id``,
    ``background_id`` …) set."""
    return (
        dict(
            id=stimulus_id(it["item_id"], "clean"),
            speech_id=it["item_id"],
            background_id="clean",
            snr_db=CLEAN_SNR_DB,
            condition="clean",
            seed=seed,
            speech_path=it["path"],
            bg_path="",
            **spec,
            bg_offset=None,
            bg_active=None,
            **extra,
        )
        | condition
    )


def _up_to_date(stamp_file, stamp: dict, ws, what: str) -> bool:
    """Whether the stamp on disk matches ``stamp``; if not, a warning names what changed."""
    if changed := differences(read_stamp(stamp_file), stamp, ws=ws):
        log.warning(
            "%s is rebuilt: %s",
            what,
            "; ".join(changed[:5]) + (f" (+{len(changed) - 5} more)" if len(changed) > 5 else ""),
        )
    return not changed


def _write_rows(rows: list, columns: list, out) -> pd.DataFrame:
    """The rows as a manifest frame (nullable ``bg_offset`` / ``bg_active``), written to ``out``."""
    df = pd.DataFrame(rows, columns=columns)
    if df["id"].duplicated().any():
        dup = df["id"][df["id"].duplicated()].unique()[:5].tolist()
        raise AiplibParameterError(
            f"{out}: stimulus ids repeat ({dup}); check item and condition ids "
            "(an id must not be another id followed by _<background>)"
        )
    df = df.astype({"bg_offset": "Int64", "bg_active": "boolean"})
    write_manifest_csv(df, out)
    return df


def build_manifest(
    ws, family: str, *, snrs=SNRS_DB, seed_start: int | None = None, overwrite: bool = False
) -> pd.DataFrame:
    """Build ``manifests/<family>.csv`` in the authors' schema (rebuilt on every run: well under a
    second, the same inputs give the same bytes; ``overwrite`` is ignored).

    Parameters
    ----------
    ws : Workspace
    family : {"asr", "kws"}
    snrs : sequence of int, dB
        In this order per background (the authors': 10, 5, 0).
    seed_start : int, optional
        First seed of the row counter; default :data:`SEED_START` of the family.

    Returns
    -------
    pandas.DataFrame
        :func:`manifest_columns` (as :func:`read_manifest` returns them), ``(n_items − n_probes) ×
        (1 + n_bg × len(snrs))`` rows (:func:`foreground_items`). ``bg_active`` is measured here on
        each row's segment (:func:`aiplib.stimuli.mixing.segment_active`).

    Raises
    ------
    FileNotFoundError
        If the item bank or battery is missing.
    AiplibParameterError
        If an SNR is not an integer or ids repeat.
    """
    columns = manifest_columns(family)  # checks the family
    snrs = [_snr_int(s) for s in snrs]
    seed0 = SEED_START[family] if seed_start is None else int(seed_start)
    kept, n_probes = foreground_items(read_item_bank(ws, family))
    if (battery := read_battery_csv(ws.battery_csv)) is None:
        raise FileNotFoundError(
            f"{ws.battery_csv}: background battery not found; run stage 03_curate_backgrounds first"
        )
    bgs = [
        (str(b.bg_id), str(b.path), load_audio_cached(ws.path(b.path)))
        for b in battery.itertuples()
    ]
    rows, seed = [], seed0
    for it in kept.to_dict("records"):
        n = _n_samples(ws, it["path"])
        spec, extra = _item_spec(it, family, n, "background")
        rows.append(_row(it, spec, extra, seed))
        seed += 1
        for bg_id, bg_path, bg in bgs:
            for snr in snrs:
                seg, off = background_segment(bg, seed, n)
                active, _ = segment_active(seg)
                rows.append(
                    _row(
                        it,
                        spec,
                        extra,
                        seed,
                        id=stimulus_id(it["item_id"], bg_id, snr),
                        background_id=bg_id,
                        snr_db=snr,
                        condition="noisy",
                        bg_path=bg_path,
                        bg_offset=off,
                        bg_active=active,
                    )
                )
                seed += 1
    df = _write_rows(rows, columns, ws.manifest_csv(family))
    noisy = df[df["condition"] == "noisy"]
    inactive = (~noisy["bg_active"].astype(bool)).groupby(noisy["background_id"]).mean()
    meta = dict(
        family=family,
        seed_start=seed0,
        snrs_db=snrs,
        n_items=len(kept),
        n_probes_skipped=n_probes,
        n_backgrounds=len(battery),
        rows_per_item=1 + len(battery) * len(snrs),
        n_rows=len(df),
        n_inactive_bg_rows=int((~noisy["bg_active"].astype(bool)).sum()),
        inactive_share_per_background={k: round(float(v), 4) for k, v in inactive.items() if v > 0},
        bg_silence_power=BG_SILENCE_POWER,
        schema="authors (IvLabs/AIP-Speech scripts/05_inference.py build_manifests) + extras",
        manifest_sha256=manifest_hash(ws, family),
    )
    (ws.manifests / f"{family}.json").write_text(json.dumps(meta, indent=2))
    (ws.manifests / f"{family}.stamp.json").unlink(
        missing_ok=True
    )  # of an older version: no stamp now
    return read_manifest(ws, family)


MANIFEST_DEFINITION_VERSION = 3
"""Bumped when the rows :func:`build_manifest` writes for the same inputs change."""


def build_manifests(ws, *, families=tuple(TASK_FAMILIES), **kwargs) -> dict:
    """:func:`build_manifest` for each family whose item bank exists; returns {family:
    DataFrame}."""
    out = {}
    for fam in families:
        if not ws.item_bank(fam).is_file():
            warnings.warn(f"no item bank for {fam!r}; its manifest is skipped")
            continue
        out[fam] = build_manifest(ws, fam, **kwargs)
    return out


def manifest_hash(ws, family: str) -> str:
    """sha256 of ``manifests/<family>.csv`` (hex): identifies the stimuli a run used."""
    return file_sha256(ws.manifest_csv(family))
