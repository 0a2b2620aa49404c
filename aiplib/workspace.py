"""Where a profile's generated data lives: ``data/<profile>/`` and its stage folders.

A *profile* changes the inputs of the pipeline, never its stages: ``demo`` (embedded default,
offline, CPU), ``paper`` (the paper's corpora and models) and ``custom`` (the user's folders).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROFILES", "STAGE_DIRS", "Workspace", "workspace", "smoke", "repo_root"]

PROFILES = ("demo", "paper", "custom")
STAGE_DIRS = ("raw", "itembanks", "bg", "descriptors", "manifests", "checks", "inference",
              "results", "executed")


def repo_root() -> Path:
    """The project's root folder (the parent of the ``aiplib`` package)."""
    return Path(__file__).resolve().parents[1]


def smoke() -> bool:
    """True when ``$AIP_SMOKE`` is ``1``/``true``: notebooks then default to tiny sizes (tests, CI)."""
    return os.environ.get("AIP_SMOKE", "0").strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class Workspace:
    """The stage folders of one profile.

    Attributes
    ----------
    profile : str
        Profile name.
    root : pathlib.Path
        ``<data_root>/<profile>``; every other attribute is a sub-folder of it
        (``raw itembanks bg descriptors manifests checks inference results executed``).
    """

    profile: str
    root: Path

    def __getattr__(self, name):
        if name in STAGE_DIRS:
            return self.root / name
        raise AttributeError(name)

    def ensure(self) -> "Workspace":
        """Create the stage folders (idempotent) and return ``self``."""
        for d in STAGE_DIRS:
            (self.root / d).mkdir(parents=True, exist_ok=True)
        return self

    def path(self, rel) -> Path:
        """Resolve a path stored in a data file (relative to :attr:`root`, or absolute)."""
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    def rel(self, p) -> str:
        """Express ``p`` relative to :attr:`root` when it lies inside it (else absolute, as str)."""
        p = Path(p).resolve()
        try:
            return p.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(p)


def workspace(profile: str = "demo", *, data_root=None, create: bool = True) -> Workspace:
    """Return the :class:`Workspace` of ``profile``.

    Parameters
    ----------
    profile : str
        One of :data:`PROFILES`.
    data_root : str or Path, optional
        Parent of the profile folders. Default ``$AIP_DATA_ROOT``, else ``<repo>/data``.
    create : bool
        Create the stage folders.

    Raises
    ------
    AiplibParameterError
        If ``profile`` is unknown.
    """
    from .errors import AiplibParameterError

    if profile not in PROFILES:
        raise AiplibParameterError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    root = Path(data_root or os.environ.get("AIP_DATA_ROOT") or repo_root() / "data")
    ws = Workspace(profile=profile, root=(root / profile).resolve())
    return ws.ensure() if create else ws
