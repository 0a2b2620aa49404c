"""Check and install the Debian packages a profile is built from, with a clear message.

The embedded ``demo`` profile takes its recordings from Debian packages (Asterisk prompts, game
and music-software sound effects). :func:`ensure_packages` installs a missing one itself when it may
(running as root, or password-less ``sudo``), and otherwise refuses to go on, saying exactly how to
install it.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from aiplib.core.errors import MissingPackageError

_APT_FLAGS = ["install", "-y", "--no-install-recommends"]


def installed(pkg: str) -> bool:
    """Whether the Debian package ``pkg`` is installed (``dpkg-query`` status ``install ok installed``);
    False when ``dpkg-query`` is not available."""
    exe = shutil.which("dpkg-query")
    if exe is None:
        return False
    proc = subprocess.run([exe, "-W", "-f=${Status}", pkg], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and proc.stdout.strip().endswith("install ok installed")


def installed_version(pkg: str) -> str | None:
    """The version of the installed Debian package ``pkg`` (``dpkg-query``'s ``${Version}``, e.g.
    ``5.6.1+dfsg-2``); None when it is not installed or ``dpkg-query`` is not available."""
    if not installed(pkg):
        return None
    exe = shutil.which("dpkg-query")
    proc = subprocess.run([exe, "-W", "-f=${Version}", pkg], capture_output=True, text=True,
                          check=False)
    version = proc.stdout.strip()
    if proc.returncode != 0 or not version:
        return None
    return version


def missing_packages(pkgs) -> list[str]:
    """The packages of ``pkgs`` that are not installed, in the given order (duplicates dropped)."""
    return [p for p in dict.fromkeys(pkgs) if not installed(p)]


def install_command(pkgs) -> str:
    """The shell command that installs ``pkgs``: ``sudo apt-get install -y --no-install-recommends …``."""
    return "sudo apt-get " + " ".join(_APT_FLAGS + list(pkgs))


def _missing_error(missing) -> MissingPackageError:
    return MissingPackageError(
        f"missing Debian package(s): {', '.join(missing)}. Install them with:\n    {install_command(missing)}")


def _apt_prefix() -> list[str] | None:
    """``[]`` when root, ``["sudo", "-n"]`` when password-less sudo works, else None."""
    if shutil.which("apt-get") is None:
        return None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return []
    sudo = shutil.which("sudo")
    if sudo and subprocess.run([sudo, "-n", "true"], capture_output=True, check=False).returncode == 0:
        return [sudo, "-n"]
    return None


def _apt_install(prefix: list[str], pkgs: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run([*prefix, "apt-get", *_APT_FLAGS, *pkgs], capture_output=True, text=True,
                          env=env, check=False)


def ensure_packages(pkgs, *, install: bool = True) -> list[str]:
    """Make sure the Debian packages ``pkgs`` are installed; with ``install``, missing ones are installed
    with ``apt-get install -y --no-install-recommends`` (as root or through ``sudo -n``; after one
    ``apt-get update`` if the lists are stale). Returns the packages this call installed.

    Raises
    ------
    MissingPackageError
        If packages are missing and cannot be installed here; the message names them and the command.
    """
    if not (missing := missing_packages(pkgs)):
        return []
    prefix = _apt_prefix() if install else None
    if prefix is None:
        raise _missing_error(missing)
    proc = _apt_install(prefix, missing)
    if proc.returncode != 0:
        subprocess.run([*prefix, "apt-get", "update"], capture_output=True, check=False)
        proc = _apt_install(prefix, missing)
    if still := missing_packages(missing):
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        raise MissingPackageError(f"{_missing_error(still)}\napt-get said: {' | '.join(tail)}")
    return missing
