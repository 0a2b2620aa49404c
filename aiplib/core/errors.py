"""Exceptions raised by aiplib.

One root, :class:`AiplibError`, so callers can catch everything the package raises on purpose
(modelled on librosa's ``ParameterError``).
"""
from __future__ import annotations

__all__ = [
    "AiplibError",
    "AiplibParameterError",
    "AudioFileError",
    "MissingPackageError",
    "ValidationError",
    "ModelUnavailableError",
    "DownloadError",
    "ChecksumError",
    "UnsafeArchiveError",
    "InsufficientDiskSpaceError",
]


class AiplibError(Exception):
    """Root of every exception aiplib raises on purpose."""


class AiplibParameterError(AiplibError, ValueError):
    """A function got an argument it cannot use (wrong shape, dtype, range or NaN samples)."""


class AudioFileError(AiplibError, OSError):
    """An audio file is missing, unreadable, corrupt, silent or otherwise unusable.

    The message always names the file.
    """


class MissingPackageError(AiplibError, RuntimeError):
    """A Debian or Python package that a stage needs is not installed.

    The message names the package and the command that installs it.
    """


class ValidationError(AiplibError):
    """User input (a custom profile's folders, a criteria file …) failed validation.

    ``problems`` holds every problem found, not only the first.
    """

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ModelUnavailableError(AiplibError, RuntimeError):
    """A registry model cannot run here (no GPU, gated weights, missing package, disabled entry)."""


class DownloadError(AiplibError, OSError):
    """A file could not be downloaded, verified or extracted.

    The message names the URL or file concerned and says what to do next. Network failures also
    carry ``url`` and ``reason`` attributes (``None`` otherwise).
    """

    def __init__(self, message: str = "", *, url: str | None = None, reason: str | None = None):
        super().__init__(message)
        self.url = url
        self.reason = reason

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ChecksumError(DownloadError):
    """A downloaded file does not match its published checksum or announced size."""


class UnsafeArchiveError(DownloadError):
    """An archive holds a member that would be written outside the target folder (or a link)."""


class InsufficientDiskSpaceError(DownloadError):
    """Not enough free disk space for a download and its extraction (reported in GB)."""
