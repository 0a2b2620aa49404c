"""Comparing two runs of the same stimuli: the paired change per condition (:func:`compare_runs`).

Runs whose manifests or text normalisers differ are refused: their numbers would not be about the
same stimuli or the same scoring.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.analysis import conditions as cond
from aiplib.analysis.conditions.table import iter_scopes, percent
from aiplib.analysis.provenance import collect_provenance, read_provenance
from aiplib.core.errors import AiplibError
from aiplib.core.tasks import TaskFamily, task_family, task_family_spec
from aiplib.core.workspace import Workspace
from aiplib.io.formats import load_scores

log = logging.getLogger(__name__)


class RunMismatchError(AiplibError):
    """Two runs cannot be compared: different manifests or text normalisers."""


# ------------------------------------------------------------------------------- run identity
def _results_of(run) -> tuple[Path, object | None]:
    """(results folder, Workspace or None) of a Workspace, workspace root or results folder."""
    if hasattr(run, "results") and hasattr(run, "manifests"):
        return Path(run.results), run
    p = Path(run)
    if (p / "results").is_dir() and (p / "manifests").is_dir():
        ws = Workspace(profile=p.name, root=p.resolve())
        return ws.results, ws
    if (p / "scores").is_dir():
        return p, None
    raise AiplibError(
        f"{p}: neither a workspace (with results/ and manifests/) nor a results folder "
        "(with scores/)"
    )


def run_identity(run) -> dict:
    """Manifest hashes and normaliser of a run (what must agree for a comparison): ``{"results":
    Path, "manifests": {family: sha256}, "normalizer": {"name", "version"}}``. ``run`` is a
    Workspace (inspected live) or the path of a workspace root or of a ``results`` folder (with
    ``provenance.json``).

    Raises
    ------
    AiplibError
        If a results folder has no ``provenance.json``.
    """
    results, ws = _results_of(run)
    rec = collect_provenance(ws) if ws is not None else read_provenance(results)
    man = {fam: (m or {}).get("sha256") for fam, m in (rec.get("manifests") or {}).items()}
    norm = rec.get("normalizer") or {}
    return {
        "results": results,
        "manifests": man,
        "normalizer": {"name": norm.get("name"), "version": norm.get("version")},
    }


def _check_same_run_inputs(ia: dict, ib: dict, families) -> None:
    problems = []
    for fam in sorted(families):
        ha, hb = ia["manifests"].get(fam), ib["manifests"].get(fam)
        if not ha or not hb:
            problems.append(
                f"manifest hash of {fam!r} unknown for run "
                f"{'A' if not ha else 'B'} ({(ia if not ha else ib)['results']})"
            )
        elif ha != hb:
            problems.append(f"manifests/{fam}.csv differ: A {ha[:12]}… vs B {hb[:12]}…")
    na, nb = ia["normalizer"], ib["normalizer"]
    if (na.get("name"), na.get("version")) != (nb.get("name"), nb.get("version")):
        problems.append(
            f"text normalisers differ: A {na.get('name')} {na.get('version')} vs "
            f"B {nb.get('name')} {nb.get('version')}"
        )
    if problems:
        raise RunMismatchError(
            "refusing to compare runs A = "
            + str(ia["results"])
            + " and B = "
            + str(ib["results"])
            + ": "
            + "; ".join(problems)
        )


# --------------------------------------------------------------------------------- comparison
def compare_runs(
    run_a,
    run_b,
    *,
    tasks=None,
    n_resamples: int = 2000,
    seed: int = 0,
    level: float = 0.95,
    min_diff_pp: float = cond.DEFAULT_MIN_DIFF_PP,
    scopes=tuple(cond.SCOPES),
) -> pd.DataFrame:
    """Paired change from run A to run B per condition (pairs: ``(model, stimulus_id)`` in both
    runs), with interval, exact test and verdict as
    :func:`aiplib.analysis.conditions.paired_change`.

    Parameters
    ----------
    run_a, run_b : Workspace or path
        As :func:`run_identity`; A is the reference (e.g. the previous run), B the new one.
    tasks : sequence of str, optional
        Default: every task scored in both runs.
    n_resamples, seed, level, min_diff_pp, scopes
        As :func:`aiplib.analysis.conditions.condition_table` (``clean`` is compared like any
          condition).

    Returns one row per (task, model, scope, bg_id, snr_db): ``scope, model, task, family, bg_id,
    snr_db, condition, n_items, n_pairs, measure`` (``wer`` or ``acc``), ``a_pp, b_pp`` (mean
    per-utterance WER or accuracy on the paired stimuli), ASR also ``a_corpus_pp, b_corpus_pp``;
    ``change_pp`` (positive = B worse: WER_B − WER_A, acc_A − acc_B), ``ci_low_pp, ci_high_pp, test,
    p_value, n_worse, n_better, n_ties, verdict, min_diff_pp, level, n_resamples, seed, note``;
    ``attrs["unpaired"]`` counts, per task and model, the stimuli present in only one run.

    Raises
    ------
    RunMismatchError
        If the manifests of a compared family differ (SHA-256) or are unknown, or the text
        normalisers differ in name or version.
    AiplibError
        If a run has no scores or the runs share no task.
    """
    ia = run_identity(run_a)
    ib = run_identity(run_b)
    sa = load_scores(ia["results"])
    sb = load_scores(ib["results"])
    common = _compared_tasks(sa, sb, tasks)
    _check_same_run_inputs(ia, ib, {task_family(t) for t in common})
    settings = _CompareSettings(
        n_resamples=n_resamples, seed=seed, level=level, min_diff_pp=min_diff_pp, scopes=scopes
    )
    frames = []
    unpaired = {}
    for task in common:
        spec = task_family_spec(task)
        cols = ["model", "stimulus_id", spec.measure, *spec.pooled]
        m = sa[task][["task", "item_id", "bg_id", "snr_db"] + cols].merge(
            sb[task][cols], on=["model", "stimulus_id"], suffixes=("_a", "_b"), how="inner"
        )
        unpaired.update(_unpaired_counts(task, sa[task], sb[task], m))
        frames.append(_compare_task(m, spec, settings))
    if unpaired:
        log.warning("stimuli present in only one run (left out): %s", unpaired)
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    out.attrs["unpaired"] = unpaired
    out.attrs["run_a"] = str(ia["results"])
    out.attrs["run_b"] = str(ib["results"])
    return out


def _compared_tasks(sa: dict, sb: dict, tasks) -> list[str]:
    """The tasks to compare: ``tasks``, or every task scored in both runs (sorted).

    Raises
    ------
    AiplibError
        If a run has no scores, a named task is not scored in both, or none is shared.
    """
    if not sa or not sb:
        raise AiplibError(f"run {'A' if not sa else 'B'} has no results/scores/<task>.csv")
    common = sorted(set(sa) & set(sb)) if tasks is None else list(tasks)
    missing = [t for t in common if t not in sa or t not in sb]
    if missing:
        raise AiplibError(f"tasks {missing} are not scored in both runs")
    if not common:
        raise AiplibError(f"the runs share no scored task (A: {sorted(sa)}, B: {sorted(sb)})")
    return common


def _unpaired_counts(task: str, rows_a, rows_b, paired) -> dict:
    """``{"<task>/<model>": {"only_a", "only_b"}}`` for the models with stimuli in one run only."""
    counts = pd.concat(
        {
            "a": rows_a["model"].value_counts(),
            "b": rows_b["model"].value_counts(),
            "p": paired["model"].value_counts(),
        },
        axis=1,
    )
    unpaired = {}
    for model, r in counts.fillna(0).astype(int).sort_index().iterrows():
        if r["a"] != r["p"] or r["b"] != r["p"]:
            unpaired[f"{task}/{model}"] = {
                "only_a": int(r["a"] - r["p"]),
                "only_b": int(r["b"] - r["p"]),
            }
    return unpaired


@dataclass(frozen=True)
class _CompareSettings:
    """Bootstrap settings, minimum change (pp) and scopes of one comparison."""

    n_resamples: int
    seed: int
    level: float
    min_diff_pp: float
    scopes: tuple


def _compare_task(m: pd.DataFrame, spec: TaskFamily, settings: _CompareSettings) -> pd.DataFrame:
    """The comparison rows of one task from its paired rows ``m`` (columns ``<measure>_a``,
    ``<measure>_b`` and, for a pooled error rate, the count columns of both runs)."""
    rows = m.assign(
        n=1.0,
        a=m[f"{spec.measure}_a"].astype(float),
        b=m[f"{spec.measure}_b"].astype(float),
        item_id=m["item_id"].astype(str),
        bg_id=m["bg_id"].astype(str),
    )
    rows["d"] = spec.degradation(rows["a"], rows["b"])  # + = B worse
    sums = ["n", "a", "b", "d", *_pooled_sums(spec)]
    out = []
    for scope, key, per_item_sums in iter_scopes(rows, sums, settings.scopes):
        totals = {c: float(per_item_sums[c].sum()) for c in sums}
        out.append(_comparison_record(scope, key, per_item_sums, totals, spec, settings))
    cols = [
        "scope",
        "model",
        "task",
        "family",
        "bg_id",
        "snr_db",
        "condition",
        "n_items",
        "n_pairs",
        "measure",
        "a_pp",
        "b_pp",
        "a_corpus_pp",
        "b_corpus_pp",
        "change_pp",
        "ci_low_pp",
        "ci_high_pp",
        "test",
        "p_value",
        "n_worse",
        "n_better",
        "n_ties",
        "verdict",
        "min_diff_pp",
        "level",
        "n_resamples",
        "seed",
        "note",
    ]
    return pd.DataFrame(out).reindex(columns=cols)


def _pooled_sums(spec: TaskFamily) -> list[str]:
    """The count columns summed for the corpus measure of both runs (``errors_a, errors_b,
    ref_words_a``; none without pooled counts)."""
    if not spec.pooled:
        return []
    errors, ref_words = spec.pooled
    return [f"{errors}_a", f"{errors}_b", f"{ref_words}_a"]


def _comparison_record(
    scope, key: dict, per_item_sums: dict, totals: dict, spec: TaskFamily, settings
) -> dict:
    """One comparison row: the paired measures of both runs, the change and its verdict."""
    n = totals["n"]
    mcnemar = None
    if spec.is_binary and bool(np.all(per_item_sums["n"] == 1)):
        mcnemar = (per_item_sums["a"].astype(bool), per_item_sums["b"].astype(bool))
    change = cond.paired_change(
        100 * per_item_sums["d"],
        per_item_sums["n"],
        n_resamples=settings.n_resamples,
        seed=settings.seed,
        level=settings.level,
        min_diff=settings.min_diff_pp,
        mcnemar=mcnemar,
    )
    record = {
        "scope": scope,
        "model": key["model"],
        "task": key["task"],
        "family": spec.name,
        "bg_id": key["bg_id"],
        "snr_db": key["snr_db"],
        "condition": cond.condition_label(key["bg_id"], key["snr_db"]),
        "n_items": len(per_item_sums["n"]),
        "n_pairs": int(n),
        "measure": spec.summary,
        "a_pp": 100 * totals["a"] / n,
        "b_pp": 100 * totals["b"] / n,
    }
    if spec.pooled:
        errors, ref_words = spec.pooled
        record["a_corpus_pp"] = percent(totals[f"{errors}_a"], totals[f"{ref_words}_a"])
        record["b_corpus_pp"] = percent(totals[f"{errors}_b"], totals[f"{ref_words}_a"])
    record.update(
        change_pp=change["estimate"],
        ci_low_pp=change["ci_low"],
        ci_high_pp=change["ci_high"],
        note=change["note"],
        min_diff_pp=float(settings.min_diff_pp),
        level=float(settings.level),
        n_resamples=int(settings.n_resamples),
        seed=int(settings.seed),
    )
    for column in ("test", "p_value", "n_worse", "n_better", "n_ties", "verdict"):
        record[column] = change[column]
    return record
