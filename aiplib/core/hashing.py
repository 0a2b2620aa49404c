"""Checksums of files (weights, item audio, inventories, results)."""
from __future__ import annotations

import hashlib

__all__ = ["sha256_file"]


def sha256_file(path, *, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file's bytes, read in ``chunk``-byte blocks (4 MiB by default).

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
