"""Stamps: what a stage read and with which parameters, so a re-run notices stale outputs.

A stamp is a JSON file beside a stage's outputs (paths relative to the workspace root when inside
it)::

    {"stamp_version": 1, "stage": "05_build_manifests:asr", "params": {"snrs_db": [10, 5, 0], ...},
     "inputs": {"itembanks/asr.jsonl": "<sha256>", ...}, "outputs": {"manifests/asr.csv":
     "<sha256>"}, "code": {"aiplib": "0.1.0", "module": "aiplib.stimuli.manifests", "module_sha256":
     "<sha256>"}, "written": "<UTC time>"}

A stage is up to date when its ``params`` equal the current ones and every input and output still
has its recorded SHA-256 (:func:`differences`); ``code`` is recorded, not compared. Which stages
write one: ``docs/ARCHITECTURE.md``; ``python -m aiplib.sources.pipeline`` lists the stale ones
(:func:`aiplib.sources.pipeline.stale_stamps`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

from aiplib.core import __version__
from aiplib.core.atomic import write_text_atomic
from aiplib.core.hashing import file_sha256

#: Version of the stamp format (``stamp_version``); a stamp of another version is stale.
STAMP_VERSION = 1
#: File name ending of a stamp (:func:`stamp_path`).
STAMP_SUFFIX = ".stamp.json"
#: What :func:`_hashes` records for a file that does not exist.
_MISSING = "missing"


def text_sha256(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()


def _canon(obj) -> str:
    """``obj`` as canonical JSON: sorted keys, no spaces, non-JSON values as their text."""
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def json_sha256(obj) -> str:
    """Hex SHA-256 of ``obj`` as canonical JSON (sorted keys, no spaces; non-JSON values as str)."""
    return text_sha256(_canon(obj))


def jsonable(v):
    """Parameters as JSON values: tuples → lists, numpy scalars → Python, paths → str."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)  # paths, arrays, objects: their text


def _hashes(paths, ws) -> dict:
    """``{path (relative to ws.root when inside it): sha256 or "missing"}``, sorted."""
    out = {}
    for given in paths:
        if ws is not None:
            path = ws.path(given)
            key = ws.rel(path)
        else:
            path = Path(given)
            key = str(path.resolve())
        if path.is_file():
            out[key] = file_sha256(path)
        else:
            out[key] = _MISSING
    return dict(sorted(out.items()))


def stamp_path(folder, name: str) -> Path:
    """``<folder>/<name>.stamp.json``."""
    return Path(folder) / f"{name}{STAMP_SUFFIX}"


def make_stamp(stage: str, *, params: dict, inputs=(), ws=None, module: str | None = None) -> dict:
    """The stamp (without ``outputs``, :func:`write_stamp`) of a stage run such as
    ``"05_build_manifests:asr"``: its JSON-able ``params``, the SHA-256 of every file of ``inputs``
    (``"missing"`` when absent; paths inside ``ws.root`` relative to it) and, under ``code``, the
    SHA-256 of ``module``'s source."""
    code = {"aiplib": __version__}
    if module:
        src = getattr(sys.modules.get(module), "__file__", None)
        module_sha256 = None
        if src:
            module_sha256 = file_sha256(src)
        code.update(module=module, module_sha256=module_sha256)
    return {
        "stamp_version": STAMP_VERSION,
        "stage": stage,
        "params": jsonable(dict(params)),
        "inputs": _hashes(inputs, ws),
        "code": code,
    }


def read_stamp(path) -> dict | None:
    """The stamp at ``path``, or None when it is missing or unreadable."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def write_stamp(path, stamp: dict, *, outputs=(), ws=None) -> Path:
    """Write ``stamp`` plus the SHA-256 of ``outputs`` atomically (``.part`` file, then rename);
    returns ``path``."""
    path = Path(path)
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    rec = dict(stamp, outputs=_hashes(outputs, ws), written=now)
    text = json.dumps(rec, indent=1, ensure_ascii=False, default=str) + "\n"
    write_text_atomic(path, text)
    return path


def _fit(text: str, n: int) -> str:
    """``text`` cut to at most ``n`` characters, the last one an ellipsis when cut."""
    if len(text) <= n:
        return text
    return text[: n - 1] + "…"


def _is_sha256_like(v) -> bool:
    """A text of at least 32 lower-case hex digits (a SHA-256)."""
    return isinstance(v, str) and len(v) >= 32 and all(c in "0123456789abcdef" for c in v)


def _short(v, n: int = 60) -> str:
    """``v`` for a message: a SHA-256 by its first 12 hex digits (they tell two apart), anything
    else as canonical JSON cut to ``n`` characters."""
    if _is_sha256_like(v):
        return v[:12] + "…"
    return _fit(_canon(v), n)


def _from(text: str, cut: int, n: int) -> str:
    """``text`` from index ``cut`` (an ellipsis in front when ``cut`` > 0), cut to ``n``."""
    if cut:
        text = "…" + text[cut:]
    return _fit(text, n)


def _pair(a, b, n: int = 60) -> str:
    """``a → b``, each cut to ``n`` characters from where they start to differ (two long texts
    with a common beginning are never shown as identical prefixes)."""
    old = _short(a, 10**9)
    new = _short(b, 10**9)
    if len(old) > n or len(new) > n:
        cut = max(0, len(os.path.commonprefix([old, new])) - 10)
        old = _from(old, cut, n)
        new = _from(new, cut, n)
    return f"{old} → {new}"


def value_differences(name: str, old, new) -> list[str]:
    """Where two JSON values differ: one ``"<name>.<key>: <old> → <new>"`` per differing leaf (dicts
    compared key by key; ``added <new>`` / ``removed (was <old>)`` for a key on one side; SHA-256
    values by their first 12 hex digits, long texts from where they differ); empty when equal."""
    if _canon(old) == _canon(new):
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            sub = f"{name}.{k}"
            if k not in old:
                out.append(f"{sub}: added {_short(new[k])}")
            elif k not in new:
                out.append(f"{sub}: removed (was {_short(old[k])})")
            else:
                out += value_differences(sub, old[k], new[k])
        return out
    return [f"{name}: {_pair(old, new)}"]


def differences(old: dict | None, new: dict, *, ws=None) -> list[str]:
    """What changed between a recorded stamp and the current one, one line per change: inputs, then
    parameters, then outputs edited since.

    ``old``: the recorded stamp (None: there is none); ``new``: the current one
    (:func:`make_stamp`); every output of ``old`` (resolved in ``ws``) is checked to still have its
    SHA-256. Empty when up to date, e.g. ``["input changed: bg/bg03.wav (3fa2c1d09e7b… → 9c1b…)",
    "parameter snrs_db: [10,5,0] → [10,5]"]``.
    """
    if old is None:
        return ["no stamp (outputs written by an older version, or not yet built)"]
    out = []
    if old.get("stamp_version") != new.get("stamp_version"):
        out.append(f"stamp version {old.get('stamp_version')} → {new.get('stamp_version')}")
    out += _input_differences(old.get("inputs", {}), new.get("inputs", {}))
    out += _parameter_differences(old.get("params", {}), new.get("params", {}))
    out += _output_differences(old.get("outputs", {}), ws)
    return out


def _input_differences(old: dict, new: dict) -> list[str]:
    """One line per input added, removed, missing or changed (``{path: sha256}`` each), by path."""
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            out.append(f"input added: {key}")
        elif key not in new:
            out.append(f"input removed: {key}")
        elif old[key] != new[key] and new[key] == _MISSING:
            out.append(f"input missing: {key}")
        elif old[key] != new[key]:
            out.append(f"input changed: {key} ({_pair(old[key], new[key])})")
    return out


def _parameter_differences(old: dict, new: dict) -> list[str]:
    """One ``parameter ...`` line per differing leaf (:func:`value_differences`), by name."""
    out = []
    for key in sorted(set(old) | set(new)):
        for difference in value_differences(key, old.get(key), new.get(key)):
            out.append(f"parameter {difference}")
    return out


def _output_differences(recorded: dict, ws) -> list[str]:
    """One line per recorded output (``{path: sha256}``, in ``ws``) now missing or edited."""
    out = []
    for key, sha in recorded.items():
        if ws is not None:
            path = ws.path(key)
        else:
            path = Path(key)
        if not path.is_file():
            out.append(f"output missing: {key}")
        elif file_sha256(path) != sha:
            out.append(f"output changed since it was written: {key}")
    return out
