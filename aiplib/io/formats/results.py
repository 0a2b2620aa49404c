"""Inference JSONL and score files: readers and writers (:mod:`aiplib.io.formats`)."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import math
import mmap
import os
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.io.formats.tables import parse_bool, read_text_csv, write_csv_atomic, write_json_atomic

__all__ = [
    "CORE_FIELDS",
    "EXTRA_FIELDS",
    "RUN_FIELDS",
    "ERROR_RESPONSE",
    "NULL_ANSWER_RULES",
    "is_error_row",
    "repair_jsonl",
    "read_inference_jsonl",
    "quarantine_path",
    "quarantine_lines",
    "read_results",
    "json_values",
    "inference_row_json",
    "append_jsonl_lines",
    "SCORE_NUMERIC_COLUMNS",
    "read_scores",
    "load_scores",
    "write_scores",
]

log = logging.getLogger("aiplib.io.formats")


#: Fields of every inference row (the authors'; a successful row has the manifest columns before
#: raw, a failed one error after it).
CORE_FIELDS = ["id", "raw", "model", "task"]
#: Our fields of an inference row: decode_s and audio_s in s, stim_key (the resume key), batch_size
#: (stimuli of the generate call; empty on mixing failures), window_s (the encoder window in s, for
#: backends choosing one).
EXTRA_FIELDS = [
    "prompt_set",
    "prompt_id",
    "decode_s",
    "audio_s",
    "stim_key",
    "batch_size",
    "window_s",
]
#: What stage 7 writes itself; every other field of a successful row is a copy of its manifest row.
RUN_FIELDS = ("raw", "model", "task", "error", *EXTRA_FIELDS)
#: ``raw`` of a failed generation (the authors' marker).
ERROR_RESPONSE = "__ERROR__"


def repair_jsonl(path) -> int:
    """Cut a line-oriented file (inference JSONL, ``mix_diagnostics.csv``) back to its last complete
    line, in place (a process killed while appending leaves a fragment); returns the bytes removed
    (0 if intact or absent)."""
    path = Path(path)
    if not path.is_file():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        keep = m.rfind(b"\n") + 1  # searched from the end
    if keep == size:
        return 0
    with open(path, "rb+") as f:
        f.truncate(keep)
        os.fsync(f.fileno())
    removed = size - keep
    log.warning(
        "%s: removed a half-written last line (%d bytes) left by an interrupted run", path, removed
    )
    return removed


def read_inference_jsonl(path, *, require_id: bool = True) -> tuple[list[dict], int]:
    """Read an inference JSONL file (ours or the authors'): the one reader of stages 7, 8 and the
    explorer.

    A line that is not UTF-8, not JSON, or not an object with an ``id`` is skipped and counted (one
    warning per file); ``NaN`` tokens are read as float NaN; ``id`` is a str.

    ``require_id=False`` reads any JSON object (the ``run_log.jsonl`` records). Returns ``(rows,
    n_skipped)``: the rows in file order and the lines skipped (a half-written last line included).

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
                bad.append(number)
                continue
            if isinstance(obj, dict) and not require_id and "id" not in obj:
                rows.append(obj)
            elif isinstance(obj, dict) and obj.get("id") not in (None, ""):
                obj["id"] = str(obj["id"])
                rows.append(obj)
            else:
                bad.append(number)
    if bad:
        more = f" … ({len(bad) - 5} more)" if len(bad) > 5 else ""
        log.warning(
            "%s: skipped %d unreadable line(s) (not UTF-8, not JSON or without an id): line %s%s",
            path,
            len(bad),
            ", ".join(str(n) for n in bad[:5]),
            more,
        )
    return rows, len(bad)


def quarantine_path(path) -> Path:
    """Where :func:`quarantine_lines` puts the unreadable lines of ``<model>/<task>.jsonl``:
    ``<model>/quarantine/<task>.jsonl``."""
    return Path(path).parent / "quarantine" / Path(path).name


def quarantine_lines(path, bad: list) -> Path:
    """Append the unreadable lines ``bad`` (``(line number, bytes)`` pairs, 1-based) of the
    inference file ``path`` to its quarantine file (then fsync) and return that file. Each record:
    ``file``, ``line`` (1-based), ``text`` (UTF-8, U+FFFD for what is not), ``bytes_hex``,
    ``set_aside`` (UTC).
    """
    side = quarantine_path(path)
    side.parent.mkdir(parents=True, exist_ok=True)
    repair_jsonl(side)
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    recs = [
        json.dumps(
            {
                "file": Path(path).name,
                "line": int(n),
                "text": raw.rstrip(b"\r\n").decode("utf-8", "replace"),
                "bytes_hex": raw.rstrip(b"\r\n").hex(),
                "set_aside": when,
            },
            ensure_ascii=False,
        )
        + "\n"
        for n, raw in bad
    ]
    append_jsonl_lines(side, recs)
    return side


def is_error_row(row: dict) -> bool:
    """A failed generation: ``raw == "__ERROR__"`` (the authors' rule), no ``raw``, or a
    non-null ``error``."""
    raw, err = (
        None if isinstance(v, float) and math.isnan(v) else v
        for v in (row.get("raw"), row.get("error"))
    )
    return raw is None or raw == ERROR_RESPONSE or err is not None


#: What a JSON ``null`` answer (``"raw": null`` with no ``error``) counts as: ``failed`` (ours: no
#: answer, left out like an ``__ERROR__`` row) or ``text_none`` (the authors' stage 6 scores
#: ``str(raw)``, the text "None")
NULL_ANSWER_RULES = ("failed", "text_none")


def _null_answer_as_text(row: dict) -> dict:
    """``row`` with a JSON ``null`` answer and no error read as the text "None" (the authors'
    ``str(raw)``)."""
    if "raw" in row and row["raw"] is None and row.get("error") is None:
        return {**row, "raw": "None"}
    return row


def read_results(path, *, keep_errors: bool = True, null_answer: str = "failed") -> pd.DataFrame:
    """Read an inference JSONL file, one row per stimulus.

    ``keep_errors`` keeps stimuli whose every attempt failed (their last ``__ERROR__`` row).
    ``null_answer`` (:data:`NULL_ANSWER_RULES`): ``failed`` treats a JSON ``null`` answer as a
    failed generation; ``text_none`` reads it as the text "None" (the authors' rule), counted in
    ``attrs["n_null_as_text"]``.

    Returns
    -------
    pandas.DataFrame
        Every field found (at least :data:`CORE_FIELDS`, ``error`` and :data:`EXTRA_FIELDS`); per
        ``id`` the last successful row, else the last error row, in the order written; empty if the
        file is missing. ``df.attrs``: ``n_skipped`` (unreadable lines), ``n_rows`` (rows read),
        ``n_failed`` (stimuli with no successful row), ``n_null_as_text``.

    Raises
    ------
    AiplibParameterError
        If ``null_answer`` is not one of :data:`NULL_ANSWER_RULES`.
    """
    if null_answer not in NULL_ANSWER_RULES:
        raise AiplibParameterError(
            f"null_answer must be one of {list(NULL_ANSWER_RULES)}, got {null_answer!r}"
        )
    path = Path(path)
    rows, bad = read_inference_jsonl(path) if path.is_file() else ([], 0)
    n_null = 0
    if null_answer == "text_none":
        read_as_text = [_null_answer_as_text(r) for r in rows]
        n_null = sum(1 for a, b in zip(rows, read_as_text) if a is not b)
        rows = read_as_text
    df = pd.DataFrame(rows)
    for col in CORE_FIELDS + ["error"] + EXTRA_FIELDS:
        if col not in df.columns:
            df[col] = pd.Series([None] * len(df), dtype=object)
    is_err = pd.Series([is_error_row(r) for r in rows], index=df.index, dtype=bool)
    ok = df[~is_err].drop_duplicates("id", keep="last")
    failed = df[is_err & ~df["id"].isin(ok["id"])].drop_duplicates("id", keep="last")
    out = pd.concat([ok, failed] if keep_errors else [ok]).sort_index().reset_index(drop=True)
    out.attrs.update(n_skipped=bad, n_rows=len(rows), n_failed=len(failed), n_null_as_text=n_null)
    return out


def _json_value(v):
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return v if math.isfinite(v) else None
    return int(v) if isinstance(v, np.integer) else bool(v) if isinstance(v, np.bool_) else v


def json_values(row: dict) -> dict:
    """``row`` as an inference line stores it: numpy scalars as Python values, NaN / NA / None as
    None."""
    return {k: _json_value(v) for k, v in row.items()}


def inference_row_json(row: dict) -> str:
    """One inference row as a JSON line (numpy scalars to Python, NaN/NA to null, UTF-8 kept)."""
    return json.dumps(json_values(row), ensure_ascii=False, allow_nan=False) + "\n"


def append_jsonl_lines(path, lines: list[str]) -> None:
    """Append complete lines to a line-oriented file, then flush and fsync."""
    if not lines:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(lines))
        f.flush()
        os.fsync(f.fileno())


def _score_numeric_columns() -> tuple[str, ...]:
    """The counts of a score file, then each task family's measure and degradation column (from
    :data:`aiplib.core.tasks.TASK_FAMILIES`)."""
    columns = [
        "snr_db",
        "wer",
        "errors",
        "ref_words",
        "substitutions",
        "deletions",
        "insertions",
        "hits",
    ]
    for spec in TASK_FAMILIES.values():
        for column in (spec.measure, spec.degradation_column):
            if column not in columns:
                columns.append(column)
    return tuple(columns)


#: Score columns read as numbers (errors coerced to NaN); every other column is read as text.
SCORE_NUMERIC_COLUMNS = _score_numeric_columns()


def read_scores(path) -> pd.DataFrame:
    """Read ``results/scores/<task>.csv``.

    Text columns stay strings as written; :data:`SCORE_NUMERIC_COLUMNS` are numbers; ``is_target``
    bool; an empty ``accent_group`` / ``accent`` NaN.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    """
    df = read_text_csv(path)
    for c in df.columns.intersection(SCORE_NUMERIC_COLUMNS):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    if "is_target" in df.columns:
        df["is_target"] = df["is_target"].map(lambda v: parse_bool(v) is True)
    for c in df.columns.intersection(["accent_group", "accent"]):
        df[c] = df[c].replace("", np.nan)
    return df


def load_scores(ws, tasks=None) -> dict[str, pd.DataFrame]:
    """:func:`read_scores` of each task whose ``results/scores/<task>.csv`` exists (task → table).

    ``ws`` may also be the path of a results folder copied out of its workspace; ``tasks`` defaults
    to every ``<task>.csv`` there, in name order."""
    scores_dir = (
        ws.scores_dir if hasattr(ws, "scores_dir") else Path(getattr(ws, "results", ws)) / "scores"
    )
    if tasks is None:
        tasks = sorted(p.stem for p in scores_dir.glob("*.csv"))
    return {
        t: read_scores(scores_dir / f"{t}.csv") for t in tasks if (scores_dir / f"{t}.csv").exists()
    }


def write_scores(ws, task: str, df: pd.DataFrame, sidecar: dict) -> Path:
    """Write ``results/scores/<task>.csv`` and its sidecar ``<task>.json``, each atomically; returns
    the CSV."""
    path = write_csv_atomic(df, ws.scores_csv(task))
    write_json_atomic(sidecar, ws.scores_sidecar(task))
    return path
