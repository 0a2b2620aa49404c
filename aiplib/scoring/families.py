"""Stage 8 of the condition families other than ``background``: scored as the battery is
(:func:`aiplib.scoring.score.score_inference` on ``ws.with_family(cf)``), and where their files
are."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from aiplib.core.hashing import file_sha256
from aiplib.core.stamps import read_stamp
from aiplib.core.tasks import parse_suite, task_family
from aiplib.inference.shards import merge_all
from aiplib.io.formats import read_scores
from aiplib.scoring.score import score_inference
from aiplib.stimuli.families import FAMILY_MODULES


def suite_families(suite) -> tuple:
    """The condition families of a ``suite`` parameter (``"background"``, a comma list, ``"all"``):
    :func:`aiplib.core.tasks.parse_suite`."""
    return tuple(parse_suite(suite))


def score_families(ws, suite) -> dict:
    """Stage 8 for the families of ``suite`` with a table of their own (not ``background``) whose
    manifests and inference files exist: shards merged (:func:`aiplib.inference.shards.merge_all`),
    then
    :func:`aiplib.scoring.score.score_inference` on ``ws.with_family(cf)``.

    Returns
    -------
    dict
        ``{family: {task: scores}}``; a family left out is named with the reason (printed).
    """
    out = {}
    for cf in [
        f for f in suite_families(suite) if FAMILY_MODULES[f].TABLE is not None
    ]:  # background: stage 8 itself
        view = ws.with_family(cf)
        if not any(Path(view.manifest_csv(t)).is_file() for t in ("asr", "kws")):
            print(f"{cf}: no manifests under {ws.rel(view.manifest_csv('asr').parent)}; not scored")
            continue
        if not any(Path(view.inference).glob("*/*.jsonl")):
            print(f"{cf}: no inference files under {ws.rel(view.inference)} (stage 7); not scored")
            continue
        merge_all(view.inference, getattr(view, "checks", None))
        out[cf] = score_inference(view)
        print(
            f"{cf}: "
            + ", ".join(f"{t} {len(d)} rows" for t, d in out[cf].items())
            + f" -> {ws.rel(view.scores_dir)}"
        )
    return out


# ------------------------------------------------------------------------------ reading
def family_path(ws, family: str, kind: str, name: str) -> Path:
    """Path of a family file: ``kind`` ``scores`` → ``results/scores/<family>/<name>.csv``,
    ``manifests`` → ``manifests/<family>/<name>``."""
    view = ws.with_family(family)
    return (
        view.scores_csv(name) if kind == "scores" else Path(view.manifest_csv("asr")).parent / name
    )


def read_family_scores(ws, family: str, tasks=("asr", "kws")) -> dict[str, pd.DataFrame]:
    """The family's score files that exist (task → table, :func:`aiplib.io.formats.read_scores`, the
    family's columns typed by its ``SCORE_TYPES``); ``{}`` when the family was not run."""
    out = {}
    for task in tasks:
        p = family_path(ws, family, "scores", task)
        if Path(p).is_file():
            df = read_scores(p)
            for c, kind in FAMILY_MODULES[family].SCORE_TYPES.items():
                if c in df.columns:
                    df[c] = (
                        pd.to_numeric(df[c], errors="coerce")
                        if kind == "float"
                        else df[c]
                        .astype(str)
                        .str.lower()
                        .map({"true": True, "false": False})
                        .astype("boolean")
                    )
            out[task] = df
    return out


def stale_reasons(ws, family: str, tasks=("asr", "kws")) -> list[str]:
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
