"""What every downloadable corpus shares: its record, mirror resolution and download.

Each corpus module (:mod:`~aiplib.sources.corpora.esc50`, :mod:`~aiplib.sources.corpora.ms_snsd`,
:mod:`~aiplib.sources.corpora.noisex92`, :mod:`~aiplib.sources.corpora.musan`, :mod:`~aiplib.sources.corpora.librispeech`,
:mod:`~aiplib.sources.corpora.speech_commands`) holds its record ``CORPUS`` (a :class:`Corpus`: files,
checksums, licence) and its lhotse-style ``prepare_<corpus>`` reader; downloading is the same for
all of them (:func:`download_corpus`, built on :func:`aiplib.sources.download.fetch`). A profile module
(:mod:`aiplib.sources.corpora.paper`) assembles the records it needs and decides what to select.

Mirrors: every corpus has a default base URL; the file URL is ``<base>/<file name>``. The base is
taken, in this order, from the ``base_urls`` argument, ``$AIP_MIRROR_<CORPUS>`` (e.g.
``AIP_MIRROR_LIBRISPEECH``), ``$AIP_MIRROR/<corpus>`` (one root holding a folder per corpus, which
is what ``make 01 PROFILE=paper MIRROR=...`` sets) and the publisher's URL. A mirror must serve the
original bytes: published checksums are still checked.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from aiplib.core.errors import AiplibError
from aiplib.sources.download import fetch

__all__ = ["CorpusError", "RemoteFile", "Corpus", "need_dir", "resolve_base_url",
           "download_corpus"]


class CorpusError(AiplibError):
    """A corpus is missing, incomplete, or too small for the paper's selection (a shortfall)."""


@dataclasses.dataclass(frozen=True)
class RemoteFile:
    """One file of a corpus.

    Attributes
    ----------
    name : str
        File name at the base URL and on disk.
    md5, sha256 : str or None
        Published (or pinned) digests; ``None`` when the publisher gives none (then the announced
        size is checked and the SHA-256 recorded in ``checks/download_progress.json``).
    approx_gb : float
        Approximate size in GB (documentation and planning only; never checked).
    extract_subdir : str or None
        Folder (relative to the corpus folder) to extract into; ``""`` = the corpus folder itself;
        ``None`` = not an archive.
    """

    name: str
    md5: str | None = None
    sha256: str | None = None
    approx_gb: float = 0.0
    extract_subdir: str | None = ""


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A downloadable corpus: where it comes from, where it goes, its licence.

    Attributes
    ----------
    name : str
        Registry key, also the folder name and the ``AIP_MIRROR_<NAME>`` suffix.
    title : str
    kind : str
        Workspace sub-folder: ``backgrounds``, ``speech_asr`` or ``kws``.
    base_url : str
        Publisher's base URL (files are fetched from ``<base_url>/<file.name>``).
    files : tuple of RemoteFile
    licence, attribution, homepage : str
    extract_factor : float
        Extracted size / archive size, for the disk-space check.
    notes : str
    """

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


def need_dir(path: Path, corpus: str) -> Path:
    """``path`` if it is a folder, else :class:`CorpusError` telling to run stage 1.

    Parameters
    ----------
    path : Path
    corpus : str
        The corpus's title, named in the message.

    Raises
    ------
    CorpusError
        If ``path`` is not a folder.
    """
    if not path.is_dir():
        raise CorpusError(f"{corpus} not found at {path}; run stage 1 (notebook 01, `make 01 PROFILE=paper`)")
    return path


def resolve_base_url(c: Corpus, base_urls=None) -> str:
    """Base URL of corpus ``c``: argument > ``$AIP_MIRROR_<NAME>`` > ``$AIP_MIRROR/<name>`` > default.

    Parameters
    ----------
    c : Corpus
    base_urls : dict or str, optional
        ``{name: base_url}``, or one string used as ``$AIP_MIRROR`` would be (``<root>/<name>``).

    Returns
    -------
    str without a trailing slash.
    """
    if isinstance(base_urls, str):
        return base_urls.rstrip("/") + "/" + c.name
    if base_urls and base_urls.get(c.name):
        return base_urls[c.name].rstrip("/")
    if os.environ.get(c.env_var):
        return os.environ[c.env_var].rstrip("/")
    if os.environ.get("AIP_MIRROR"):
        return os.environ["AIP_MIRROR"].rstrip("/") + "/" + c.name
    return c.base_url.rstrip("/")


def _mirror_hint(c: Corpus) -> str:
    """One sentence telling how to fetch corpus ``c`` from a mirror (appended to network errors)."""
    return (f"To use a mirror, set {c.env_var}=<base URL holding {', '.join(f.name for f in c.files)}> "
            f"(or AIP_MIRROR=<root URL with one folder per corpus>, or pass base_urls/--base-url), "
            f"e.g. `make 01 PROFILE=paper MIRROR=https://my.mirror/aip-corpora`.")


def download_corpus(c: Corpus, target_dir, *, base_url: str | None = None, force_download: bool = False,
                    progress_file=None, **kwargs) -> Path:
    """Download, verify and extract every file of corpus ``c`` into ``target_dir``.

    Parameters
    ----------
    c : Corpus
        A corpus record (e.g. ``aiplib.sources.corpora.esc50.CORPUS``).
    target_dir : str or Path
        The corpus folder (archives are kept there, next to the extracted data).
    base_url : str, optional
        Overrides the mirror resolution of :func:`resolve_base_url`.
    force_download : bool
        Download and extract again even when complete.
    progress_file : str or Path, optional
        ``checks/download_progress.json``; completed files recorded there are skipped.
    **kwargs
        Passed to :func:`aiplib.sources.download.fetch` (``retries``, ``timeout``, ``progress``).

    Returns
    -------
    Path
        ``target_dir``.

    Raises
    ------
    DownloadError
        Unreachable URL (the message names it and says how to use a mirror), checksum mismatch,
        unsafe archive or too little disk space.
    """
    target_dir = Path(target_dir)
    base = base_url.rstrip("/") if base_url else resolve_base_url(c)
    for f in c.files:
        fetch(f"{base}/{f.name}", target_dir / f.name, key=f"{c.name}/{f.name}",
              extract_to=None if f.extract_subdir is None else target_dir / f.extract_subdir,
              md5=f.md5, sha256=f.sha256, progress_file=progress_file,
              extract_factor=c.extract_factor, hint=_mirror_hint(c), force=force_download, **kwargs)
    return target_dir
