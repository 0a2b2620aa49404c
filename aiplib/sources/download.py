"""Resumable, verified downloads and safe archive extraction (stage 1 of the ``paper`` profile).

The pieces every corpus downloader needs, kept apart from any one corpus (pooch- and
lhotse-style):

* :func:`download_file` — HTTP(S) download into ``<file>.part`` with range requests, so an
  interrupted download is continued, not restarted; a progress bar (tqdm); a free-disk-space check
  before the first byte is written; verification against the publisher's MD5 or a pinned SHA-256,
  else against the size the server announced (the SHA-256 is always recorded).
* :func:`aiplib.sources.archives.safe_extract` (its own module) — ZIP / TAR extraction that checks every
  member before writing anything.
* :func:`fetch` — download + extract + ``.completed`` marker + an entry in the JSON progress file
  (``checks/download_progress.json``), skipped when already complete.
* :func:`set_cache_env` — point ``HF_HOME``, ``HF_DATASETS_CACHE`` and ``TORCH_HOME`` into
  ``models/cache/`` unless the user has set them.

Failures raise :class:`~aiplib.core.errors.DownloadError` (or its subclasses ``ChecksumError``,
``UnsafeArchiveError``, ``InsufficientDiskSpaceError``, all in :mod:`aiplib.core.errors`) whose message names
the URL or file and says how to continue (a mirror, free space, running again to resume).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path

from aiplib.core.errors import ChecksumError, DownloadError, InsufficientDiskSpaceError
from aiplib.core.workspace import repo_root
from aiplib.sources.archives import safe_extract

__all__ = [
    "download_file",
    "fetch",
    "file_digests",
    "check_disk_space",
    "read_progress",
    "update_progress",
    "set_cache_env",
    "RETRY_WAIT_S",
]

RETRY_WAIT_S = 2.0
"""Seconds to wait before the first retry of a failed request (doubled for each further retry)."""

_GB = 1e9
_CHUNK = 1 << 16


# --------------------------------------------------------------------------------------------
# checksums and disk space
# --------------------------------------------------------------------------------------------
def file_digests(path, *, chunk_size: int = _CHUNK) -> dict:
    """MD5 and SHA-256 of a file in one pass.

    Parameters
    ----------
    path : str or Path
    chunk_size : int > 0, bytes read at a time

    Returns
    -------
    dict
        ``{"md5": hex str, "sha256": hex str, "size": int bytes}``.
    """
    md5, sha = hashlib.md5(), hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while True:
            block = fh.read(chunk_size)
            if not block:
                break
            md5.update(block)
            sha.update(block)
            size += len(block)
    return {"md5": md5.hexdigest(), "sha256": sha.hexdigest(), "size": size}


def _free_bytes(path: Path) -> int:
    """Free bytes on the file system holding ``path`` (the nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def check_disk_space(path, needed_bytes: float, *, what: str = "the download") -> None:
    """Raise when the file system holding ``path`` has less than ``needed_bytes`` free.

    Parameters
    ----------
    path : str or Path
        A file or folder (it need not exist yet).
    needed_bytes : float >= 0, bytes
    what : str
        Named in the message.

    Raises
    ------
    InsufficientDiskSpaceError
        With the space needed and available in GB and the folder concerned.
    """
    free = _free_bytes(Path(path))
    if needed_bytes > free:
        raise InsufficientDiskSpaceError(
            f"not enough disk space for {what} in {Path(path).parent if Path(path).suffix else path}: "
            f"needs {needed_bytes / _GB:.2f} GB, only {free / _GB:.2f} GB free. Free some space, or "
            f"set AIP_DATA_ROOT to a larger disk, and run again (partial files are kept and resumed).")


# --------------------------------------------------------------------------------------------
# progress file
# --------------------------------------------------------------------------------------------
def read_progress(progress_file) -> dict:
    """Read the JSON progress file (``checks/download_progress.json``).

    Parameters
    ----------
    progress_file : str or Path or None

    Returns
    -------
    dict
        ``{key: entry}`` where ``key`` is ``"<corpus>/<file>"`` and ``entry`` holds ``status``
        (``"complete"``), ``url``, ``path``, ``size``, ``md5``, ``sha256``, ``verified_by``,
        ``extracted_to`` and ``completed_at`` (ISO 8601, UTC). Empty when the file is missing or
        unreadable (a corrupt progress file only costs a re-verification).
    """
    if progress_file is None:
        return {}
    p = Path(progress_file)
    if not p.is_file():
        return {}
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("files", {}) if isinstance(data, dict) else {}


def update_progress(progress_file, key: str, entry: dict | None) -> None:
    """Set (or, with ``entry=None``, remove) one entry of the progress file, atomically.

    Parameters
    ----------
    progress_file : str or Path
    key : str
        ``"<corpus>/<file>"``.
    entry : dict or None
    """
    p = Path(progress_file)
    p.parent.mkdir(parents=True, exist_ok=True)
    files = read_progress(p)
    if entry is None:
        files.pop(key, None)
    else:
        files[key] = entry
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps({"files": dict(sorted(files.items()))}, indent=2) + "\n", encoding="utf-8")
    tmp.replace(p)


# --------------------------------------------------------------------------------------------
# download
# --------------------------------------------------------------------------------------------
def _content_range(value: str | None):
    """Parse ``bytes start-end/total`` → (start, total or None)."""
    m = re.match(r"bytes\s+(\d+)-\d+/(\d+|\*)", value or "")
    if not m:
        return None, None
    return int(m.group(1)), (None if m.group(2) == "*" else int(m.group(2)))


def _unreachable(url: str, reason, hint: str) -> DownloadError:
    return DownloadError(
        f"cannot download {url}: {reason}. Files already downloaded are kept and a partial file is "
        f"resumed on the next run." + (f" {hint}" if hint else ""), url=url, reason=str(reason))


def _is_dns_failure(exc) -> bool:
    text = repr(exc)
    return any(k in text for k in ("NameResolutionError", "Name or service not known", "nodename nor servname",
                                   "Temporary failure in name resolution", "getaddrinfo failed"))


def download_file(url: str, dest, *, md5: str | None = None, sha256: str | None = None,
                  size: int | None = None, extract_factor: float = 0.0, hint: str = "",
                  retries: int = 2, timeout=(15.0, 60.0), progress: bool | None = True,
                  chunk_size: int = _CHUNK, session=None) -> dict:
    """Download ``url`` to ``dest``, resuming a partial ``dest.part``, and verify it.

    Bytes go to ``<dest>.part``; when a ``.part`` file exists the request carries
    ``Range: bytes=<size>-`` and a ``206 Partial Content`` answer is appended to it (a server that
    ignores ranges answers ``200`` and the file is restarted). After the last byte the file is
    verified and renamed to ``dest``.

    Parameters
    ----------
    url : str
        HTTP(S) URL.
    dest : str or Path
        Final file path; its folder is created.
    md5, sha256 : str, optional
        Expected hex digests (the publisher's, or a pinned one). Checked when given.
    size : int, optional
        Expected size in bytes. Otherwise the size the server announced
        (``Content-Length``/``Content-Range``) is checked.
    extract_factor : float >= 0
        Extracted size as a fraction of the archive size, for the disk-space check
        (``needed = remaining download + factor × archive size``).
    hint : str
        Appended to network error messages (how to use a mirror).
    retries : int >= 0
        Further attempts after a connection error or an interrupted transfer; each resumes.
    timeout : float or (float, float), s
        requests' (connect, read) timeout.
    progress : bool or None
        Show a tqdm bar (default); ``None`` shows it only on a terminal, ``False`` never.
    chunk_size : int > 0, bytes
    session : requests.Session, optional

    Returns
    -------
    dict
        ``{"url", "path", "size", "md5", "sha256", "verified_by"}`` with ``verified_by`` one of
        ``"md5"``, ``"sha256"``, ``"size"``.

    Raises
    ------
    DownloadError
        The server cannot be reached, answers with an HTTP error, or the transfer broke off
        ``retries + 1`` times (the partial file is kept for the next run). The message names the URL.
    ChecksumError
        The file does not match ``md5``/``sha256``/``size``; the bad file is renamed to
        ``<dest>.corrupt`` and the message names it.
    InsufficientDiskSpaceError
        Not enough free space for the rest of the download and its extraction.
    """
    import requests
    from tqdm.auto import tqdm

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    sess = session or requests.Session()
    total = None
    attempt = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        headers = {"Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        try:
            resp = sess.get(url, headers=headers, stream=True, timeout=timeout, allow_redirects=True)
        except (requests.ConnectionError, requests.Timeout) as exc:
            if _is_dns_failure(exc):  # no network or a wrong host name: retrying will not help
                raise _unreachable(url, "the host name cannot be resolved (no network, or a wrong URL)",
                                   hint) from None
            if attempt < retries:
                time.sleep(RETRY_WAIT_S * 2 ** attempt)
                attempt += 1
                continue
            raise _unreachable(url, f"the server cannot be reached ({type(exc).__name__})", hint) from None
        except requests.RequestException as exc:
            raise _unreachable(url, f"request failed ({exc})", hint) from None
        with resp:
            if resp.status_code == 416 and have:
                m = re.match(r"bytes\s+\*/(\d+)", resp.headers.get("Content-Range", ""))
                if m and int(m.group(1)) == have:
                    total = have
                    break  # the partial file is already complete
                part.unlink()  # the partial file is longer than the remote one: start over
                continue
            if resp.status_code == 206 and have:
                start, total = _content_range(resp.headers.get("Content-Range"))
                if start != have:
                    part.unlink()
                    continue
                mode = "ab"
            elif resp.status_code == 200:
                clen = resp.headers.get("Content-Length")
                total = int(clen) if clen and clen.isdigit() else None
                have, mode = 0, "wb"
            else:
                raise _unreachable(url, f"HTTP {resp.status_code} {resp.reason}", hint)
            full = total if total is not None else size
            if full is not None:
                check_disk_space(dest, max(full - have, 0) + extract_factor * full, what=dest.name)
            bar = tqdm(total=total, initial=have, unit="B", unit_scale=True, unit_divisor=1024,
                       desc=dest.name, disable=(None if progress is None else not progress), leave=False)
            try:
                with open(part, mode) as fh:
                    for block in resp.iter_content(chunk_size=chunk_size):
                        if block:
                            fh.write(block)
                            bar.update(len(block))
            except requests.RequestException:
                got = part.stat().st_size if part.exists() else 0
                if attempt < retries:
                    time.sleep(RETRY_WAIT_S * 2 ** attempt)
                    attempt += 1
                    continue
                raise _unreachable(url, f"the transfer broke off after {got} of {total or '?'} bytes", hint) from None
            except OSError as exc:  # the local disk, not the network
                raise DownloadError(f"cannot write {part}: {exc} (partial data is kept)") from None
            finally:
                bar.close()
        got = part.stat().st_size
        if total is not None and got < total:
            if attempt < retries:
                attempt += 1
                continue
            raise _unreachable(url, f"the transfer broke off after {got} of {total} bytes", hint)
        break

    digests = file_digests(part)
    problems = []
    if md5 and digests["md5"] != md5.lower():
        problems.append(f"MD5 {digests['md5']} != expected {md5.lower()}")
    if sha256 and digests["sha256"] != sha256.lower():
        problems.append(f"SHA-256 {digests['sha256']} != expected {sha256.lower()}")
    expected_size = size if size is not None else total
    if expected_size is not None and digests["size"] != expected_size:
        problems.append(f"size {digests['size']} bytes != expected {expected_size}")
    if problems:
        bad = dest.with_name(dest.name + ".corrupt")
        part.replace(bad)
        raise ChecksumError(
            f"{dest.name} (from {url}) failed verification: {'; '.join(problems)}. The file was moved "
            f"to {bad}; run again to download it afresh, or check the mirror serves the original file.")
    part.replace(dest)
    return {"url": url, "path": str(dest), "size": digests["size"], "md5": digests["md5"],
            "sha256": digests["sha256"],
            "verified_by": "md5" if md5 else ("sha256" if sha256 else "size")}


# --------------------------------------------------------------------------------------------
# download + extract + record
# --------------------------------------------------------------------------------------------
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def fetch(url: str, archive_path, *, key: str, extract_to=None, md5: str | None = None,
          sha256: str | None = None, size: int | None = None, progress_file=None,
          extract_factor: float = 1.0, hint: str = "", force: bool = False, **kwargs) -> dict:
    """Download (resuming), verify, extract and record one file; skip it when already complete.

    A file is *complete* when the progress file has a ``"complete"`` entry for ``key``, the archive
    is on disk with the recorded size and — when ``extract_to`` is given — the marker
    ``<extract_to>/.<archive name>.completed`` exists (lhotse-style); switching to a mirror does not
    make it incomplete. An archive found on disk without a progress entry is verified (checksum when
    known) instead of being downloaded again, and extracted only if its marker is missing.

    Parameters
    ----------
    url : str
    archive_path : str or Path
        Where the downloaded file is kept (archives stay next to their extracted data).
    key : str
        Progress-file key, ``"<corpus>/<file>"``.
    extract_to : str or Path, optional
        Folder to extract into with :func:`safe_extract`; ``None`` keeps the file as is.
    md5, sha256 : str, optional
        Expected digests.
    size : int, optional
        Expected size in bytes.
    progress_file : str or Path, optional
        JSON progress file, normally ``checks/download_progress.json``.
    extract_factor : float >= 0
        Extracted size / archive size (disk-space check).
    hint : str
        How to use a mirror; appended to network errors.
    force : bool
        Download and extract again even when complete.
    **kwargs
        Passed to :func:`download_file` (``retries``, ``timeout``, ``progress``, ``session``).

    Returns
    -------
    dict
        The progress entry, plus ``"skipped": True`` when nothing had to be done.

    Raises
    ------
    DownloadError, ChecksumError, UnsafeArchiveError, InsufficientDiskSpaceError
        See :func:`download_file` and :func:`safe_extract`.
    """
    archive_path = Path(archive_path)
    marker = Path(extract_to) / f".{archive_path.name}.completed" if extract_to is not None else None
    entry = read_progress(progress_file).get(key)
    if (not force and entry and entry.get("status") == "complete"
            and archive_path.is_file() and archive_path.stat().st_size == entry.get("size")
            and (marker is None or marker.is_file())):
        return {**entry, "skipped": True}

    info, downloaded = None, False
    if not force and archive_path.is_file():
        digests = file_digests(archive_path)
        ok = ((not md5 or digests["md5"] == md5.lower()) and (not sha256 or digests["sha256"] == sha256.lower())
              and (size is None or digests["size"] == size))
        if ok:
            info = {"url": url, "path": str(archive_path), **digests,
                    "verified_by": "md5" if md5 else ("sha256" if sha256 else "present")}
        else:
            archive_path.replace(archive_path.with_name(archive_path.name + ".corrupt"))
    if info is None:
        info = download_file(url, archive_path, md5=md5, sha256=sha256, size=size, hint=hint,
                             extract_factor=extract_factor if extract_to is not None else 0.0, **kwargs)
        downloaded = True
    if extract_to is not None and (downloaded or not marker.is_file()):
        if marker.exists():
            marker.unlink()
        check_disk_space(Path(extract_to) / "x", extract_factor * info["size"],
                         what=f"extracting {archive_path.name}")
        safe_extract(archive_path, extract_to)
        marker.write_text(_now() + "\n", encoding="utf-8")
    entry = {"status": "complete", "url": url, "path": str(archive_path), "size": info["size"],
             "md5": info["md5"], "sha256": info["sha256"], "verified_by": info["verified_by"],
             "extracted_to": str(extract_to) if extract_to is not None else None, "completed_at": _now()}
    if progress_file is not None:
        update_progress(progress_file, key, entry)
    return {**entry, "skipped": False}


# --------------------------------------------------------------------------------------------
# caches
# --------------------------------------------------------------------------------------------
def set_cache_env(cache_root=None) -> dict:
    """Point the model and data-set caches into ``models/cache/`` unless the user has set them.

    ``HF_HOME`` → ``<cache_root>/huggingface``, ``HF_DATASETS_CACHE`` →
    ``<cache_root>/huggingface/datasets`` (only when ``HF_HOME`` was not set by the user either,
    so a user's ``HF_HOME`` keeps its own ``datasets`` folder) and ``TORCH_HOME`` →
    ``<cache_root>/torch``. Variables already in the environment are never changed.

    Parameters
    ----------
    cache_root : str or Path, optional
        Default ``<repo>/models/cache``.

    Returns
    -------
    dict
        The variables this call set, ``{name: value}`` (empty when all were set already).
    """

    root = Path(cache_root) if cache_root is not None else repo_root() / "models" / "cache"
    user_hf_home = "HF_HOME" in os.environ
    wanted = {"HF_HOME": root / "huggingface", "TORCH_HOME": root / "torch"}
    if not user_hf_home:
        wanted["HF_DATASETS_CACHE"] = root / "huggingface" / "datasets"
    done = {}
    for name, value in wanted.items():
        if name not in os.environ:
            os.environ[name] = str(value)
            done[name] = str(value)
    return done
