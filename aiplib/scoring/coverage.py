"""Stage 8's coverage: how much of its manifest each condition family × model × task scored (a
``limit``, a stopped run or unmerged shards cover part of it), written to
``results/tables/coverage.csv``.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from aiplib.core.tasks import task_family
from aiplib.inference.models import get_entry
from aiplib.inference.prompts import NO_PROMPT_ID, not_applicable
from aiplib.inference.remove import logged_not_applicable
from aiplib.io.formats import read_manifest, read_manifest_csv, write_csv_atomic

#: Columns of ``results/tables/coverage.csv`` (backgrounds and SNRs counted on the noisy rows).
COLUMNS = [
    "family",
    "model",
    "task",
    "n_stimuli",
    "n_scored",
    "n_items_covered",
    "n_items",
    "n_backgrounds_covered",
    "n_backgrounds",
    "n_snrs_covered",
    "n_snrs",
    "complete",
]


def _applies(ws, model: str, task: str, model_rows: pd.DataFrame) -> bool:
    """Whether ``task`` applies to ``model``, from what its inference says before the models file:
    the ``not_applicable`` event of its run log, then its rows (every row sent no prompt: a model
    that takes none), then its registry entry; a model known to none of them counts as applicable.
    ``model_rows``: the model's score rows of this condition family, every task."""
    logged = logged_not_applicable(Path(ws.inference) / model)
    if logged:
        return task not in logged
    prompt_ids = set(model_rows.get("prompt_id", pd.Series(dtype=str)).astype(str))
    if prompt_ids == {NO_PROMPT_ID}:
        return not not_applicable(SimpleNamespace(id=model, takes_prompt=False), [task])
    try:
        return not not_applicable(get_entry(model), [task])
    except KeyError:  # a model scored from files written elsewhere: not in this registry
        return True


def coverage_table(ws, scores_by_family: dict, *, manifests_dir=None) -> pd.DataFrame:
    """One row per condition family × model × task (:data:`COLUMNS`).

    ``scores_by_family`` is ``{family: {task: scores}}`` (the frames of stage 8, with ``model`` and
    ``stimulus_id``); every model scored in a family gets a row for each task of it, a task it has
    no rows of included (0 scored) unless the task does not apply to it (a prompt variant of a model
    without prompts). ``manifests_dir`` replaces the background family's manifests; a background
    task without any manifest is counted against the stimuli the models scored together
    (:func:`manifest_from_scores`), another family × task without a manifest is left out.
    """
    rows = []
    for cf, by_task in scores_by_family.items():
        if not by_task:
            continue
        rows_of = _rows_by_model(by_task)
        for task, df in by_task.items():
            man = _task_manifest(ws, cf, task, df, manifests_dir)
            if man is None:
                continue
            for model, model_rows in rows_of.items():
                got = man[man["id"].isin(df.loc[df["model"] == model, "stimulus_id"])]
                if got.empty and not _applies(ws.with_family(cf), model, task, model_rows):
                    continue
                rows.append(_coverage_row(cf, model, task, man, got))
    return pd.DataFrame(rows, columns=COLUMNS)


def _rows_by_model(by_task: dict) -> dict[str, pd.DataFrame]:
    """Model → its ``model, prompt_id`` score rows over every task of a family, models sorted."""
    every = pd.concat(
        [df[[c for c in ("model", "prompt_id") if c in df.columns]] for df in by_task.values()]
    )
    return {m: every[every["model"] == m] for m in sorted(every["model"].unique())}


def _task_manifest(ws, cf: str, task: str, df: pd.DataFrame, manifests_dir) -> pd.DataFrame | None:
    """The manifest ``task`` of condition family ``cf`` is counted against (``manifests_dir``'s for
    the background family; a background task without one: :func:`manifest_from_scores`); None for
    another family without a manifest."""
    fam = task_family(task)
    m_csv = Path(manifests_dir) / f"{fam}.csv" if manifests_dir and cf == "background" else None
    try:
        return read_manifest_csv(m_csv) if m_csv else read_manifest(ws.with_family(cf), fam)
    except FileNotFoundError:
        if cf != "background":
            return None
        return manifest_from_scores(df)


def _coverage_row(cf: str, model: str, task: str, man: pd.DataFrame, got: pd.DataFrame) -> dict:
    """One row of :data:`COLUMNS`: ``got``, the manifest rows ``model`` scored, against ``man``."""
    noisy = man[man["condition"] == "noisy"]
    g_noisy = got[got["condition"] == "noisy"]
    return dict(
        family=cf,
        model=model,
        task=task,
        n_stimuli=len(man),
        n_scored=len(got),
        n_items_covered=got["speech_id"].nunique(),
        n_items=man["speech_id"].nunique(),
        n_backgrounds_covered=g_noisy["background_id"].nunique(),
        n_backgrounds=noisy["background_id"].nunique(),
        n_snrs_covered=g_noisy["snr_db"].nunique(),
        n_snrs=noisy["snr_db"].nunique(),
        complete=len(got) == len(man),
    )


def manifest_from_scores(scores: pd.DataFrame) -> pd.DataFrame:
    """The stand-in manifest of files scored without one (``make score`` on the authors' files,
    whose rows carry the manifest columns): one row per stimulus any model scored, with the manifest
    columns ``id, speech_id, background_id, snr_db, condition`` that :func:`coverage_table` counts.
    A stimulus that failed for every model is not in it."""
    rows = scores.drop_duplicates("stimulus_id")
    return pd.DataFrame(
        {
            "id": rows["stimulus_id"].to_numpy(),
            "speech_id": rows["item_id"].to_numpy(),
            "background_id": rows["bg_id"].to_numpy(),
            "snr_db": rows["snr_db"].to_numpy(),
            "condition": rows["condition"].to_numpy(),
        }
    )


def write_coverage(ws, scores_by_family: dict, *, manifests_dir=None) -> pd.DataFrame:
    """:func:`coverage_table`, written to ``results/tables/coverage.csv`` (atomically); returns
    it."""
    cov = coverage_table(ws, scores_by_family, manifests_dir=manifests_dir)
    write_csv_atomic(cov, ws.tables_dir / "coverage.csv")
    return cov


def partial_lines(cov: pd.DataFrame) -> list[str]:
    """One line per incomplete row of a coverage table (stages 8 and 9 print them)."""
    lines = []
    for r in cov[~cov["complete"].astype(bool)].itertuples():
        where, what = (
            ("", "backgrounds") if r.family == "background" else (f" ({r.family})", "conditions")
        )
        lines.append(
            f"partial run: {r.model} × {r.task}{where} covers {r.n_scored} of {r.n_stimuli} "
            f"stimuli ({r.n_items_covered} of {r.n_items} items, {r.n_backgrounds_covered} of "
            f"{r.n_backgrounds} {what}) — figures and tables of stage 9 mark it"
        )
    return lines
