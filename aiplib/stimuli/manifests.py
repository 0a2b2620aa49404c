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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.stamps import differences, read_stamp
from aiplib.core.tasks import CONDITION_FAMILIES, TASK_FAMILIES
from aiplib.io.audio import load_audio_cached

# read_manifest and TASK_FAMILIES are also imported from here by aiplib/inference/runner.py and
# aiplib/stimuli/checks.py
from aiplib.io.formats import read_battery_csv, read_item_bank, read_manifest, write_manifest_csv
from aiplib.io.formats.tables import MANIFEST_REQUIRED
from aiplib.stimuli.mixing import BG_SILENCE_POWER, background_segment, segment_active

log = logging.getLogger(__name__)

#: The paper's SNRs in dB (integers: they are part of the ids).
SNRS_DB = (10, 5, 0)

#: ``snr_db`` written on clean rows (the authors' value).
CLEAN_SNR_DB = 99

#: First seed of each manifest's row counter (the authors' values; the ``background`` family's
#: ``seed_start`` in ``tasks.yaml``).
SEED_START = CONDITION_FAMILIES["background"].seed_start

#: The authors' manifest columns, in their order: the columns every manifest has
#: (:data:`aiplib.io.formats.tables.MANIFEST_REQUIRED`), then the family's own.
AUTHOR_COLUMNS = {
    "asr": [*MANIFEST_REQUIRED, "accent", "gender", "transcript"],
    "kws": [*MANIFEST_REQUIRED, "keyword", "is_target"],
}

#: Our columns after the authors': ``family`` (asr or kws), ``accent_group``, ``bg_offset`` (start
#: sample of the segment, informational), ``bg_active`` (False for a digitally silent segment;
#: empty on clean rows), ``duration_s`` (s), ``n_samples``, ``condition_family`` (a family
#: manifest's own columns follow: :attr:`aiplib.core.tasks.ConditionFamily.columns`).
EXTRA_COLUMNS = [
    "family",
    "accent_group",
    "bg_offset",
    "bg_active",
    "duration_s",
    "n_samples",
    "condition_family",
]


@dataclass(frozen=True)
class FamilyOptions:
    """What stage 5 may choose of a condition family's conditions (None: the family's default).

    Attributes
    ----------
    languages : sequence of str or None
        Competing speech: the distractor languages.
    snrs : sequence of int or None
        Competing speech: the target-over-distractor SNRs, dB.
    conditions : sequence of str or None
        Channel: the condition names.
    """

    languages: Sequence[str] | None = None
    snrs: Sequence[int] | None = None
    conditions: Sequence[str] | None = None


@dataclass(frozen=True)
class ManifestPlan:
    """A condition family's manifest beyond the items' clean rows (what its ``manifest_plan``
    returns, :data:`aiplib.stimuli.families.MIXERS`).

    Attributes
    ----------
    params : dict
        Enter the stamp and the sidecar ``manifests/<cf>/<task>.json``.
    inputs : list of Path
        Files the rows depend on besides the item bank and the speech.
    item_rows : callable
        ``item_rows(item, spec, extra, n_samples, seed) -> (rows, n_seeds)``: one item's rows after
        its clean row (each :func:`item_row`), seeds from ``seed``; ``n_seeds`` is how far the
        counter moves.
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


def snr_int(snr) -> int:
    """An SNR in dB as the integer that stimulus ids carry (``5.0`` → ``5``).

    Raises
    ------
    AiplibParameterError
        If the SNR is not a whole number of dB.
    """
    value = float(snr)
    if not value.is_integer():
        raise AiplibParameterError(
            f"SNR {snr!r} dB is not an integer; stimulus ids need integer SNRs"
        )
    return int(value)


def stimulus_id(item_id: str, bg_id: str, snr_db=None) -> str:
    """The authors' stimulus id: ``<item_id>_clean`` or ``<item_id>_<bg_id>_snr<N>``.

    Examples
    --------
    >>> stimulus_id("1089-134686-0000", "esc_rain", 5), stimulus_id("a01", "clean")
    ('1089-134686-0000_esc_rain_snr5', 'a01_clean')
    >>> stimulus_id("a01", "talker_fr", -5)
    'a01_talker_fr_snr-5'
    """
    return f"{item_id}_clean" if bg_id == "clean" else f"{item_id}_{bg_id}_snr{snr_int(snr_db)}"


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


# ------------------------------------------------------------------------------ the row builder
# A condition family's stage-5 plan (:class:`ManifestPlan`) builds its rows with these, so every
# family's rows share the background manifest's schema.


def cell_text(value) -> str:
    """A manifest cell as text: ``""`` for None or NaN, else ``str(value)``."""
    if value is None:
        return ""
    if isinstance(value, float) and np.isnan(value):
        return ""
    return str(value)


def speech_n_samples(ws, rel) -> int:
    """Number of samples of the speech file ``rel`` (workspace-relative) at 16 kHz: read from the
    header when the file is at 16 kHz, else counted after :func:`aiplib.io.audio.load_audio_cached`
    resamples it.

    Raises
    ------
    soundfile.LibsndfileError, AudioFileError
        If the file is missing or unreadable.
    """
    import soundfile as sf

    path = ws.path(rel)
    info = sf.info(str(path))
    if info.samplerate == 16000:
        return int(info.frames)
    return int(load_audio_cached(path).shape[0])


def _transcript_columns(item: dict) -> dict:
    """The ASR task columns of an item: ``accent`` (else its ``accent_group``), ``gender``,
    ``transcript``."""
    accent = cell_text(item.get("accent")) or cell_text(item.get("accent_group"))
    return dict(
        accent=accent,
        gender=cell_text(item.get("gender")),
        transcript=cell_text(item.get("text")),
    )


def _keyword_columns(item: dict) -> dict:
    """The KWS task columns of an item: ``keyword`` (its label), ``is_target``."""
    return dict(keyword=cell_text(item.get("label")), is_target=bool(item.get("is_target")))


#: A task family's reference column (:attr:`aiplib.core.tasks.TaskFamily.reference`) → the task
#: columns of an item's rows.
_TASK_COLUMNS = {"transcript": _transcript_columns, "keyword": _keyword_columns}


def item_spec(item: dict, family: str, n: int, condition_family: str) -> tuple[dict, dict]:
    """The task columns and our extra columns of an item's rows (every condition family alike).

    Parameters
    ----------
    item : dict
        An item-bank row (``item_id, path`` and ``text, accent, gender`` or ``label, is_target``).
    family : str
        Task family (a key of :data:`aiplib.core.tasks.TASK_FAMILIES`).
    n : int
        The speech's length in samples at 16 kHz (:func:`speech_n_samples`).
    condition_family : str
        The rows' ``condition_family``.

    Returns
    -------
    spec : dict
        The authors' task columns (ASR: ``accent, gender, transcript``; KWS: ``keyword,
        is_target``).
    extra : dict
        ``family, accent_group, duration_s`` (s), ``n_samples, condition_family``.
    """
    spec = _TASK_COLUMNS[TASK_FAMILIES[family].reference](item)
    extra = dict(
        family=family,
        accent_group=cell_text(item.get("accent_group")),
        duration_s=round(n / 16000, 4),
        n_samples=n,
        condition_family=condition_family,
    )
    return spec, extra


def item_row(item: dict, spec: dict, extra: dict, seed: int, condition: dict | None = None) -> dict:
    """One manifest row of item ``item``: its clean row, with the ``condition``'s columns set.

    Parameters
    ----------
    item : dict
        The item-bank row (``item_id``, ``path``).
    spec, extra : dict
        :func:`item_spec` of the item.
    seed : int
        The row's seed (the manifest's row counter).
    condition : dict, optional
        Columns that replace the clean row's or are added after them (``id``, ``background_id``,
        ``snr_db``, ``condition`` … and a family's own columns); None: the clean row.

    Returns
    -------
    dict
        Column → value (:data:`AUTHOR_COLUMNS`, :data:`EXTRA_COLUMNS`, then the family's).
    """
    row = dict(
        id=stimulus_id(item["item_id"], "clean"),
        speech_id=item["item_id"],
        background_id="clean",
        snr_db=CLEAN_SNR_DB,
        condition="clean",
        seed=seed,
        speech_path=item["path"],
        bg_path="",
        **spec,
        bg_offset=None,
        bg_active=None,
        **extra,
    )
    if condition:
        row.update(condition)
    return row


def stamp_up_to_date(stamp_file, stamp: dict, ws, what: str) -> bool:
    """Whether the stamp on disk (``stamp_file``) matches ``stamp``; if not, a warning names
    ``what`` is rebuilt and the first five differences."""
    changed = differences(read_stamp(stamp_file), stamp, ws=ws)
    if changed:
        more = f" (+{len(changed) - 5} more)" if len(changed) > 5 else ""
        log.warning("%s is rebuilt: %s", what, "; ".join(changed[:5]) + more)
    return not changed


def write_manifest_rows(rows: list, columns: list, out) -> pd.DataFrame:
    """The rows (:func:`item_row`) as a manifest frame in ``columns`` order (nullable
    ``bg_offset`` / ``bg_active``), written to ``out``
    (:func:`aiplib.io.formats.write_manifest_csv`).

    Raises
    ------
    AiplibParameterError
        If a stimulus id repeats.
    """
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


def _background_item_rows(ws, item: dict, family: str, bgs: list, snrs: list, seed: int) -> list:
    """One item's rows of the background manifest, seeds counted from ``seed``: its clean row, then
    every background of ``bgs`` (``(bg_id, bg_path, samples)``) at each SNR of ``snrs`` (dB)."""
    n = speech_n_samples(ws, item["path"])
    spec, extra = item_spec(item, family, n, "background")
    rows = [item_row(item, spec, extra, seed)]
    seed += 1
    for bg_id, bg_path, bg in bgs:
        for snr in snrs:
            seg, off = background_segment(bg, seed, n)
            active, _ = segment_active(seg)
            condition = dict(
                id=stimulus_id(item["item_id"], bg_id, snr),
                background_id=bg_id,
                snr_db=snr,
                condition="noisy",
                bg_path=bg_path,
                bg_offset=off,
                bg_active=active,
            )
            rows.append(item_row(item, spec, extra, seed, condition))
            seed += 1
    return rows


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
    snrs = [snr_int(s) for s in snrs]
    if seed_start is None:
        seed0 = SEED_START[family]
    else:
        seed0 = int(seed_start)
    kept, n_probes = foreground_items(read_item_bank(ws, family))
    battery = read_battery_csv(ws.battery_csv)
    if battery is None:
        raise FileNotFoundError(
            f"{ws.battery_csv}: background battery not found; run stage 03_curate_backgrounds first"
        )
    bgs = [
        (str(b.bg_id), str(b.path), load_audio_cached(ws.path(b.path)))
        for b in battery.itertuples()
    ]
    rows = []
    seed = seed0
    for item in kept.to_dict("records"):
        new = _background_item_rows(ws, item, family, bgs, snrs, seed)
        rows += new
        seed += len(new)
    df = write_manifest_rows(rows, columns, ws.manifest_csv(family))
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


#: Bumped when the rows :func:`build_manifest` writes for the same inputs change.
MANIFEST_DEFINITION_VERSION = 3


def build_manifests(
    ws,
    *,
    families=tuple(TASK_FAMILIES),
    snrs=SNRS_DB,
    seed_start: int | None = None,
    overwrite: bool = False,
) -> dict:
    """:func:`build_manifest` (``snrs`` in dB, ``seed_start``, ``overwrite`` as there) for each task
    family whose item bank exists (a missing one is warned about and skipped).

    Returns
    -------
    dict
        ``{family: DataFrame}``.
    """
    out = {}
    for fam in families:
        if not ws.item_bank(fam).is_file():
            warnings.warn(f"no item bank for {fam!r}; its manifest is skipped")
            continue
        out[fam] = build_manifest(ws, fam, snrs=snrs, seed_start=seed_start, overwrite=overwrite)
    return out


def manifest_hash(ws, family: str) -> str:
    """sha256 of ``manifests/<family>.csv`` (hex): identifies the stimuli a run used."""
    return file_sha256(ws.manifest_csv(family))
