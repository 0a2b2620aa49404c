"""The audit report, the comparison of two runs, and pass/fail criteria for CI.

:func:`build_report` writes ``results/report.md`` and ``results/report.html``: per task the
condition tables (:mod:`aiplib.conditions`) with 95 % intervals, exact tests and verdicts, the
ten stimuli that got worst (reference and hypotheses), Tables 2–5, the figures (embedded by
relative path, so the report folder can be moved as a whole) and the provenance
(:mod:`aiplib.provenance`); it also writes ``results/tables/conditions_<task>.csv`` and a JSON
sidecar next to every results file.

:func:`compare_runs` pairs two runs by (model, stimulus id) and reports, per condition, the
paired change B − A with a bootstrap interval over items, an exact test and a verdict. It refuses
(:class:`RunMismatchError`) to compare runs whose manifests (SHA-256) or text normalisers (name or
version) differ: their numbers would not be about the same stimuli or the same scoring.

:func:`check_criteria` tests a run against a criteria file and, optionally, against a previous
run; ``python -m aiplib.report --criteria criteria.json [--previous PATH]`` exits with status
:data:`EXIT_CRITERIA_FAILED` (3) when anything fails, for use in CI.

Criteria file (``criteria.json``)
---------------------------------
A JSON object (or just the list of criteria)::

    {
      "criteria": [
        {"task": "asr", "model": "*", "bg_id": "all", "snr_db": 0,
         "measure": "wer_pp", "max": 60},
        {"task": "kws", "scope": "condition", "measure": "acc_pp", "min": 40},
        {"task": "asr", "scope": "overall", "measure": "delta_wer", "max": 0.30},
        {"task": "asr", "bg_id": "clean", "measure": "wer", "max": 0.25}
      ],
      "no_worse_than_previous": true,
      "previous": "../last-green/results",
      "min_diff_pp": 2.0,
      "regression_scopes": ["clean", "overall", "snr", "background", "condition"]
    }

Each criterion selects rows of the ``conditions_<task>.csv`` tables and bounds one measure:

* ``task``, ``model``, ``bg_id``, ``scope``: a value or ``"*"`` (any; the default). ``bg_id``
  ``"all"`` is the aggregate over backgrounds and ``"clean"`` the clean stimuli; ``scope`` is one
  of ``clean, overall, snr, background, condition`` (:data:`aiplib.conditions.SCOPES`).
* ``snr_db``: a number, ``"all"`` (rows aggregated over SNRs) or ``"*"`` (any; the default).
* ``measure``: a numeric column of the table (``wer_pp, mean_wer_pp, cer_pp, sub_pp, del_pp,
  ins_pp, acc_pp, delta_pp, ci_low_pp, ci_high_pp, delta_corpus_pp, p_value`` …, percent /
  percentage points) or an alias in fractions: ``wer, mean_wer, cer, substitutions, deletions,
  insertions, acc, delta_wer, delta_acc`` (:data:`MEASURE_ALIASES`).
* ``min`` and/or ``max``: inclusive bounds. Every selected row with a finite value must satisfy
  them; a criterion that selects no row with a value fails too (a typo must not pass silently).

``no_worse_than_previous`` (default true when a previous run is known, through the argument
``previous`` or the ``previous`` key, a path relative to the criteria file): every condition in
``regression_scopes`` (default all) whose verdict in :func:`compare_runs` (previous → this run)
is ``worse`` fails. ``min_diff_pp`` sets the minimum change of that verdict (default 2).
"""
from __future__ import annotations

import argparse
import html
import json
import logging
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from . import conditions as cond
from . import stats
from .errors import AiplibError, AiplibParameterError, ValidationError

__all__ = [
    "EXIT_CRITERIA_FAILED",
    "MEASURE_ALIASES",
    "EXAMPLE_CRITERIA",
    "RunMismatchError",
    "run_identity",
    "compare_runs",
    "load_criteria",
    "check_criteria",
    "worst_stimuli",
    "build_report",
    "main",
]

log = logging.getLogger(__name__)

EXIT_CRITERIA_FAILED = 3
"""Exit status of ``python -m aiplib.report`` when a criterion fails or a condition got worse
than in the previous run."""

MEASURE_ALIASES = {"wer": "wer_pp", "mean_wer": "mean_wer_pp", "cer": "cer_pp",
                   "substitutions": "sub_pp", "deletions": "del_pp", "insertions": "ins_pp",
                   "acc": "acc_pp", "delta_wer": "delta_pp", "delta_acc": "delta_pp",
                   "clean_wer": "clean_wer_pp", "clean_acc": "clean_acc_pp"}
"""Criteria measures given as fractions → the percent column they are read from (÷ 100)."""

EXAMPLE_CRITERIA = {
    "criteria": [
        {"task": "asr", "model": "*", "bg_id": "all", "snr_db": 0, "measure": "wer_pp",
         "max": 60},
        {"task": "kws", "scope": "condition", "measure": "acc_pp", "min": 40},
        {"task": "asr", "scope": "overall", "measure": "delta_wer", "max": 0.30},
        {"task": "asr", "bg_id": "clean", "measure": "wer", "max": 0.25},
    ],
    "no_worse_than_previous": True,
    "min_diff_pp": 2.0,
}
"""The example of the module docstring, as a Python object."""

_CRITERION_KEYS = {"task", "model", "bg_id", "snr_db", "scope", "measure", "min", "max", "note"}
_TOP_KEYS = {"criteria", "no_worse_than_previous", "previous", "min_diff_pp",
             "regression_scopes", "note"}


class RunMismatchError(AiplibError):
    """Two runs cannot be compared: different manifests or text normalisers."""


# ------------------------------------------------------------------------------- run identity
def _results_of(run) -> tuple[Path, object | None]:
    """(results folder, Workspace or None) of a Workspace, workspace root or results folder."""
    if hasattr(run, "results") and hasattr(run, "manifests"):
        return Path(run.results), run
    p = Path(run)
    if (p / "results").is_dir() and (p / "manifests").is_dir():
        from .workspace import Workspace

        ws = Workspace(profile=p.name, root=p.resolve())
        return ws.results, ws
    if (p / "scores").is_dir():
        return p, None
    raise AiplibError(f"{p}: neither a workspace (with results/ and manifests/) nor a results "
                      "folder (with scores/)")


def run_identity(run) -> dict:
    """Manifest hashes and normaliser of a run: what must agree for a comparison.

    Parameters
    ----------
    run : Workspace, or path of a workspace root or of a ``results`` folder
        A workspace is inspected live (manifests hashed, normaliser read from the score
        sidecars); a lone results folder needs its ``provenance.json``.

    Returns
    -------
    dict
        ``{"results": Path, "manifests": {family: sha256}, "normalizer": {"name", "version"}}``.

    Raises
    ------
    AiplibError
        If a results folder has no ``provenance.json``.
    """
    from .provenance import collect_provenance, read_provenance

    results, ws = _results_of(run)
    rec = collect_provenance(ws) if ws is not None else read_provenance(results)
    man = {fam: (m or {}).get("sha256") for fam, m in (rec.get("manifests") or {}).items()}
    norm = rec.get("normalizer") or {}
    return {"results": results, "manifests": man,
            "normalizer": {"name": norm.get("name"), "version": norm.get("version")}}


def _check_same_run_inputs(ia: dict, ib: dict, families) -> None:
    problems = []
    for fam in sorted(families):
        ha, hb = ia["manifests"].get(fam), ib["manifests"].get(fam)
        if not ha or not hb:
            problems.append(f"manifest hash of {fam!r} unknown for run "
                            f"{'A' if not ha else 'B'} ({(ia if not ha else ib)['results']})")
        elif ha != hb:
            problems.append(f"manifests/{fam}.csv differ: A {ha[:12]}… vs B {hb[:12]}…")
    na, nb = ia["normalizer"], ib["normalizer"]
    if (na.get("name"), na.get("version")) != (nb.get("name"), nb.get("version")):
        problems.append(f"text normalisers differ: A {na.get('name')} {na.get('version')} vs "
                        f"B {nb.get('name')} {nb.get('version')}")
    if problems:
        raise RunMismatchError("refusing to compare runs A = " + str(ia["results"]) + " and B = "
                               + str(ib["results"]) + ": " + "; ".join(problems))


# --------------------------------------------------------------------------------- comparison
def _load_scores_dir(results: Path) -> dict:
    from .figures import load_scores

    tasks = sorted(p.stem for p in (results / "scores").glob("*.csv"))
    return load_scores(SimpleNamespace(results=results), tasks=tasks)


def compare_runs(run_a, run_b, *, tasks=None, n_resamples: int = 2000, seed: int = 0,
                 level: float = 0.95, min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP,
                 scopes=tuple(cond.SCOPES)) -> pd.DataFrame:
    """Paired change from run A to run B, per condition, with interval, exact test and verdict.

    Parameters
    ----------
    run_a, run_b : Workspace or path
        A workspace, a workspace root or a ``results`` folder (which then needs its
        ``provenance.json``, written by :func:`build_report`). A is the reference (e.g. the
        previous run), B the new one.
    tasks : sequence of str, optional
        Default: every task scored in both runs.
    n_resamples, seed, level, min_diff_pp, scopes
        As in :func:`aiplib.conditions.condition_table`; ``scopes`` may include ``clean`` (the
        clean stimuli are compared like any condition).

    Returns
    -------
    pandas.DataFrame
        One row per (task, model, scope, bg_id, snr_db): ``scope, model, task, family, bg_id,
        snr_db, condition, n_items, n_pairs, measure`` (``wer`` or ``acc``), ``a_pp, b_pp``
        (mean per-utterance WER or accuracy on the paired stimuli), ASR also ``a_corpus_pp,
        b_corpus_pp``; ``change_pp`` (oriented so that positive = B worse: WER_B − WER_A,
        acc_A − acc_B), ``ci_low_pp, ci_high_pp, test, p_value, n_worse, n_better, n_ties,
        verdict, min_diff_pp, level, n_resamples, seed, note``. ``attrs["unpaired"]`` counts,
        per task and model, the stimuli present in only one run.

    Raises
    ------
    RunMismatchError
        If the manifests of a compared family differ (SHA-256) or are unknown, or the text
        normalisers differ in name or version.
    AiplibError
        If a run has no scores or the runs share no task.

    Notes
    -----
    Stimuli are paired by ``(model, stimulus_id)``; only pairs present in both runs count. The
    interval resamples items (cluster bootstrap for aggregated scopes); the test is the exact
    McNemar test for KWS conditions with one pair per item, otherwise the exact sign test on the
    per-item mean changes (:func:`aiplib.conditions.paired_change`).
    """
    from .scoring import task_family

    ia, ib = run_identity(run_a), run_identity(run_b)
    sa, sb = _load_scores_dir(ia["results"]), _load_scores_dir(ib["results"])
    if not sa or not sb:
        raise AiplibError(f"run {'A' if not sa else 'B'} has no results/scores/<task>.csv")
    common = sorted(set(sa) & set(sb)) if tasks is None else list(tasks)
    missing = [t for t in common if t not in sa or t not in sb]
    if missing:
        raise AiplibError(f"tasks {missing} are not scored in both runs")
    if not common:
        raise AiplibError(f"the runs share no scored task (A: {sorted(sa)}, B: {sorted(sb)})")
    _check_same_run_inputs(ia, ib, {task_family(t) for t in common})
    frames, unpaired = [], {}
    for task in common:
        fam = task_family(task)
        val = "wer" if fam == "asr" else "correct"
        cols = ["model", "stimulus_id", val] + (["errors", "ref_words"] if fam == "asr" else [])
        a = sa[task][["task", "item_id", "bg_id", "snr_db"] + cols]
        b = sb[task][cols]
        m = a.merge(b, on=["model", "stimulus_id"], suffixes=("_a", "_b"), how="inner")
        for model in sorted(set(sa[task]["model"]) | set(sb[task]["model"])):
            na = int((sa[task]["model"] == model).sum())
            nb = int((sb[task]["model"] == model).sum())
            npair = int((m["model"] == model).sum())
            if na != npair or nb != npair:
                unpaired[f"{task}/{model}"] = {"only_a": na - npair, "only_b": nb - npair}
        frames.append(_compare_task(m, fam, n_resamples=n_resamples, seed=seed, level=level,
                                    min_diff_pp=min_diff_pp, scopes=scopes))
    if unpaired:
        log.warning("stimuli present in only one run (left out): %s", unpaired)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out.attrs["unpaired"] = unpaired
    out.attrs["run_a"], out.attrs["run_b"] = str(ia["results"]), str(ib["results"])
    return out


def _compare_task(m: pd.DataFrame, fam: str, *, n_resamples, seed, level, min_diff_pp, scopes):
    rows = m.copy()
    rows["n"] = 1.0
    if fam == "asr":
        rows["a"], rows["b"] = rows["wer_a"].astype(float), rows["wer_b"].astype(float)
        rows["d"] = rows["b"] - rows["a"]
        sums = ["n", "a", "b", "d", "errors_a", "errors_b", "ref_words_a"]
    else:
        rows["a"], rows["b"] = rows["correct_a"].astype(float), rows["correct_b"].astype(float)
        rows["d"] = rows["a"] - rows["b"]
        sums = ["n", "a", "b", "d"]
    rows["item_id"] = rows["item_id"].astype(str)
    rows["bg_id"] = rows["bg_id"].astype(str)
    out = []
    for scope, k, g in cond._iter_scopes(rows, sums, scopes):
        n = g.total("n")
        mc = None
        if fam == "kws" and bool(np.all(g["n"] == 1)):
            mc = (g["a"].astype(bool), g["b"].astype(bool))
        pc = cond.paired_change(100 * g["d"], g["n"], n_resamples=n_resamples, seed=seed,
                                level=level, min_diff=min_diff_pp, mcnemar=mc)
        rec = {"scope": scope, "model": k["model"], "task": k["task"], "family": fam,
               "bg_id": k["bg_id"], "snr_db": k["snr_db"],
               "condition": cond.condition_label(k["bg_id"], k["snr_db"]),
               "n_items": len(g), "n_pairs": int(n), "measure": "wer" if fam == "asr" else "acc",
               "a_pp": 100 * g.total("a") / n, "b_pp": 100 * g.total("b") / n}
        if fam == "asr":
            w = g.total("ref_words_a")
            rec.update(a_corpus_pp=100 * g.total("errors_a") / w if w else math.nan,
                       b_corpus_pp=100 * g.total("errors_b") / w if w else math.nan)
        rec.update(change_pp=pc["estimate"], ci_low_pp=pc["ci_low"], ci_high_pp=pc["ci_high"],
                   test=pc["test"], p_value=pc["p_value"], n_worse=pc["n_worse"],
                   n_better=pc["n_better"], n_ties=pc["n_ties"], verdict=pc["verdict"],
                   min_diff_pp=float(min_diff_pp), level=float(level),
                   n_resamples=int(n_resamples), seed=int(seed), note=pc["note"])
        out.append(rec)
    cols = ["scope", "model", "task", "family", "bg_id", "snr_db", "condition", "n_items",
            "n_pairs", "measure", "a_pp", "b_pp", "a_corpus_pp", "b_corpus_pp", "change_pp",
            "ci_low_pp", "ci_high_pp", "test", "p_value", "n_worse", "n_better", "n_ties",
            "verdict", "min_diff_pp", "level", "n_resamples", "seed", "note"]
    return pd.DataFrame(out).reindex(columns=cols)


# ----------------------------------------------------------------------------------- criteria
def load_criteria(criteria) -> dict:
    """Read and validate a criteria file (format in the module docstring).

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
        if not source.is_file():
            raise AiplibError(f"criteria file {source} does not exist")
        try:
            criteria = json.loads(source.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise AiplibError(f"criteria file {source} is not valid JSON: {exc}") from exc
    if isinstance(criteria, list):
        criteria = {"criteria": criteria}
    problems = []
    if not isinstance(criteria, dict):
        raise ValidationError([f"criteria must be a JSON object or list, got "
                               f"{type(criteria).__name__}"])
    unknown = set(criteria) - _TOP_KEYS
    if unknown:
        problems.append(f"unknown top-level keys {sorted(unknown)}; allowed {sorted(_TOP_KEYS)}")
    items = criteria.get("criteria", [])
    if not isinstance(items, list):
        problems.append("'criteria' must be a list of objects")
        items = []
    out = []
    for i, c in enumerate(items):
        where = f"criteria[{i}]"
        if not isinstance(c, dict):
            problems.append(f"{where}: must be an object")
            continue
        bad = set(c) - _CRITERION_KEYS
        if bad:
            problems.append(f"{where}: unknown keys {sorted(bad)}; allowed "
                            f"{sorted(_CRITERION_KEYS)}")
        if not isinstance(c.get("measure"), str) or not c.get("measure"):
            problems.append(f"{where}: 'measure' (a column name or alias) is required")
        if "min" not in c and "max" not in c:
            problems.append(f"{where}: give 'min' and/or 'max'")
        for b in ("min", "max"):
            if b in c and (isinstance(c[b], bool) or not isinstance(c[b], (int, float))):
                problems.append(f"{where}: {b!r} must be a number, got {c[b]!r}")
        nums = [c.get(b) for b in ("min", "max")]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums) \
                and nums[0] > nums[1]:
            problems.append(f"{where}: min {c['min']} > max {c['max']}")
        scope = c.get("scope", "*")
        if scope != "*" and scope not in cond.SCOPES:
            problems.append(f"{where}: scope {scope!r} is not one of {list(cond.SCOPES)} or '*'")
        snr = c.get("snr_db", "*")
        if not (snr in ("*", "all") or (isinstance(snr, (int, float))
                                        and not isinstance(snr, bool))):
            problems.append(f"{where}: snr_db must be a number, 'all' or '*', got {snr!r}")
        out.append({"task": "*", "model": "*", "bg_id": "*", "scope": "*", "snr_db": "*", **c})
    nwp = criteria.get("no_worse_than_previous")
    if nwp is not None and not isinstance(nwp, bool):
        problems.append(f"'no_worse_than_previous' must be true or false, got {nwp!r}")
    md = criteria.get("min_diff_pp", cond.DEFAULT_MIN_DIFF_PP)
    if isinstance(md, bool) or not isinstance(md, (int, float)) or md < 0:
        problems.append(f"'min_diff_pp' must be a number >= 0, got {md!r}")
        md = cond.DEFAULT_MIN_DIFF_PP
    rs = criteria.get("regression_scopes", list(cond.SCOPES))
    if not isinstance(rs, list) or any(s not in cond.SCOPES for s in rs):
        problems.append(f"'regression_scopes' must be a list drawn from {list(cond.SCOPES)}")
        rs = list(cond.SCOPES)
    prev = criteria.get("previous")
    if prev is not None:
        if not isinstance(prev, str):
            problems.append(f"'previous' must be a path string, got {prev!r}")
            prev = None
        else:
            prev = Path(prev)
            if not prev.is_absolute() and source is not None:
                prev = (source.parent / prev).resolve()
    if problems:
        raise ValidationError([f"{source or 'criteria'}: {p}" for p in problems])
    return {"criteria": out, "no_worse_than_previous": nwp, "previous": prev,
            "min_diff_pp": float(md), "regression_scopes": rs, "source": source}


def _select(t: pd.DataFrame, c: dict) -> pd.DataFrame:
    sel = pd.Series(True, index=t.index)
    for key in ("task", "model", "bg_id", "scope"):
        v = c.get(key, "*")
        if v != "*":
            sel &= t[key].astype(str) == str(v)
    snr = c.get("snr_db", "*")
    if snr == "all":
        sel &= t["snr_db"].isna() & (t["bg_id"].astype(str) != "clean")
    elif snr != "*":
        sel &= np.isclose(pd.to_numeric(t["snr_db"], errors="coerce").to_numpy(float),
                          float(snr))
    return t[sel]


def _measure(t: pd.DataFrame, measure: str):
    """(values, column used, scale) or None if the measure is unknown for this table."""
    if measure in t.columns and pd.api.types.is_numeric_dtype(t[measure]):
        return t[measure].astype(float), measure, 1.0
    col = MEASURE_ALIASES.get(measure)
    if col is not None and col in t.columns:
        fam = set(t["family"].astype(str)) if "family" in t.columns else set()
        if measure == "delta_wer" and fam - {"asr"} or measure == "delta_acc" and fam - {"kws"}:
            return None
        return t[col].astype(float) / 100.0, col, 0.01
    return None


def check_criteria(ws, criteria=None, previous=None, *, tables=None, n_resamples: int = 2000,
                   seed: int = 0, level: float = 0.95) -> list[dict]:
    """Test a run against criteria and, optionally, against a previous run.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        The run under test. Its ``results/tables/conditions_<task>.csv`` are read (computed from
        the scores when absent).
    criteria : str, Path, dict or list, optional
        A criteria file or object (:func:`load_criteria`). None: only the regression check.
    previous : Workspace or path, optional
        The previous run (overrides the file's ``previous``). When a previous run is known and
        ``no_worse_than_previous`` is not false, every condition whose verdict in
        :func:`compare_runs` (previous → ``ws``) is ``worse`` fails.
    tables : dict of str -> pandas.DataFrame, optional
        Condition tables to use instead of reading them.
    n_resamples, seed, level
        Bootstrap settings of the regression comparison (and of the tables, if computed).

    Returns
    -------
    list of dict
        One dict per failure: ``kind`` (``threshold``, ``no_match``, ``unknown_measure`` or
        ``regression``), ``criterion`` (index or None), ``task, model, condition, measure,
        value, min, max`` where they apply, and a readable ``message``. Empty = pass.

    Raises
    ------
    ValidationError
        If the criteria file is invalid.
    RunMismatchError
        If the previous run has other manifests or another normaliser.
    """
    spec = load_criteria(criteria) if criteria is not None else {
        "criteria": [], "no_worse_than_previous": None, "previous": None,
        "min_diff_pp": cond.DEFAULT_MIN_DIFF_PP, "regression_scopes": list(cond.SCOPES)}
    failures: list[dict] = []
    if spec["criteria"]:
        if tables is None:
            tables = cond.read_condition_tables(ws.results)
            if not tables:
                tables = cond.condition_tables(_load_scores_dir(Path(ws.results)),
                                               n_resamples=n_resamples, seed=seed, level=level,
                                               min_diff_pp=spec["min_diff_pp"])
        for i, c in enumerate(spec["criteria"]):
            failures.extend(_check_one(tables, i, c))
    prev = previous if previous is not None else spec["previous"]
    if prev is not None and spec["no_worse_than_previous"] is not False:
        cmp_ = compare_runs(prev, ws, n_resamples=n_resamples, seed=seed, level=level,
                            min_diff_pp=spec["min_diff_pp"], scopes=spec["regression_scopes"])
        for r in cmp_[cmp_["verdict"] == "worse"].itertuples(index=False):
            failures.append({
                "kind": "regression", "criterion": None, "task": r.task, "model": r.model,
                "condition": r.condition, "measure": r.measure, "value": r.change_pp,
                "min": None, "max": None,
                "message": (f"{r.task}/{r.model} {r.condition}: worse than the previous run — "
                            f"{r.measure} {r.a_pp:.1f} → {r.b_pp:.1f} %, change "
                            f"{r.change_pp:+.1f} pp [{r.ci_low_pp:.1f}, {r.ci_high_pp:.1f}], "
                            f"p = {r.p_value:.3g}")})
    elif spec["no_worse_than_previous"]:
        log.warning("no_worse_than_previous is set but no previous run was given: "
                    "regression check skipped")
    return failures


def _fmt_bound(c):
    parts = []
    if "min" in c:
        parts.append(f">= {c['min']:g}")
    if "max" in c:
        parts.append(f"<= {c['max']:g}")
    return " and ".join(parts)


def _check_one(tables: dict, i: int, c: dict) -> list[dict]:
    base = {"criterion": i, "task": c["task"], "model": c["model"], "measure": c["measure"],
            "min": c.get("min"), "max": c.get("max")}
    out, any_value, any_row = [], False, False
    for task in sorted(tables):
        t = tables[task]
        if t.empty or (c["task"] != "*" and str(c["task"]) != task):
            continue
        part = _select(t, c)
        if part.empty:
            continue
        any_row = True
        got = _measure(part, c["measure"])
        if got is None:
            out.append({**base, "kind": "unknown_measure", "task": task, "condition": None,
                        "value": None,
                        "message": f"criterion {i}: measure {c['measure']!r} does not exist in "
                                   f"conditions_{task}.csv"})
            continue
        vals = got[0].to_numpy(float)
        ok = np.isfinite(vals)
        any_value |= bool(ok.any())
        lo, hi = c.get("min", -np.inf), c.get("max", np.inf)
        bad = ok & ((vals < lo) | (vals > hi))
        for (_, r), v in zip(part[bad].iterrows(), vals[bad]):
            out.append({**base, "kind": "threshold", "task": r["task"], "model": r["model"],
                        "condition": r["condition"], "value": float(v),
                        "message": f"{r['task']}/{r['model']} {r['condition']}: {c['measure']} = "
                                   f"{v:.4g}, required {_fmt_bound(c)} (criterion {i})"})
    if not any_row:
        out.append({**base, "kind": "no_match", "condition": None, "value": None,
                    "message": f"criterion {i} ({_describe(c)}) selects no condition"})
    elif not any_value and not any(f["kind"] == "unknown_measure" for f in out):
        out.append({**base, "kind": "no_match", "condition": None, "value": None,
                    "message": f"criterion {i} ({_describe(c)}) selects no condition with a "
                               f"value of {c['measure']!r}"})
    return out


def _describe(c: dict) -> str:
    return ", ".join(f"{k}={c[k]}" for k in ("task", "model", "scope", "bg_id", "snr_db",
                                             "measure") if c.get(k, "*") != "*")


# ------------------------------------------------------------------------------ worst stimuli
def worst_stimuli(scores: pd.DataFrame, family: str, n: int = 10) -> pd.DataFrame:
    """The ``n`` noisy stimuli whose result got worst against their clean version.

    Parameters
    ----------
    scores : pandas.DataFrame
        One task's ``results/scores/<task>.csv`` (:func:`aiplib.figures.load_scores`).
    family : {"asr", "kws"}
    n : int

    Returns
    -------
    pandas.DataFrame
        ASR: the largest ΔWER first (ties: higher noisy WER, then stimulus id); columns
        ``model, stimulus_id, item_id, bg_id, snr_db, reference, clean_hypothesis, hypothesis,
        clean_wer_pp, wer_pp, delta_wer_pp``. KWS: clips correct when clean and wrong when noisy,
        highest SNR first (a flip at a mild SNR is the more telling), one per item
        before any item's second; columns ``model,
        stimulus_id, item_id, bg_id, snr_db, label, clean_response, response``.
    """
    if scores.empty:
        return pd.DataFrame()
    df = scores.copy()
    key = ["model", "task", "item_id"]
    clean = df[df["bg_id"] == "clean"].drop_duplicates(key, keep="last").set_index(key)
    noisy = df[df["bg_id"] != "clean"]
    idx = pd.MultiIndex.from_frame(noisy[key])
    if family == "asr":
        noisy = noisy[noisy["delta_wer"].notna()].copy()
        idx = pd.MultiIndex.from_frame(noisy[key])
        noisy["clean_hypothesis"] = clean["response"].reindex(idx).to_numpy()
        noisy["clean_wer"] = clean["wer"].reindex(idx).to_numpy()
        noisy = noisy.sort_values(["delta_wer", "wer", "stimulus_id"],
                                  ascending=[False, False, True], kind="stable").head(n)
        return pd.DataFrame({
            "model": noisy["model"], "stimulus_id": noisy["stimulus_id"],
            "item_id": noisy["item_id"], "bg_id": noisy["bg_id"], "snr_db": noisy["snr_db"],
            "reference": noisy["reference"], "clean_hypothesis": noisy["clean_hypothesis"],
            "hypothesis": noisy["response"], "clean_wer_pp": 100 * noisy["clean_wer"],
            "wer_pp": 100 * noisy["wer"], "delta_wer_pp": 100 * noisy["delta_wer"],
        }).reset_index(drop=True)
    flips = noisy[noisy["delta_acc"] > 0].copy()
    idx = pd.MultiIndex.from_frame(flips[key])
    flips["clean_response"] = clean["response"].reindex(idx).to_numpy()
    flips = flips.sort_values(["snr_db", "stimulus_id"], ascending=[False, True], kind="stable")
    # spread the list over items: each item's first flip, then second flips, ...
    flips["_k"] = flips.groupby("item_id").cumcount()
    flips = flips.sort_values(["_k", "snr_db", "stimulus_id"], ascending=[True, False, True],
                              kind="stable").head(n)
    return pd.DataFrame({
        "model": flips["model"], "stimulus_id": flips["stimulus_id"],
        "item_id": flips["item_id"], "bg_id": flips["bg_id"], "snr_db": flips["snr_db"],
        "label": flips["label"], "clean_response": flips["clean_response"],
        "response": flips["response"]}).reset_index(drop=True)


# --------------------------------------------------------------------------------- rendering
def _text(col: pd.Series) -> pd.Series:
    """A column as strings, missing values as ``""``."""
    return col.astype(object).where(col.notna(), "").astype(str)


def _f(v, nd=1) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return str(v)
    return "–" if not math.isfinite(x) else f"{x:.{nd}f}"


def _p(v) -> str:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if not math.isfinite(x) else (f"{x:.2g}" if x < 0.001 else f"{x:.3f}")


def _ci(est, lo, hi, nd=1, signed=True) -> str:
    if not np.isfinite(float(est)):
        return "–"
    e = f"{float(est):+.{nd}f}" if signed else f"{float(est):.{nd}f}"
    if not (np.isfinite(float(lo)) and np.isfinite(float(hi))):
        return e
    return f"{e} [{float(lo):.{nd}f}, {float(hi):.{nd}f}]"


def _display_conditions(t: pd.DataFrame, family: str, *, with_model: bool) -> pd.DataFrame:
    d = pd.DataFrame()
    if with_model:
        d["model"] = t["model"].to_numpy()
    d["condition"] = t["condition"].to_numpy()
    d["items"] = t["n_items"].to_numpy()
    d["stimuli"] = t["n_stimuli"].to_numpy()
    if family == "asr":
        d["WER %"] = [_f(v) for v in t["wer_pp"]]
        d["mean WER %"] = [_f(v) for v in t["mean_wer_pp"]]
        d["CER %"] = [_f(v) for v in t["cer_pp"]]
        d["S / D / I %"] = [f"{_f(s)} / {_f(dl)} / {_f(i)}"
                            for s, dl, i in zip(t["sub_pp"], t["del_pp"], t["ins_pp"])]
        d["clean WER %"] = [_f(v) for v in t["clean_wer_pp"]]
        d["ΔWER pp [95% CI]"] = [_ci(e, lo, hi) for e, lo, hi in
                                 zip(t["delta_pp"], t["ci_low_pp"], t["ci_high_pp"])]
        d["corpus ΔWER pp [95% CI]"] = [_ci(e, lo, hi) for e, lo, hi in
                                        zip(t["delta_corpus_pp"], t["corpus_ci_low_pp"],
                                            t["corpus_ci_high_pp"])]
    else:
        d["acc %"] = [_f(v) for v in t["acc_pp"]]
        d["clean acc %"] = [_f(v) for v in t["clean_acc_pp"]]
        d["ΔAcc pp [95% CI]"] = [_ci(e, lo, hi) for e, lo, hi in
                                 zip(t["delta_pp"], t["ci_low_pp"], t["ci_high_pp"])]
    d["worse / better / tie"] = [
        "–" if pd.isna(w) else f"{int(w)} / {int(b)} / {int(ti)}"
        for w, b, ti in zip(t["n_worse"], t["n_better"], t["n_ties"])]
    d["test"] = _text(t["test"]).to_numpy()
    d["p"] = [_p(v) for v in t["p_value"]]
    if "p_bh" in t:
        d["p (BH)"] = [_p(v) for v in t["p_bh"]]
    d["verdict"] = _text(t["verdict"]).to_numpy()
    return d


def _md_cell(v) -> str:
    s = "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_(no rows)_"
    head = "| " + " | ".join(_md_cell(c) for c in df.columns) + " |"
    sep = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(_md_cell(v) for v in row) + " |"
            for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body])


def _html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p><em>(no rows)</em></p>"
    h = df.to_html(index=False, escape=True, na_rep="–", border=0, classes="tbl")
    for v in ("worse", "better", "same"):
        h = h.replace(f"<td>{v}</td>", f'<td class="{v}">{v}</td>')
    return h


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
table.tbl{border-collapse:collapse;font-size:12px;margin:.5em 0 1.2em}
table.tbl th,table.tbl td{border-bottom:1px solid #ddd;padding:3px 7px;text-align:left;
vertical-align:top}
table.tbl th{background:#f3f3f3}
td.worse{color:#b00020;font-weight:600} td.better{color:#1b7d2c;font-weight:600}
td.same{color:#666} figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:12px;color:#555} code,pre{background:#f6f6f6} pre{padding:.6em;
overflow-x:auto;font-size:12px} details{margin:.4em 0 1em} summary{cursor:pointer}
.fail{color:#b00020} .pass{color:#1b7d2c}"""


def _render(blocks, fmt: str) -> str:
    out = []
    for b in blocks:
        kind = b[0]
        if kind == "h":
            _, lvl, text = b
            out.append(f"{'#' * lvl} {text}\n" if fmt == "md"
                       else f"<h{lvl}>{html.escape(text)}</h{lvl}>")
        elif kind == "p":
            out.append(b[1] + "\n" if fmt == "md" else f"<p>{html.escape(b[1])}</p>")
        elif kind == "list":
            if fmt == "md":
                out.append("\n".join(f"- {x}" for x in b[1]) + "\n")
            else:
                out.append("<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in b[1])
                           + "</ul>")
        elif kind == "table":
            _, df, caption = b
            if fmt == "md":
                out.append((f"*{caption}*\n\n" if caption else "") + _md_table(df) + "\n")
            else:
                out.append((f"<p><em>{html.escape(caption)}</em></p>" if caption else "")
                           + _html_table(df))
        elif kind == "img":
            _, src, caption = b
            out.append(f"![{caption}]({src})\n\n*{caption}*\n" if fmt == "md" else
                       f'<figure><img src="{html.escape(src)}" alt="{html.escape(caption)}">'
                       f"<figcaption>{html.escape(caption)}</figcaption></figure>")
        elif kind == "pre":
            out.append(f"```\n{b[1]}\n```\n" if fmt == "md"
                       else f"<pre>{html.escape(b[1])}</pre>")
        elif kind == "details":
            _, summary, inner = b
            if fmt == "md":
                out.append(f"<details><summary>{html.escape(summary)}</summary>\n\n"
                           + _render(inner, "md") + "\n</details>\n")
            else:
                out.append(f"<details><summary>{html.escape(summary)}</summary>"
                           + _render(inner, "html") + "</details>")
        else:  # pragma: no cover - internal
            raise AiplibParameterError(f"unknown block {kind!r}")
    return "\n".join(out)


def _html_page(title: str, blocks) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>\n"
            + _render(blocks, "html") + "\n</body></html>\n")


# ------------------------------------------------------------------------------------- report
_FIG_CAPTIONS = {
    "figure2_descriptor_regressions": "Figure 2 · the descriptors most correlated with "
                                      "degradation (one point per background, OLS line)",
    "figure3_descriptor_correlations": "Figure 3 · Spearman r_s of descriptors vs degradation "
                                       "(* p_BH < 0.05)",
    "figure4_background_ranking": "Figure 4 · backgrounds ranked by the mean of ASR ΔWER and "
                                  "KWS ΔAcc (95 % CI)",
    "figure5_accent_degradation": "Figure 5 · ΔWER by accent group (95 % CI)",
    "figure6_prompt_steering_rer": "Figure 6 · steering prompt: Residual Effect Ratio (95 % CI)",
    "figure7_snr_performance": "Figure 7 · mean per-utterance WER and KWS accuracy per SNR "
                               "(95 % CI bands)",
}


def _read_table(ws, name) -> pd.DataFrame | None:
    p = Path(ws.results) / "tables" / f"{name}.csv"
    if not p.is_file():
        return None
    return pd.read_csv(p, keep_default_na=False, na_values=[""])


def _summary_table(tables: dict) -> pd.DataFrame:
    rows = []
    for task, t in tables.items():
        fam = t["family"].iloc[0]
        for model, g in t.groupby("model", sort=True):
            cl = g[g["scope"] == "clean"]
            ov = g[g["scope"] == "overall"]
            cs = g[g["scope"] == "condition"]["verdict"].value_counts()
            val = "wer_pp" if fam == "asr" else "acc_pp"
            o = ov.iloc[0] if len(ov) else None
            coarse = int((g[g["scope"] == "condition"].get("coarse", pd.Series(dtype=object))
                          .astype(str) == "True").sum())
            if o is None:
                robust = "–"
            elif fam == "asr":
                loops = o.get("n_loops", math.nan)
                robust = (f"{_f(o.get('mean_wer_capped_pp', math.nan))} / "
                          f"{_f(o.get('median_wer_pp', math.nan))}; loops "
                          + ("–" if pd.isna(loops) else str(int(loops))))
            else:
                robust = (f"{_f(o.get('strict_acc_pp', math.nan))} / "
                          f"{_f(o.get('non_answer_pp', math.nan))}")
            rows.append({
                "task": task, "model": model, "measure": "WER" if fam == "asr" else "accuracy",
                "clean %": _f(cl[val].iloc[0]) if len(cl) else "–",
                "noisy (all) %": _f(o[val]) if o is not None else "–",
                "mean per-item Δ pp [95% CI] (+ = worse)": _ci(o["delta_pp"], o["ci_low_pp"], o["ci_high_pp"])
                if o is not None else "–",
                "corpus Δ pp [95% CI]": _ci(o["delta_corpus_pp"], o["corpus_ci_low_pp"], o["corpus_ci_high_pp"])
                if o is not None and "delta_corpus_pp" in o.index else "–",
                "p": _p(o["p_value"]) if o is not None else "–",
                "verdict": o["verdict"] if o is not None else "",
                "conditions worse / same / better / n/a": " / ".join(
                    str(int(cs.get(v, 0))) for v in ("worse", "same", "better", "n/a")),
                "coarse conditions": str(coarse),
                "robust (noisy): ASR capped mean / median WER %, loops; KWS strict acc / "
                "non-answers %": robust,
            })
    d = pd.DataFrame(rows)
    return d.fillna("–")


def _task_blocks(task, t, scores_df, fam, prompt_text) -> list:
    multi = t["model"].nunique() > 1
    b = [("h", 2, f"Task {task} ({'ASR' if fam == 'asr' else 'KWS'})")]
    if prompt_text:
        b.append(("p", f"Prompt: “{prompt_text}”"))
    head = t[t["scope"].isin(["clean", "overall", "snr"])]
    b.append(("h", 3, "By SNR (pooled over backgrounds)"))
    b.append(("table", _display_conditions(head, fam, with_model=multi), None))
    bg = t[t["scope"] == "background"]
    b.append(("h", 3, "By background (pooled over SNRs)"))
    b.append(("table", _display_conditions(bg, fam, with_model=multi), None))
    c = t[t["scope"] == "condition"]
    counts = c["verdict"].value_counts()
    b.append(("h", 3, "Every condition (background × SNR)"))
    b.append(("p", f"{len(c)} conditions: " + ", ".join(
        f"{int(counts.get(v, 0))} {v}" for v in cond.VERDICTS) + "."))
    b.append(("details", f"Show all {len(c)} conditions",
              [("table", _display_conditions(c, fam, with_model=multi), None)]))
    w = worst_stimuli(scores_df, fam, 10)
    b.append(("h", 3, "The ten stimuli that got worst"))
    if w.empty:
        b.append(("p", "No noisy stimulus got worse than its clean version."))
    else:
        w = w.copy()
        w["snr_db"] = [_f(v, 0) for v in w["snr_db"]]
        for col in ("clean_wer_pp", "wer_pp", "delta_wer_pp"):
            if col in w.columns:
                w[col] = [_f(v) for v in w[col]]
        if fam == "kws":
            b.append(("p", "KWS: clips recognised when clean and missed when noisy, mildest SNR "
                           "first."))
        b.append(("table", w, None))
    return b


def _table2_block(t2: pd.DataFrame) -> list:
    d = pd.DataFrame({
        "task": t2["task"], "model": t2["model"], "descriptor": t2["descriptor"], "n": t2["n"],
        "r_s [95% CI]": [_ci(r, lo, hi, 2) for r, lo, hi in
                         zip(t2["r_s"], t2["ci_low"], t2["ci_high"])],
        "p": [_p(v) for v in t2["p"]], "p_BH": [_p(v) for v in t2["p_bh"]],
        "note": _text(t2["note"])})
    return [("h", 2, "Descriptors vs degradation (Table 2)"),
            ("p", "Spearman r_s across backgrounds between each descriptor and the mean "
                  "degradation (items, then SNRs; 'pooled' = mean over models, only backgrounds "
                  "every model covers); p exact up to "
                  f"{stats.SPEARMAN_EXACT_MAX_N} backgrounds, a seeded permutation test "
                  f"({stats.SPEARMAN_N_PERMUTATIONS} permutations) up to "
                  f"{stats.SPEARMAN_PERMUTATION_MAX_N}; 95 % percentile bootstrap over "
                  "backgrounds (resamples with a constant column are unusable; no interval with "
                  f"more than {100 - 100 * stats.MIN_USABLE_SHARE:g} % of them); p_BH = "
                  "Benjamini–Hochberg over the descriptors within each task and model. A "
                  "constant column gives NaN with a note."),
            ("table", d, None)]


def _table4_block(t4: pd.DataFrame) -> list:
    d = pd.DataFrame({
        "model": t4["model"], "accent group": t4["accent_group"], "items": t4["n_items"],
        "clean WER %": [_f(v) for v in t4["clean_wer_pp"]],
        "mean ΔWER pp [95% CI]": [_ci(e, lo, hi) for e, lo, hi in
                                  zip(t4["mean_delta_wer_pp"], t4["ci_low_pp"],
                                      t4["ci_high_pp"])]})
    return [("h", 2, "Accent groups (Table 4)"),
            ("p", "Mean ΔWER per model and accent group, 95 % bootstrap interval over the "
                  f"group's items (none below {stats.MIN_N_FOR_INTERVAL} items). Rows pooled "
                  "over models and items without an accent group: "
                  "tables/table4_accent_dwer_pooled_unspecified.csv."),
            ("table", d, None)]


def _table5_block(t5: pd.DataFrame) -> list:
    d = pd.DataFrame({
        "model": t5["model"], "family": t5["family"], "items": t5["n_items"],
        "Δ baseline pp": [_f(v) for v in t5["delta_base_pp"]],
        "Δ steering pp": [_f(v) for v in t5["delta_steer_pp"]],
        "RER [95% CI]": [_ci(r, lo, hi, 2, signed=False) for r, lo, hi in
                         zip(t5["rer"], t5["ci_low"], t5["ci_high"])],
        "flag": _text(t5["base_flag"]) if "base_flag" in t5 else "",
        "rule": _text(t5["rule"]), "note": _text(t5["note"])})
    return [("h", 2, "Steering prompt (Table 5)"),
            ("p", "RER = Δ(steering) / (Δ(baseline) + 1e-9) on the same stimuli, as the authors "
                  "compute it; KWS with both |Δ| below 1 pp → RER = 1. RER < 1 means the prompt "
                  "reduced the noise effect only when Δ(baseline) is clearly positive: the flag "
                  "column marks Δ(baseline) ≤ 0 (the ratio's sign is inverted) or < 1 pp (an "
                  "unstable ratio of small numbers). The 95 % interval (ours) resamples items; "
                  "resamples whose Δ(baseline) is below 1 pp are unusable, and with more than "
                  "5 % unusable (or fewer than "
                  f"{stats.MIN_N_FOR_INTERVAL} items) no interval is given."),
            ("table", d, None)]


def _provenance_blocks(rec: dict) -> list:
    models = [f"{m}: revision {v.get('revision')}, weights {v.get('weights')}"
              + (f" (sha256 {str(v.get('weights_sha256'))[:12]}…)" if v.get("weights_sha256")
                 else "") for m, v in (rec.get("models") or {}).items()]
    man = [f"manifests/{f}.csv sha256 {m.get('sha256')} (seeds from {m.get('seed_start')}, {m.get('n_rows')} rows)"
           for f, m in (rec.get("manifests") or {}).items()]
    n = rec.get("normalizer") or {}
    a = rec.get("analysis") or {}
    items = [f"aiplib {rec.get('aiplib_version')}; " + ", ".join(
        f"{k} {v}" for k, v in (rec.get("versions") or {}).items() if k != "aiplib"),
        f"normaliser {n.get('name')} {n.get('version')}",
        f"bootstrap seed {a.get('seed')}, {a.get('n_resamples')} resamples, level "
        f"{a.get('level')}", *man, *models]
    prompts = "\n".join(f"{t}: [{p.get('prompt_id')}] {p.get('text')}"
                        for t, p in (rec.get("tasks") or {}).items())
    return [("h", 2, "Provenance"),
            ("p", "Full record in results/provenance.json; every results file has a JSON "
                  "sidecar (same name, .json) with its SHA-256 and this record."),
            ("list", items), ("pre", prompts)]


def build_report(ws, *, n_resamples: int = 2000, seed: int = 0, level: float = 0.95,
                 min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP, previous=None, criteria=None,
                 title: str | None = None) -> dict:
    """Write the condition tables, the report (Markdown and HTML) and every sidecar.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        Reads ``results/scores/``, ``results/tables/`` (Tables 2–5, if present),
        ``results/figures/*.png`` (if present), the manifests and ``inference/*/run_log.jsonl``.
    n_resamples, seed, level : int, int, float
        Bootstrap settings of every interval computed here (recorded everywhere).
    min_diff_pp : float
        Minimum change (pp) of a ``worse``/``better`` verdict (default 2).
    previous : Workspace or path, optional
        A previous run to compare with (:func:`compare_runs`, previous → this run); writes
        ``results/tables/comparison.csv`` and a report section.
    criteria : str, Path, dict or list, optional
        Criteria to check (:func:`check_criteria`); the outcome is a report section.
    title : str, optional

    Returns
    -------
    dict
        ``report_md, report_html, provenance`` (paths), ``conditions`` (task → path),
        ``comparison`` (path or None), ``failures`` (list of dicts; empty when no criteria or
        all pass), ``sidecars`` (list of paths).

    Raises
    ------
    AiplibError
        If there is no ``results/scores/<task>.csv`` (run stage 8 first).
    RunMismatchError
        If ``previous`` has other manifests or normaliser.
    """
    from .prompts import PROMPTS, TASKS
    from .provenance import annotate_results, collect_provenance
    from .scoring import task_family

    results = Path(ws.results)
    scores = _load_scores_dir(results)
    if not scores:
        raise AiplibError(f"no results/scores/<task>.csv under {results}; run stage 8 (scoring) "
                          "first")
    kw = dict(n_resamples=n_resamples, seed=seed, level=level)
    tables = cond.condition_tables(scores, min_diff_pp=min_diff_pp, **kw)
    cond_paths = {}
    (results / "tables").mkdir(parents=True, exist_ok=True)
    for task, t in tables.items():
        p = results / "tables" / f"conditions_{task}.csv"
        t.to_csv(p, index=False)
        cond_paths[task] = p
    comparison, cmp_path = None, None
    if previous is not None:
        comparison = compare_runs(previous, ws, min_diff_pp=min_diff_pp, **kw)
        cmp_path = results / "tables" / "comparison.csv"
        comparison.to_csv(cmp_path, index=False)
    failures = None
    if criteria is not None or previous is not None:
        failures = check_criteria(ws, criteria, previous, tables=tables, **kw)
    rec = collect_provenance(ws, seed=seed, n_resamples=n_resamples, level=level,
                             extra={"min_diff_pp": float(min_diff_pp)})

    title = title or f"AIP-Speech report · profile {getattr(ws, 'profile', '?')}"
    man = ", ".join(f"{f} {m['sha256'][:12]}…" for f, m in rec["manifests"].items()) or "unknown"
    blocks = [
        ("h", 1, title),
        ("p", f"aiplib {rec['aiplib_version']} · manifests {man} · normaliser "
              f"{rec['normalizer']['name']} {rec['normalizer']['version']} · models "
              f"{', '.join(sorted({m for t in scores.values() for m in t['model'].unique()}))}."),
        ("p", f"Every interval is a {100 * level:g} % percentile bootstrap over items "
              f"({n_resamples} resamples, seed {seed}); rows pooled over backgrounds and/or SNRs "
              "resample whole items (all of an item's pairs together). ΔWER = WER(noisy) − "
              "WER(clean) and ΔAcc = acc(clean) − acc(noisy) on the same items, in percentage "
              "points: positive means the background hurt. WER % is the corpus WER "
              "(Σ errors / Σ reference words); mean WER is the mean of per-utterance WERs; S / "
              "D / I are substitutions, deletions and insertions as shares of the reference "
              "words (they add up to the WER; insertions show how much of a background voice "
              "ends up in the text). Tests are exact: the sign test (binomial, scipy.stats."
              "binomtest) on per-item changes; for KWS single conditions McNemar's exact test. "
              f"Verdict: worse / better when the interval excludes 0, the change is at least "
              f"{min_diff_pp:g} pp and the Benjamini–Hochberg adjusted exact p is below "
              f"{cond.ALPHA:g}; otherwise same; n/a with fewer than "
              f"{cond.MIN_ITEMS_FOR_VERDICT} paired items, which get no interval either (a "
              "percentile bootstrap of so few values only spans their range). Rows with fewer "
              f"than {cond.COARSE_BELOW_ITEMS} paired items are marked coarse. An interval is "
              f"refused when fewer than {100 * stats.MIN_USABLE_SHARE:g} % of its resamples "
              "were usable; the tables give the usable count (ci_usable). "
              "p (BH): Benjamini–Hochberg adjusted across the conditions of the same task, model and "
              "scope (the per-SNR, per-background and background × SNR rows are many tests at once). "
              "Beside the paper's means, a robust view: WER capped at 1 per utterance, the median "
              "WER and the count of looping transcripts (ASR); strict accuracy counting "
              "non-answers wrong and the share of non-answers (KWS), when the scores carry them."),
        ("h", 2, "Summary"),
        ("table", _summary_table(tables), None),
    ]
    inactive = cond.inactive_background_rows(scores)
    if not inactive.empty:
        per_bg = ", ".join(f"{r.bg_id} {r.n_inactive}/{r.n_noisy} ({r.task})" for r in inactive.itertuples())
        blocks.append(("p", f"Silent background segments: {int(inactive['n_inactive'].sum())} noisy rows "
                            f"had a background segment of digital silence (bg_active false: {per_bg}); they "
                            "are in every number above, as the authors' mixer made them, and "
                            "tables/conditions_<task>_bg_active.csv repeats the analysis without them."))
    if failures is not None:
        blocks.append(("h", 2, "Criteria and regression check"))
        if failures:
            blocks.append(("p", f"FAILED: {len(failures)} problem(s)."))
            blocks.append(("list", [f["message"] for f in failures[:200]]
                           + ([f"… and {len(failures) - 200} more"] if len(failures) > 200
                              else [])))
        else:
            blocks.append(("p", "PASSED: every criterion holds"
                           + (" and no condition got worse than the previous run."
                              if previous is not None else ".")))
    if comparison is not None and not comparison.empty:
        c = comparison
        counts = c[c["scope"] == "condition"]["verdict"].value_counts()
        top = c[c["scope"].isin(["clean", "overall", "snr"])]
        d = pd.DataFrame({
            "task": top["task"], "model": top["model"], "condition": top["condition"],
            "pairs": top["n_pairs"], "previous %": [_f(v) for v in top["a_pp"]],
            "this run %": [_f(v) for v in top["b_pp"]],
            "change pp [95% CI] (+ = worse)": [_ci(e, lo, hi) for e, lo, hi in
                                               zip(top["change_pp"], top["ci_low_pp"],
                                                   top["ci_high_pp"])],
            "test": top["test"], "p": [_p(v) for v in top["p_value"]],
            "verdict": top["verdict"]})
        blocks += [("h", 2, "Comparison with the previous run"),
                   ("p", f"Previous run: {comparison.attrs.get('run_a')}. Stimuli paired by "
                         "(model, stimulus id); measure is WER (ASR) or accuracy (KWS). "
                         f"Per background × SNR: " + ", ".join(
                             f"{int(counts.get(v, 0))} {v}" for v in cond.VERDICTS)
                         + ". Every condition: tables/comparison.csv."),
                   ("table", d, None)]
    for task, t in tables.items():
        fam = task_family(task)
        prompt = PROMPTS.get(TASKS.get(task, ("", "")), {}).get("text")
        blocks += _task_blocks(task, t, scores[task], fam, prompt)
    t2 = _read_table(ws, "table2_descriptor_correlations")
    if t2 is not None:
        blocks += _table2_block(t2)
    t4 = _read_table(ws, "table4_accent_dwer")
    if t4 is not None:
        blocks += _table4_block(t4)
    t5 = _read_table(ws, "table5_prompt_steering_rer")
    if t5 is not None and not t5.empty:
        blocks += _table5_block(t5)
    figs = sorted((results / "figures").glob("*.png")) if (results / "figures").is_dir() else []
    if figs:
        blocks.append(("h", 2, "Figures"))
        for f in figs:
            blocks.append(("img", f"figures/{f.name}", _FIG_CAPTIONS.get(f.stem, f.stem)))
    else:
        blocks += [("h", 2, "Figures"), ("p", "No figures yet (run stage 9 make_all_figures).")]
    blocks += _provenance_blocks(rec)
    md_path, html_path = results / "report.md", results / "report.html"
    md_path.write_text(_render(blocks, "md") + "\n", encoding="utf-8")
    html_path.write_text(_html_page(title, blocks), encoding="utf-8")
    sidecars = annotate_results(ws, seed=seed, n_resamples=n_resamples, level=level,
                                extra={"min_diff_pp": float(min_diff_pp)})
    return {"report_md": md_path, "report_html": html_path, "provenance": sidecars[0],
            "conditions": cond_paths, "comparison": cmp_path, "failures": failures or [],
            "sidecars": sidecars[1:]}


# ------------------------------------------------------------------------------------------ CLI
def main(argv=None) -> int:
    """``python -m aiplib.report``: build the report, then check criteria / regressions.

    Exit status: 0 pass; :data:`EXIT_CRITERIA_FAILED` (3) when a criterion fails or a condition
    got worse than the previous run; 1 on an aiplib error (missing scores, invalid criteria file,
    runs that cannot be compared); 2 on bad arguments.
    """
    from .workspace import PROFILES, workspace

    ap = argparse.ArgumentParser(
        prog="python -m aiplib.report",
        description="Write results/report.md and .html with intervals and verdicts; check "
                    "criteria (exit status 3 on failure).")
    ap.add_argument("--profile", default="demo", choices=PROFILES)
    ap.add_argument("--data-root", default=None, help="parent of the profile folders "
                    "(default $AIP_DATA_ROOT, else <repo>/data)")
    ap.add_argument("--criteria", default=None, help="criteria JSON file")
    ap.add_argument("--previous", default=None,
                    help="previous run: workspace root or results folder with provenance.json")
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--level", type=float, default=0.95)
    ap.add_argument("--min-diff", type=float, default=None,
                    help="minimum change in pp for a worse/better verdict (default: the "
                         "criteria file's min_diff_pp, else 2)")
    ap.add_argument("--check-only", action="store_true",
                    help="do not rebuild the report; check the existing condition tables")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        ws = workspace(args.profile, data_root=args.data_root)
        spec = load_criteria(args.criteria) if args.criteria else None
        min_diff = args.min_diff if args.min_diff is not None else (
            spec["min_diff_pp"] if spec else cond.DEFAULT_MIN_DIFF_PP)
        if spec is not None:
            spec = {**{k: v for k, v in spec.items() if k not in ("source",)},
                    "previous": str(spec["previous"]) if spec["previous"] else None,
                    "min_diff_pp": min_diff}
        elif args.previous:
            spec = {"criteria": [], "min_diff_pp": min_diff}
        kw = dict(n_resamples=args.n_resamples, seed=args.seed, level=args.level)
        if args.check_only:
            failures = check_criteria(ws, spec, args.previous, **kw)
        else:
            out = build_report(ws, previous=args.previous or (spec or {}).get("previous"),
                               criteria=spec, min_diff_pp=min_diff, **kw)
            failures = out["failures"]
            print(f"report: {out['report_md']} and {out['report_html']}")
    except AiplibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if failures:
        print(f"criteria FAILED ({len(failures)}):", file=sys.stderr)
        for f in failures[:50]:
            print(f"  - {f['message']}", file=sys.stderr)
        if len(failures) > 50:
            print(f"  … and {len(failures) - 50} more", file=sys.stderr)
        return EXIT_CRITERIA_FAILED
    if args.criteria or args.previous:
        print("criteria passed")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
