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

from aiplib.core.errors import AiplibError
from aiplib.core.tasks import parse_suite
from aiplib.core.workspace import MODELS_ENV
from aiplib.inference.models import resolve
from aiplib.inference.models.registry import load_registry
from aiplib.inference.prompts import task_names
from aiplib.inference.shards import coerce_shard


def problems(*, model: str = "", task: str = "", suite: str = "", shard: str = "") -> list[str]:
    """One line per invalid value, each the message the stage would raise: the models file
    (``$AIP_MODELS``, loaded as every stage loads it), ``model`` (registry ids, a comma list or
    ``all``; :func:`aiplib.inference.models.resolve`, whose ``KeyError`` names the valid
    models), ``task`` (:func:`aiplib.inference.prompts.task_names`), ``suite``
    (:func:`aiplib.core.tasks.parse_suite`) and ``shard`` (``i/n``). Empty values are not
    checked (the notebooks' defaults apply)."""
    out = []
    checks = [("MODELS", os.environ.get(MODELS_ENV, ""), load_registry, True)]
    checks += [
        ("MODEL", model, resolve, False),
        ("TASK", task, task_names, False),
        ("SUITE", suite, parse_suite, False),
        ("SHARD", shard, coerce_shard, False),
    ]
    for name, value, check, always in checks:
        if not (value or always):
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
