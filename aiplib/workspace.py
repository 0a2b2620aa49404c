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

    # ---------------------------------------------------------------- the files of each stage
    # One home for every path the pipeline writes; their formats live in aiplib.formats.
    def item_bank(self, family: str) -> Path:
        """``itembanks/<family>.jsonl`` (stage 2)."""
        return self.root / "itembanks" / f"{family}.jsonl"

    def item_bank_sidecar(self, family: str) -> Path:
        """``itembanks/<family>.json``: the item bank's sidecar (the KWS keyword set)."""
        return self.root / "itembanks" / f"{family}.json"

    @property
    def battery_csv(self) -> Path:
        """``descriptors/battery.csv`` (stage 3)."""
        return self.root / "descriptors" / "battery.csv"

    @property
    def descriptor_csv(self) -> Path:
        """``descriptors/acoustic_descriptors.csv`` (stage 4)."""
        return self.root / "descriptors" / "acoustic_descriptors.csv"

    def manifest_csv(self, family: str) -> Path:
        """``manifests/<family>.csv`` (stage 5)."""
        return self.root / "manifests" / f"{family}.csv"

    @property
    def mix_diagnostics_csv(self) -> Path:
        """``checks/mix_diagnostics.csv`` (stage 7)."""
        return self.root / "checks" / "mix_diagnostics.csv"

    def inference_jsonl(self, model: str, task: str) -> Path:
        """``inference/<model>/<task>.jsonl`` (stage 7)."""
        return self.root / "inference" / model / f"{task}.jsonl"

    def run_log(self, model: str) -> Path:
        """``inference/<model>/run_log.jsonl`` (stage 7)."""
        return self.root / "inference" / model / "run_log.jsonl"

    @property
    def scores_dir(self) -> Path:
        """``results/scores`` (stage 8)."""
        return self.root / "results" / "scores"

    def scores_csv(self, task: str) -> Path:
        """``results/scores/<task>.csv`` (stage 8)."""
        return self.scores_dir / f"{task}.csv"

    def scores_sidecar(self, task: str) -> Path:
        """``results/scores/<task>.json``: the score file's sidecar."""
        return self.scores_dir / f"{task}.json"

    @property
    def tables_dir(self) -> Path:
        """``results/tables`` (stage 9)."""
        return self.root / "results" / "tables"

    @property
    def figures_dir(self) -> Path:
        """``results/figures`` (stage 9)."""
        return self.root / "results" / "figures"

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
