"""Verified, resumable downloads and safe extraction on pooch (stage 1 of the ``paper`` profile).

:func:`fetch` = :func:`pooch.retrieve` + :class:`ResumingDownloader` (HTTP ``Range`` from
``<file>.part``, requests through :func:`aiplib.io.http.http_session`) + :class:`SafeUntar` /
:class:`SafeUnzip`, recorded in ``checks/download_progress.json``. Failures raise
:class:`~aiplib.core.errors.DownloadError` or a subclass, naming the URL or file.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import json
import os
import re
import shutil
import tarfile
import time
import zipfile
from pathlib import Path, PurePosixPath

import pooch
import requests
import yaml

from aiplib.core.errors import (
    AiplibError,
    ChecksumError,
    DownloadError,
    InsufficientDiskSpaceError,
    UnsafeArchiveError,
)
from aiplib.core.workspace import repo_root
from aiplib.io.formats import write_json_atomic
from aiplib.io.http import RetryPolicy, http_session, is_name_resolution_failure

pooch.get_logger().setLevel("WARNING")  # its "use this hash" advice is not for our users

#: Seconds before the first retry of a failed request or resume of a broken transfer (doubled for
#: each further one).
RETRY_WAIT_S = 2.0
#: Longest wait before one retry, seconds (also the cap of a server's ``Retry-After``).
MAX_RETRY_WAIT_S = 60.0
#: ``(connect, read)`` timeouts of one request, seconds.
TIMEOUT_S = (15.0, 60.0)

#: Bytes in a GB (decimal, as disk sizes are given).
_GB = 1e9
#: Bytes read from the network per write.
_CHUNK = 1 << 16
#: ``Content-Range`` of a 206 answer: first byte, total size (or ``*``).
_RANGE_RE = re.compile(r"bytes\s+(\d+)-\d+/(\d+|\*)")
#: ``Content-Range`` of a 416 answer: the remote file's size.
_SIZE_RE = re.compile(r"bytes\s+\*/(\d+)")


class CorpusError(AiplibError):
    """A corpus is missing, incomplete, or too small for the paper's selection (a shortfall)."""


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One file of a corpus: ``name`` at the base URL and on disk; published ``md5`` / ``sha256``
    (``None``: the announced size is checked); ``approx_gb`` (documentation only);
    ``extract_subdir`` relative to the corpus folder (``""`` the folder itself, ``None`` not an
    archive)."""

    name: str
    md5: str | None = None
    sha256: str | None = None
    approx_gb: float = 0.0
    extract_subdir: str | None = ""


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A downloadable corpus: ``name`` (registry key, folder, ``AIP_MIRROR_<NAME>`` suffix),
    ``kind`` (workspace sub-folder: ``backgrounds``, ``speech_asr`` or ``kws``), ``base_url``,
    ``files`` (tuple of :class:`RemoteFile`), licence and attribution, ``extract_factor``
    (extracted size / archive size, for the disk-space check)."""

    name: str
    title: str
    kind: str
    base_url: str
    files: tuple
    licence: str
    attribution: str
    homepage: str
    extract_factor: float = 1.1
    notes: str = ""

    @property
    def env_var(self) -> str:
        """Name of the environment variable holding this corpus's mirror base URL."""
        return f"AIP_MIRROR_{self.name.upper()}"


@dataclasses.dataclass(frozen=True)
class Download:
    """One file to fetch: ``url`` → ``dest``, checked against ``md5`` or ``sha256`` (else the
    announced size), extracted into ``extract_to`` when given; ``extract_factor`` (extracted size /
    file size) sizes the disk-space check; ``hint`` is appended to network errors; ``key``
    (``"<corpus>/<file>"``) names its entry in the progress file."""

    url: str
    dest: Path
    md5: str | None = None
    sha256: str | None = None
    extract_to: Path | None = None
    extract_factor: float = 0.0
    hint: str = ""
    key: str = ""


def corpus_record(name: str) -> Corpus:
    """The :class:`Corpus` ``name`` of ``sources/corpora/corpora.yaml`` (KeyError if it has
    none)."""
    with open(Path(__file__).parent / "corpora" / "corpora.yaml", encoding="utf-8") as f:
        d = dict(yaml.safe_load(f)[name])
    return Corpus(name=name, files=tuple(RemoteFile(**r) for r in d.pop("files")), **d)


def need_dir(path: Path, corpus: str) -> Path:
    """``path`` if it is a folder, else :class:`CorpusError` naming ``corpus``."""
    if not path.is_dir():
        raise CorpusError(
            f"{corpus} not found at {path}; run stage 1 (notebook 01, `make 01 PROFILE=paper`)"
        )
    return path


def resolve_base_url(c: Corpus, base_urls=None) -> str:
    """Base URL of corpus ``c`` without a trailing slash: ``base_urls`` (``{name: url}``, or one
    root string used as ``$AIP_MIRROR``) > ``$AIP_MIRROR_<NAME>`` > ``$AIP_MIRROR/<name>`` >
    default."""
    if isinstance(base_urls, str):
        return base_urls.rstrip("/") + "/" + c.name
    own = (base_urls or {}).get(c.name) or os.environ.get(c.env_var)  # this corpus's own mirror
    if own:
        return own.rstrip("/")
    root = os.environ.get("AIP_MIRROR")
    return root.rstrip("/") + "/" + c.name if root else c.base_url.rstrip("/")


# ------------------------------------------------------------------------------- disk space,
# progress file
def _free_bytes(p: Path) -> int:
    while not p.exists() and p != p.parent:  # the nearest existing parent
        p = p.parent
    return shutil.disk_usage(p).free


def check_disk_space(path, needed_bytes: float, *, what: str = "the download") -> None:
    """Raise :class:`InsufficientDiskSpaceError` (GB needed and free) when the file system holding
    ``path`` has less than ``needed_bytes`` free."""
    free = _free_bytes(Path(path))
    if needed_bytes > free:
        where = Path(path).parent if Path(path).suffix else path
        raise InsufficientDiskSpaceError(
            f"not enough disk space for {what} in {where}: "
            f"needs {needed_bytes / _GB:.2f} GB, only {free / _GB:.2f} GB free. "
            f"Free some space, or set AIP_DATA_ROOT to a larger disk, and run again "
            f"(partial files are kept and resumed)."
        )


def read_progress(progress_file) -> dict:
    """``{"<corpus>/<file>": entry}`` of ``checks/download_progress.json`` (entry: ``status``,
    ``url``, ``path``, ``size``, ``md5``, ``sha256``, ``verified_by``, ``extracted_to``,
    ``completed_at``); empty when the file is missing or unreadable."""
    if progress_file is None or not Path(progress_file).is_file():
        return {}
    try:
        data = json.loads(Path(progress_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("files", {}) if isinstance(data, dict) else {}


def update_progress(progress_file, key: str, entry: dict | None) -> None:
    """Set (or, with ``entry=None``, remove) one entry of the progress file, atomically."""
    files = read_progress(progress_file)
    if entry is None:
        files.pop(key, None)
    else:
        files[key] = entry
    write_json_atomic({"files": dict(sorted(files.items()))}, progress_file)


# ------------------------------------------------------------------------------- pooch downloader
def _unreachable(url: str, reason, hint: str) -> DownloadError:
    return DownloadError(
        f"cannot download {url}: {reason}. Files already downloaded are kept and a partial file is "
        f"resumed on the next run." + (f" {hint}" if hint else ""),
        url=url,
        reason=str(reason),
    )


#: One GET of :class:`ResumingDownloader` ended with the file complete.
_DONE = "done"
#: The partial file was dropped: ask again from byte 0.
_RESTART = "restart"
#: The transfer broke off: resume from the partial file's end.
_BROKEN = "broken"


class ResumingDownloader:
    """A pooch downloader continuing ``<dest>.part`` with an HTTP ``Range`` request (``206``
    appended, ``200`` restarted, ``416`` with the part's size: complete); the finished part is
    hard-linked to pooch's temporary file.

    Requests go through :func:`aiplib.io.http.http_session`, which retries a connection failure or
    HTTP 429/5xx ``retries`` times (waiting :data:`RETRY_WAIT_S`, doubled each time); a transfer
    that breaks off is resumed up to ``retries`` times with the same waits.

    Raises
    ------
    DownloadError
        Unreachable server, an HTTP error, or a transfer broken off ``retries + 1`` times.
    InsufficientDiskSpaceError
        Not enough free space for the rest of the download plus ``extract_factor`` × its size.
    """

    def __init__(self, d: Download, *, retries: int = 2, progress: bool | None = True):
        self.d = d
        self.retries = retries
        self.progress = progress
        self.part = d.dest.with_name(d.dest.name + ".part")
        self.total = None

    def __call__(self, url, output_file, pooch_obj=None, check_only=False):
        self._download(url)
        os.unlink(output_file)
        try:
            os.link(self.part, output_file)
        except OSError:
            shutil.copyfile(self.part, output_file)

    def _download(self, url):
        """GET ``url`` into the partial file until it is complete, resuming a broken transfer."""
        policy = RetryPolicy(
            retries=self.retries,
            backoff_s=RETRY_WAIT_S,
            max_backoff_s=MAX_RETRY_WAIT_S,
            pool_size=1,
        )
        resumes = 0
        with http_session(policy) as session:
            while True:
                outcome = self._transfer(session, url)
                if outcome == _DONE:
                    return
                if outcome == _BROKEN:
                    self._before_resume(url, resumes)
                    resumes += 1

    def _before_resume(self, url: str, resumes: int) -> None:
        """Wait before resuming a broken transfer; :class:`DownloadError` when ``retries`` resumes
        were made already."""
        got = self._part_size()
        if resumes >= self.retries:
            raise _unreachable(
                url, f"the transfer broke off after {got} of {self.total} bytes", self.d.hint
            )
        time.sleep(RETRY_WAIT_S * 2**resumes)

    def _part_size(self) -> int:
        """Bytes in the partial file (0 when there is none)."""
        if self.part.exists():
            return self.part.stat().st_size
        return 0

    def _transfer(self, session, url: str) -> str:
        """One GET from the partial file's end: ``_DONE``, ``_RESTART`` (the part was dropped) or
        ``_BROKEN`` (fewer bytes than announced)."""
        have = self._part_size()
        resp = self._request(session, url, have)
        with resp:
            if resp.status_code == 416 and have:
                return self._judge_complete(resp, have)
            if resp.status_code == 206 and have:
                if not self._accept_range(resp, have):
                    self.part.unlink()
                    return _RESTART
                mode = "ab"
            elif resp.status_code == 200:
                self.total = _content_length(resp)
                have = 0
                mode = "wb"
            else:
                raise _unreachable(url, f"HTTP {resp.status_code} {resp.reason}", self.d.hint)
            self._check_space(have)
            self._write_body(resp, have, mode)
        if self.total is None or self._part_size() >= self.total:
            return _DONE
        return _BROKEN

    def _request(self, session, url: str, have: int):
        """GET ``url`` from byte ``have`` (streamed); :class:`DownloadError` naming why it
        failed."""
        headers = {"Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        hint = self.d.hint
        try:
            return session.get(
                url, headers=headers, stream=True, timeout=TIMEOUT_S, allow_redirects=True
            )
        except (requests.ConnectionError, requests.Timeout) as exc:
            if is_name_resolution_failure(exc):  # no network or a wrong host name: not retried
                why = "the host name cannot be resolved (no network, or a wrong URL)"
                raise _unreachable(url, why, hint) from None
            why = f"the server cannot be reached ({type(exc).__name__})"
            raise _unreachable(url, why, hint) from None
        except requests.RequestException as exc:
            raise _unreachable(url, f"request failed ({exc})", hint) from None

    def _judge_complete(self, resp, have: int) -> str:
        """A 416 answer: the partial file is complete when the server's size equals it, else it is
        longer than the remote file and dropped."""
        m = _SIZE_RE.match(resp.headers.get("Content-Range", ""))
        if m and int(m.group(1)) == have:
            self.total = have
            return _DONE
        self.part.unlink()
        return _RESTART

    def _accept_range(self, resp, have: int) -> bool:
        """A 206 answer continues the partial file when its range starts at ``have`` (the total size
        is then taken from it)."""
        m = _RANGE_RE.match(resp.headers.get("Content-Range", ""))
        if not m or int(m.group(1)) != have:
            return False
        self.total = None if m.group(2) == "*" else int(m.group(2))
        return True

    def _check_space(self, have: int) -> None:
        """:func:`check_disk_space` for the rest of the file plus its extraction (size known)."""
        if self.total is None:
            return
        needed = max(self.total - have, 0) + self.d.extract_factor * self.total
        check_disk_space(self.d.dest, needed, what=self.d.dest.name)

    def _write_body(self, resp, have: int, mode: str) -> None:
        """Write the answer's body into the partial file (``mode`` ``"ab"`` or ``"wb"``) with a
        progress bar; a broken transfer stops quietly (judged by the size), a disk error raises
        :class:`DownloadError`."""
        from tqdm.auto import tqdm

        bar = tqdm(
            total=self.total,
            initial=have,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=self.d.dest.name,
            leave=False,
            disable=None if self.progress is None else not self.progress,
        )
        try:
            with bar, open(self.part, mode) as fh:
                for block in resp.iter_content(chunk_size=_CHUNK):
                    fh.write(block)
                    bar.update(len(block))
        except requests.RequestException:
            pass  # judged by the size
        except OSError as exc:  # the local disk, not the network
            raise DownloadError(f"cannot write {self.part}: {exc} (partial data is kept)") from None


def _content_length(resp) -> int | None:
    """The announced ``Content-Length`` in bytes, or None."""
    clen = resp.headers.get("Content-Length")
    if clen and clen.isdigit():
        return int(clen)
    return None


# ------------------------------------------------------------------------------- pooch extractors
def _unsafe_name(name: str, root: Path) -> str | None:
    """Why an archive member name is unsafe, or None."""
    norm = name.replace("\\", "/")
    if not norm:
        return "empty name"
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        return "absolute path"
    if ".." in PurePosixPath(norm).parts:
        return "'..' component"
    target = (root / norm).resolve()
    if target == root or root in target.parents:
        return None
    return "resolves outside the target folder"


def _refuse_unsafe(archive, root, members) -> None:
    """Raise :class:`UnsafeArchiveError` for the first unsafe ``(name, why-or-None)`` member."""
    root = Path(root).resolve()
    for name, kind in members:
        why = _unsafe_name(name, root) or kind
        if why:
            raise UnsafeArchiveError(
                f"{Path(archive).name}: refusing to extract member {name!r} ({why}); "
                f"nothing was extracted to {root}. The archive is not the expected one — "
                f"delete it and check the source or mirror."
            )


def _tar_kind(m: tarfile.TarInfo) -> str | None:
    """Why a TAR member is refused for its type (a link or a special file), or None."""
    if m.issym():
        return f"symbolic link to {m.linkname!r}"
    if m.islnk():
        return f"hard link to {m.linkname!r}"
    return None if m.isfile() or m.isdir() else "device, FIFO or other special file"


class SafeUntar(pooch.Untar):
    """:class:`pooch.Untar` refusing an absolute path, ``..``, a link, a device or a path outside
    the target (:class:`UnsafeArchiveError`, nothing written), then extracting with tarfile's
    ``filter="data"``; :class:`DownloadError` if the file is not a readable TAR archive."""

    @staticmethod
    def _open(fname):
        try:
            return tarfile.open(fname, "r:*")
        except (tarfile.TarError, OSError) as exc:
            raise DownloadError(
                f"{fname}: not a readable ZIP or TAR archive ({exc}); delete it and download again"
            ) from None

    def _all_members(self, fname):
        with self._open(fname) as tf:
            return tf.getnames()

    def _extract_file(self, fname, extract_dir):
        with self._open(fname) as tf:
            members = tf.getmembers()
            _refuse_unsafe(fname, extract_dir, [(m.name, _tar_kind(m)) for m in members])
            tf.extractall(extract_dir, members=members, filter="data")


class SafeUnzip(pooch.Unzip):
    """:class:`pooch.Unzip` checking every member first as :class:`SafeUntar` (a symbolic-link mode
    is refused)."""

    def _extract_file(self, fname, extract_dir):
        with zipfile.ZipFile(fname) as zf:
            members = [(i.filename, _zip_kind(i)) for i in zf.infolist()]
            _refuse_unsafe(fname, extract_dir, members)
            zf.extractall(extract_dir)


def _zip_kind(info: zipfile.ZipInfo) -> str | None:
    """ "symbolic link" for a ZIP member whose Unix mode is a link, else None."""
    if (info.external_attr >> 16) & 0o170000 == 0o120000:
        return "symbolic link"
    return None


def safe_extract(archive, target_dir) -> list[str]:
    """Extract a ZIP or TAR archive into ``target_dir`` (created) after checking every member
    (raises as :class:`SafeUntar`); returns the full paths of the files under ``target_dir``.

    Raises
    ------
    DownloadError
        The file is not a readable ZIP or TAR archive (the message names it).
    """
    archive, target_dir = Path(archive), Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    is_zip = archive.suffix == ".zip" or (archive.is_file() and zipfile.is_zipfile(archive))
    cls = SafeUnzip if is_zip else SafeUntar
    try:
        return cls(extract_dir=str(target_dir.resolve()))(str(archive), "download", None)
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise DownloadError(
            f"{archive}: not a readable ZIP or TAR archive ({exc}); delete it and run again, "
            "or check the mirror it came from"
        ) from exc


# ------------------------------------------------------------------------------- fetch
def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def fetch(
    d: Download,
    *,
    progress_file=None,
    force: bool = False,
    retries: int = 2,
    progress: bool | None = True,
) -> dict:
    """Download (resuming), verify, extract and record one file; skip it when already complete.

    *Complete* = a ``"complete"`` entry for ``d.key`` in ``progress_file``, the file on disk with
    that size and, for an archive, the marker ``<extract_to>/.<name>.completed``. ``force``
    downloads again; the old file is kept until the new one is verified.

    Returns
    -------
    dict
        The progress entry, plus ``"skipped": True`` when nothing had to be done.

    Raises
    ------
    ChecksumError
        The file does not match its digest; it is moved to ``<dest>.corrupt`` and the message names
        it.
    DownloadError, UnsafeArchiveError, InsufficientDiskSpaceError
        See :class:`ResumingDownloader` and :class:`SafeUntar`.
    """
    dest = Path(d.dest)
    marker = _marker(d)
    entry = read_progress(progress_file).get(d.key)
    if not force and _is_complete(entry, dest, marker):
        return {**entry, "skipped": True}
    dest.parent.mkdir(parents=True, exist_ok=True)
    already_extracted = marker is not None and marker.is_file() and not force
    downloader = ResumingDownloader(d, retries=retries, progress=progress)
    _retrieve(d, downloader, force=force, already_extracted=already_extracted)
    downloader.part.unlink(missing_ok=True)
    info = _file_digests(dest)
    _check_announced_size(d, info["size"], downloader.total)
    if marker is not None:
        marker.write_text(_now() + "\n", encoding="utf-8")
    entry = {
        "status": "complete",
        "url": d.url,
        "path": str(dest),
        **info,
        "verified_by": _verified_by(d),
        "extracted_to": str(d.extract_to) if d.extract_to is not None else None,
        "completed_at": _now(),
    }
    if progress_file is not None:
        update_progress(progress_file, d.key, entry)
    return {**entry, "skipped": False}


def _marker(d: Download) -> Path | None:
    """``<extract_to>/.<name>.completed``, written once an archive is extracted (None: not an
    archive)."""
    if d.extract_to is None:
        return None
    return Path(d.extract_to) / f".{Path(d.dest).name}.completed"


def _is_complete(entry: dict | None, dest: Path, marker: Path | None) -> bool:
    """True when the progress entry says complete, the file has its size, and the archive's marker
    exists."""
    if not entry or entry.get("status") != "complete":
        return False
    if not dest.is_file() or dest.stat().st_size != entry.get("size"):
        return False
    return marker is None or marker.is_file()


def _extract(d: Download, already_extracted: bool, fname, action, _pooch) -> None:
    """pooch processor: extract ``fname`` into ``d.extract_to`` unless pooch only found the file
    and it was extracted before."""
    if d.extract_to is None or (action == "fetch" and already_extracted):
        return
    _marker(d).unlink(missing_ok=True)
    safe_extract(fname, d.extract_to)


def _retrieve(d: Download, downloader, *, force: bool, already_extracted: bool) -> None:
    """:func:`pooch.retrieve` with ``downloader``; with ``force`` the old file is kept as
    ``<dest>.old`` until the new one is verified. :class:`ChecksumError` on a digest mismatch (the
    file moved to ``<dest>.corrupt``)."""
    dest = Path(d.dest)
    old = dest.with_name(dest.name + ".old")
    if force and dest.is_file():
        dest.replace(old)  # kept until the new file is verified
    try:
        pooch.retrieve(
            d.url,
            known_hash=f"md5:{d.md5}" if d.md5 else d.sha256,
            fname=dest.name,
            path=dest.parent,
            downloader=downloader,
            processor=functools.partial(_extract, d, already_extracted),
        )
    except ValueError:  # pooch: the hash differs
        raise _checksum_error(d, downloader.part) from None
    finally:
        _restore_old(old, dest)


def _restore_old(old: Path, dest: Path) -> None:
    """Drop the kept ``<dest>.old`` when a new file arrived, else put it back."""
    if not old.is_file():
        return
    if dest.is_file():
        old.unlink()
    else:
        old.replace(dest)


def _checksum_error(d: Download, part: Path) -> ChecksumError:
    """Move the downloaded ``part`` to ``<dest>.corrupt`` and say which digest differs."""
    dest = Path(d.dest)
    if d.md5:
        alg = "MD5"
        want = d.md5
    else:
        alg = "SHA-256"
        want = d.sha256
    bad = dest.with_name(dest.name + ".corrupt")
    part.replace(bad)
    got = pooch.file_hash(str(bad), alg="md5" if d.md5 else "sha256")
    return ChecksumError(
        f"{dest.name} (from {d.url}) failed verification: {alg} {got} != expected "
        f"{want.lower()}. The file was moved to {bad}; run again to download it afresh, "
        f"or check the mirror serves the original file."
    )


def _file_digests(dest: Path) -> dict:
    """``size`` (bytes), ``md5`` and ``sha256`` of a downloaded file."""
    return {
        "size": dest.stat().st_size,
        "md5": pooch.file_hash(str(dest), alg="md5"),
        "sha256": pooch.file_hash(str(dest)),
    }


def _check_announced_size(d: Download, size: int, announced: int | None) -> None:
    """Without a digest, :class:`ChecksumError` when the file's size differs from the announced
    one."""
    if d.md5 or d.sha256 or announced is None or size == announced:
        return
    raise ChecksumError(
        f"{Path(d.dest).name} (from {d.url}) failed verification: size {size} bytes != "
        f"announced {announced}"
    )


def _verified_by(d: Download) -> str:
    """How the file was checked: ``md5``, ``sha256`` or ``size``."""
    if d.md5:
        return "md5"
    if d.sha256:
        return "sha256"
    return "size"


def download_file(
    url: str,
    dest,
    *,
    md5: str | None = None,
    sha256: str | None = None,
    hint: str = "",
    retries: int = 2,
    progress: bool | None = True,
) -> dict:
    """:func:`fetch` of ``url`` to ``dest`` without extraction or progress file; returns its entry
    (``url, path, size, md5, sha256, verified_by``) and raises as :func:`fetch`."""
    return fetch(
        Download(url, Path(dest), md5=md5, sha256=sha256, hint=hint),
        retries=retries,
        progress=progress,
    )


def _mirror_hint(c: Corpus) -> str:
    return (
        f"To use a mirror, set {c.env_var}=<base URL holding {', '.join(f.name for f in c.files)}> "
        f"(or AIP_MIRROR=<root URL with one folder per corpus>, or pass base_urls/--base-url), "
        f"e.g. `make 01 PROFILE=paper MIRROR=https://my.mirror/aip-corpora`."
    )


def download_corpus(
    c: Corpus,
    target_dir,
    *,
    base_url: str | None = None,
    force_download: bool = False,
    progress_file=None,
    retries: int = 2,
    progress: bool | None = True,
) -> Path:
    """:func:`fetch` every file of corpus ``c`` into ``target_dir`` from ``base_url`` (default
    :func:`resolve_base_url`); ``retries`` and ``progress`` as :func:`fetch`. Returns
    ``target_dir``; raises as :func:`fetch`, a network error naming how to use a mirror."""
    target_dir = Path(target_dir)
    base = base_url.rstrip("/") if base_url else resolve_base_url(c)
    for f in c.files:
        fetch(
            Download(
                f"{base}/{f.name}",
                target_dir / f.name,
                md5=f.md5,
                sha256=f.sha256,
                extract_to=None if f.extract_subdir is None else target_dir / f.extract_subdir,
                extract_factor=c.extract_factor,
                hint=_mirror_hint(c),
                key=f"{c.name}/{f.name}",
            ),
            progress_file=progress_file,
            force=force_download,
            retries=retries,
            progress=progress,
        )
    return target_dir


def set_cache_env(cache_root=None) -> dict:
    """Point ``HF_HOME`` (``<cache_root>/huggingface``), ``HF_DATASETS_CACHE`` (its ``datasets``,
    unless the user set ``HF_HOME``) and ``TORCH_HOME`` (``<cache_root>/torch``) into ``cache_root``
    (default ``<repo>/models/cache``), never changing a variable already set; returns ``{name:
    value}`` of those set."""
    root = Path(cache_root) if cache_root is not None else repo_root() / "models" / "cache"
    wanted = {"HF_HOME": root / "huggingface", "TORCH_HOME": root / "torch"}
    if "HF_HOME" not in os.environ:
        wanted["HF_DATASETS_CACHE"] = root / "huggingface" / "datasets"
    done = {name: str(v) for name, v in wanted.items() if name not in os.environ}
    os.environ.update(done)
    return done
