"""Stages 1–3 of the ``custom`` profile: the user's own folders, validated before any work.

Inputs (notebook 01's parameters, or ``make all PROFILE=custom SPEECH_DIR=… TEXTS=… KWS_DIR=…
KWS_LABELS=… BACKGROUNDS_DIR=…``):

``speech_dir`` and ``texts``
    Utterances and a CSV/TSV table ``file`` (relative to ``speech_dir``, or absolute), ``text``,
    optional ``accent_group``, ``speaker``, ``licence``, ``attribution``.
``kws_dir`` and ``kws_labels``
    Keyword clips and a table ``file``, ``label`` (the one word spoken), same options;
    ``is_target`` is ``label in keywords`` (default :data:`KEYWORDS`).
``backgrounds_dir``
    Background recordings, optional ``licences.csv`` (``file``, ``licence``, ``attribution``,
    optional ``category`` — one of :data:`CATEGORIES` — and ``description``).

Audio files are found by extension (recursively, hidden files skipped), any format, rate and
channel count (:func:`aiplib.io.audio.load_audio`: mono, 16 kHz).

Stage 1 (:func:`gather_raw`) writes nothing if a problem is fatal and does not copy the user's
audio: ``raw/inventory.csv`` points at the files with their size and SHA-256, and stage 2 refuses
a file that changed since. A KWS label of several words is listed with ``used = False`` and skipped.
A background without ``category`` is inferred ``transient`` or ``stationary``
(:data:`~aiplib.sources.corpora.custom.validate.TRANSIENT_PEAK_DB`); runs of digital silence are
shortened (:func:`strip_digital_silence`) into ``raw/backgrounds/<bg_id>.wav``.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core import DEFAULT_SEED
from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.tasks import KEYWORDS, TASK_FAMILIES
from aiplib.io.audio import SR, load_audio, write_wav
from aiplib.io.formats import (
    parse_bool,
    read_item_bank,
    write_csv_atomic,
    write_item_bank,
    write_json_atomic,
)
from aiplib.io.subaudible import SUBAUDIBLE_LIMIT_DB, remove_subaudible_steep, subaudible_power
from aiplib.sources.corpora.custom.files import licence_table
from aiplib.sources.corpora.custom.report import ValidationReport
from aiplib.sources.corpora.custom.validate import (
    CATEGORIES,
    MAX_UTTERANCE_S,
    UNKNOWN_LICENCE,
    keyword_list,
    strip_digital_silence,
    validate_inputs,
)

__all__ = [
    "CATEGORIES",
    "UNKNOWN_LICENCE",
    "INVENTORY_COLUMNS",
    "strip_digital_silence",
    "validate_inputs",
    "gather_raw",
    "build_item_banks",
    "battery_specs",
]

#: Value of the item banks' ``source`` and the battery's ``source_package``.
SOURCE = "custom (user-supplied)"

#: Columns of ``raw/inventory.csv``: ``package`` is ``custom/speech``, ``custom/kws``,
#: ``custom/backgrounds`` or ``custom/metadata`` (the tables); ``file`` the user's file (absolute),
#: ``prepared`` stage 1's trimmed background copy (relative to the workspace; empty when the file is
#: used as it is).
INVENTORY_COLUMNS = [
    "file",
    "package",
    "licence",
    "attribution",
    "bytes",
    "sha256",
    "used",
    "item_id",
    "bg_id",
    "text",
    "label",
    "is_target",
    "accent_group",
    "speaker",
    "category",
    "category_source",
    "description",
    "duration_s",
    "sample_rate",
    "channels",
    "prepared",
    "prepared_duration_s",
    "note",
]


# ----------------------------------------------------------------------------- stage 1
def _inventory_frame(report: ValidationReport):
    """``raw/inventory.csv`` of a validated report: the tables, then the speech, keyword and
    background rows, with the size and SHA-256 of each file (:data:`INVENTORY_COLUMNS`)."""
    tables = [(report.params.get(n), f"the {n} table") for n in ("texts", "kws_labels")]
    tables.append((licence_table(report.params["backgrounds_dir"]), "background licences"))
    rows = [
        dict(
            file=str(p),
            package="custom/metadata",
            licence="",
            attribution="",
            used=True,
            note=note,
            bytes=Path(p).stat().st_size,
        )
        for p, note in tables
        if p and Path(p).is_file()
    ]
    rows += report.speech + report.kws + report.backgrounds
    df = pd.DataFrame(rows)
    for column in INVENTORY_COLUMNS:
        if column not in df.columns:  # a column no row has
            df[column] = None
    df["sha256"] = [file_sha256(f) for f in df["file"]]
    return df[INVENTORY_COLUMNS]


def gather_raw(ws, *, speech_dir, texts, kws_dir, kws_labels, backgrounds_dir, keywords=KEYWORDS):
    """Stage 1 of ``custom``: validate the user's folders, then record them in
    ``raw/inventory.csv``.

    Nothing is written unless no problem is fatal; also written: ``raw/custom_inputs.json`` (the
    resolved parameters) and ``raw/validation.csv`` (every problem). Warnings are issued as one
    :class:`UserWarning`. Parameters: see :func:`validate_inputs`; ``ws`` may not exist yet.

    Returns
    -------
    pandas.DataFrame
        ``raw/inventory.csv`` (:data:`INVENTORY_COLUMNS`): one row per audio file and table, with
        its size and SHA-256.

    Raises
    ------
    ValidationError
        If any problem is fatal; ``exc.problems`` lists every problem, one line each in the message.
    """
    report = validate_inputs(
        speech_dir=speech_dir,
        texts=texts,
        kws_dir=kws_dir,
        kws_labels=kws_labels,
        backgrounds_dir=backgrounds_dir,
        keywords=keywords,
    )
    report.raise_if_fatal()
    inv = _inventory_frame(report)  # reads the user's files only: still nothing written
    ws.ensure()
    for i in np.flatnonzero(inv["prepared_duration_s"].notna().to_numpy()):
        y, _ = strip_digital_silence(load_audio(inv.at[i, "file"], sr=SR))
        inv.at[i, "prepared"] = ws.rel(
            write_wav(ws.raw / "backgrounds" / f"{inv.at[i, 'bg_id']}.wav", y)
        )
    write_csv_atomic(inv, ws.raw / "inventory.csv")
    report.to_frame().to_csv(ws.raw / "validation.csv", index=False)
    meta = dict(
        report.params,
        max_utterance_s=MAX_UTTERANCE_S,
        sample_rate_hz=SR,
        validated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        n_speech=len(report.speech),
        n_kws=sum(r["used"] for r in report.kws),
        n_kws_skipped=sum(not r["used"] for r in report.kws),
        n_backgrounds=len(report.backgrounds),
        n_warnings=len(report.warnings),
    )
    write_json_atomic(meta, ws.raw / "custom_inputs.json")
    if report.warnings:
        warnings.warn(
            "custom inputs: " + "; ".join(str(p) for p in report.warnings),
            UserWarning,
            stacklevel=2,
        )
    return inv


# ----------------------------------------------------------------------------- stage 2
def _read_inventory(ws):
    """``raw/inventory.csv`` as strings; raises :class:`AiplibError` when missing or not a custom
    inventory."""
    path = ws.raw / "inventory.csv"
    if not path.is_file():
        raise AiplibError(
            f"{path} is missing: run stage 1 (aiplib.sources.corpora.custom.gather_raw) first"
        )
    inv = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in INVENTORY_COLUMNS if c not in inv.columns]
    if missing or not (inv["package"].str.startswith("custom/")).any():
        raise AiplibError(
            f"{path} is not a custom-profile inventory (lacks {missing or 'custom rows'}); "
            "re-run stage 1 with PROFILE=custom"
        )
    return inv


#: How many changed input files the one-line error of :func:`_check_unchanged` names.
CHANGED_SHOWN = 5


def _check_unchanged(inv) -> None:
    """Raise :class:`AiplibError`, one line, naming the files of ``inv`` gone or changed since
    stage 1: the first :data:`CHANGED_SHOWN`, then "and N more", each of which is then listed on
    stderr (the stage's log) before the error."""
    changed = []
    for r in inv.itertuples():
        p = Path(r.file)
        if not p.is_file():
            changed.append(f"{p} (gone)")
        elif str(p.stat().st_size) != str(r.bytes) or file_sha256(p) != r.sha256:
            changed.append(f"{p} (changed)")
    if not changed:
        return
    shown = ", ".join(changed[:CHANGED_SHOWN])
    if len(changed) > CHANGED_SHOWN:
        for c in changed:
            print(f"changed since stage 1: {c}", file=sys.stderr, flush=True)
        shown += f" and {len(changed) - CHANGED_SHOWN} more (all {len(changed)} are listed "
        shown += "above it on stderr, in the stage's log)"
    raise AiplibError(
        f"these input files changed since stage 1; re-run stage 1 to validate them again: {shown}"
    )


def _select(idx: np.ndarray, n: int | None, rng, strata=None) -> np.ndarray:
    """Seeded choice of ``n`` of ``idx`` (all when ``n`` is None), kept in original order.

    With ``strata`` (bool per element) both groups keep at least one member when n ≥ 2.
    """
    if n is None or n >= idx.size:
        return idx
    if strata is None or n < 2 or strata.all() or not strata.any():
        return np.sort(rng.choice(idx, size=n, replace=False))
    a = idx[strata]
    b = idx[~strata]
    na = min(int(np.clip(round(n * a.size / idx.size), 1, n - 1)), a.size)
    nb = min(n - na, b.size)
    return np.sort(
        np.concatenate(
            [rng.choice(a, size=na, replace=False), rng.choice(b, size=nb, replace=False)]
        )
    )


def _stage1_keywords(ws) -> list[str]:
    """The keyword set stage 1 validated (``keywords`` of ``raw/custom_inputs.json``; default set if
    absent)."""
    p = ws.raw / "custom_inputs.json"
    return keyword_list(
        json.loads(p.read_text(encoding="utf-8")).get("keywords") if p.is_file() else None
    )


def build_item_banks(
    ws, *, seed: int = DEFAULT_SEED, overwrite: bool = False, max_items: int | None = None
):
    """Stage 2 of ``custom``: decode the validated files into the item banks (read back when both
    exist, unless ``overwrite``).

    ``max_items``: at most this many items per family, a choice seeded by ``seed`` (KWS keeps a
    target and a non-target clip when both exist and ``max_items`` ≥ 2); None = every usable item.
    Returns ``{"asr": …, "kws": …}``; audio at ``itembanks/audio/<family>/<item_id>.wav`` (16 kHz
    mono float32).

    Raises
    ------
    AiplibError
        If stage 1 has not been run, or an input file changed since stage 1.
    AiplibParameterError
        If ``max_items`` is not a positive integer.
    """
    _check_max_items(max_items)
    inv = _read_inventory(ws)
    if not overwrite and all(ws.item_bank(f).is_file() for f in TASK_FAMILIES):
        return {f: read_item_bank(ws, f) for f in TASK_FAMILIES}
    is_used = inv["used"].str.lower() == "true"
    used = inv[(inv["package"].isin(list(_BANK_PACKAGES.values()))) & is_used]
    _check_unchanged(used)
    ws.ensure()
    # one generator per family, in the order of TASK_FAMILIES (asr, then kws)
    seeds = np.random.SeedSequence(seed).spawn(len(TASK_FAMILIES))
    rngs = [np.random.default_rng(s) for s in seeds]
    for fam, rng in zip(TASK_FAMILIES, rngs):
        _write_bank(ws, fam, used, max_items, rng)
    return {f: read_item_bank(ws, f) for f in TASK_FAMILIES}


def _check_max_items(max_items) -> None:
    """Raise :class:`AiplibParameterError` unless ``max_items`` is None or a positive integer."""
    if max_items is None:
        return
    if isinstance(max_items, bool) or int(max_items) != max_items or max_items < 1:
        raise AiplibParameterError(
            f"max_items must be a positive integer or None, got {max_items!r}"
        )


def _is_target(value) -> bool:
    """An inventory ``is_target`` cell read as a bool (only a true value counts)."""
    return parse_bool(value) is True


def _speech_fields(r: dict) -> dict:
    """The item-bank fields of an utterance beyond the common ones: its transcript."""
    return dict(text=r["text"])


def _keyword_fields(r: dict) -> dict:
    """The item-bank fields of a keyword clip beyond the common ones: its label and whether it is
    a target."""
    return dict(label=r["label"], is_target=r["is_target"].lower() == "true")


#: Inventory ``package`` of each task family's items.
_BANK_PACKAGES = {"asr": "custom/speech", "kws": "custom/kws"}

#: Item-bank fields proper to each task family's items (:func:`_speech_fields`,
#: :func:`_keyword_fields`).
_BANK_FIELDS = {"asr": _speech_fields, "kws": _keyword_fields}


def item_audio(path):
    """An utterance or keyword clip as stage 2 writes it: 16 kHz mono float32 [shape=(n,)], with its
    DC offset and power below 20 Hz removed (:func:`aiplib.io.subaudible.remove_subaudible_steep`)
    when they hold at least :data:`aiplib.io.subaudible.SUBAUDIBLE_LIMIT_DB` (1 %) of its power —
    else the mixer's power-based SNR would count them and the item would be heard at a lower SNR
    than labelled (0.5 peak + 0.1 offset: 5 dB lower). Stage 1 warns about such a file.

    Raises
    ------
    AudioFileError
        If the file is missing or unreadable.
    """
    y = load_audio(path, sr=SR)
    if subaudible_power(y, sr=SR)["subaudible_db"] >= SUBAUDIBLE_LIMIT_DB:
        y = remove_subaudible_steep(y, sr=SR)[0]
    return y


def _bank_row(ws, fam: str, r: dict) -> dict:
    """Decode one inventory row to ``itembanks/audio/<fam>/<item_id>.wav`` (:func:`item_audio`);
    returns its item-bank row."""
    y = item_audio(r["file"])
    out = write_wav(ws.itembanks / "audio" / fam / f"{r['item_id']}.wav", y)
    return dict(
        item_id=r["item_id"],
        path=ws.rel(out),
        source_file=r["file"],
        source=SOURCE,
        licence=r["licence"],
        attribution=r["attribution"],
        duration_s=float(y.size / SR),
        speaker=r["speaker"] or "unknown",
        accent_group=r["accent_group"] or None,
        synthetic=False,
        **_BANK_FIELDS[fam](r),
    )


def _write_bank(ws, fam: str, used, max_items, rng) -> None:
    """Choose (seeded by ``rng``) and write the item bank of task family ``fam``.

    A family with a keyword set keeps a target and a non-target clip in its choice, and the keyword
    set validated in stage 1 travels with its item bank (prompts and scoring read it).
    """
    spec = TASK_FAMILIES[fam]
    has_keywords = spec.keyword_set is not None
    sub = used[used["package"] == _BANK_PACKAGES[fam]].reset_index(drop=True)
    strata = None
    if has_keywords:
        strata = sub["is_target"].map(_is_target).to_numpy(bool)
    keep = _select(np.arange(len(sub)), max_items, rng, strata)
    if len(keep) < len(sub):
        print(
            f"{fam}: {len(keep)} of {len(sub)} usable items kept in the item bank "
            f"(max_items={max_items}, e.g. the smoke size of $AIP_SMOKE=1), chosen by the seed"
        )
    rows = [_bank_row(ws, fam, r) for r in sub.iloc[keep].to_dict("records")]
    keywords = None
    if has_keywords:
        keywords = _stage1_keywords(ws)
    write_item_bank(ws, fam, rows, keywords=keywords)


# ----------------------------------------------------------------------------- stage 3 input
def battery_specs(ws, *, seed: int | None = None) -> list[dict]:
    """Stage 3 of ``custom``: one background spec per file, for
    :func:`aiplib.battery.backgrounds.curate_battery` (``seed`` unused).

    Returns
    -------
    list of dict
        ``bg_id``, ``category`` (``licences.csv``, else inferred), ``description``, ``sources =
        [absolute path]`` (the user's file or stage 1's trimmed copy), ``combine = "concat"``,
        ``licence``, ``attribution``, ``synthetic = False``, ``subaudible = "remove"``.

    Raises
    ------
    AiplibError
        If stage 1 has not been run, or a background changed since stage 1.
    """
    inv = _read_inventory(ws)
    bgs = inv[inv["package"] == "custom/backgrounds"]
    _check_unchanged(bgs)
    for r in bgs.to_dict("records"):
        if r["prepared"] and not ws.path(r["prepared"]).is_file():
            raise AiplibError(f"{ws.path(r['prepared'])} is missing: re-run stage 1")
    return [
        dict(
            bg_id=r["bg_id"],
            category=r["category"],
            description=r["description"],
            sources=[str(ws.path(r["prepared"])) if r["prepared"] else r["file"]],
            combine="concat",
            source_package=SOURCE,
            licence=r["licence"],
            attribution=r["attribution"],
            synthetic=False,
            subaudible="remove",
        )
        for r in bgs.to_dict("records")
    ]
