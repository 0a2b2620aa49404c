"""Verified, resumable downloads and safe extraction on pooch (stage 1 of the ``paper`` profile).

:func:`fetch` = :func:`pooch.retrieve` + :class:`ResumingDownloader` (HTTP ``Range`` from
  ``<file>.part``) +
:class:`SafeUntar` / :class:`SafeUnzip`, recorded in ``checks/download_progress.json``. Failures
  raise
:class:`~aiplib.core.errors.DownloadError` or a subclass, naming the URL or file.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import re
import shutil
import tarfile
import time
import zipfile
from pathlib import Path, PurePosixPath

import pooch
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

pooch.get_logger().setLevel("WARNING")  # its "use this hash" advice is not for our users

RETRY_WAIT_S = (
    2.0  # Seconds before the first retry of a failed request (doubled for each further retry).
)

_GB = 1e9
_CHUNK = 1 << 16


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
    if own := (base_urls or {}).get(c.name) or os.environ.get(
        c.env_var
    ):  # this corpus's own mirror
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
        raise InsufficientDiskSpaceError(
            f"not enough disk space for {what} in {Path(path).parent if Path(path).suffix else path}: "
            f"needs {needed_bytes / _GB:.2f} GB, only {free / _GB:.2f} GB free. Free some space, or "
            f"set AIP_DATA_ROOT to a larger disk, and run again (partial files are kept and resumed)."
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
    files.pop(key, None) if entry is None else files.__setitem__(key, entry)
    write_json_atomic({"files": dict(sorted(files.items()))}, progress_file)


# ------------------------------------------------------------------------------- pooch downloader
def _unreachable(url: str, reason, hint: str) -> DownloadError:
    return DownloadError(
        f"cannot download {url}: {reason}. Files already downloaded are kept and a partial file is "
        f"resumed on the next run." + (f" {hint}" if hint else ""),
        url=url,
        reason=str(reason),
    )


_DNS_FAILURES = (
    "NameResolutionError",
    "Name or service not known",
    "nodename nor servname",
    "Temporary failure in name resolution",
    "getaddrinfo failed",
)


class ResumingDownloader:
    """A pooch downloader continuing ``<dest>.part`` with an HTTP ``Range`` request (``206``
    appended, ``200`` restarted, ``416`` with the part's size: complete), retried ``retries`` times
    (waiting
    :data:`RETRY_WAIT_S`, doubled each time); the finished part is hard-linked to pooch's temporary
      file.

    Raises
    ------
    DownloadError
        Unreachable server, an HTTP error, or a transfer broken off ``retries + 1`` times.
    InsufficientDiskSpaceError
        Not enough free space for the rest of the download plus ``extract_factor`` × its size.
    """

    def __init__(self, d: Download, *, retries: int = 2, progress: bool | None = True):
        self.d, self.retries, self.progress = d, retries, progress
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
        import requests
        from tqdm.auto import tqdm

        sess, attempt, hint = requests.Session(), 0, self.d.hint
        while True:
            have = self.part.stat().st_size if self.part.exists() else 0
            headers = {
                "Accept-Encoding": "identity",
                **({"Range": f"bytes={have}-"} if have else {}),
            }
            try:
                resp = sess.get(
                    url, headers=headers, stream=True, timeout=(15.0, 60.0), allow_redirects=True
                )
            except (requests.ConnectionError, requests.Timeout) as exc:
                if any(
                    k in repr(exc) for k in _DNS_FAILURES
                ):  # no network or a wrong host name: no retry
                    raise _unreachable(
                        url, "the host name cannot be resolved (no network, or a wrong URL)", hint
                    ) from None
                if attempt < self.retries:
                    time.sleep(RETRY_WAIT_S * 2**attempt)
                    attempt += 1
                    continue
                raise _unreachable(
                    url, f"the server cannot be reached ({type(exc).__name__})", hint
                ) from None
            except requests.RequestException as exc:
                raise _unreachable(url, f"request failed ({exc})", hint) from None
            with resp:
                if resp.status_code == 416 and have:
                    m = re.match(r"bytes\s+\*/(\d+)", resp.headers.get("Content-Range", ""))
                    if m and int(m.group(1)) == have:
                        self.total = have
                        return  # the partial file is already complete
                    self.part.unlink()  # longer than the remote file: start over
                    continue
                if resp.status_code == 206 and have:
                    m = re.match(
                        r"bytes\s+(\d+)-\d+/(\d+|\*)", resp.headers.get("Content-Range", "")
                    )
                    if not m or int(m.group(1)) != have:
                        self.part.unlink()
                        continue
                    self.total, mode = (None if m.group(2) == "*" else int(m.group(2))), "ab"
                elif resp.status_code == 200:
                    clen = resp.headers.get("Content-Length")
                    self.total, have, mode = (
                        (int(clen) if clen and clen.isdigit() else None),
                        0,
                        "wb",
                    )
                else:
                    raise _unreachable(url, f"HTTP {resp.status_code} {resp.reason}", hint)
                if self.total is not None:
                    check_disk_space(
                        self.d.dest,
                        max(self.total - have, 0) + self.d.extract_factor * self.total,
                        what=self.d.dest.name,
                    )
                try:
                    with (
                        tqdm(
                            total=self.total,
                            initial=have,
                            unit="B",
                            unit_scale=True,
                            unit_divisor=1024,
                            desc=self.d.dest.name,
                            leave=False,
                            disable=None if self.progress is None else not self.progress,
                        ) as bar,
                        open(self.part, mode) as fh,
                    ):
                        for block in resp.iter_content(chunk_size=_CHUNK):
                            fh.write(block)
                            bar.update(len(block))
                except requests.RequestException:
                    pass  # judged by the size below
                except OSError as exc:  # the local disk, not the network
                    raise DownloadError(
                        f"cannot write {self.part}: {exc} (partial data is kept)"
                    ) from None
            got = self.part.stat().st_size
            if self.total is None or got >= self.total:
                return
            if attempt >= self.retries:
                raise _unreachable(
                    url, f"the transfer broke off after {got} of {self.total} bytes", hint
                )
            time.sleep(RETRY_WAIT_S * 2**attempt)
            attempt += 1


# ------------------------------------------------------------------------------- pooch extractors
def _unsafe_name(name: str, root: Path) -> str | None:
    """Why an archive member name is unsafe, or None."""
    if not (norm := name.replace("\\", "/")):
        return "empty name"
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm):
        return "absolute path"
    if ".." in PurePosixPath(norm).parts:
        return "'..' component"
    target = (root / norm).resolve()
    return (
        None if target == root or root in target.parents else "resolves outside the target folder"
    )


def _refuse_unsafe(archive, root, members) -> None:
    """Raise :class:`UnsafeArchiveError` for the first unsafe ``(name, why-or-None)`` member."""
    root = Path(root).resolve()
    for name, kind in members:
        if why := _unsafe_name(name, root) or kind:
            raise UnsafeArchiveError(
                f"{Path(archive).name}: refusing to extract member {name!r} ({why}); nothing was extracted "
                f"to {root}. The archive is not the expected one — delete it and check the source or mirror."
            )


def _tar_kind(m: tarfile.TarInfo) -> str | None:
    if m.issym():
        return f"symbolic link to {m.linkname!r}"
    if m.islnk():
        return f"hard link to {m.linkname!r}"
    return None if m.isfile() or m.isdir() else "device, FIFO or other special file"


class SafeUntar(pooch.Untar):
    """:class:`pooch.Untar` refusing an absolute path, ``..``, a link, a device or a path outside
    the target (:class:`UnsafeArchiveError`, nothing written), then extracting with tarfile's
    ``filter="data"``;
    :class:`DownloadError` if the file is not a readable TAR archive."""

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
            _refuse_unsafe(
                fname,
                extract_dir,
                [
                    (
                        i.filename,
                        "symbolic link" if (i.external_attr >> 16) & 0o170000 == 0o120000 else None,
                    )
                    for i in zf.infolist()
                ],
            )
            zf.extractall(extract_dir)


def safe_extract(archive, target_dir) -> list[str]:
    """Extract a ZIP or TAR archive into ``target_dir`` (created) after checking every member
    (raises as
    :class:`SafeUntar`); returns the full paths of the files under ``target_dir``.

    Raises
    ------
    DownloadError
        The file is not a readable ZIP or TAR archive (the message names it).
    """
    archive, target_dir = Path(archive), Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    cls = (
        SafeUnzip
        if archive.suffix == ".zip" or (archive.is_file() and zipfile.is_zipfile(archive))
        else SafeUntar
    )
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
    marker = Path(d.extract_to) / f".{dest.name}.completed" if d.extract_to is not None else None
    entry = read_progress(progress_file).get(d.key)
    if (
        not force
        and entry
        and entry.get("status") == "complete"
        and dest.is_file()
        and dest.stat().st_size == entry.get("size")
        and (marker is None or marker.is_file())
    ):
        return {**entry, "skipped": True}
    dest.parent.mkdir(parents=True, exist_ok=True)
    old = dest.with_name(dest.name + ".old")
    if force and dest.is_file():
        dest.replace(old)  # kept until the new file is verified
    extracted = marker is not None and marker.is_file() and not force

    def extract(fname, action, _):
        if d.extract_to is not None and (action != "fetch" or not extracted):
            marker.unlink(missing_ok=True)
            safe_extract(fname, d.extract_to)

    downloader = ResumingDownloader(d, retries=retries, progress=progress)
    try:
        pooch.retrieve(
            d.url,
            known_hash=f"md5:{d.md5}" if d.md5 else d.sha256,
            fname=dest.name,
            path=dest.parent,
            downloader=downloader,
            processor=extract,
        )
    except ValueError:  # pooch: the hash differs
        alg, want = ("MD5", d.md5) if d.md5 else ("SHA-256", d.sha256)
        bad = dest.with_name(dest.name + ".corrupt")
        downloader.part.replace(bad)
        got = pooch.file_hash(str(bad), alg="md5" if d.md5 else "sha256")
        raise ChecksumError(
            f"{dest.name} (from {d.url}) failed verification: {alg} {got} != expected {want.lower()}. The file was "
            f"moved to {bad}; run again to download it afresh, or check the mirror serves the original file."
        ) from None
    finally:
        if old.is_file():
            old.unlink() if dest.is_file() else old.replace(dest)
    downloader.part.unlink(missing_ok=True)
    info = {
        "size": dest.stat().st_size,
        "md5": pooch.file_hash(str(dest), alg="md5"),
        "sha256": pooch.file_hash(str(dest)),
    }
    if (
        not (d.md5 or d.sha256)
        and downloader.total is not None
        and info["size"] != downloader.total
    ):
        raise ChecksumError(
            f"{dest.name} (from {d.url}) failed verification: size {info['size']} bytes != "
            f"announced {downloader.total}"
        )
    if marker is not None:
        marker.write_text(_now() + "\n", encoding="utf-8")
    entry = {
        "status": "complete",
        "url": d.url,
        "path": str(dest),
        **info,
        "verified_by": "md5" if d.md5 else ("sha256" if d.sha256 else "size"),
        "extracted_to": str(d.extract_to) if d.extract_to is not None else None,
        "completed_at": _now(),
    }
    if progress_file is not None:
        update_progress(progress_file, d.key, entry)
    return {**entry, "skipped": False}


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
    **kwargs,
) -> Path:
    """:func:`fetch` every file of corpus ``c`` into ``target_dir`` from ``base_url`` (default
    :func:`resolve_base_url`); returns ``target_dir``. A network error names how to use a mirror."""
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
            **kwargs,
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
