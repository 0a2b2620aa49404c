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
from pathlib import Path

from aiplib.core.errors import MissingPackageError
from aiplib.core.hashing import file_sha256

#: ``apt-get`` arguments of an install.
_APT_FLAGS = ["install", "-y", "--no-install-recommends"]


def installed(pkg: str) -> bool:
    """Whether the Debian package ``pkg`` is installed (``dpkg-query`` status ``install ok
    installed``); False when ``dpkg-query`` is not available or does not answer within
    :data:`QUERY_TIMEOUT_S`."""
    exe = shutil.which("dpkg-query")
    if exe is None:
        return False
    status, _problem = _run_tool([exe, "-W", "-f=${Status}", pkg])
    return status.strip().endswith("install ok installed")


def installed_version(pkg: str) -> str | None:
    """The version of the installed Debian package ``pkg`` (``dpkg-query``'s ``${Version}``, e.g.
    ``5.6.1+dfsg-2``); None when it is not installed or ``dpkg-query`` is not available."""
    if not installed(pkg):
        return None
    exe = shutil.which("dpkg-query")
    version, _problem = _run_tool([exe, "-W", "-f=${Version}", pkg])
    version = version.strip()
    if not version:
        return None
    return version


def _distinct(pkgs) -> list[str]:
    """``pkgs`` without repeats, in the given order."""
    names = []
    for p in pkgs:
        if p not in names:
            names.append(p)
    return names


def missing_packages(pkgs) -> list[str]:
    """The packages of ``pkgs`` that are not installed, in the given order (duplicates dropped)."""
    return [p for p in _distinct(pkgs) if not installed(p)]


def install_command(pkgs) -> str:
    """The shell command that installs ``pkgs``: ``sudo apt-get install -y --no-install-recommends
    …``."""
    return "sudo apt-get " + " ".join(_APT_FLAGS + list(pkgs))


def _missing_error(missing) -> MissingPackageError:
    """The error naming the ``missing`` packages and the command that installs them."""
    return MissingPackageError(
        f"missing Debian package(s): {', '.join(missing)}. "
        f"Install them with:\n    {install_command(missing)}"
    )


def _apt_prefix() -> list[str] | None:
    """``[]`` when root, ``["sudo", "-n"]`` when password-less sudo works, else None."""
    if shutil.which("apt-get") is None:
        return None
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return []
    sudo = shutil.which("sudo")
    if (
        sudo
        and subprocess.run([sudo, "-n", "true"], capture_output=True, check=False).returncode == 0
    ):
        return [sudo, "-n"]
    return None


def _apt_install(prefix: list[str], pkgs: list[str]) -> subprocess.CompletedProcess:
    """Run ``apt-get install`` of ``pkgs`` (non-interactive) behind ``prefix`` (sudo or none)."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(
        [*prefix, "apt-get", *_APT_FLAGS, *pkgs],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def ensure_packages(pkgs, *, install: bool = True) -> list[str]:
    """Make sure the Debian packages ``pkgs`` are installed; with ``install``, missing ones are
    installed with ``apt-get install -y --no-install-recommends`` (as root or through ``sudo -n``;
    after one ``apt-get update`` if the lists are stale). Returns the packages this call installed.

    Raises
    ------
    MissingPackageError
        If packages are missing and cannot be installed here; the message names them and the
        command.
    """
    missing = missing_packages(pkgs)
    if not missing:
        return []
    prefix = _apt_prefix() if install else None
    if prefix is None:
        raise _missing_error(missing)
    proc = _apt_install(prefix, missing)
    if proc.returncode != 0:
        subprocess.run([*prefix, "apt-get", "update"], capture_output=True, check=False)
        proc = _apt_install(prefix, missing)
    still = missing_packages(missing)
    if still:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        raise MissingPackageError(f"{_missing_error(still)}\napt-get said: {' | '.join(tail)}")
    return missing


# ----------------------------------------------------------------------------- what was installed
#: Columns of ``raw/debian_packages.csv`` (:func:`package_records`).
PACKAGE_COLUMNS = [
    "package",
    "role",
    "status",
    "version",
    "architecture",
    "source_package",
    "deb_sha256",
    "sha256_source",
]

#: Seconds a ``dpkg-query`` or ``apt-cache`` call may take.
QUERY_TIMEOUT_S = 60

#: Where apt keeps the ``.deb`` files it downloaded.
APT_ARCHIVES = Path("/var/cache/apt/archives")

#: Version recorded when there is no ``dpkg`` to ask.
NO_DPKG = "unknown (no dpkg)"

#: ``dpkg-query`` fields read for each package.
_QUERY_FIELDS = ("Package", "Version", "Architecture", "source:Package", "Status", "Depends")

#: ``dpkg-query --showformat`` of :data:`_QUERY_FIELDS`: tab-separated, one line per package.
_QUERY_FORMAT = "\t".join("${" + field + "}" for field in _QUERY_FIELDS) + "\n"


def _run_tool(argv: list[str]) -> tuple[str, str]:
    """``(stdout, problem)`` of a query command; ``problem`` is ``""`` or why it gave nothing."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        return "", f"{Path(argv[0]).name} took longer than {QUERY_TIMEOUT_S} s"
    except OSError as exc:
        return "", f"{Path(argv[0]).name} failed: {exc}"
    return done.stdout, ""


def _depends_names(field: str) -> list[str]:
    """Package names of a ``Depends`` field (every alternative; versions and ``:any`` dropped)."""
    names = []
    for clause in field.replace("|", ",").split(","):
        words = clause.split()
        if words:
            names.append(words[0].split(":")[0])
    return names


def query_installed(pkgs) -> dict:
    """What ``dpkg-query`` says of the installed packages ``pkgs``, by name.

    Returns
    -------
    dict
        ``{package: {"version", "architecture", "source_package", "depends": [names]}}`` for the
        packages installed here (one architecture: the first ``dpkg-query`` lists); absent packages
        are missing from the dict. ``{}`` without ``dpkg-query`` (see :func:`dpkg_available`).
    """
    exe = shutil.which("dpkg-query")
    names = _distinct(pkgs)
    if exe is None or not names:
        return {}
    out, _ = _run_tool([exe, "-W", f"-f={_QUERY_FORMAT}", *names])
    found = {}
    for line in out.splitlines():
        fields = line.split("\t")
        if len(fields) != len(_QUERY_FIELDS) or fields[0] in found:
            continue
        name, version, arch, source, status, depends = fields
        if not status.endswith("install ok installed"):
            continue
        found[name] = {
            "version": version,
            "architecture": arch,
            "source_package": source or name,
            "depends": _depends_names(depends),
        }
    return found


def dpkg_available() -> bool:
    """Whether this machine has ``dpkg-query`` (a Debian or Ubuntu system)."""
    return shutil.which("dpkg-query") is not None


def _new_dependencies(todo: list, reached: dict) -> dict:
    """The installed dependencies of the packages ``todo`` not yet ``reached``: ``{dependency:
    (the package of pkgs it is reached from, the source package it must share)}``."""
    known = query_installed(todo)
    deps = {}
    for name in todo:
        rec = known.get(name)
        if rec is None:
            continue
        for dep in rec["depends"]:
            if dep not in reached and dep not in deps:
                deps[dep] = (reached[name], rec["source_package"])
    return deps


def same_source_closure(pkgs) -> dict:
    """``pkgs`` and, recursively, the installed packages they depend on that are built from the same
    Debian source package (``espeak-ng`` → ``espeak-ng-data``, ``libespeak-ng1``; ``ffmpeg`` →
    ``libavcodec59`` …): the libraries and data that do the work of a program.

    Returns ``{package: the package of pkgs it was reached from}`` (a package of ``pkgs`` maps to
    itself), in the order found; ``{}`` without ``dpkg-query``.
    """
    if not dpkg_available():
        return {}
    reached = {}
    for p in pkgs:
        reached[p] = p
    todo = list(reached)
    while todo:
        deps = _new_dependencies(todo, reached)
        dep_known = query_installed(deps)
        todo = []
        for dep, (root, source) in deps.items():
            if dep in dep_known and dep_known[dep]["source_package"] == source:
                reached[dep] = root
                todo.append(dep)
    return reached


def deb_file_name(pkg: str, version: str, arch: str) -> str:
    """The name apt gives the downloaded ``.deb`` of ``pkg`` ``version`` (``:`` of an epoch as
    ``%3a``): ``ffmpeg_7%3a5.1.6-0+deb12u1_amd64.deb``."""
    return f"{pkg}_{version.replace(':', '%3a')}_{arch}.deb"


def _apt_records(text: str) -> list[dict]:
    """The records (field → value; continuation lines dropped) of ``apt-cache show``'s output."""
    records = []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.splitlines():
            if ": " in line and not line.startswith(" "):
                key, value = line.split(": ", 1)
                fields[key] = value.strip()
        if fields:
            records.append(fields)
    return records


def apt_cache_sha256(installed: dict) -> tuple[dict, str]:
    """The archive's SHA-256 of each installed ``.deb``, from one ``apt-cache show pkg=version …``.

    ``installed``: ``{package: {"version", "architecture", …}}`` (:func:`query_installed`).
    Returns ``({package: sha256}, problem)``: packages whose version the apt lists no longer hold
    are absent; ``problem`` is ``""`` or why nothing could be asked (no ``apt-cache``, a time-out).
    """
    exe = shutil.which("apt-cache")
    if exe is None:
        return {}, "no apt-cache"
    if not installed:
        return {}, ""
    wanted = [f"{pkg}={rec['version']}" for pkg, rec in installed.items()]
    out, problem = _run_tool([exe, "show", *wanted])
    found = {}
    for fields in _apt_records(out):
        pkg = fields.get("Package", "")
        rec = installed.get(pkg)
        if rec is None or pkg in found or not fields.get("SHA256"):
            continue
        same_version = fields.get("Version") == rec["version"]
        same_arch = fields.get("Architecture") == rec["architecture"]
        if same_version and same_arch:
            found[pkg] = fields["SHA256"]
    return found, problem


def deb_sha256(
    pkg: str, version: str, arch: str, *, listed: str = "", problem: str = "not in the apt lists"
) -> tuple[str, str]:
    """SHA-256 of the ``.deb`` of ``pkg`` ``version`` (``arch``) and where it was read.

    ``listed``: the ``SHA256:`` field of ``apt-cache show pkg=version`` (the archive's own checksum,
    :func:`apt_cache_sha256`; source ``"apt-cache show"``) when known; else the hash of the file in
    :data:`APT_ARCHIVES` (source ``"/var/cache/apt/archives/<file>"``); else
    ``("", "unknown (<problem>; no <file> in /var/cache/apt/archives)")``. Never raises.
    """
    if listed:
        return listed, "apt-cache show"
    cached = APT_ARCHIVES / deb_file_name(pkg, version, arch)
    if cached.is_file():
        return file_sha256(cached), str(cached)
    return "", f"unknown ({problem}; no {cached.name} in {APT_ARCHIVES})"


def package_records(roles: dict) -> list[dict]:
    """One record per Debian package of ``roles`` (``{package: role}``, in order), columns
    :data:`PACKAGE_COLUMNS`: ``status`` ``installed`` / ``not installed`` / ``unknown (no dpkg)``,
    ``version`` (``dpkg-query``'s ``${Version}``), ``architecture``, ``source_package``,
    ``deb_sha256`` (64 hex characters, or ``""``) and ``sha256_source`` (:func:`deb_sha256`).

    Without ``dpkg-query`` every field says :data:`NO_DPKG`; never raises.
    """
    if not dpkg_available():
        return [
            {
                "package": p,
                "role": role,
                "status": NO_DPKG,
                "version": NO_DPKG,
                "architecture": "",
                "source_package": "",
                "deb_sha256": "",
                "sha256_source": NO_DPKG,
            }
            for p, role in roles.items()
        ]
    known = query_installed(roles)
    listed, problem = apt_cache_sha256(known)
    if not problem:
        problem = "not in the apt lists"
    rows = []
    for pkg, role in roles.items():
        rec = known.get(pkg)
        if rec is None:
            rows.append(
                {
                    "package": pkg,
                    "role": role,
                    "status": "not installed",
                    "version": "",
                    "architecture": "",
                    "source_package": "",
                    "deb_sha256": "",
                    "sha256_source": "not installed",
                }
            )
            continue
        digest, where = deb_sha256(
            pkg, rec["version"], rec["architecture"], listed=listed.get(pkg, ""), problem=problem
        )
        rows.append(
            {
                "package": pkg,
                "role": role,
                "status": "installed",
                "version": rec["version"],
                "architecture": rec["architecture"],
                "source_package": rec["source_package"],
                "deb_sha256": digest,
                "sha256_source": where,
            }
        )
    return rows
