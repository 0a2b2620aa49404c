"""Paths in a models file, resolved from that file's folder (never from ``notebooks/``, where the
kernels run), and the rule that tells a local folder from a Hugging Face hub id.

``weights:`` of an entry is read as follows (docs/AUDIT_YOUR_MODEL.md):

- ``package:<module>``: weights shipped in a Python package, kept as written;
- ``hub:<org>/<name>``: a hub id, always (the prefix is dropped);
- starting with ``/``, ``~``, ``./`` or ``../`` (or exactly ``.`` / ``..``): a local folder, made
  absolute from the models file's folder; when it does not exist, loading the model stops with one
  line naming that absolute path (never a hub id);
- anything else that exists as a folder relative to the models file's folder: that local folder;
- anything else (``org/name``, ``name``): a hub id.

The program of a ``command`` entry (the first word of ``command:``) starting with ``./``, ``../``
or ``~`` is made absolute the same way; a bare name is looked up on ``PATH``.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

#: Prefix that marks ``weights:`` as a Hugging Face hub id whatever folders exist.
HUB_PREFIX = "hub:"
#: Prefix of weights shipped in an installed Python package (kept as written).
PACKAGE_PREFIX = "package:"
#: Beginnings that mark a value as a local path (relative ones from the models file's folder).
LOCAL_PREFIXES = ("/", "~", "./", "../")


def looks_local(value: str) -> bool:
    """True when ``value`` is written as a local path (:data:`LOCAL_PREFIXES`, ``.`` or ``..``)."""
    return value in (".", "..") or value.startswith(LOCAL_PREFIXES)


def resolve_weights_value(value, base: Path):
    """``weights:`` of a models file in ``base`` as the entry keeps it: an absolute folder path, a
    hub id or ``package:<module>`` (rule in the module docstring); None stays None.

    Examples (``base`` = ``/home/me/audit``): ``ckpt`` (an existing folder there) →
    ``/home/me/audit/ckpt``; ``./missing`` → ``/home/me/audit/missing``; ``facebook/wav2vec2-base``
    → itself; ``hub:facebook/wav2vec2-base`` → ``facebook/wav2vec2-base``.
    """
    if value is None:
        return None
    text = str(value).strip()
    if text.startswith(PACKAGE_PREFIX):
        return text
    if text.startswith(HUB_PREFIX):
        return text[len(HUB_PREFIX) :].strip()
    if looks_local(text):
        return os.path.abspath(Path(base) / Path(text).expanduser())
    beside = Path(base) / text
    if beside.is_dir():
        return os.path.abspath(beside)
    return text


def resolve_command_value(value, base: Path):
    """``command:`` of a models file in ``base`` with its program (the first word) made absolute
    when it is written as a relative or ``~`` path (``./whisper-asr {file}``, ``bin/asr {file}``:
    any path with a ``/`` that is neither absolute nor starts with ``$``); a bare name is left for
    the ``PATH`` lookup. A command that does not split (unbalanced quotes) is kept for the
    backend's own error."""
    if value is None:
        return None
    text = str(value)
    try:
        argv = shlex.split(text)
    except ValueError:
        return text
    if not argv:
        return text
    program = argv[0]
    home_or_dot = program.startswith(("./", "../", "~"))
    relative_path = "/" in program and not program.startswith(("/", "$"))
    if not (home_or_dot or relative_path):
        return text
    argv[0] = os.path.abspath(Path(base) / Path(argv[0]).expanduser())
    return shlex.join(argv)


def resolve_entry_paths(raw, base: Path):
    """A models file entry's fields (a mapping) with ``weights`` and ``command`` resolved from
    ``base``, the models file's folder; anything else (a malformed entry) is returned as it is, for
    the registry's own one-line error."""
    if not isinstance(raw, dict):
        return raw
    out = dict(raw)
    if "weights" in out:
        out["weights"] = resolve_weights_value(out["weights"], base)
    if "command" in out:
        out["command"] = resolve_command_value(out["command"], base)
    return out


def missing_local_weights(weights) -> Path | None:
    """The absolute folder of ``weights`` when it names a local path that does not exist (what
    loading would refuse), else None (an existing folder, a hub id, ``package:`` or None)."""
    if weights is None:
        return None
    text = str(weights)
    if not looks_local(text):
        return None
    p = Path(os.path.abspath(Path(text).expanduser()))
    if p.exists():
        return None
    return p
