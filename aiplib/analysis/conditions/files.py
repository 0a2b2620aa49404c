"""Condition tables on disk, and the analysis without silent background segments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis.conditions.table import condition_table, condition_tables
from aiplib.analysis.conditions.verdicts import DEFAULT_MIN_DIFF_PP, SCOPES
from aiplib.core.errors import AiplibError
from aiplib.core.tasks import task_family
from aiplib.io.formats import load_scores, parse_bool, write_csv_atomic


def write_condition_tables(
    ws,
    *,
    scores=None,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = DEFAULT_MIN_DIFF_PP,
    scopes=tuple(SCOPES),
) -> dict[str, Path]:
    """Write ``results/tables/conditions_<task>.csv`` for every scored task: :func:`condition_table`
    of ``scores`` (default :func:`aiplib.io.formats.load_scores` of ``ws``) with the bootstrap
    settings, minimum change (pp) and scopes given; returns task → file.

    Raises
    ------
    AiplibError
        If there are no score files (run stage 8 first).
    """
    scores = load_scores(ws) if scores is None else scores
    if not scores:
        raise AiplibError(
            f"no results/scores/<task>.csv under {ws.results}; run stage 8 (scoring) first"
        )
    ws.tables_dir.mkdir(parents=True, exist_ok=True)
    tables = condition_tables(
        scores,
        n_resamples=n_resamples,
        seed=seed,
        level=level,
        min_diff_pp=min_diff_pp,
        scopes=scopes,
    )
    return {
        task: write_csv_atomic(t, ws.tables_dir / f"conditions_{task}.csv")
        for task, t in tables.items()
    }


#: Columns of a condition table read back as text, not numbers.
_TEXT_COLUMNS = {
    "bg_id",
    "model",
    "task",
    "condition",
    "scope",
    "test",
    "verdict",
    "note",
    "measure",
    "family",
    "coarse",
}


def read_condition_tables(results_dir) -> dict[str, pd.DataFrame]:
    """Read every ``tables/conditions_<task>.csv`` under a results folder (task → table)."""
    out = {}
    for p in sorted((Path(results_dir) / "tables").glob("conditions_*.csv")):
        t = pd.read_csv(
            p,
            dtype={c: str for c in _TEXT_COLUMNS},
            keep_default_na=False,
            na_values={"snr_db": [""]},
        )
        for c in t.columns:
            if c == "coarse":
                t[c] = (
                    t[c].map(parse_bool).map(lambda v: np.nan if v is pd.NA else v).astype(object)
                )
            elif (
                t[c].dtype == object or pd.api.types.is_string_dtype(t[c])
            ) and c not in _TEXT_COLUMNS:
                t[c] = pd.to_numeric(t[c].replace("", np.nan), errors="coerce")
        out[p.stem[len("conditions_") :]] = t
    return out


def _inactive(s: pd.DataFrame) -> pd.Series:
    """True where a scored row's background segment was digital silence (``bg_active`` false)."""
    return s["bg_active"].map(lambda v: parse_bool(v) is False)


def inactive_background_rows(scores: dict) -> pd.DataFrame:
    """Per task and background, the scored noisy rows whose background segment was digital silence
    (``bg_active`` False, measured at stage 5; e.g. an ESC-50 clip zero-padded to 5 s; kept in every
    headline number, as the authors' mixer made them).

    ``scores``: task → ``results/scores/<task>.csv`` table. Returns ``task, bg_id, n_noisy,
    n_inactive, inactive_share`` (only backgrounds with inactive rows).
    """
    rows = []
    for task, s in scores.items():
        if "bg_active" not in s.columns:
            continue
        noisy = s[s["bg_id"].astype(str) != "clean"]
        counts = _inactive(noisy).groupby(noisy["bg_id"]).agg(["size", "sum"])
        rows += [
            {
                "task": task,
                "bg_id": bg,
                "n_noisy": int(n),
                "n_inactive": int(k),
                "inactive_share": k / n,
            }
            for bg, n, k in counts[counts["sum"] > 0].itertuples()
        ]
    return pd.DataFrame(rows, columns=["task", "bg_id", "n_noisy", "n_inactive", "inactive_share"])


def write_active_only_tables(
    ws,
    *,
    scores=None,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = DEFAULT_MIN_DIFF_PP,
    scopes=tuple(SCOPES),
) -> dict[str, Path]:
    """The per-condition tables again without the noisy rows whose background segment was silent,
    written to ``results/tables/conditions_<task>_bg_active.csv`` for each task that has such rows
    (settings as :func:`condition_table`); returns task → file (empty when no row was
    inactive)."""
    scores = load_scores(ws) if scores is None else scores
    written = {}
    for task in sorted(set(inactive_background_rows(scores)["task"])):
        s = scores[task]
        active = s[~_inactive(s)].reset_index(drop=True)
        t = condition_table(
            active,
            task_family(task),
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            min_diff_pp=min_diff_pp,
            scopes=scopes,
        )
        written[task] = write_csv_atomic(t, ws.tables_dir / f"conditions_{task}_bg_active.csv")
    return written
