"""Stimuli left out of the scores: recogniser failures (``__ERROR__`` rows), missing answers and
unreadable lines, per model × task and one by one, so a score over fewer stimuli never passes for
a score over all of them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiplib.core.tasks import task_family
from aiplib.inference.shards import is_shard_file
from aiplib.io.formats import read_manifest_csv, read_results, write_csv_atomic

#: Columns of ``results/tables/failures_by_model_task.csv`` (left out = failed + missing).
SUMMARY_COLUMNS = [
    "model",
    "task",
    "n_stimuli",
    "n_scored",
    "n_failed",
    "n_missing",
    "n_left_out",
    "n_unreadable_lines",
]

#: Columns of ``results/tables/failed_stimuli.csv`` (``status`` ``failed`` or ``missing``).
FAILED_COLUMNS = ["model", "task", "stimulus_id", "status", "error"]


def failure_tables(
    inference_dir, manifests_dir=None, *, null_answer: str = "failed"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per model × task counts of left-out stimuli, and the list of them.

    Reads ``<inference_dir>/<model>/<task>.jsonl`` (not shard or run-log files) and
    ``<manifests_dir>/<family>.csv`` (without it only the inference rows count and ``n_missing`` is
    0); ``null_answer`` as stage 8's (:func:`aiplib.io.formats.read_results`: ``text_none`` counts a
    JSON null answer as scored). Returns ``(summary, failed)`` with the
    columns :data:`SUMMARY_COLUMNS` and :data:`FAILED_COLUMNS`, sorted by model and task.
    """
    ids: dict[str, set] = {}
    summary, failed = [], []
    for path in sorted(Path(inference_dir).glob("*/*.jsonl")):
        task, model = path.stem, path.parent.name
        if task.startswith("run_log") or is_shard_file(path):
            continue
        try:
            fam = task_family(task)
        except Exception:  # noqa: BLE001 - a file that is no task of ours: not counted
            continue
        if fam not in ids:
            m = Path(manifests_dir) / f"{fam}.csv" if manifests_dir is not None else None
            ids[fam] = set(read_manifest_csv(m)["id"]) if m is not None and m.is_file() else set()
        df = read_results(path, keep_errors=True, null_answer=null_answer)
        ok_mask = df["raw"].notna() & (df["raw"] != "__ERROR__") & df["error"].isna()
        ok, err, manifest = set(df.loc[ok_mask, "id"]), df[~ok_mask], ids[fam]
        missing = sorted(manifest - ok - set(err["id"])) if manifest else []
        if manifest:
            err = err[err["id"].isin(manifest)]
            ok &= manifest
        failed += [
            dict(model=model, task=task, stimulus_id=r["id"], status="failed", error=r["error"])
            for r in err.to_dict("records")
        ]
        failed += [
            dict(model=model, task=task, stimulus_id=i, status="missing", error=None)
            for i in missing
        ]
        n = len(manifest) if manifest else len(ok) + len(err)
        summary.append(
            dict(
                model=model,
                task=task,
                n_stimuli=n,
                n_scored=len(ok),
                n_failed=len(err),
                n_missing=len(missing),
                n_left_out=len(err) + len(missing),
                n_unreadable_lines=int(df.attrs.get("n_skipped", 0)),
            )
        )
    failed = pd.DataFrame(failed, columns=FAILED_COLUMNS).sort_values(
        ["model", "task", "stimulus_id"], ignore_index=True
    )
    return pd.DataFrame(summary, columns=SUMMARY_COLUMNS), failed


def write_failure_tables(
    ws, *, inference_dir=None, manifests_dir=None, null_answer: str = "failed"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`failure_tables` of a workspace, written to
    ``results/tables/failures_by_model_task.csv`` and ``results/tables/failed_stimuli.csv``
    (atomically); returns both."""
    summary, failed = failure_tables(
        inference_dir or ws.inference, manifests_dir or ws.manifests, null_answer=null_answer
    )
    write_csv_atomic(summary, ws.tables_dir / "failures_by_model_task.csv")
    write_csv_atomic(failed, ws.tables_dir / "failed_stimuli.csv")
    return summary, failed


def failure_sentence(summary: pd.DataFrame) -> str:
    """One sentence for the report: how many stimuli were left out, per model × task."""
    if summary.empty:
        return "No inference file was found, so no stimulus was scored."
    bad = summary[(summary["n_left_out"] > 0) | (summary["n_unreadable_lines"] > 0)]
    if bad.empty:
        return (
            "Every stimulus was scored: no recogniser failure, no missing answer, no unreadable "
            f"line ({len(summary)} model × task files)."
        )
    parts = [
        f"{r.model} × {r.task}: {r.n_left_out} of {r.n_stimuli} left out ({r.n_failed} failed, "
        f"{r.n_missing} missing"
        + (f", {r.n_unreadable_lines} unreadable lines" if r.n_unreadable_lines else "")
        + ")"
        for r in bad.itertuples()
    ]
    return (
        "Stimuli left out of the scores (a failed decode or no answer; listed in "
        "results/tables/failed_stimuli.csv; the next stage-7 run retries them): "
        + "; ".join(parts)
        + "."
    )


def failure_markdown(summary: pd.DataFrame) -> str:
    """:func:`failure_sentence` followed by the per model × task table (Markdown), for the
    report."""
    head = "| model | task | stimuli | scored | failed | missing | left out | unreadable lines |"
    rule = "|" + "---|" * 8
    rows = [
        f"| {r.model} | {r.task} | {r.n_stimuli} | {r.n_scored} | {r.n_failed} | {r.n_missing} | "
        f"{r.n_left_out} | {r.n_unreadable_lines} |"
        for r in summary.itertuples()
    ]
    return failure_sentence(summary) + ("\n\n" + "\n".join([head, rule, *rows]) if rows else "")
