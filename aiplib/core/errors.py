"""Exceptions raised by aiplib: one root, :class:`AiplibError` (as librosa's ``ParameterError``)."""

from __future__ import annotations


class AiplibError(Exception):
    """Root of every exception aiplib raises on purpose."""


class AiplibParameterError(AiplibError, ValueError):
    """A function got an argument it cannot use (wrong shape, dtype, range or NaN samples)."""


class AudioFileError(AiplibError, OSError):
    """An audio file is missing, unreadable, corrupt, silent or otherwise unusable (the message
    names it)."""


class MissingPackageError(AiplibError, RuntimeError):
    """A Debian or Python package a stage needs is not installed (the message says how to install
    it)."""


class ValidationError(AiplibError):
    """User input (a custom profile's folders, a criteria file …) failed; ``problems`` lists every
    problem."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ModelUnavailableError(AiplibError, RuntimeError):
    """A registry model cannot run here (no GPU, gated weights, missing package, disabled entry)."""


class DownloadError(AiplibError, OSError):
    """A file could not be downloaded, verified or extracted (the message names it and what to do
    next); network failures carry ``url`` and ``reason`` (else ``None``)."""

    def __init__(self, message: str = "", *, url: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.url = url
        self.reason = reason


class ChecksumError(DownloadError):
    """A downloaded file does not match its published checksum or announced size."""


class UnsafeArchiveError(DownloadError):
    """An archive holds a member that would be written outside the target folder (or a link)."""


class InsufficientDiskSpaceError(DownloadError):
    """Not enough free disk space for a download and its extraction (reported in GB)."""
