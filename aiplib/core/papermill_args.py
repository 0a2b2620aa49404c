"""The filter of make's papermill arguments: each notebook gets only the parameters it declares.

``make`` builds one set of ``-p``/``-r``/``-y`` arguments for every stage; papermill would warn
``Passed unknown parameter`` about the others and define them anyway. The declared names come from
papermill's own ``inspect_notebook``. ``scripts/run_stage.sh`` runs
``python -m aiplib.core.papermill_args filter-args NOTEBOOK.ipynb [papermill args ...]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, Sequence

import yaml
from papermill import inspect_notebook
from papermill.iorw import NoDatesSafeLoader

from aiplib.core.errors import AiplibParameterError

_PAIR_OPTIONS = {"-p", "--parameters", "-r", "--parameters_raw"}
_YAML_OPTIONS = {"-y", "--parameters_yaml"}


def notebook_parameters(notebook: str | Path) -> list[str]:
    """Names of the parameters the notebook's cell tagged ``parameters`` declares, in cell order
    (``papermill.inspect_notebook``); empty without such a cell.

    Raises
    ------
    OSError, ValueError
        The file is missing or not a notebook.
    """
    return list(inspect_notebook(str(notebook)))


def filter_papermill_args(
    args: Sequence[str], declared: Iterable[str], known: Iterable[str] = ()
) -> tuple[list[str], list[str], list[str]]:
    """Keep only the papermill parameters a notebook declares.

    ``args`` holds ``-p NAME VALUE``, ``-r NAME VALUE``, ``-y YAML`` (a mapping: its undeclared keys
    are removed) and other options (kept). Returns ``(kept, dropped, unknown)``: ``args`` without
    the parameters not in ``declared`` (order kept); the names removed that ``known`` (every
    notebook's parameters) holds; the names removed that no notebook declares (a typo).

    Raises
    ------
    AiplibParameterError
        An option lacks its value(s), or ``-y`` is not a YAML mapping.
    """
    declared, known = set(declared), set(known)
    kept, dropped, unknown = [], [], []

    def drop(name: str) -> None:
        bucket = dropped if name in known else unknown
        if name not in bucket:
            bucket.append(name)

    i = 0
    while i < len(args):
        option = args[i]
        if option in _PAIR_OPTIONS:
            if i + 2 >= len(args):
                raise AiplibParameterError(
                    f"papermill option {option} needs NAME VALUE: {list(args[i:])}"
                )
            if args[i + 1] in declared:
                kept += args[i : i + 3]
            else:
                drop(args[i + 1])
            i += 3
        elif option in _YAML_OPTIONS:
            if i + 1 >= len(args):
                raise AiplibParameterError(f"papermill option {option} needs a YAML mapping")
            text = args[i + 1]
            mapping = (
                yaml.load(text, Loader=NoDatesSafeLoader) or {}
            )  # papermill's loader: dates stay strings
            if not isinstance(mapping, dict):
                raise AiplibParameterError(
                    f"papermill option {option} needs a YAML mapping, got {text!r}"
                )
            keep = {k: v for k, v in mapping.items() if k in declared}
            for k in mapping:
                if k not in declared:
                    drop(str(k))
            if len(keep) == len(mapping):
                kept += [option, text]
            elif keep:
                kept += [option, yaml.safe_dump(keep, default_flow_style=True, width=10**9).strip()]
            i += 2
        else:
            kept.append(option)
            i += 1
    return kept, dropped, unknown


def main(argv: Sequence[str]) -> int:
    """``filter-args NOTEBOOK.ipynb [papermill args ...]``: the kept arguments NUL-separated on
    stdout (values with spaces survive), one note on stderr for a name no notebook of NOTEBOOK's
    folder declares. Exit 2 on usage errors, 1 when a notebook cannot be read."""
    if len(argv) < 2 or argv[0] != "filter-args":
        print(
            "usage: python -m aiplib.core.papermill_args filter-args NOTEBOOK.ipynb [papermill args ...]",
            file=sys.stderr,
        )
        return 2
    notebook = Path(argv[1])
    try:
        declared = notebook_parameters(notebook)
        known = set(declared)
        for other in sorted(notebook.parent.glob("[0-9][0-9]_*.ipynb")):
            known.update(notebook_parameters(other))
        kept, _dropped, unknown = filter_papermill_args(argv[2:], declared, known)
    except (OSError, ValueError, SyntaxError) as err:
        print(f"cannot read the parameters of {notebook}: {err}", file=sys.stderr)
        return 1
    if unknown:
        print(
            f"note: not passed to {notebook.stem}: {', '.join(unknown)} — no notebook in "
            f"{notebook.parent} declares {'it' if len(unknown) == 1 else 'them'} (a typo?)",
            file=sys.stderr,
        )
    sys.stdout.write("".join(a + "\0" for a in kept))
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through scripts/run_stage.sh
    sys.exit(main(sys.argv[1:]))
