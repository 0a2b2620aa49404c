"""Stage 8 of the condition families other than ``background``: scored as the battery is
(:func:`aiplib.scoring.score.score_inference` on ``ws.with_family(cf)``), and where their files
are."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiplib.core.hashing import file_sha256
from aiplib.core.stamps import read_stamp
from aiplib.core.tasks import CONDITION_FAMILIES, TASK_FAMILIES, parse_suite, task_family
from aiplib.inference.shards import merge_all
from aiplib.io.formats import read_scores
from aiplib.scoring.family_columns import FAMILY_SCORERS
from aiplib.scoring.score import score_inference

#: The tasks whose family score files are read (the baseline tasks, named as their families).
FAMILY_TASKS = tuple(TASK_FAMILIES)


def suite_families(suite) -> tuple:
    """The condition families of a ``suite`` parameter (``"background"``, a comma list, ``"all"``):
    :func:`aiplib.core.tasks.parse_suite`."""
    return tuple(parse_suite(suite))


def _why_not_scored(ws, view, cf: str) -> str | None:
    """Why family ``cf`` cannot be scored (no manifests, no inference files), or None."""
    manifests = [Path(view.manifest_csv(t)) for t in FAMILY_TASKS]
    if not any(p.is_file() for p in manifests):
        return f"{cf}: no manifests under {ws.rel(manifests[0].parent)}; not scored"
    if not any(Path(view.inference).glob("*/*.jsonl")):
        return f"{cf}: no inference files under {ws.rel(view.inference)} (stage 7); not scored"
    return None


def score_families(ws, suite) -> dict:
    """Stage 8 for the families of ``suite`` with a table of their own
    (:attr:`aiplib.core.tasks.ConditionFamily.table`; not ``background``, which stage 8 scores
    itself) whose manifests and inference files exist: shards merged
    (:func:`aiplib.inference.shards.merge_all`), then :func:`aiplib.scoring.score.score_inference`
    on ``ws.with_family(cf)``.

    Returns
    -------
    dict
        ``{family: {task: scores}}``; a family left out is named with the reason (printed).
    """
    out = {}
    for cf in suite_families(suite):
        if CONDITION_FAMILIES[cf].table is None:
            continue
        view = ws.with_family(cf)
        reason = _why_not_scored(ws, view, cf)
        if reason is not None:
            print(reason)
            continue
        merge_all(view.inference, getattr(view, "checks", None))
        out[cf] = score_inference(view)
        counts = ", ".join(f"{t} {len(d)} rows" for t, d in out[cf].items())
        print(f"{cf}: {counts} -> {ws.rel(view.scores_dir)}")
    return out


# ------------------------------------------------------------------------------ reading
def family_path(ws, family: str, kind: str, name: str) -> Path:
    """Path of a family file: ``kind`` ``scores`` → ``results/scores/<family>/<name>.csv``,
    ``manifests`` → ``manifests/<family>/<name>``."""
    view = ws.with_family(family)
    if kind == "scores":
        return view.scores_csv(name)
    return Path(view.manifest_csv(FAMILY_TASKS[0])).parent / name


def _as_float(values: pd.Series) -> pd.Series:
    """A score column read back as numbers (NaN where not one)."""
    return pd.to_numeric(values, errors="coerce")


def _as_bool(values: pd.Series) -> pd.Series:
    """A score column read back as nullable booleans (``true`` / ``false``, any case; else NA)."""
    return values.astype(str).str.lower().map({"true": True, "false": False}).astype("boolean")


#: A score type of :attr:`aiplib.scoring.family_columns.FamilyScorer.score_types` → its reader.
_READERS = {"float": _as_float, "bool": _as_bool}


def read_family_scores(ws, family: str, tasks=FAMILY_TASKS) -> dict[str, pd.DataFrame]:
    """The family's score files that exist (task → table, :func:`aiplib.io.formats.read_scores`, the
    family's columns typed by its ``score_types``,
    :data:`aiplib.scoring.family_columns.FAMILY_SCORERS`); ``{}`` when the family was not run."""
    out = {}
    for task in tasks:
        p = family_path(ws, family, "scores", task)
        if not Path(p).is_file():
            continue
        df = read_scores(p)
        for c, kind in FAMILY_SCORERS[family].score_types.items():
            if c in df.columns:
                df[c] = _READERS[kind](df[c])
        out[task] = df
    return out


def stale_reasons(ws, family: str, tasks=FAMILY_TASKS) -> list[str]:
    """Why a family's score files no longer describe the current inputs (``[]`` when current).

    Stale when, for a task with a score file, the family manifest is gone, its stamp records another
    SHA-256 of the item bank than ``itembanks/<task family>.jsonl`` has now, or the score file is
    older than the manifest (a family runs only with ``SUITE=``, so a later default run can leave it
    behind).

    Returns
    -------
    list of str
        One line per problem, naming the file and what to re-run.
    """
    out = []
    for task in tasks:
        scores = family_path(ws, family, "scores", task)
        if not Path(scores).is_file():
            continue
        fam = task_family(task)
        manifest = family_path(ws, family, "manifests", f"{fam}.csv")
        stamp = read_stamp(Path(manifest).with_suffix(".stamp.json")) or {}
        bank = ws.item_bank(fam)
        recorded = (stamp.get("inputs") or {}).get(f"itembanks/{fam}.jsonl")
        fix = f"re-run make all SUITE={family}"
        if not Path(manifest).is_file():
            out.append(f"{ws.rel(scores)}: its manifest {ws.rel(manifest)} is gone ({fix})")
        elif recorded and bank.is_file() and recorded != file_sha256(bank):
            out.append(f"{ws.rel(scores)}: built from an older {ws.rel(bank)} ({fix})")
        elif Path(scores).stat().st_mtime < Path(manifest).stat().st_mtime:
            out.append(f"{ws.rel(scores)}: older than {ws.rel(manifest)} ({fix})")
    return out
