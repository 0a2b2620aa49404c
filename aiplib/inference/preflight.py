"""``make all``'s check before stage 1: the variables stage 7 and the condition families need
(``MODEL``, ``MODELS``, ``TASK``, ``SUITE``, ``SHARD``), with the one-line messages the stages give,
in seconds instead of after stages 1–6.

``python -m aiplib.inference.preflight [--model M] [--task T] [--suite S] [--shard i/n]`` (the
Makefile's ``preflight`` step; ``$AIP_MODELS`` names the models file, as for stages 6–10): exit 0
and nothing printed when every value is valid; else one line per problem on stderr, exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys

from aiplib.core.errors import AiplibError, ModelUnavailableError
from aiplib.core.tasks import parse_suite
from aiplib.core.workspace import MODELS_ENV
from aiplib.inference.models import resolve
from aiplib.inference.models.catalog import gpu_visible, readiness
from aiplib.inference.models.registry import load_registry
from aiplib.inference.prompts import task_names
from aiplib.inference.shards import coerce_shard


def named_models(value: str) -> list:
    """The registry entries ``value`` names (:func:`aiplib.inference.models.resolve`); each id
    named explicitly (not ``all``) must be ready here by :func:`aiplib.inference.models.catalog.
    readiness`, servers not probed: a disabled entry, a missing program, package or weights
    folder, or a CUDA entry without a GPU is refused before stage 1 instead of at stage 7.

    Raises
    ------
    KeyError
        An unknown id (the valid ones listed).
    ModelUnavailableError
        The first named entry that is not ready, with ``make models``' reason.
    """
    entries = resolve(value)
    if value.strip() == "all":
        return entries
    gpu = gpu_visible()
    for entry in entries:
        state = readiness(entry, gpu=gpu, probed=None)
        if not state.ready:
            reason = f"{entry.id}: {state.why} (make models lists what is ready)"
            raise ModelUnavailableError(reason)
    return entries


def problems(*, model: str = "", task: str = "", suite: str = "", shard: str = "") -> list[str]:
    """One line per invalid value, each the message the stage would raise: the models file
    (``$AIP_MODELS``, loaded as every stage loads it), ``model`` (registry ids, a comma list or
    ``all``; :func:`named_models`: an unknown id is refused naming the valid models, a named model
    that cannot run here with its reason), ``task`` (:func:`aiplib.inference.prompts.task_names`),
    ``suite`` (:func:`aiplib.core.tasks.parse_suite`) and ``shard`` (``i/n``). Empty values are
    not checked (the notebooks' defaults apply)."""
    out = []
    checks = [("MODELS", os.environ.get(MODELS_ENV, ""), load_registry, True)]
    checks += [
        ("MODEL", model, named_models, False),
        ("TASK", task, task_names, False),
        ("SUITE", suite, parse_suite, False),
        ("SHARD", shard, coerce_shard, False),
    ]
    for name, value, check, always in checks:
        if not (value or always):
            continue
        if name == "MODEL" and out:  # the models file is unreadable: MODEL would repeat its line
            continue
        try:
            if name == "MODELS":
                check()
            else:
                check(value)
        except (KeyError, ValueError, OSError, AiplibError) as err:
            reason = err.args[0] if isinstance(err, KeyError) and err.args else err
            out.append(f"make: {name}={value}: {type(err).__name__}: {reason}")
    return out


def main(argv=None) -> int:
    """Command line of :func:`problems`; exit 1 when one value is invalid."""
    ap = argparse.ArgumentParser(prog="python -m aiplib.inference.preflight")
    for name in ("model", "task", "suite", "shard"):
        ap.add_argument(f"--{name}", default="")
    a = ap.parse_args(argv)
    found = problems(model=a.model, task=a.task, suite=a.suite, shard=a.shard)
    for line in found:
        print(line, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
