"""Stage 7's run records: ``checks/mix_diagnostics.csv`` (:class:`MixDiagnostics`), the per-model
:class:`Throughput` and the other fields of ``run_log.jsonl``.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import logging
import os
import platform
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core import __version__
from aiplib.io.formats import append_jsonl_lines, repair_jsonl

log = logging.getLogger(__name__)

#: longest error message kept in a row or run-log record
ERROR_MAX_CHARS = 300


def versions() -> dict:
    """Versions of aiplib, Python, the platform and the numeric / model packages this process has
    imported."""

    loaded = [
        m
        for m in ("faster_whisper", "ctranslate2", "torch", "transformers")
        if sys.modules.get(m) is not None
    ]
    return {
        "aiplib": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "pandas": pd.__version__,
        **{m: getattr(sys.modules[m], "__version__", "?") for m in loaded},
    }


def now_iso() -> str:
    """Local time with its UTC offset, ISO 8601, whole seconds."""
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def short_error(exc: BaseException) -> str:
    """``"Type: message"`` on one line, at most :data:`ERROR_MAX_CHARS` characters."""
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:ERROR_MAX_CHARS]


def log_run(path: Path, record: dict) -> None:
    """Append ``record`` as one JSON line to ``path`` (``run_log.jsonl``), a half last line cut
    first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    repair_jsonl(path)
    append_jsonl_lines(path, [json.dumps(record, default=str, allow_nan=False) + "\n"])


#: columns of checks/mix_diagnostics.csv
MIX_DIAG_FIELDS = [
    "stimulus_id",
    "family",
    "speech_id",
    "background_id",
    "snr_db",
    "condition",
    "target_snr_db",
    "achieved_snr_db",
    "speech_lufs",
    "speech_peak",
    "bg_gain_db",
    "peak",
    "clip_scale",
    "bg_offset",
    "bg_active",
]


def _stimulus_ids(path: Path) -> set[str] | None:
    """The ``stimulus_id`` column of a diagnostics file (empty if absent, None if unreadable)."""
    if not path.is_file() or path.stat().st_size == 0:
        return set()
    try:
        return set(
            pd.read_csv(path, usecols=["stimulus_id"], dtype=str, keep_default_na=False)[
                "stimulus_id"
            ]
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None


class MixDiagnostics:
    """Append-only, de-duplicated writer of ``checks/mix_diagnostics.csv`` (or a shard's
    ``mix_diagnostics.shard-<i>-of-<n>.csv``; ``also_seen``: files only read, whose stimuli are not
    written again).
    """

    def __init__(self, path: Path, also_seen=()):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl(path)
        self.seen = _stimulus_ids(path)
        if self.seen is None:
            log.warning("%s is unreadable; starting it again", path)
            path.unlink()
            self.seen = set()
        for other in also_seen:  # only a hint against duplicates; the merge de-duplicates anyway
            self.seen |= _stimulus_ids(Path(other)) or set()
        self.pending: list[dict] = []

    def add(self, row, family: str, info) -> None:
        sid = str(row["id"])
        if sid in self.seen:
            return
        self.seen.add(sid)
        self.pending.append(
            {
                "stimulus_id": sid,
                "family": family,
                **{k: row.get(k) for k in MIX_DIAG_FIELDS[2:6]},
                **{k: getattr(info, k) for k in MIX_DIAG_FIELDS[6:]},
            }
        )

    def flush(self) -> None:
        if not self.pending:
            return
        new = not self.path.is_file() or self.path.stat().st_size == 0
        with open(self.path, "a", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=MIX_DIAG_FIELDS)
            if new:
                w.writeheader()
            w.writerows(self.pending)
            f.flush()
            os.fsync(f.fileno())
        self.pending = []


class Throughput:
    """Per-model throughput of stage 7, summed over the task families run: distinct ``stimuli``,
    (stimulus, prompt) ``decodes``, ``audio_s`` (after the cut to ``max_audio_s``) and loop
    ``seconds``; RTFx = ``audio_s / seconds``.
    """

    def __init__(self, model: str):
        self.model = model
        self.families: dict[str, dict] = {}

    def add(
        self, *, family: str, stimuli: int, decodes: int, audio_s: float, seconds: float
    ) -> None:
        self.families[family] = {
            "stimuli": int(stimuli),
            "decodes": int(decodes),
            "audio_s": round(float(audio_s), 3),
            "seconds": round(float(seconds), 3),
        }

    def record(self) -> dict:
        """``{stimuli, decodes, audio_s, seconds, stimuli_per_s, decodes_per_s, rtfx,
        families}``."""
        tot = {
            k: sum(f[k] for f in self.families.values())
            for k in ("stimuli", "decodes", "audio_s", "seconds")
        }
        s = tot["seconds"]
        rate = {
            f"{k}_per_s" if k != "audio_s" else "rtfx": round(tot[k] / s, 3)
            if s > 0 and tot[k]
            else None
            for k in ("stimuli", "decodes", "audio_s")
        }
        return {
            **tot,
            "audio_s": round(tot["audio_s"], 3),
            "seconds": round(s, 3),
            **rate,
            "families": self.families,
        }

    def line(self) -> str:
        """One summary line (without the ``[progress]`` marker)."""
        r = self.record()
        if not r["stimuli"]:
            return f"{self.model} · nothing to run (every stimulus already decoded)"
        rate = f"{r['stimuli_per_s']:.3g} stimuli/s" if r["stimuli_per_s"] else "? stimuli/s"
        rtfx = f"RTFx {r['rtfx']:.3g}" if r["rtfx"] else "RTFx ?"
        return (
            f"{self.model} · throughput · {r['stimuli']} stimuli, {r['decodes']} decodes, "
            f"{r['audio_s']:.0f} s of audio in {r['seconds']:.1f} s · {rate} · {rtfx}"
        )
