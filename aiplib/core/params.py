"""Typed notebook parameters: what papermill injects is checked against the parameters cell.

Every notebook declares its parameters with annotated assignments in the cell tagged
``parameters`` (``snrs: list[int] = [10, 5, 0]``). papermill injects the values given on its
command line in a cell *after* that one, with its own typing rules: ``-p NAME VALUE`` turns
``True``/``False``/``None`` and numbers into Python values and leaves everything else a string
(``-p overwrite false`` arrives as the string ``"false"``, which is truthy), ``-p snrs 10`` arrives
as the int ``10`` where a list is meant, ``-r`` always gives a string and ``-y`` parses YAML. The
first line of the cell after the parameters cell,

    aiplib.check_parameters(globals())

checks every declared parameter against its annotation, converts the few unambiguous cases below
in place, and otherwise stops the run with one line naming the parameter, its declared type and
the value received (:class:`ParameterTypeError`) — never a silent wrong run.

Conversions accepted (anything else is refused):

========================  ===============================================================
declared                  also accepted
========================  ===============================================================
``bool``                  the strings ``true``/``false`` (any case) and ``1``/``0`` (int or
                          string): what ``-p x false``, ``-r x true`` and ``make X=1`` give
``int``                   a float with no fractional part (``5.0``); a string of an integer
                          (``-r limit 5``)
``float``                 an int (``-p duration_s 30``); a string of a number (not NaN)
``str``                   — (a number is refused: ``-p model 007`` would arrive as ``7``; pass
                          text with ``-r NAME VALUE``, which keeps it as written)
``list[T]``               a single T (``-p snrs 10`` → ``[10]``); a tuple; a comma-separated
                          string, brackets optional (``-r snrs "10,5,0"`` → ``[10, 5, 0]``);
                          each element is then converted as T
``dict`` / ``dict[K, V]`` — (a string is refused: pass a mapping with ``-y 'NAME: {k: v}'``)
``Optional[T]``           ``None`` (``-p NAME None``), or the string ``none`` when T is not str
``Literal[...]``          a value equal to one of the choices after converting to its type
========================  ===============================================================

``bool`` is never accepted where a number is declared (``True`` is an ``int`` in Python, but
``-p limit True`` is a mistake). Derived defaults (``n_inspection = 6 if smoke else 60``) are
declared as ``Optional[int] = None`` in the parameters cell and computed in the cell after it, so an
injected ``-p smoke true`` reaches them.

The second half of the module is the filter that ``scripts/run_stage.sh`` runs before papermill:
``make`` builds one set of ``-p``/``-r``/``-y`` arguments for every stage, and
:func:`filter_papermill_args` keeps, for one notebook, only the parameters it declares (papermill
would otherwise warn ``Passed unknown parameter`` and define the variable anyway). A name declared
by no notebook of the folder (a typo such as ``-p snr 10``) is dropped with one note on stderr;
a name another stage declares (``MODEL=`` for stage 05) is dropped silently. The declared names
are read with :func:`notebook_parameters` (``ast``), which agrees with papermill's own
``inspect_notebook`` on every notebook (tested) and costs no papermill import (~3 s).
"""
from __future__ import annotations

import ast
import json
import math
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Mapping, MutableMapping, Sequence

from aiplib.core.errors import AiplibParameterError

__all__ = [
    "ParameterTypeError",
    "check_parameters",
    "coerce_parameter",
    "notebook_parameters",
    "filter_papermill_args",
]

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}
_INT_RE = re.compile(r"[+-]?\d+")


class ParameterTypeError(AiplibParameterError, TypeError):
    """A notebook parameter arrived with a value its declared type cannot take.

    The message is one line: ``parameter 'NAME' is declared TYPE but received VALUE (PYTYPE)``
    followed by a hint on how to pass it.
    """


def _type_name(annotation: Any) -> str:
    """How a declared type reads in a message: ``int``, ``list[int]``, ``Optional[int]``."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _fail(name: str, annotation: Any, value: Any, hint: str = "") -> ParameterTypeError:
    text = (f"parameter {name!r} is declared {_type_name(annotation)} but received {value!r} "
            f"({type(value).__name__})")
    return ParameterTypeError(text + (f": {hint}" if hint else ""))


def coerce_parameter(name: str, value: Any, annotation: Any) -> Any:
    """Check one parameter value against its declared type; convert it where unambiguous.

    Parameters
    ----------
    name : str
        Parameter name, used in the message (``snrs``, or ``snrs[1]`` for a list element).
    value : object
        The value the notebook holds after papermill's injected cell.
    annotation : type or typing form
        The declared type: ``bool``, ``int``, ``float``, ``str``, ``list``/``list[T]``,
        ``dict``/``dict[K, V]``, ``Optional[T]`` (``T | None``), ``Literal[...]``; any other class
        is checked with ``isinstance``, anything else is accepted unchecked.

    Returns
    -------
    object
        ``value`` itself when it already has the type, else its conversion (table in the module
        docstring), e.g. ``"false"`` → ``False`` for ``bool``, ``10`` → ``[10]`` for ``list[int]``.

    Raises
    ------
    ParameterTypeError
        The value has another type and no conversion of the table applies. One line naming the
        parameter, its declared type and the value received, with a hint.
    """
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)

    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        if value is None and len(members) < len(args):
            return None
        if (len(members) < len(args) and isinstance(value, str) and value.strip().lower() == "none"
                and str not in members):
            return None
        for member in members:
            try:
                return coerce_parameter(name, value, member)
            except ParameterTypeError:
                continue
        raise _fail(name, annotation, value)

    if origin is typing.Literal:
        for choice in args:
            try:
                converted = coerce_parameter(name, value, type(choice))
            except ParameterTypeError:
                continue
            if converted == choice:
                return choice
        raise _fail(name, annotation, value, "choose one of " + ", ".join(map(repr, args)))

    if annotation is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise _fail(name, annotation, value, "use true/false (e.g. -p NAME false)")

    if annotation is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
            return int(value.strip())
        raise _fail(name, annotation, value, "give a whole number")

    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if math.isnan(value):
                raise _fail(name, annotation, value, "NaN is not a usable value")
            return float(value)
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = math.nan
            if not math.isnan(number):
                return number
        raise _fail(name, annotation, value, "give a number")

    if annotation is str:
        if isinstance(value, str):
            return value
        raise _fail(name, annotation, value,
                    "papermill's -p reads numbers, True/False/None as Python values; "
                    "pass text with -r NAME VALUE")

    if annotation is list or origin is list:
        element = args[0] if args else None
        if isinstance(value, (list, tuple)):
            items = list(value)
        elif isinstance(value, str):
            text = value.strip()
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            items = [part.strip() for part in text.split(",")] if text.strip() else []
            if element is None:
                raise _fail(name, annotation, value, "pass a list with -y 'NAME: [a, b]'")
        elif element is not None and not isinstance(value, (dict, set)):
            items = [value]
        else:
            raise _fail(name, annotation, value, "pass a list with -y 'NAME: [a, b]'")
        if element is None:
            return items
        try:
            return [coerce_parameter(f"{name}[{i}]", item, element) for i, item in enumerate(items)]
        except ParameterTypeError as err:
            raise _fail(name, annotation, value, f"{err}; pass a list with -y 'NAME: [a, b]'") from None

    if annotation is dict or origin is dict:
        if not isinstance(value, Mapping):
            raise _fail(name, annotation, value, "pass a mapping with -y 'NAME: {key: value}'")
        if not args:
            return dict(value)
        key_type, value_type = args
        return {coerce_parameter(f"{name} key", k, key_type): coerce_parameter(f"{name}[{k!r}]", v, value_type)
                for k, v in value.items()}

    if isinstance(annotation, type) and origin is None:
        if isinstance(value, annotation):
            return value
        raise _fail(name, annotation, value)
    return value


def _annotations(namespace: Mapping[str, Any]) -> dict:
    """The module-level annotations of an IPython (or exec) namespace.

    IPython runs each top-level statement of a cell as a module, so ``x: int = 1`` stores ``int``
    in the namespace's ``__annotations__`` (Python ≤ 3.13). Python 3.14 (PEP 649) evaluates them
    lazily through ``__annotate__``; that is read as a fallback.
    """
    found = namespace.get("__annotations__")
    if isinstance(found, Mapping) and found:
        return dict(found)
    annotate = namespace.get("__annotate__")
    if callable(annotate):
        return dict(annotate(1))
    return {}


def check_parameters(namespace: MutableMapping[str, Any], annotations: Mapping[str, Any] | None = None) -> None:
    """Check every declared notebook parameter; convert unambiguous values in place.

    Called as ``aiplib.check_parameters(globals())`` in the first line of the cell after the
    ``parameters`` cell, i.e. after papermill's ``injected-parameters`` cell: the annotations come
    from the parameters cell, the values from whichever cell set them last.

    Parameters
    ----------
    namespace : dict
        The notebook's globals. Converted values are written back (``namespace["snrs"] = [10]``).
    annotations : dict, optional
        Name → declared type. Default: the namespace's module-level annotations (those of the
        parameters cell, and of any annotated assignment run before this call).

    Raises
    ------
    ParameterTypeError
        A value does not fit its declared type (first such parameter, one line) or a declared
        parameter has no value.
    AiplibParameterError
        No annotations found (the parameters cell was not run, or declares nothing).
    """
    declared = dict(annotations) if annotations is not None else _annotations(namespace)
    if not declared:
        raise AiplibParameterError("check_parameters: no annotated parameters in this namespace; "
                                   "run the cell tagged 'parameters' first")
    for name, annotation in declared.items():
        if name not in namespace:
            raise ParameterTypeError(f"parameter {name!r} is declared {_type_name(annotation)} but has no value")
        value = namespace[name]
        converted = coerce_parameter(name, value, annotation)
        if converted is not value:
            namespace[name] = converted


# --------------------------------------------------------------------------------------------------
# Which parameters a notebook declares, and the filter of make's papermill arguments.

def notebook_parameters(notebook: str | Path) -> list[str]:
    """Names assigned at top level in the notebook's cell tagged ``parameters``.

    Parameters
    ----------
    notebook : str or Path
        An ``.ipynb`` file (nbformat 4 JSON).

    Returns
    -------
    list of str
        In cell order: targets of annotated and plain assignments (``x: int = 1``, ``x = 1``),
        the names papermill's ``inspect_notebook`` reports for this project's notebooks. Empty
        when no cell is tagged ``parameters``.

    Raises
    ------
    OSError, ValueError
        The file is missing or not JSON; SyntaxError when the parameters cell is not Python.
    """
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            source = cell.get("source", "")
            source = "".join(source) if isinstance(source, list) else source
            names: list[str] = []
            for node in ast.parse(source).body:
                targets = [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else (
                    node.targets if isinstance(node, ast.Assign) else [])
                names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
            return names
    return []


_PAIR_OPTIONS = {"-p", "--parameters", "-r", "--parameters_raw"}
_YAML_OPTIONS = {"-y", "--parameters_yaml"}


def filter_papermill_args(args: Sequence[str], declared: Iterable[str],
                          known: Iterable[str] = ()) -> tuple[list[str], list[str], list[str]]:
    """Keep only the papermill parameters a notebook declares.

    Parameters
    ----------
    args : sequence of str
        papermill arguments as ``make`` builds them: ``-p NAME VALUE``, ``-r NAME VALUE``,
        ``-y YAML`` (a mapping; its undeclared keys are removed) and any other option, which is
        kept unchanged (``-f``/``-b`` parameter files too).
    declared : iterable of str
        The notebook's parameters (:func:`notebook_parameters`).
    known : iterable of str
        Parameters of every notebook of the pipeline; a dropped name outside this set is reported
        as unknown (most likely a typo).

    Returns
    -------
    kept : list of str
        ``args`` without the undeclared parameters, order kept.
    dropped : list of str
        Names removed because another notebook declares them.
    unknown : list of str
        Names removed that no notebook declares.

    Raises
    ------
    AiplibParameterError
        An option lacks its value(s) (``-p NAME`` at the end), or ``-y`` is not a YAML mapping.
    """
    declared, known = set(declared), set(known)
    kept: list[str] = []
    dropped: list[str] = []
    unknown: list[str] = []

    def drop(name: str) -> None:
        bucket = dropped if name in known else unknown
        if name not in bucket:
            bucket.append(name)

    i = 0
    while i < len(args):
        option = args[i]
        if option in _PAIR_OPTIONS:
            if i + 2 >= len(args):
                raise AiplibParameterError(f"papermill option {option} needs NAME VALUE: {list(args[i:])}")
            name = args[i + 1]
            if name in declared:
                kept += args[i:i + 3]
            else:
                drop(name)
            i += 3
        elif option in _YAML_OPTIONS:
            if i + 1 >= len(args):
                raise AiplibParameterError(f"papermill option {option} needs a YAML mapping")
            import yaml

            text = args[i + 1]
            mapping = yaml.load(text, Loader=_yaml_loader()) or {}
            if not isinstance(mapping, dict):
                raise AiplibParameterError(f"papermill option {option} needs a YAML mapping, got {text!r}")
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


def _yaml_loader():
    """papermill's YAML loader (dates stay strings), or PyYAML's SafeLoader without papermill."""
    try:
        from papermill.iorw import NoDatesSafeLoader
        return NoDatesSafeLoader
    except ImportError:  # pragma: no cover - papermill is a dependency of the notebooks extra
        import yaml
        return yaml.SafeLoader


def main(argv: Sequence[str]) -> int:
    """``python -m aiplib.core.params filter-args NOTEBOOK.ipynb [papermill args ...]``.

    (scripts/run_stage.sh calls it with ``python -c`` as ``aiplib`` imports this module.) Writes the
    kept arguments NUL-separated to stdout (paths with spaces survive), and one note to
    stderr when a parameter no notebook of NOTEBOOK's folder declares was dropped. Exit 2 on usage
    errors, 1 when the notebook cannot be read.
    """
    if len(argv) < 2 or argv[0] != "filter-args":
        print("usage: python -m aiplib.core.params filter-args NOTEBOOK.ipynb [papermill args ...]", file=sys.stderr)
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
        print(f"note: not passed to {notebook.stem}: {', '.join(unknown)} — no notebook in "
              f"{notebook.parent} declares {'it' if len(unknown) == 1 else 'them'} (a typo?)", file=sys.stderr)
    sys.stdout.write("".join(a + "\0" for a in kept))
    return 0


if __name__ == "__main__":  # pragma: no cover - exercised through scripts/run_stage.sh
    sys.exit(main(sys.argv[1:]))
