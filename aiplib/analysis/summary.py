"""The headline numbers of a run for a leaderboard or a script: ``results/summary.json`` and
``results/summary.csv`` (:func:`write_summary`, called by notebook 09).

One record per condition family × model × task: the clean and noisy level of the family's measure
(corpus WER or accuracy, %), the mean per-item degradation with its 95 % bootstrap interval and the
resample count, the corpus-level change with its interval, the exact test and the verdict, the items
and pairs behind them and the run's coverage of the manifest. Every number is copied from the
``clean`` and ``overall`` rows of ``results/tables/conditions_<task>.csv`` (Table R1) and from
``results/tables/coverage.csv`` (stage 8); nothing is recomputed. Format: ``docs/FILE_FORMATS.md``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from aiplib.core.atomic import write_text_atomic
from aiplib.core.tasks import TASK_FAMILIES

#: Name of the summary files under ``results/`` (``.json`` and ``.csv``).
SUMMARY_NAME = "summary"

#: Version of the summary's layout (``schema`` in the JSON); bump when a field changes meaning.
SUMMARY_SCHEMA = "aip-speech-summary/1"

#: Fields of each record, in order (the CSV's columns).
SUMMARY_COLUMNS = [
    "condition_family",
    "model",
    "task",
    "task_family",
    "measure",
    "clean_pp",
    "noisy_pp",
    "degradation",
    "delta_pp",
    "ci_low_pp",
    "ci_high_pp",
    "ci_usable",
    "delta_corpus_pp",
    "corpus_ci_low_pp",
    "corpus_ci_high_pp",
    "level",
    "n_resamples",
    "seed",
    "test",
    "p_value",
    "verdict",
    "n_items",
    "n_pairs",
    "n_stimuli_scored",
    "n_stimuli",
    "coverage",
    "complete",
    "source",
]

#: Overall-row columns copied as they are (the rest are named in :func:`summary_records`): the run
#: of :data:`SUMMARY_COLUMNS` from ``delta_pp`` to ``n_pairs``.
_COPIED = tuple(
    SUMMARY_COLUMNS[SUMMARY_COLUMNS.index("delta_pp") : SUMMARY_COLUMNS.index("n_pairs") + 1]
)


#: Fields that are counts (whole numbers in the files, although a CSV column with a gap reads as
#: float).
_COUNTS = {"ci_usable", "n_resamples", "seed", "n_items", "n_pairs"}


def _plain(v, field: str = ""):
    """A value JSON can hold: NaN and missing → None, numpy scalars → Python numbers, the
    :data:`_COUNTS` as int."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if field in _COUNTS and isinstance(v, float):
        return int(v)
    return v


def _coverage_of(coverage: pd.DataFrame | None, family: str, model: str, task: str) -> dict:
    """The stimuli scored and in the manifest of one family × model × task (stage 8's
    ``coverage.csv``); None each when the table lacks the row."""
    out = {"n_stimuli_scored": None, "n_stimuli": None, "coverage": None, "complete": None}
    if coverage is None:
        return out
    sel = coverage[
        (coverage["family"] == family) & (coverage["model"] == model) & (coverage["task"] == task)
    ]
    if sel.empty:
        return out
    r = sel.iloc[0]
    n = int(r["n_stimuli"])
    scored = int(r["n_scored"])
    out.update(n_stimuli_scored=scored, n_stimuli=n, complete=bool(str(r["complete"]) == "True"))
    out["coverage"] = scored / n if n else None
    return out


def summary_records(tables: dict, coverage: pd.DataFrame | None = None) -> list[dict]:
    """The summary's records: one per condition family × model × task of the condition tables.

    Parameters
    ----------
    tables : dict
        Task → condition table (:func:`aiplib.analysis.conditions.read_condition_tables`: the
        ``background`` family's ``conditions_<task>.csv``).
    coverage : pandas.DataFrame or None
        ``results/tables/coverage.csv`` (:data:`aiplib.scoring.coverage.COLUMNS`).

    Returns
    -------
    list of dict
        Fields :data:`SUMMARY_COLUMNS`, sorted by family, model, task: ``clean_pp`` / ``noisy_pp``
        the family's measure (``wer_pp`` corpus WER or ``acc_pp`` accuracy, %) of the ``clean``
        and ``overall`` rows; ``delta_pp`` … ``n_pairs`` the ``overall`` row's columns of the same
        names (pp; + = worse); ``coverage`` = scored / manifest stimuli (0–1); ``source`` the
        condition table's file. A missing number is None.
    """
    records = []
    for task, t in sorted(tables.items()):
        spec = TASK_FAMILIES[str(t["family"].iloc[0])]
        level = f"{spec.summary}_pp"
        for model, g in t.groupby("model", sort=True):
            clean = g[g["scope"] == "clean"]
            overall = g[g["scope"] == "overall"]
            if overall.empty:
                continue
            o = overall.iloc[0]
            rec = {
                "condition_family": "background",
                "model": str(model),
                "task": task,
                "task_family": spec.name,
                "measure": spec.measure_label,
                "clean_pp": clean[level].iloc[0] if len(clean) else None,
                "noisy_pp": o[level],
                "degradation": spec.degradation_label,
            }
            rec.update({c: o.get(c) for c in _COPIED})
            rec.update(_coverage_of(coverage, "background", str(model), task))
            rec["source"] = f"tables/conditions_{task}.csv"
            records.append({c: _plain(rec.get(c), c) for c in SUMMARY_COLUMNS})
    return records


def write_summary(ws, tables: dict) -> dict:
    """Write ``results/summary.json`` and ``results/summary.csv`` from the condition tables and
    ``results/tables/coverage.csv`` (:func:`summary_records`); return ``{"json": path, "csv":
    path, "records": n}``.

    JSON: ``{"schema": SUMMARY_SCHEMA, "profile", "columns", "records": [...]}`` (missing numbers
    ``null``); the CSV holds the same records, one row each, columns :data:`SUMMARY_COLUMNS`.
    Both files are written atomically. Stage 9 later adds the sidecar of ``summary.csv`` to the
    JSON under ``provenance`` (:func:`aiplib.analysis.provenance.write_sidecar` keeps the other
    keys).
    """
    results = Path(ws.results)
    cov_path = Path(ws.tables_dir) / "coverage.csv"
    coverage = pd.read_csv(cov_path) if cov_path.is_file() else None
    records = summary_records(tables, coverage)
    doc = {
        "schema": SUMMARY_SCHEMA,
        "profile": ws.profile,
        "columns": SUMMARY_COLUMNS,
        "records": records,
    }
    results.mkdir(parents=True, exist_ok=True)
    json_path = results / f"{SUMMARY_NAME}.json"
    csv_path = results / f"{SUMMARY_NAME}.csv"
    write_text_atomic(json_path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    frame = pd.DataFrame(records, columns=SUMMARY_COLUMNS)
    write_text_atomic(csv_path, frame.to_csv(index=False))
    return {"json": json_path, "csv": csv_path, "records": len(records)}


def read_summary(ws) -> list[dict]:
    """The records of ``results/summary.json`` (:func:`write_summary`), one dict per condition
    family x model x task, keys :data:`SUMMARY_COLUMNS`.

    Raises
    ------
    FileNotFoundError
        When stage 9 has not written the file yet.
    """
    path = Path(ws.results) / f"{SUMMARY_NAME}.json"
    return json.loads(path.read_text(encoding="utf-8"))["records"]
