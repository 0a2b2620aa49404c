"""Removing one model's stage-7 results: its folder ``inference/<model>/`` in every condition family
(task files, shard files, run log, set-aside rows). ``make remove-model MODEL=<id>`` runs
``python -m aiplib.inference.remove`` and then stages 8–9, so the report no longer shows the model.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.core.workspace import workspace


def remove_model(ws, model: str) -> list[Path]:
    """Delete ``inference/<model>/`` of every condition family of ``ws``; returns the folders
    deleted (empty when the model has none).

    Raises
    ------
    AiplibParameterError
        ``model`` is not a plain folder name, or it is the name of a condition family's folder.
    """
    if (
        not model
        or Path(model).name != model
        or model in (".", "..")
        or model in CONDITION_FAMILIES
    ):
        raise AiplibParameterError(f"remove-model: {model!r} is not a model id")
    gone = [
        d for d in (ws.with_family(cf).inference / model for cf in CONDITION_FAMILIES) if d.is_dir()
    ]
    for d in gone:
        shutil.rmtree(d)
    return gone


def models_with_rows(ws) -> list[str]:
    """The models that have a task file in ``inference/`` of any condition family."""
    names = set()
    for cf in CONDITION_FAMILIES:
        for p in ws.with_family(cf).inference.glob("*/*.jsonl"):
            names.add(p.parent.name)
    return sorted(names - set(CONDITION_FAMILIES))


def logged_not_applicable(model_dir) -> dict[str, str]:
    """``{task: reason}`` of the last ``not_applicable`` event in ``<model_dir>/run_log.jsonl``
    (stage 7 writes it for a model that takes no task prompt; its steering tasks were not run);
    {} without a run log or such an event. What the inference folder says, whichever models file
    is read now (a model run with ``MODELS=`` and scored without it keeps its verdict)."""
    log_p = Path(model_dir) / "run_log.jsonl"
    if not log_p.is_file():
        return {}
    found: dict[str, str] = {}
    for line in log_p.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:  # a half-written last line of an interrupted run
            continue
        if isinstance(rec, dict) and rec.get("event") == "not_applicable":
            found = {str(k): str(v) for k, v in (rec.get("tasks") or {}).items()}
    return found


def main(argv=None) -> int:
    """``python -m aiplib.inference.remove --model ID``: exit 1 when the model has no inference
    folder."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.inference.remove", description=main.__doc__)
    ap.add_argument("--profile", default="demo")
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--model", required=True)
    a = ap.parse_args(argv)
    ws = workspace(a.profile, data_root=a.data_root, create=False)
    try:
        gone = remove_model(ws, a.model)
    except AiplibParameterError as exc:
        print(exc)
        return 1
    if not gone:
        print(
            f"remove-model: no inference of {a.model!r} under {ws.inference}; models with rows: "
            f"{', '.join(models_with_rows(ws)) or 'none'}"
        )
        return 1
    print(f"removed the stage-7 results of {a.model}: {', '.join(ws.rel(d) for d in gone)}")
    # nothing left to score: no report of a removed model
    if not models_with_rows(ws) and ws.results.is_dir():
        shutil.rmtree(ws.results)
        print(
            f"no model has stage-7 results left: {ws.rel(ws.results)}/ removed, "
            "stages 8-9 not re-run"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
