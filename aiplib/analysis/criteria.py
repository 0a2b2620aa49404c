"""Pass/fail criteria for CI: thresholds on the condition tables and no regression.

Criteria file (``criteria.json``)
---------------------------------
A JSON object (or just the list of criteria) with the keys ``criteria`` (list), and optionally
``no_worse_than_previous``, ``previous``, ``min_diff_pp``, ``regression_scopes`` and ``note``;
:data:`EXAMPLE_CRITERIA` is an example.

Each criterion selects rows of the ``conditions_<task>.csv`` tables and bounds one measure:

* ``task``, ``model``, ``bg_id``, ``scope``: a value or ``"*"`` (any; the default). ``bg_id``
  ``"all"`` is the aggregate over backgrounds and ``"clean"`` the clean stimuli; ``scope`` is one
  of ``clean, overall, snr, background, condition`` (:data:`aiplib.analysis.conditions.SCOPES`).
* ``snr_db``: a number, ``"all"`` (rows aggregated over SNRs) or ``"*"`` (any; the default).
* ``measure``: a numeric column of the table (``wer_pp, mean_wer_pp, cer_pp, sub_pp, del_pp,
  ins_pp, acc_pp, delta_pp, ci_low_pp, ci_high_pp, delta_corpus_pp, p_value`` …, percent /
  percentage points) or an alias in fractions: ``wer, mean_wer, cer, substitutions, deletions,
  insertions, acc, delta_wer, delta_acc`` (:data:`MEASURE_ALIASES`).
* ``min`` and/or ``max``: inclusive bounds. Every selected row with a finite value must satisfy
  them; a criterion that selects no row with a value fails too (a typo must not pass silently).

``no_worse_than_previous`` (default true when a previous run is known, through the argument
``previous`` or the ``previous`` key, a path relative to the criteria file): every condition in
``regression_scopes`` (default all) whose verdict in :func:`aiplib.analysis.comparison.compare_runs`
(previous → this run) is ``worse`` fails. ``min_diff_pp`` sets the minimum change of that verdict
(default 2). ``python -m aiplib.analysis.report --criteria criteria.json`` checks a run from the
shell.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd

from aiplib.analysis import conditions as cond
from aiplib.analysis.comparison import compare_runs
from aiplib.core.errors import AiplibError, ValidationError
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.io.formats import load_scores

log = logging.getLogger(__name__)


def _measure_aliases() -> dict[str, str]:
    """Criteria measures given as fractions → their percent column; each task family's
    degradation column (``TaskFamily.degradation_column``) reads ``delta_pp``."""
    aliases = {
        "wer": "wer_pp",
        "mean_wer": "mean_wer_pp",
        "cer": "cer_pp",
        "substitutions": "sub_pp",
        "deletions": "del_pp",
        "insertions": "ins_pp",
        "acc": "acc_pp",
    }
    for spec in TASK_FAMILIES.values():
        aliases[spec.degradation_column] = "delta_pp"
    aliases["clean_wer"] = "clean_wer_pp"
    aliases["clean_acc"] = "clean_acc_pp"
    return aliases


#: Criteria measures given as fractions → the percent column they are read from (÷ 100).
MEASURE_ALIASES = _measure_aliases()

#: A degradation measure → the task family whose tables hold it (``delta_wer`` → ``asr``).
_DEGRADATION_FAMILY = {spec.degradation_column: name for name, spec in TASK_FAMILIES.items()}

#: An example criteria object (what a criteria.json holds, as a Python dict).
EXAMPLE_CRITERIA = {
    "criteria": [
        {"task": "asr", "model": "*", "bg_id": "all", "snr_db": 0, "measure": "wer_pp", "max": 60},
        {"task": "kws", "scope": "condition", "measure": "acc_pp", "min": 40},
        {
            "task": "asr",
            "scope": "overall",
            "measure": TASK_FAMILIES["asr"].degradation_column,
            "max": 0.30,
        },
        {"task": "asr", "bg_id": "clean", "measure": "wer", "max": 0.25},
    ],
    "no_worse_than_previous": True,
    "min_diff_pp": 2.0,
}

#: JSON Schema of a number.
_NUM = {"type": "number"}

#: The scopes of :data:`aiplib.analysis.conditions.SCOPES`, in order.
_SCOPE_LIST = list(cond.SCOPES)

#: JSON Schema of a criteria object (after a bare list is wrapped as ``{"criteria": [...]}``).
SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "criteria": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["measure"],
                "if": {"not": {"required": ["min"]}},
                "then": {"required": ["max"]},  # min and/or max
                "properties": {
                    "task": {},
                    "model": {},
                    "bg_id": {},
                    "note": {},
                    "min": _NUM,
                    "max": _NUM,
                    "measure": {"type": "string", "minLength": 1},
                    "scope": {"enum": ["*", *_SCOPE_LIST]},
                    "snr_db": {"anyOf": [_NUM, {"enum": ["*", "all"]}]},
                },
            },
        },
        "no_worse_than_previous": {"type": ["boolean", "null"]},
        "previous": {"type": ["string", "null"]},
        "min_diff_pp": {"type": "number", "minimum": 0},
        "regression_scopes": {"type": "array", "items": {"enum": _SCOPE_LIST}},
        "note": {},
    },
}


# ----------------------------------------------------------------------------------- criteria
def load_criteria(criteria) -> dict:
    """Read and validate a criteria file (format in the module docstring; :data:`SCHEMA`).

    Parameters
    ----------
    criteria : str, Path, dict or list
        A path to a JSON file, or the parsed object (a list is taken as the ``criteria``).

    Returns
    -------
    dict
        ``criteria`` (list of dicts with defaults filled: ``"*"`` selectors),
        ``no_worse_than_previous`` (bool or None when unset), ``previous`` (absolute path or
        None), ``min_diff_pp`` (float), ``regression_scopes`` (list), ``source`` (file or None).

    Raises
    ------
    ValidationError
        Listing every problem found (unknown keys, bad measures, missing bounds …).
    AiplibError
        If the file does not exist or is not JSON.
    """
    source = None
    if isinstance(criteria, (str, Path)):
        source = Path(criteria)
        criteria = _read_criteria_file(source)
    if isinstance(criteria, list):
        criteria = {"criteria": criteria}
    problems = _criteria_problems(criteria)
    if problems:
        raise ValidationError([f"{source or 'criteria'}: {p}" for p in problems])
    return {
        "criteria": [
            {"task": "*", "model": "*", "bg_id": "*", "scope": "*", "snr_db": "*", **c}
            for c in criteria.get("criteria", [])
        ],
        "no_worse_than_previous": criteria.get("no_worse_than_previous"),
        "previous": _previous_path(criteria.get("previous"), source),
        "min_diff_pp": float(criteria.get("min_diff_pp", cond.DEFAULT_MIN_DIFF_PP)),
        "regression_scopes": criteria.get("regression_scopes", _SCOPE_LIST),
        "source": source,
    }


def _read_criteria_file(source: Path):
    """The parsed JSON of a criteria file.

    Raises
    ------
    AiplibError
        If the file does not exist or is not JSON.
    """
    if not source.is_file():
        raise AiplibError(f"criteria file {source} does not exist")
    try:
        return json.loads(source.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AiplibError(f"criteria file {source} is not valid JSON: {exc}") from exc


def _schema_problem(error) -> str:
    """One schema error in words (a missing bound is named as such)."""
    if "then" in error.schema_path:
        return f"{error.json_path}: give 'min' and/or 'max'"
    return f"{error.json_path}: {error.message}"


def _criteria_problems(criteria) -> list[str]:
    """Every schema problem of a criteria object; without one, every criterion whose min exceeds
    its max."""
    validator = jsonschema.Draft202012Validator(SCHEMA)
    problems = [_schema_problem(e) for e in validator.iter_errors(criteria)]
    if problems:
        return problems
    for i, c in enumerate(criteria.get("criteria", [])):
        if "min" in c and "max" in c and c["min"] > c["max"]:
            problems.append(f"$.criteria[{i}]: min {c['min']} > max {c['max']}")
    return problems


def _previous_path(previous, source: Path | None) -> Path | None:
    """The previous run's path: a relative one is read from the criteria file's folder."""
    if previous is None:
        return None
    prev = Path(previous)
    if not prev.is_absolute() and source is not None:
        prev = (source.parent / prev).resolve()
    return prev


def _select(t: pd.DataFrame, c: dict) -> pd.DataFrame:
    sel = pd.Series(True, index=t.index)
    for key in ("task", "model", "bg_id", "scope"):
        value = c.get(key, "*")
        if value != "*":
            sel &= t[key].astype(str) == str(value)
    snr = c.get("snr_db", "*")
    if snr == "all":
        sel &= t["snr_db"].isna() & (t["bg_id"].astype(str) != "clean")
    elif snr != "*":
        sel &= np.isclose(pd.to_numeric(t["snr_db"], errors="coerce").to_numpy(float), float(snr))
    return t[sel]


def _measure(t: pd.DataFrame, measure: str) -> pd.Series | None:
    """The values of ``measure`` (an alias: its percent column ÷ 100), or None if unknown for this
    table."""
    if measure in t.columns and pd.api.types.is_numeric_dtype(t[measure]):
        return t[measure].astype(float)
    col = MEASURE_ALIASES.get(measure)
    if col not in t.columns:
        return None
    families = set(t["family"].astype(str)) if "family" in t.columns else set()
    owner = _DEGRADATION_FAMILY.get(measure)
    if owner is not None and families - {owner}:  # a degradation read in another family's table
        return None
    return t[col].astype(float) / 100.0


def check_criteria(
    ws,
    criteria=None,
    previous=None,
    *,
    tables=None,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> list[dict]:
    """Test a run against criteria and, optionally, against a previous run.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        The run under test: its ``results/tables/conditions_<task>.csv`` (computed when absent), or
        ``tables``.
    criteria : str, Path, dict or list, optional
        A criteria file or object (:func:`load_criteria`). None: only the regression check.
    previous : Workspace or path, optional
        Overrides the file's ``previous``. Unless ``no_worse_than_previous`` is false, every
        condition whose verdict in :func:`compare_runs` (previous → ``ws``) is ``worse`` fails.
    n_resamples, seed, level
        Bootstrap settings of the regression comparison (and of the tables, if computed).

    Returns one dict per failure (empty: pass): ``kind`` (``threshold``, ``no_match``,
    ``unknown_measure`` or ``regression``), ``criterion`` (index or None), ``task, model, condition,
    measure, value, min, max`` where they apply, and a readable ``message``.

    Raises
    ------
    ValidationError
        If the criteria file is invalid.
    RunMismatchError
        If the previous run has other manifests or another normaliser.
    """
    spec = load_criteria({} if criteria is None else criteria)
    if spec["criteria"] and tables is None:
        tables = cond.read_condition_tables(ws.results) or cond.condition_tables(
            load_scores(ws),
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            min_diff_pp=spec["min_diff_pp"],
        )
    failures = [f for i, c in enumerate(spec["criteria"]) for f in _check_one(tables, i, c)]
    prev = previous if previous is not None else spec["previous"]
    if prev is not None and spec["no_worse_than_previous"] is not False:
        cmp_ = compare_runs(
            prev,
            ws,
            n_resamples=n_resamples,
            seed=seed,
            level=level,
            min_diff_pp=spec["min_diff_pp"],
            scopes=spec["regression_scopes"],
        )
        for r in cmp_[cmp_["verdict"] == "worse"].itertuples(index=False):
            failures.append(
                {
                    "kind": "regression",
                    "criterion": None,
                    "task": r.task,
                    "model": r.model,
                    "condition": r.condition,
                    "measure": r.measure,
                    "value": r.change_pp,
                    "min": None,
                    "max": None,
                    "message": f"{r.task}/{r.model} {r.condition}: worse than the previous run "
                    f"— {r.measure} {r.a_pp:.1f} → {r.b_pp:.1f} %, change {r.change_pp:+.1f} pp "
                    f"[{r.ci_low_pp:.1f}, {r.ci_high_pp:.1f}], p = {r.p_value:.3g}",
                }
            )
    elif spec["no_worse_than_previous"]:
        log.warning(
            "no_worse_than_previous is set but no previous run was given: regression check skipped"
        )
    return failures


def _check_one(tables: dict, i: int, c: dict) -> list[dict]:
    base = {
        "criterion": i,
        "task": c["task"],
        "model": c["model"],
        "measure": c["measure"],
        "min": c.get("min"),
        "max": c.get("max"),
    }
    out, any_value, any_row = [], False, False
    bound = " and ".join(f"{op} {c[b]:g}" for b, op in (("min", ">="), ("max", "<=")) if b in c)
    for task, t in sorted(tables.items()):
        part = _select(t, c) if not t.empty and str(c["task"]) in ("*", task) else t.iloc[:0]
        if part.empty:
            continue
        any_row = True
        got = _measure(part, c["measure"])
        if got is None:
            out.append(
                {
                    **base,
                    "kind": "unknown_measure",
                    "task": task,
                    "condition": None,
                    "value": None,
                    "message": f"criterion {i}: measure {c['measure']!r} does not exist in "
                    f"conditions_{task}.csv",
                }
            )
            continue
        vals = got.to_numpy(float)
        ok = np.isfinite(vals)
        any_value |= bool(ok.any())
        lo, hi = c.get("min", -np.inf), c.get("max", np.inf)
        bad = ok & ((vals < lo) | (vals > hi))
        for (_, r), v in zip(part[bad].iterrows(), vals[bad]):
            out.append(
                {
                    **base,
                    "kind": "threshold",
                    "task": r["task"],
                    "model": r["model"],
                    "condition": r["condition"],
                    "value": float(v),
                    "message": f"{r['task']}/{r['model']} {r['condition']}: {c['measure']} = "
                    f"{v:.4g}, required {bound} (criterion {i})",
                }
            )
    if not any_row or not any_value and not any(f["kind"] == "unknown_measure" for f in out):
        what = f" with a value of {c['measure']!r}" if any_row else ""
        out.append(
            {
                **base,
                "kind": "no_match",
                "condition": None,
                "value": None,
                "message": f"criterion {i} ({_describe(c)}) selects no condition{what}",
            }
        )
    return out


def _describe(c: dict) -> str:
    return ", ".join(
        f"{k}={c[k]}"
        for k in ("task", "model", "scope", "bg_id", "snr_db", "measure")
        if c.get(k, "*") != "*"
    )
