"""Typed notebook parameters: what papermill injects is checked against the parameters cell.

Each notebook declares its parameters as annotated assignments in the cell tagged ``parameters``
(``snrs: list[int] = [10, 5, 0]``). papermill's ``-p`` turns ``True``/``False``/``None`` and numbers
into Python values and leaves the rest a string (``-p overwrite false`` arrives as ``"false"``),
``-r`` always gives a string, ``-y`` parses YAML. ``aiplib.check_parameters(globals())``, the first
line of the next cell, converts the unambiguous cases below in place and refuses anything else
with one line (:class:`ParameterTypeError`):

========================  ===============================================================
declared                  also accepted
========================  ===============================================================
``bool``                  ``true``/``false`` (any case), ``1``/``0`` (int or string)
``int``                   a float with no fractional part; a string of an integer
``float``                 an int; a string of a number (not NaN)
``str``                   — (a number is refused: pass text with ``-r NAME VALUE``)
``list[T]``               a single T; a tuple; a comma-separated string, brackets optional;
                          each element then converted as T
``dict`` / ``dict[K, V]`` — (pass a mapping with ``-y 'NAME: {k: v}'``)
``Optional[T]``           ``None``, or the string ``none`` when T is not str
``Literal[...]``          a value equal to one of the choices after converting to its type
========================  ===============================================================

``bool`` is never accepted where a number is declared. Defaults derived from ``smoke`` are declared
``Optional[int] = None`` and computed in the cell after the parameters cell, so an injected value
reaches them.
"""

from __future__ import annotations

import contextlib
import math
import re
import types
import typing
from typing import Any, Callable, Mapping, MutableMapping

from aiplib.core.errors import AiplibParameterError

#: Strings (lower-cased, stripped) accepted as ``True`` where ``bool`` is declared.
_TRUE = {"true", "1"}
#: Strings (lower-cased, stripped) accepted as ``False`` where ``bool`` is declared.
_FALSE = {"false", "0"}
#: A string of a whole number, optionally signed.
_INT_RE = re.compile(r"[+-]?\d+")
#: The hint of every refused ``list`` value.
_LIST_HINT = "pass a list with -y 'NAME: [a, b]'"
#: The hint of a refused ``str`` value.
_STR_HINT = (
    "papermill's -p reads numbers, True/False/None as Python values; pass text with -r NAME VALUE"
)


class ParameterTypeError(AiplibParameterError, TypeError):
    """A notebook parameter's value does not fit its declared type; one line:
    ``parameter 'NAME' is declared TYPE but received VALUE (PYTYPE): hint``."""


def _type_name(annotation: Any) -> str:
    """How a declared type reads in a message: ``int``, ``list[int]``, ``Optional[int]``."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _fail(name: str, annotation: Any, value: Any, hint: str = "") -> ParameterTypeError:
    """The one-line error for ``value`` refused as ``annotation``; ``hint`` follows a colon."""
    text = (
        f"parameter {name!r} is declared {_type_name(annotation)} "
        f"but received {value!r} ({type(value).__name__})"
    )
    if hint:
        text = f"{text}: {hint}"
    return ParameterTypeError(text)


# ---------------------------------------------------------------------------------------------
# One coercer per declared kind; each returns the value or its conversion, or raises


def _accepts_none(value: Any, members: list) -> bool:
    """``None`` itself, or the string ``none`` (any case) when no member is ``str``."""
    if value is None:
        return True
    if not isinstance(value, str) or str in members:
        return False
    return value.strip().lower() == "none"


def _coerce_union(name: str, value: Any, annotation: Any) -> Any:
    """``Optional[T]`` / ``T | U``: ``None`` where allowed, else the first member that fits."""
    args = typing.get_args(annotation)
    members = [arg for arg in args if arg is not type(None)]
    optional = len(members) < len(args)
    if optional and _accepts_none(value, members):
        return None
    for member in members:
        with contextlib.suppress(ParameterTypeError):
            return coerce_parameter(name, value, member)
    raise _fail(name, annotation, value)


def _coerce_literal(name: str, value: Any, annotation: Any) -> Any:
    """``Literal[...]``: the choice equal to ``value`` once converted to the choice's type."""
    choices = typing.get_args(annotation)
    for choice in choices:
        with contextlib.suppress(ParameterTypeError):
            if coerce_parameter(name, value, type(choice)) == choice:
                return choice
    hint = "choose one of " + ", ".join(map(repr, choices))
    raise _fail(name, annotation, value, hint)


def _coerce_bool(name: str, value: Any, annotation: Any) -> bool:
    """``bool``: a bool, ``1``/``0``, or ``true``/``false``/``1``/``0`` as text (any case)."""
    text = ""
    if isinstance(value, (int, str)):  # a bool is an int
        text = str(value).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise _fail(name, annotation, value, "use true/false (e.g. -p NAME false)")


def _coerce_int(name: str, value: Any, annotation: Any) -> int:
    """``int``: an int (not a bool), a float with no fractional part, or the text of an integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        return int(value.strip())
    raise _fail(name, annotation, value, "give a whole number")


def _parse_float(text: str) -> float | None:
    """``float(text)``, or ``None`` when the text is not a number."""
    try:
        return float(text.strip())
    except ValueError:
        return None


def _coerce_float(name: str, value: Any, annotation: Any) -> float:
    """``float``: an int or float (not a bool, not NaN), or the text of a number (not NaN)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if math.isnan(value):
            raise _fail(name, annotation, value, "NaN is not a usable value")
        return float(value)
    if isinstance(value, str):
        number = _parse_float(value)
        if number is not None and not math.isnan(number):
            return number
    raise _fail(name, annotation, value, "give a number")


def _coerce_str(name: str, value: Any, annotation: Any) -> str:
    """``str``: text only (a number is refused)."""
    if isinstance(value, str):
        return value
    raise _fail(name, annotation, value, _STR_HINT)


def _split_list_text(value: str) -> list[str]:
    """The parts of ``a, b`` or ``[a, b]``, stripped; an empty text is an empty list."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if not text.strip():
        return []
    return [part.strip() for part in text.split(",")]


def _list_items(name: str, value: Any, annotation: Any, element: Any) -> list:
    """The elements before conversion: a list or tuple as is; with an element type declared, a
    comma-separated text split, or a single value (not a dict or set) wrapped."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if element is None:
        raise _fail(name, annotation, value, _LIST_HINT)
    if isinstance(value, str):
        return _split_list_text(value)
    if isinstance(value, (dict, set)):
        raise _fail(name, annotation, value, _LIST_HINT)
    return [value]


def _coerce_list(name: str, value: Any, annotation: Any) -> list:
    """``list`` / ``list[T]``: the items (:func:`_list_items`), each converted as ``T``."""
    args = typing.get_args(annotation)
    element = args[0] if args else None
    items = _list_items(name, value, annotation, element)
    if element is None:
        return items
    try:
        return [coerce_parameter(f"{name}[{i}]", item, element) for i, item in enumerate(items)]
    except ParameterTypeError as err:
        raise _fail(name, annotation, value, f"{err}; {_LIST_HINT}") from None


def _coerce_dict(name: str, value: Any, annotation: Any) -> dict:
    """``dict`` / ``dict[K, V]``: a mapping, each key converted as ``K`` and value as ``V``."""
    if not isinstance(value, Mapping):
        raise _fail(name, annotation, value, "pass a mapping with -y 'NAME: {key: value}'")
    args = typing.get_args(annotation)
    if not args:
        return dict(value)
    key_type, value_type = args
    coerced = {}
    for key, item in value.items():
        new_key = coerce_parameter(f"{name} key", key, key_type)
        coerced[new_key] = coerce_parameter(f"{name}[{key!r}]", item, value_type)
    return coerced


def _check_instance(name: str, value: Any, annotation: Any) -> Any:
    """Another class: ``value`` if it is an instance; anything else declared: ``value``."""
    if not isinstance(annotation, type) or typing.get_origin(annotation) is not None:
        return value
    if isinstance(value, annotation):
        return value
    raise _fail(name, annotation, value)


#: The coercer of each declared kind (:func:`_declared_kind`); the module's table, row by row.
_COERCERS: dict[str, Callable[[str, Any, Any], Any]] = {
    "Union": _coerce_union,
    "Literal": _coerce_literal,
    "bool": _coerce_bool,
    "int": _coerce_int,
    "float": _coerce_float,
    "str": _coerce_str,
    "list": _coerce_list,
    "dict": _coerce_dict,
}


def _declared_kind(annotation: Any) -> str:
    """The key of ``annotation`` in :data:`_COERCERS`; ``"other"`` for anything else."""
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return "Union"
    if origin is typing.Literal:
        return "Literal"
    for plain in (bool, int, float, str):
        if annotation is plain:
            return plain.__name__
    for container in (list, dict):
        if annotation is container or origin is container:
            return container.__name__
    return "other"


def coerce_parameter(name: str, value: Any, annotation: Any) -> Any:
    """Check one parameter value against its declared type; convert it where unambiguous.

    ``name`` is used in the message (``snrs``, or ``snrs[1]`` for a list element); ``value`` is the
    value after papermill's injected cell; ``annotation`` one of ``bool``, ``int``, ``float``,
    ``str``, ``list[T]``, ``dict[K, V]``, ``Optional[T]``, ``Literal[...]`` (another class is
    checked with ``isinstance``, anything else accepted). Returns ``value`` itself when it has the
    type, else its conversion (the module's table).

    Raises
    ------
    ParameterTypeError
        No conversion applies: one line naming the parameter, its declared type and the value.
    """
    coercer = _COERCERS.get(_declared_kind(annotation), _check_instance)
    return coercer(name, value, annotation)


def _annotations(namespace: Mapping[str, Any]) -> dict:
    """The module-level annotations of a namespace (``__annotate__`` under Python 3.14, PEP 649)."""
    found = namespace.get("__annotations__")
    if isinstance(found, Mapping) and found:
        return dict(found)
    annotate = namespace.get("__annotate__")
    return dict(annotate(1)) if callable(annotate) else {}


def check_parameters(
    namespace: MutableMapping[str, Any], annotations: Mapping[str, Any] | None = None
) -> None:
    """Check every declared notebook parameter of ``namespace`` (the notebook's globals) and write
    the unambiguous conversions back; ``annotations`` (name → declared type) default to the
    namespace's own.

    Raises
    ------
    ParameterTypeError
        The first value that does not fit its declared type, or a declared parameter without value.
    AiplibParameterError
        No annotations found (the parameters cell was not run).
    """
    if annotations is not None:
        declared = dict(annotations)
    else:
        declared = _annotations(namespace)
    if not declared:
        raise AiplibParameterError(
            "check_parameters: no annotated parameters in this namespace; "
            "run the cell tagged 'parameters' first"
        )
    for name, annotation in declared.items():
        if name not in namespace:
            raise ParameterTypeError(
                f"parameter {name!r} is declared {_type_name(annotation)} but has no value"
            )
        # the value itself when it fits, else its conversion
        namespace[name] = coerce_parameter(name, namespace[name], annotation)
