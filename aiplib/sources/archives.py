"""Safe extraction of ZIP and TAR archives (stage 1 of the ``paper`` profile).

:func:`safe_extract` checks *every* member before writing anything and refuses absolute paths,
``..`` components, symbolic and hard links and device files; used by
:func:`aiplib.sources.download.fetch` for each corpus archive.
"""
from __future__ import annotations

import re
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from aiplib.core.errors import DownloadError, UnsafeArchiveError

__all__ = ["safe_extract"]


def _unsafe_name(name: str, root: Path) -> str | None:
    """Why an archive member name is unsafe, or None."""
    if not name:
        return "empty name"
    norm = name.replace("\\", "/")
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        return "absolute path"
    if ".." in PurePosixPath(norm).parts:
        return "'..' component"
    target = (root / norm).resolve()
    if target != root and root not in target.parents:
        return "resolves outside the target folder"
    return None


def safe_extract(archive, target_dir) -> list[str]:
    """Extract a ZIP or TAR archive into ``target_dir`` after checking every member.

    Nothing is written unless all members are safe: a member with an absolute path (``/x``,
    ``C:\\x``), a ``..`` component or a path resolving outside ``target_dir``, a symbolic or hard
    link, or a device/FIFO member makes the whole archive refused. TAR members are then extracted
    with Python's ``"data"`` filter as a second line of defence.

    Parameters
    ----------
    archive : str or Path
        ``.zip``, ``.tar``, ``.tar.gz``/``.tgz``, ``.tar.bz2``, ``.tar.xz``.
    target_dir : str or Path
        Created if missing.

    Returns
    -------
    list of str
        Member names extracted (files and folders, as stored in the archive).

    Raises
    ------
    UnsafeArchiveError
        Naming the archive, the first offending member and the reason.
    DownloadError
        If the file is not a readable ZIP or TAR archive.
    """
    archive = Path(archive)
    root = Path(target_dir)
    root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()

    def refuse(member, why):
        return UnsafeArchiveError(
            f"{archive.name}: refusing to extract member {member!r} ({why}); nothing was extracted "
            f"to {root}. The archive is not the expected one — delete it and check the source or mirror.")

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            for info in infos:
                why = _unsafe_name(info.filename, root)
                mode = (info.external_attr >> 16) & 0o170000
                if why is None and mode == 0o120000:
                    why = "symbolic link"
                if why:
                    raise refuse(info.filename, why)
            zf.extractall(root)
            return [i.filename for i in infos]
    try:
        tf = tarfile.open(archive, "r:*")
    except (tarfile.TarError, OSError) as exc:
        raise DownloadError(f"{archive}: not a readable ZIP or TAR archive ({exc}); delete it and "
                            f"download again") from None
    with tf:
        members = tf.getmembers()
        for m in members:
            why = _unsafe_name(m.name, root)
            if why is None:
                if m.issym():
                    why = f"symbolic link to {m.linkname!r}"
                elif m.islnk():
                    why = f"hard link to {m.linkname!r}"
                elif not (m.isfile() or m.isdir()):
                    why = "device, FIFO or other special file"
            if why:
                raise refuse(m.name, why)
        if hasattr(tarfile, "data_filter"):
            tf.extractall(root, members=members, filter="data")
        else:  # pragma: no cover - Python < 3.11.4
            tf.extractall(root, members=members)
        return [m.name for m in members]
