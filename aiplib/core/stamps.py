"""Stamps: what a stage read and with which parameters, so a re-run notices stale outputs.

A stamp is a JSON file beside a stage's outputs (paths relative to the workspace root when inside
it)::

    {"stamp_version": 1, "stage": "05_build_manifests:asr", "params": {"snrs_db": [10, 5, 0], ...},
     "inputs": {"itembanks/asr.jsonl": "<sha256>", ...}, "outputs": {"manifests/asr.csv":
     "<sha256>"}, "code": {"aiplib": "0.1.0", "module": "aiplib.stimuli.manifests", "module_sha256":
     "<sha256>"}, "written": "<UTC time>"}

A stage is up to date when its ``params`` equal the current ones and every input and output still
has its recorded SHA-256 (:func:`differences`); ``code`` is recorded, not compared. Which stages
write one: ``docs/ARCHITECTURE.md``; ``make stamps`` lists the stale ones
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
from aiplib.core.hashing import file_sha256

STAMP_VERSION = 1  # of the stamp format
STAMP_SUFFIX = ".stamp.json"


def text_sha256(text: str) -> str:
    """Hex SHA-256 of a text's UTF-8 bytes."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()


def _canon(obj) -> str:
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
    for p in paths:
        p = ws.path(p) if ws is not None else Path(p)
        out[ws.rel(p) if ws is not None else str(p.resolve())] = (
            file_sha256(p) if p.is_file() else "missing"
        )
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
        code.update(module=module, module_sha256=file_sha256(src) if src else None)
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
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(
        json.dumps(rec, indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    os.replace(tmp, path)
    return path


def _short(v, n: int = 60) -> str:
    if isinstance(v, str) and len(v) >= 32 and all(c in "0123456789abcdef" for c in v):
        return v[:12] + "…"  # a SHA-256: its first 12 hex digits tell two apart
    s = _canon(v)
    return s if len(s) <= n else s[: n - 1] + "…"


def _pair(a, b, n: int = 60) -> str:
    """``a → b``, each cut to ``n`` characters from where they start to differ (two long texts
    with a common beginning are never shown as identical prefixes)."""
    sa, sb = _short(a, 10**9), _short(b, 10**9)
    if len(sa) > n or len(sb) > n:
        cut = max(0, len(os.path.commonprefix([sa, sb])) - 10)
        sa, sb = (("…" if cut else "") + x[cut:] for x in (sa, sb))
        sa, sb = (x if len(x) <= n else x[: n - 1] + "…" for x in (sa, sb))
    return f"{sa} → {sb}"


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
    oi, ni = old.get("inputs", {}), new.get("inputs", {})
    for k in sorted(set(oi) | set(ni)):
        if k not in oi:
            out.append(f"input added: {k}")
        elif k not in ni:
            out.append(f"input removed: {k}")
        elif oi[k] != ni[k] and ni[k] == "missing":
            out.append(f"input missing: {k}")
        elif oi[k] != ni[k]:
            out.append(f"input changed: {k} ({_pair(oi[k], ni[k])})")
    op, np_ = old.get("params", {}), new.get("params", {})
    for k in sorted(set(op) | set(np_)):
        out += [f"parameter {d}" for d in value_differences(k, op.get(k), np_.get(k))]
    for k, sha in old.get("outputs", {}).items():
        p = ws.path(k) if ws is not None else Path(k)
        if not p.is_file():
            out.append(f"output missing: {k}")
        elif file_sha256(p) != sha:
            out.append(f"output changed since it was written: {k}")
    return out
