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
from typing import Any, Mapping, MutableMapping

from aiplib.core.errors import AiplibParameterError

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}
_INT_RE = re.compile(r"[+-]?\d+")


class ParameterTypeError(AiplibParameterError, TypeError):
    """A notebook parameter's value does not fit its declared type; one line:
    ``parameter 'NAME' is declared TYPE but received VALUE (PYTYPE): hint``."""


def _type_name(annotation: Any) -> str:
    """How a declared type reads in a message: ``int``, ``list[int]``, ``Optional[int]``."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _fail(name: str, annotation: Any, value: Any, hint: str = "") -> ParameterTypeError:
    text = f"parameter {name!r} is declared {_type_name(annotation)} but received {value!r} ({type(value).__name__})"
    return ParameterTypeError(text + (f": {hint}" if hint else ""))


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
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)

    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in args if a is not type(None)]
        if len(members) < len(args) and (
            value is None
            or (isinstance(value, str) and value.strip().lower() == "none" and str not in members)
        ):
            return None
        for member in members:
            with contextlib.suppress(ParameterTypeError):
                return coerce_parameter(name, value, member)
        raise _fail(name, annotation, value)

    if origin is typing.Literal:
        for choice in args:
            with contextlib.suppress(ParameterTypeError):
                if coerce_parameter(name, value, type(choice)) == choice:
                    return choice
        raise _fail(name, annotation, value, "choose one of " + ", ".join(map(repr, args)))

    if annotation is bool:
        text = (
            str(value).strip().lower() if isinstance(value, (int, str)) else ""
        )  # a bool is an int
        if text in _TRUE | _FALSE:
            return text in _TRUE
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
            with contextlib.suppress(ValueError):
                if not math.isnan(number := float(value.strip())):
                    return number
        raise _fail(name, annotation, value, "give a number")

    if annotation is str:
        if isinstance(value, str):
            return value
        raise _fail(
            name,
            annotation,
            value,
            "papermill's -p reads numbers, True/False/None as Python values; "
            "pass text with -r NAME VALUE",
        )

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
            raise _fail(
                name, annotation, value, f"{err}; pass a list with -y 'NAME: [a, b]'"
            ) from None

    if annotation is dict or origin is dict:
        if not isinstance(value, Mapping):
            raise _fail(name, annotation, value, "pass a mapping with -y 'NAME: {key: value}'")
        if not args:
            return dict(value)
        key_type, value_type = args
        return {
            coerce_parameter(f"{name} key", k, key_type): coerce_parameter(
                f"{name}[{k!r}]", v, value_type
            )
            for k, v in value.items()
        }

    if isinstance(annotation, type) and origin is None:
        if isinstance(value, annotation):
            return value
        raise _fail(name, annotation, value)
    return value


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
    if not (declared := dict(annotations) if annotations is not None else _annotations(namespace)):
        raise AiplibParameterError(
            "check_parameters: no annotated parameters in this namespace; "
            "run the cell tagged 'parameters' first"
        )
    for name, annotation in declared.items():
        if name not in namespace:
            raise ParameterTypeError(
                f"parameter {name!r} is declared {_type_name(annotation)} but has no value"
            )
        namespace[name] = coerce_parameter(
            name, namespace[name], annotation
        )  # the value itself when it fits
