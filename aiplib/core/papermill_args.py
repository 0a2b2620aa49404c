"""The filter of make's papermill arguments: each notebook gets only the parameters it declares.

``make`` builds one set of ``-p``/``-r``/``-y`` arguments for every stage; papermill would warn
``Passed unknown parameter`` about the others and define them anyway. The declared names come from
papermill's own ``inspect_notebook``. ``scripts/run_stage.sh`` runs
``python -m aiplib.core.papermill_args filter-args NOTEBOOK.ipynb [papermill args ...]``.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import yaml
from papermill import inspect_notebook
from papermill.iorw import NoDatesSafeLoader

from aiplib.core.errors import AiplibParameterError

#: Options followed by ``NAME VALUE`` (papermill's ``-p`` and ``-r``).
_PAIR_OPTIONS = {"-p", "--parameters", "-r", "--parameters_raw"}
#: Options followed by one YAML mapping (papermill's ``-y``).
_YAML_OPTIONS = {"-y", "--parameters_yaml"}
#: The parameters the Makefile passes from its own variables (``PROFILE``, ``MODEL``, ``TASK``,
#: ``SEED``, ``SHARD``, ``SUITE`` and the custom folders and tables): a notebook folder of one's own
#: (``NOTEBOOKS=``) may declare none of them, so they are dropped silently, never refused as typos.
MAKE_PARAMETERS = (
    "profile",
    "model",
    "task",
    "seed",
    "shard",
    "suite",
    "speech_dir",
    "texts",
    "kws_dir",
    "kws_labels",
    "backgrounds_dir",
    "keywords",
    "distractors_dir",
    "distractor_texts",
)
#: The command line :func:`main` expects.
_USAGE = (
    "usage: python -m aiplib.core.papermill_args filter-args NOTEBOOK.ipynb [papermill args ...]"
)


@dataclass
class _Filtered:
    """What :func:`filter_papermill_args` returns, filled while the arguments are read."""

    declared: set[str]
    known: set[str]
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    def drop(self, name: str) -> None:
        """Note a removed name once: in ``dropped`` if some notebook knows it, else ``unknown``."""
        if name in self.known:
            bucket = self.dropped
        else:
            bucket = self.unknown
        if name not in bucket:
            bucket.append(name)


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
    result = _Filtered(declared=set(declared), known=set(known))
    i = 0
    while i < len(args):
        option = args[i]
        if option in _PAIR_OPTIONS:
            i = _take_pair(args, i, result)
        elif option in _YAML_OPTIONS:
            i = _take_yaml(args, i, result)
        else:
            result.kept.append(option)
            i += 1
    return result.kept, result.dropped, result.unknown


def _take_pair(args: Sequence[str], i: int, result: _Filtered) -> int:
    """``-p``/``-r NAME VALUE`` at ``args[i]``: kept if NAME is declared; returns the next index."""
    option = args[i]
    if i + 2 >= len(args):
        raise AiplibParameterError(f"papermill option {option} needs NAME VALUE: {list(args[i:])}")
    name = args[i + 1]
    if name in result.declared:
        result.kept += args[i : i + 3]
    else:
        result.drop(name)
    return i + 3


def _yaml_mapping(option: str, text: str) -> dict:
    """The mapping ``-y`` carries, read with papermill's loader (dates stay strings)."""
    mapping = yaml.load(text, Loader=NoDatesSafeLoader)
    if not mapping:
        mapping = {}
    if not isinstance(mapping, dict):
        raise AiplibParameterError(f"papermill option {option} needs a YAML mapping, got {text!r}")
    return mapping


def _take_yaml(args: Sequence[str], i: int, result: _Filtered) -> int:
    """``-y YAML`` at ``args[i]``: kept as is if every key is declared, rewritten without the
    undeclared keys, or left out when none is declared; returns the next index."""
    option = args[i]
    if i + 1 >= len(args):
        raise AiplibParameterError(f"papermill option {option} needs a YAML mapping")
    text = args[i + 1]
    mapping = _yaml_mapping(option, text)
    keep = {}
    for key, value in mapping.items():
        if key in result.declared:
            keep[key] = value
        else:
            result.drop(str(key))
    if len(keep) == len(mapping):
        result.kept += [option, text]
    elif keep:
        result.kept += [option, yaml.safe_dump(keep, default_flow_style=True, width=10**9).strip()]
    return i + 2


def known_parameters(notebook_dir: Path) -> set[str]:
    """Every parameter a notebook ``NN_*.ipynb`` of ``notebook_dir`` declares, and
    :data:`MAKE_PARAMETERS`.

    Raises
    ------
    OSError, ValueError
        A notebook cannot be read.
    """
    known = set(MAKE_PARAMETERS)
    for notebook in sorted(Path(notebook_dir).glob("[0-9][0-9]_*.ipynb")):
        known.update(notebook_parameters(notebook))
    return known


def unknown_names(args: Sequence[str], known: Iterable[str]) -> list[str]:
    """The parameter names of ``args`` (``-p``/``-r NAME VALUE``, ``-y`` mappings) not in
    ``known``, in order, each once (:func:`filter_papermill_args`)."""
    _kept, _dropped, unknown = filter_papermill_args(args, declared=(), known=known)
    return unknown


def unknown_names_line(notebook_dir: Path, unknown: Sequence[str], known: Iterable[str]) -> str:
    """One line refusing parameter names that no notebook of ``notebook_dir`` declares, each with
    the closest declared name when one is close (``difflib.get_close_matches``)."""
    known = sorted(set(known))
    named = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        if close:
            named.append(f"{name} (did you mean {close[0]}?)")
        else:
            named.append(name)
    return (
        f"make: PARAMS: no notebook in {notebook_dir} declares {', '.join(named)} (a parameter "
        "reaches only the notebooks whose parameters cell declares it)"
    )


def main(argv: Sequence[str]) -> int:
    """``filter-args NOTEBOOK.ipynb [papermill args ...]``: the kept arguments NUL-separated on
    stdout (values with spaces survive). A name no notebook of NOTEBOOK's folder declares and that
    is not one of :data:`MAKE_PARAMETERS` (a typo) stops it with one line
    (:func:`unknown_names_line`) and exit 2, as do usage errors; exit 1 when a notebook cannot be
    read."""
    if len(argv) < 2 or argv[0] != "filter-args":
        print(_USAGE, file=sys.stderr)
        return 2
    notebook = Path(argv[1])
    try:
        declared = notebook_parameters(notebook)
        known = set(declared) | known_parameters(notebook.parent)
        kept, _dropped, unknown = filter_papermill_args(argv[2:], declared, known)
    except (OSError, ValueError, SyntaxError) as err:
        print(f"cannot read the parameters of {notebook}: {err}", file=sys.stderr)
        return 1
    if unknown:
        print(unknown_names_line(notebook.parent, unknown, known), file=sys.stderr)
        return 2
    sys.stdout.write("".join(a + "\0" for a in kept))
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through scripts/run_stage.sh
    sys.exit(main(sys.argv[1:]))
