"""The one file hasher: SHA-256 of a file's bytes, cached in this process."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

#: Digest of each file read: (absolute path, inode, size, mtime ns, ctime ns) → hex SHA-256.
_CACHE: dict[tuple, str] = {}
#: A file changed less than this many ns (2 s) ago is not cached (its mtime may not change again).
_RACY_NS = 2_000_000_000
#: Bytes read at a time (4 MiB).
_BLOCK = 1 << 22


def file_sha256(path) -> str:
    """Hex SHA-256 of a file's bytes, cached on (absolute path, inode, size, mtime, ctime in ns).

    Raises
    ------
    OSError
        If the file cannot be read.
    """
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _CACHE:
        return _CACHE[key]
    h = hashlib.sha256()
    with open(p, "rb") as f:
        block = f.read(_BLOCK)
        while block:
            h.update(block)
            block = f.read(_BLOCK)
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS:
        _CACHE[key] = h.hexdigest()
    return h.hexdigest()
