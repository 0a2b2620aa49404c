"""Inference JSONL and score files: readers and writers (:mod:`aiplib.io.formats`)."""
from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.io.formats.tables import _read_text_csv, parse_bool, write_csv_atomic, write_json_atomic

__all__ = [
    "CORE_FIELDS", "EXTRA_FIELDS", "RUN_FIELDS", "ERROR_RESPONSE", "is_error_row", "repair_jsonl",
    "read_inference_jsonl", "quarantine_path", "quarantine_lines", "read_results", "json_values", "inference_row_json", "append_jsonl_lines",
    "SCORE_NUMERIC_COLUMNS", "read_scores", "load_scores", "write_scores",
]

log = logging.getLogger("aiplib.io.formats")


# ============================================================================== inference JSONL
CORE_FIELDS = ["id", "raw", "model", "task"]
"""Fields every inference row has (the authors'); a successful row has the manifest columns before
``raw``, a failed one ``error`` after ``raw``."""
EXTRA_FIELDS = ["prompt_set", "prompt_id", "decode_s", "audio_s", "stim_key", "batch_size", "window_s"]
"""Our fields, after the authors' (``decode_s``, ``audio_s`` in s; ``stim_key`` the resume key,
:func:`aiplib.inference.resume.stimulus_keys`; ``batch_size`` the stimuli of the ``generate`` call that
decoded the row, empty on rows written before it was recorded and on mixing failures; ``window_s``
the encoder window the stimulus was decoded on, in s, for backends that choose one — the embedded
Whisper's 15 / 20 / 30 s — else None)."""
RUN_FIELDS = ("raw", "model", "task", "error", *EXTRA_FIELDS)
"""Fields stage 7 writes itself (the response and how it was made); every other field of a
successful row is a copy of its manifest row (``id`` included), see
:func:`aiplib.inference.resume.resume_file` which keeps those copies equal to the manifest."""
ERROR_RESPONSE = "__ERROR__"
"""``raw`` of a failed generation (the authors' marker)."""


def repair_jsonl(path) -> int:
    """Cut a line-oriented file back to its last complete line.

    A process killed while appending can leave a last line without its newline. That fragment is
    removed; all complete lines are kept. Also used for ``mix_diagnostics.csv``.

    Parameters
    ----------
    path : str or Path
        File to repair in place (a missing file is left alone).

    Returns
    -------
    int
        Bytes removed (0 if the file was intact or absent).
    """
    path = Path(path)
    if not path.is_file():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return 0
        pos, keep = size, 0
        while pos > 0 and not keep:  # scan back for the last newline, 64 KiB at a time
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            i = f.read(step).rfind(b"\n")
            keep = pos + i + 1 if i >= 0 else 0
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    removed = size - keep
    log.warning("%s: removed a half-written last line (%d bytes) left by an interrupted run", path, removed)
    return removed


def _line_list(numbers: list[int], at_most: int = 5) -> str:
    shown = ", ".join(str(n) for n in numbers[:at_most])
    return shown + (f" … ({len(numbers) - at_most} more)" if len(numbers) > at_most else "")


def read_inference_jsonl(path, *, require_id: bool = True, bad_lines: list | None = None
                         ) -> tuple[list[dict], int]:
    """Read an inference JSONL file: the one reader of stages 7, 8 and the explorer.

    Policy: a line that is not UTF-8, not JSON, or not a JSON object with an ``id`` is skipped and
    counted (one warning per file), never an exception; blank lines are ignored. ``NaN`` tokens
    (the authors' clean rows hold ``"bg_path": NaN``) are read as float NaN. ``id`` is a str.

    Parameters
    ----------
    path : str or Path
        ``inference/<model>/<task>.jsonl`` (ours or the authors').
    require_id : bool
        Skip objects without an ``id`` (stimulus rows). False reads any JSON object (the
        ``run_log.jsonl`` records), with the same skip-and-count policy for unreadable lines.
    bad_lines : list, optional
        If given, ``(line_number, raw_bytes)`` of every skipped line is appended to it (1-based line
        numbers). The warning names the file and the first line numbers.

    Returns
    -------
    rows : list of dict
        In file order.
    n_skipped : int
        Lines skipped (a half-written last line included).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    """
    path = Path(path)
    rows, bad = [], []
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                bad.append((number, raw))
                continue
            if isinstance(obj, dict) and not require_id and "id" not in obj:
                rows.append(obj)
            elif isinstance(obj, dict) and obj.get("id") not in (None, ""):
                obj["id"] = str(obj["id"])
                rows.append(obj)
            else:
                bad.append((number, raw))
    if bad:
        log.warning("%s: skipped %d unreadable line(s) (not UTF-8, not JSON or without an id): line %s",
                    path, len(bad), _line_list([n for n, _ in bad]))
    if bad_lines is not None:
        bad_lines.extend(bad)
    return rows, len(bad)


def quarantine_path(path) -> Path:
    """Where :func:`quarantine_lines` puts the unreadable lines of ``<model>/<task>.jsonl``:
    ``<model>/quarantine/<task>.jsonl``."""
    path = Path(path)
    return path.parent / "quarantine" / path.name


def quarantine_lines(path, bad: list) -> Path:
    """Append unreadable lines of an inference file to its quarantine file (then fsync).

    Each record is one JSON object: ``file`` (name of the inference file), ``line`` (1-based line
    number in it when set aside), ``text`` (the bytes decoded as UTF-8 with U+FFFD for what is
    not), ``bytes_hex`` (the exact bytes, without the newline) and ``set_aside`` (UTC time).

    Parameters
    ----------
    path : str or Path
        The inference file.
    bad : list of (int, bytes)
        As collected by :func:`read_inference_jsonl` (``bad_lines=``).

    Returns
    -------
    Path
        The quarantine file (:func:`quarantine_path`).
    """

    side = quarantine_path(path)
    side.parent.mkdir(parents=True, exist_ok=True)
    repair_jsonl(side)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    recs = [json.dumps({"file": Path(path).name, "line": int(n), "text": raw.rstrip(b"\r\n").decode("utf-8", "replace"),
                        "bytes_hex": raw.rstrip(b"\r\n").hex(), "set_aside": when}, ensure_ascii=False) + "\n"
            for n, raw in bad]
    append_jsonl_lines(side, recs)
    return side


def is_error_row(row: dict) -> bool:
    """A failed generation: ``raw == "__ERROR__"`` (the authors' rule), no ``raw``, or a
    non-null ``error``."""
    raw = row.get("raw")
    if isinstance(raw, float) and math.isnan(raw):
        raw = None
    err = row.get("error")
    if isinstance(err, float) and math.isnan(err):
        err = None
    return raw is None or raw == ERROR_RESPONSE or err is not None


def read_results(path, *, keep_errors: bool = True) -> pd.DataFrame:
    """Read an inference JSONL file, one row per stimulus.

    Parameters
    ----------
    path : str or Path
        ``inference/<model>/<task>.jsonl``.
    keep_errors : bool
        Keep stimuli whose every attempt failed (their last ``__ERROR__`` row). If False they are
        dropped.

    Returns
    -------
    pandas.DataFrame
        Every field found (at least ``id, raw, error, model, task, prompt_set, prompt_id,
        decode_s, audio_s``); per ``id`` the last successful row, else (with ``keep_errors``) the
        last error row; in the order the kept rows were written. Empty (with those columns) if the
        file is missing or empty. Unreadable lines are skipped and counted
        (:func:`read_inference_jsonl`). ``df.attrs``: ``n_skipped`` (those lines), ``n_rows``
        (rows read) and ``n_failed`` (stimuli with no successful row).
    """
    path = Path(path)
    rows, bad = read_inference_jsonl(path) if path.is_file() else ([], 0)
    df = pd.DataFrame(rows)
    for col in CORE_FIELDS + ["error"] + EXTRA_FIELDS:
        if col not in df.columns:
            df[col] = pd.Series([None] * len(df), dtype=object)
    is_err = pd.Series([is_error_row(r) for r in rows], index=df.index, dtype=bool)
    ok = df[~is_err].drop_duplicates("id", keep="last")
    failed = df[is_err & ~df["id"].isin(ok["id"])].drop_duplicates("id", keep="last")
    out = pd.concat([ok, failed] if keep_errors else [ok]).sort_index().reset_index(drop=True)
    out.attrs.update(n_skipped=bad, n_rows=len(rows), n_failed=len(failed))
    return out


def _json_value(v):
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return v if math.isfinite(v) else None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def json_values(row: dict) -> dict:
    """``row`` with the values an inference line stores: numpy scalars as Python numbers and
    bools, NaN / NA / None as None (what :func:`inference_row_json` writes and JSON reads back)."""
    return {k: _json_value(v) for k, v in row.items()}


def inference_row_json(row: dict) -> str:
    """One inference row as a JSON line (numpy scalars to Python, NaN/NA to null, UTF-8 kept)."""
    return json.dumps(json_values(row), ensure_ascii=False, allow_nan=False) + "\n"


def append_jsonl_lines(path, lines: list[str]) -> None:
    """Append complete lines to a line-oriented file, then flush and fsync (a kill loses nothing
    written before)."""
    if not lines:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(lines))
        f.flush()
        os.fsync(f.fileno())


# ============================================================================== scores
SCORE_NUMERIC_COLUMNS = ("snr_db", "wer", "errors", "ref_words", "substitutions", "deletions", "insertions",
                         "hits", "delta_wer", "correct", "delta_acc")
"""Score columns read as numbers (errors coerced to NaN); every other column is read as text."""


def read_scores(path) -> pd.DataFrame:
    """Read ``results/scores/<task>.csv``.

    Text columns stay strings (``"None"``, ``"NA"`` or ``"0001"`` are not turned into NaN or
    numbers); :data:`SCORE_NUMERIC_COLUMNS` are numbers; ``is_target`` is bool; ``accent_group``
    and ``accent`` ``""`` become NaN.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    """
    df = _read_text_csv(path)
    for c in SCORE_NUMERIC_COLUMNS:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    if "is_target" in df.columns:
        df["is_target"] = df["is_target"].map(lambda v: parse_bool(v) is True)
    for c in ("accent_group", "accent"):
        if c in df.columns:
            df[c] = df[c].replace("", np.nan)
    return df


def load_scores(ws, tasks=None) -> dict[str, pd.DataFrame]:
    """:func:`read_scores` of each task whose ``results/scores/<task>.csv`` exists (task → table).

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        (An object with only a ``results`` folder, or the path of a results folder, is accepted
        too, for a results folder copied out of its workspace.)
    tasks : iterable of str, optional
        Default: every ``<task>.csv`` there, in name order.
    """
    scores_dir = ws.scores_dir if hasattr(ws, "scores_dir") else Path(getattr(ws, "results", ws)) / "scores"
    if tasks is None:
        tasks = sorted(p.stem for p in scores_dir.glob("*.csv"))
    out = {}
    for task in tasks:
        p = scores_dir / f"{task}.csv"
        if p.exists():
            out[task] = read_scores(p)
    return out


def write_scores(ws, task: str, df: pd.DataFrame, sidecar: dict) -> Path:
    """Write ``results/scores/<task>.csv`` and its sidecar ``<task>.json``, each atomically.

    Returns
    -------
    Path
        The CSV.
    """
    path = write_csv_atomic(df, ws.scores_csv(task))
    write_json_atomic(sidecar, ws.scores_sidecar(task))
    return path
