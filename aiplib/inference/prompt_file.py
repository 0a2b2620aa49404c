"""Read the literal ``PROMPTS = {...}`` dict of a Python file (the authors' inference script)
with :mod:`ast`, never executing it (it imports transformers and patches it at import time).
"""
from __future__ import annotations

import ast
from pathlib import Path

from aiplib.core.errors import AiplibError


class PromptFileError(AiplibError, ValueError):
    """A prompts file cannot be used as a prompt set (the message names the file and line)."""


def _scope_nodes(body):
    """Statements that run at import time: the module body and the bodies of its if/try/with/for
    blocks, never function or class bodies."""
    for node in body:
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _scope_nodes(getattr(node, field, None) or [])
        for h in getattr(node, "handlers", None) or []:
            yield from _scope_nodes(h.body)


def _names(target) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    return []


def _is_var(node, variable) -> bool:
    return isinstance(node, ast.Name) and node.id == variable


def _mutation(node, variable) -> str | None:
    """Why ``node`` (a module-level statement) changes the dict after its literal, or None."""
    targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete))
               else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
    for t in targets:
        if isinstance(t, (ast.Subscript, ast.Attribute)) and _is_var(t.value, variable):
            return f"`{ast.unparse(t)}` is assigned or deleted"
        if isinstance(node, ast.AugAssign) and _is_var(t, variable):
            return f"`{variable}` is updated in place ({type(node.op).__name__})"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        if isinstance(f, ast.Attribute) and _is_var(f.value, variable):
            return f"`{variable}.{f.attr}(...)` is called"
    return None


def _describe(node) -> str:
    if isinstance(node, ast.JoinedStr):
        return "an f-string"
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - a description only
        text = type(node).__name__
    return f"`{text[:60]}{'…' if len(text) > 60 else ''}`"


def _string(node, where: str) -> str:
    """The str value of a string literal, of adjacent literals (joined by the parser) or of
    ``+`` between such; anything else raises."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string(node.left, where) + _string(node.right, where)
    raise PromptFileError(f"{where}:{node.lineno}: {_describe(node)} is not a string literal; only "
                          f"string literals (adjacent, parenthesised or joined with +) are read — the "
                          f"file is never executed")


def parse_prompts_file(path, *, variable: str = "PROMPTS") -> dict[str, str]:
    """Read the literal dict ``variable = {...}`` of a Python file without executing it.

    The one module-level assignment (also inside a module-level ``if``/``try``) must be a dict display of
    string-literal keys and values (adjacent, parenthesised or joined with ``+``). Returns every key, in
    file order.

    Raises
    ------
    PromptFileError
        The file cannot be read or parsed; ``variable`` is assigned never or more than once, or not to a
        dict display; a key is ``**`` unpacking, not a string literal or repeated; a value is not a string
        literal; or the dict is changed at module level after its literal.
    """
    p = Path(path)
    try:
        source = p.read_bytes()
    except OSError as exc:
        raise PromptFileError(f"cannot read the prompts file {p}: {exc.strerror or exc}") from None
    try:
        tree = ast.parse(source, filename=str(p))
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        raise PromptFileError(f"{p}{f':{line}' if line else ''}: not a Python file that can be parsed "
                              f"({getattr(exc, 'msg', exc)})") from None
    assigns, mutations = [], []
    for node in _scope_nodes(tree.body):
        if isinstance(node, ast.Assign) and any(variable in _names(t) for t in node.targets):
            assigns.append(node)
        elif isinstance(node, ast.AnnAssign) and _is_var(node.target, variable) and node.value is not None:
            assigns.append(node)
        elif (why := _mutation(node, variable)) is not None:
            mutations.append((node.lineno, why))
    if not assigns:
        raise PromptFileError(f"{p}: no module-level assignment `{variable} = {{...}}` found "
                              f"(is this the authors' inference script?)")
    if len(assigns) > 1:
        lines = ", ".join(str(a.lineno) for a in assigns)
        raise PromptFileError(f"{p}:{assigns[1].lineno}: `{variable}` is assigned {len(assigns)} times at "
                              f"module level (lines {lines}); cannot tell which dict the script used")
    node = assigns[0]
    if isinstance(node, ast.Assign) and not all(_is_var(t, variable) or variable not in _names(t)
                                                 for t in node.targets):
        raise PromptFileError(f"{p}:{node.lineno}: `{variable}` is unpacked from a tuple; expected "
                              f"`{variable} = {{...}}`")
    if mutations:
        line, why = mutations[0]
        raise PromptFileError(f"{p}:{line}: {why} at module level, so the dict the script used differs "
                              f"from its literal; not read")
    value = node.value
    if not isinstance(value, ast.Dict):
        raise PromptFileError(f"{p}:{value.lineno}: `{variable}` is {_describe(value)}, not a literal "
                              f"dict `{{'task': 'text', ...}}`")
    out: dict[str, str] = {}
    for k, v in zip(value.keys, value.values):
        if k is None:
            raise PromptFileError(f"{p}:{v.lineno}: `**{_describe(v).strip('`')}` unpacking in "
                                  f"`{variable}` is not read; only literal keys")
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise PromptFileError(f"{p}:{k.lineno}: key {_describe(k)} of `{variable}` is not a string literal")
        if k.value in out:
            raise PromptFileError(f"{p}:{k.lineno}: key {k.value!r} appears twice in `{variable}`")
        out[k.value] = _string(v, str(p))
    return out
