"""What validation of the custom inputs reports: :class:`Problem` and :class:`ValidationReport`."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

import pandas as pd

from aiplib.core.errors import ValidationError

#: Severities of a problem: a fatal one stops stage 1, a warning is reported.
_SEVERITIES = ("fatal", "warning")

#: Folder parameter → (what its files are called in the summary, report attribute of its rows).
_ROLES = {
    "speech_dir": ("utterances", "speech"),
    "kws_dir": ("keyword clips", "kws"),
    "backgrounds_dir": ("backgrounds", "backgrounds"),
}


@dataclass(frozen=True)
class Problem:
    """One validation finding: ``severity`` (``fatal`` or ``warning``), ``kind`` (a short code:
    ``table``, ``silent`` …), ``file`` (file, folder or table concerned; may be empty) and
    ``message``."""

    severity: str
    kind: str
    file: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{self.severity.upper()} [{self.kind}] {where}{self.message}"


@dataclass
class ValidationReport:
    """What :func:`~aiplib.sources.corpora.custom.validate.validate_inputs` found: ``problems``
    (fatal first), ``speech``, ``kws`` (skipped clips ``used = False``), ``backgrounds`` (inventory
    rows), ``params`` (the resolved inputs) and ``scans`` (one per folder)."""

    problems: list = field(default_factory=list)
    speech: list = field(default_factory=list)
    kws: list = field(default_factory=list)
    backgrounds: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    scans: list = field(default_factory=list)

    @property
    def fatal(self) -> list:
        """The fatal problems."""
        return [p for p in self.problems if p.severity == "fatal"]

    @property
    def warnings(self) -> list:
        """The warnings."""
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        """True when no problem is fatal."""
        return not self.fatal

    def _accepted(self, role: str, folder: str | None = None) -> tuple[int, int]:
        """Files of ``role`` accepted and skipped (multi-word KWS labels), only those under
        ``folder`` if given."""
        rows = getattr(self, _ROLES[role][1])
        if folder is not None:
            top = os.path.join(folder, "")
            rows = [r for r in rows if str(r["file"]).startswith(top)]
        used = sum(1 for r in rows if r.get("used", True))
        return used, len(rows) - used

    def summary(self, max_folders: int = 20) -> str:
        """A printable report: audio files found, accepted, skipped (multi-word KWS labels) and
        rejected (named by a fatal problem) per input and folder, then every problem; subfolders are
        listed one by one when there are at most ``max_folders``."""
        scans = {sc["role"]: sc for sc in self.scans}
        parts = []
        for role, (noun, _) in _ROLES.items():
            used, skipped = self._accepted(role)
            skip = f" ({skipped} skipped)" if role == "kws_dir" else ""
            found = f" of {scans[role]['n_files']} found" if role in scans else ""
            parts.append(f"{used} {noun} accepted{skip}{found}")
        lines = [
            f"custom inputs: {', '.join(parts)} — {len(self.fatal)} fatal problem(s), "
            f"{len(self.warnings)} warning(s)"
        ]
        for sc in self.scans:
            bad = f", {len(sc['errors'])} could not be scanned" if sc["errors"] else ""
            counts = ""
            if sc["role"] in _ROLES:
                used, skipped = self._accepted(sc["role"], sc["folder"])
                rejected = max(sc["n_files"] - used - skipped, 0)
                counts = f"; {used} accepted"
                counts += f", {skipped} skipped" if sc["role"] == "kws_dir" else ""
                counts += f", {rejected} rejected" + (" (FATAL below)" if rejected else "")
            lines.append(
                f"  {sc['role']} {sc['folder']}: {sc['n_files']} audio file(s) found in "
                f"{sc['n_folders']} folder(s){bad}{counts}"
            )
            if 1 < sc["n_folders"] <= max_folders:
                lines += [f"    {rel}/: {n}" for rel, n in sc["per_folder"].items()]
            lines += [f"    {e}: not scanned" for e in sc["errors"]]
        return "\n".join([*lines, *(f"  {p}" for p in self.problems)])

    def to_frame(self):
        """The problems as a pandas DataFrame (columns ``severity, kind, file, message``)."""
        return pd.DataFrame(
            [asdict(p) for p in self.problems], columns=["severity", "kind", "file", "message"]
        )

    def raise_if_fatal(self) -> None:
        """Raise :class:`aiplib.core.errors.ValidationError` with every problem if any is fatal."""
        if self.fatal:
            raise ValidationError(self.problems)


def _not_fatal(problem: Problem) -> bool:
    """Sort key putting fatal problems first."""
    return problem.severity != "fatal"


class Collector(list):
    """The problems found by a validation, in the order found (a list of :class:`Problem`)."""

    def add(self, severity: str, kind: str, file, message: str) -> None:
        """Record one problem; ``severity`` is one of ``_SEVERITIES``, ``file`` a path or ``""``."""
        assert severity in _SEVERITIES
        if file:
            file = str(file)
        else:
            file = ""
        self.append(Problem(severity, kind, file, message))

    def sorted(self) -> list[Problem]:
        """The problems, fatal first, each group in the order found (a stable sort)."""
        return sorted(self, key=_not_fatal)
