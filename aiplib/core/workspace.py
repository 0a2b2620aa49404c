"""Where a profile's generated data lives: ``data/<profile>/`` and its stage folders.

A *profile* changes the inputs of the pipeline, never its stages: ``demo`` (embedded default,
offline, CPU), ``paper`` (the paper's corpora and models) and ``custom`` (the user's folders).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import CONDITION_FAMILIES, check_family

#: The profiles: ``demo`` (embedded default), ``paper`` (the paper's inputs), ``custom`` (yours).
PROFILES = ("demo", "paper", "custom")
#: The stage folders under a profile's root, each an attribute of :class:`Workspace`.
STAGE_DIRS = (
    "raw",
    "itembanks",
    "bg",
    "descriptors",
    "manifests",
    "checks",
    "inference",
    "results",
    "executed",
)
#: Environment variable naming the user models file (``make … MODELS=<file>`` sets it); read by
#: the model registry (aiplib.inference.models.registry) and by the records of the stages that
#: load it (aiplib.core.stage_records).
MODELS_ENV = "AIP_MODELS"
#: The user models file in the data root (``<data root>/models.yaml``), read when ``$AIP_MODELS``
#: is unset.
MODELS_FILE_NAME = "models.yaml"
#: Stage folders with one sub-folder per condition family that has its own folders
#: (:attr:`aiplib.core.tasks.ConditionFamily.own_folders`; :meth:`Workspace.with_family`).
FAMILY_STAGE_DIRS = ("manifests", "inference", "checks")


def repo_root() -> Path:
    """The project's root folder (the parent of the ``aiplib`` package)."""
    return Path(__file__).resolve().parents[2]


#: The variable that turns smoke size on, and the values that do (lower case, stripped).
SMOKE_ENV = "AIP_SMOKE"
SMOKE_VALUES = ("1", "true", "yes")


def smoke() -> bool:
    """True when ``$AIP_SMOKE`` is ``1``/``true``/``yes``: notebooks then default to tiny sizes
    (tests, CI)."""
    return os.environ.get(SMOKE_ENV, "0").strip().lower() in SMOKE_VALUES


@dataclass(frozen=True)
class Workspace:
    """The stage folders of one profile: ``root`` (``<data_root>/<profile>``) and its sub-folders
    :data:`STAGE_DIRS` as attributes. ``condition_family`` is the family this view reads and writes
    (default ``background``); for a family ``cf`` with its own folders
    (:attr:`aiplib.core.tasks.ConditionFamily.own_folders`), :data:`FAMILY_STAGE_DIRS` resolve to
    ``<root>/<stage>/<cf>`` and :attr:`scores_dir` to ``results/scores/<cf>``; the rest is shared.
    """

    profile: str
    root: Path
    condition_family: str = "background"

    def __getattr__(self, name):
        """A folder of :data:`STAGE_DIRS` (this family's own for :data:`FAMILY_STAGE_DIRS`)."""
        if name not in STAGE_DIRS:
            raise AttributeError(name)
        if name in FAMILY_STAGE_DIRS and self.has_own_folders:
            return self.root / name / self.condition_family
        return self.root / name

    @property
    def has_own_folders(self) -> bool:
        """Whether this view's condition family keeps its files in sub-folders named after it
        (:attr:`aiplib.core.tasks.ConditionFamily.own_folders`).

        Raises
        ------
        KeyError
            If :attr:`condition_family` is not one of :data:`aiplib.core.tasks.CONDITION_FAMILIES`.
        """
        return CONDITION_FAMILIES[self.condition_family].own_folders

    def with_family(self, condition_family: str) -> "Workspace":
        """The view of this workspace for one condition family (see :attr:`condition_family`).

        Raises
        ------
        AiplibParameterError
            If ``condition_family`` is not one of :data:`aiplib.core.tasks.CONDITION_FAMILIES`.
        """
        return dataclasses.replace(self, condition_family=check_family(condition_family))

    def ensure(self) -> "Workspace":
        """Create the stage folders (and this family's own ones; idempotent) and return ``self``."""
        for d in STAGE_DIRS:
            (self.root / d).mkdir(parents=True, exist_ok=True)
        for d in FAMILY_STAGE_DIRS:
            getattr(self, d).mkdir(parents=True, exist_ok=True)
        return self

    # ---------------------------------------------------------------- the files of each stage
    # One home for every path the pipeline writes; their formats live in aiplib.io.formats.
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

    @property
    def distractors_csv(self) -> Path:
        """``raw/distractors/distractors.csv``: the competing-speech distractor table (stage 1)."""
        return self.root / "raw" / "distractors" / "distractors.csv"

    @property
    def debian_packages_csv(self) -> Path:
        """``raw/debian_packages.csv``: version and ``.deb`` SHA-256 of the Debian packages the
        demo's inputs come from (stage 1)."""
        return self.root / "raw" / "debian_packages.csv"

    def manifest_csv(self, family: str) -> Path:
        """``manifests/<family>.csv`` (stage 5; ``manifests/<cf>/<family>.csv`` in a family
        view)."""
        return self.manifests / f"{family}.csv"

    @property
    def mix_diagnostics_csv(self) -> Path:
        """``checks/mix_diagnostics.csv`` (stage 7; ``checks/<cf>/…`` in a family view)."""
        return self.checks / "mix_diagnostics.csv"

    def inference_jsonl(self, model: str, task: str) -> Path:
        """``inference/<model>/<task>.jsonl`` (stage 7; ``inference/<cf>/<model>/…`` in a family
        view)."""
        return self.inference / model / f"{task}.jsonl"

    def run_log(self, model: str) -> Path:
        """``inference/<model>/run_log.jsonl`` (stage 7; under ``inference/<cf>/`` in a family
        view)."""
        return self.inference / model / "run_log.jsonl"

    @property
    def scores_dir(self) -> Path:
        """``results/scores`` (stage 8; ``results/scores/<cf>`` in a family view)."""
        scores = self.root / "results" / "scores"
        if self.has_own_folders:
            return scores / self.condition_family
        return scores

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
        if p.is_absolute():
            return p
        return self.root / p

    def rel(self, p) -> str:
        """Express ``p`` relative to :attr:`root` when it lies inside it (else absolute, as str)."""
        p = Path(p).resolve()
        try:
            return p.relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(p)


def workspace(profile: str = "demo", *, data_root=None, create: bool = True) -> Workspace:
    """Return the :class:`Workspace` of ``profile``.

    ``data_root`` is the parent of the profile folders (default ``$AIP_DATA_ROOT``, else
    ``<repo>/data``); ``create`` creates the stage folders.

    Raises
    ------
    AiplibParameterError
        If ``profile`` is unknown.
    """
    if profile not in PROFILES:
        raise AiplibParameterError(
            f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}"
        )
    root = Path(data_root or os.environ.get("AIP_DATA_ROOT") or repo_root() / "data")
    ws = Workspace(profile=profile, root=(root / profile).resolve())
    if create:
        ws.ensure()
    return ws
