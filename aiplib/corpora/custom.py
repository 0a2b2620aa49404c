"""Stage 1–2 of the ``custom`` profile: the user's own folders, validated before any work.

Inputs (the parameters of notebook 01, or ``make all PROFILE=custom SPEECH_DIR=… TEXTS=… KWS_DIR=…
KWS_LABELS=… BACKGROUNDS_DIR=…``):

``speech_dir`` and ``texts``
    A folder of utterances and a CSV or TSV table with the columns ``file`` (path relative to
    ``speech_dir``, or absolute) and ``text`` (the reference transcript), and optionally
    ``accent_group``, ``speaker``, ``licence`` and ``attribution``.
``kws_dir`` and ``kws_labels``
    A folder of keyword clips and a table with ``file`` and ``label`` (the one word spoken), and
    optionally ``speaker``, ``accent_group``, ``licence``, ``attribution``. ``keywords`` is the
    closed keyword set (default the paper's ten, :data:`KEYWORDS`); ``is_target`` is
    ``label in keywords``.
``backgrounds_dir``
    A folder of background recordings, with an optional ``licences.csv`` (``file``, ``licence``,
    ``attribution``, and optionally ``category`` — one of ``stationary``, ``transient``, ``music``,
    ``speech-like`` — and ``description``).

Audio files are recognised by extension (:data:`AUDIO_EXTENSIONS`, searched recursively; hidden
files such as macOS ``._*`` are ignored). Any format soundfile or ffmpeg reads, at any sample rate
and channel count, is accepted: :func:`aiplib.audio.load_audio` averages the channels to mono and
resamples to 16 kHz (soxr). A source below 16 kHz keeps its narrower band (an 8 kHz file has no
content above 4 kHz).

Validation (:func:`validate_inputs`) reads every file once and lists *all* problems, each with a
severity (``fatal`` or ``warning``) and the file it concerns: a folder (or subfolder) that cannot
be scanned (every error of the directory walk is a problem naming the folder, and the number of
audio files found is printed per folder), a missing transcript or label, a transcript that is
empty after normalisation (``[music]``, ``uh``: WER undefined), a listed file that does not exist, an unreadable or corrupt file, silent audio (integrated
loudness −inf LUFS: every 400 ms block below the ITU-R BS.1770 absolute gate of −70 LUFS, so the
file cannot be loudness-normalised), NaN or infinite samples, an utterance or clip longer than
the 30 s cap (:data:`MAX_UTTERANCE_S`, the length of every curated background), no keyword clips.
Warnings: a background shorter than the longest utterance (it is looped), fewer than
:data:`MIN_BACKGROUNDS` backgrounds (weak correlations), clips whose label holds several words
(skipped, see below), backgrounds without a licence, labels changed by normalisation.

KWS labels are normalised as model answers are (lower-case, first word, punctuation stripped at
its ends: ``"Yes!"`` → ``yes``, a keyword); every label changed beyond its case is listed as a
``label_normalised`` warning.

Stage 1 (:func:`gather_raw`) validates first and writes nothing if any problem is fatal. It does
**not copy** the user's audio: ``raw/inventory.csv`` points at the files where they are (absolute
paths) with their size and SHA-256, and stage 2 refuses to build from a file that changed since.
Stage 2 (:func:`build_item_banks`) writes the 16 kHz mono item WAVs, and stage 3
(:func:`battery_specs` → :func:`aiplib.backgrounds.curate_battery`) the 30 s backgrounds, inside the
workspace, so stages 4–10 never read the user's folders.

Multi-keyword clips: a label holding several words (``yes|no|go|stop``, ``turn on``) cannot be
scored by the closed-set first-word rule (one word per clip), so such clips are listed in the
inventory with ``used = False`` and skipped with a warning.

Backgrounds without a ``category`` in ``licences.csv`` get one inferred from the first 30 s (the
part the battery uses): ``transient`` when the loudest 100 ms frame is at least
:data:`TRANSIENT_PEAK_DB` dB above the median frame level (events stand out), else ``stationary``.
Music and speech-like are never inferred; give them in ``licences.csv``. The description then says
the category was inferred, and ``raw/inventory.csv`` records the measured peak-to-median level.

Digital silence in backgrounds: short sound events are often padded with exact zeros (an ESC-50
dog-bark clip holds 0.4 s of sound in 5 s). Looped, such padding leaves stretches where a stimulus
would hear no background at all, and mixing at a set SNR is then impossible. Runs of digital silence
(10 ms frames whose peak is below :data:`DIGITAL_SILENCE_DBFS`) longer than :data:`MAX_SILENT_GAP_S`
are therefore shortened, with a warning, to :data:`MAX_SILENT_GAP_S` inside a background and to
half of it at each end (so a loop junction holds at most :data:`MAX_SILENT_GAP_S`). Stage 1 writes
that prepared copy (16 kHz mono) to ``raw/backgrounds/<bg_id>.wav`` — the only audio stage 1
writes — and stage 3 curates from it.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import re
import sys
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..audio import SR, load_audio, loudness_lufs, write_wav
from ..errors import AiplibError, AudioFileError, MissingPackageError, ValidationError
from ..hashing import sha256_file
from ..formats import write_item_bank
from ..jsonl import read_jsonl

__all__ = ["KEYWORDS", "MAX_UTTERANCE_S", "MIN_BACKGROUNDS", "AUDIO_EXTENSIONS", "CATEGORIES",
           "UNKNOWN_LICENCE", "TRANSIENT_PEAK_DB", "DIGITAL_SILENCE_DBFS", "MAX_SILENT_GAP_S",
           "strip_digital_silence", "INVENTORY_COLUMNS", "Problem", "ValidationReport",
           "validate_inputs", "gather_raw", "build_item_banks", "battery_specs", "main"]

from ..tasks import KEYWORDS  # noqa: E402 - the default keyword set, aiplib/tasks.yaml

MAX_UTTERANCE_S = 30.0
"""Longest utterance or keyword clip accepted, in s (the length of every curated background)."""

MIN_BACKGROUNDS = 8
"""Fewer backgrounds than this give a warning: Spearman correlations over so few are weak."""

AUDIO_EXTENSIONS = frozenset({
    ".wav", ".wave", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".m4a", ".mp4", ".aac", ".wma",
    ".aif", ".aiff", ".aifc", ".au", ".snd", ".caf", ".w64", ".rf64", ".sph", ".nist", ".webm",
    ".mka", ".amr", ".ac3", ".g722", ".spx"})
"""File name extensions treated as audio when the folders are scanned (case-insensitive)."""

CATEGORIES = ("stationary", "transient", "music", "speech-like")
"""Allowed background categories (as in ``descriptors/battery.csv``)."""

UNKNOWN_LICENCE = "unknown — supplied by the user"
"""Licence and attribution recorded when the user gives none."""

TRANSIENT_PEAK_DB = 10.0
"""Peak-to-median 100 ms frame level (dB) from which a background is inferred ``transient``."""

DIGITAL_SILENCE_DBFS = -80.0
"""A 10 ms frame whose peak is below this level (dBFS) counts as digital silence."""

MAX_SILENT_GAP_S = 0.25
"""Longest run of digital silence kept inside a background (half of it at each end), s."""

SOURCE = "custom (user-supplied)"
"""Value of the item banks' ``source`` and the battery's ``source_package``."""

INVENTORY_COLUMNS = ["file", "package", "licence", "attribution", "bytes", "sha256", "used", "item_id",
                     "bg_id", "text", "label", "is_target", "accent_group", "speaker", "category",
                     "category_source", "description", "duration_s", "sample_rate", "channels", "prepared",
                     "prepared_duration_s", "note"]
"""Columns of ``raw/inventory.csv`` for this profile. ``package`` is ``custom/speech``,
``custom/kws``, ``custom/backgrounds`` or ``custom/metadata`` (the tables themselves); ``file`` is
the user's file (absolute path), ``prepared`` the background copy stage 1 wrote without its digital
silence (relative to the workspace; empty when the file is used as it is)."""

_SEVERITIES = ("fatal", "warning")
_ID_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_MULTI = re.compile(r"[|,;+/\s]")
_LEVEL_FRAME_S = 0.1


# ----------------------------------------------------------------------------- report
@dataclass(frozen=True)
class Problem:
    """One validation finding.

    Attributes
    ----------
    severity : {"fatal", "warning"}
        ``fatal`` stops the pipeline; ``warning`` is reported and the run goes on.
    kind : str
        Short code: ``parameter``, ``table``, ``missing_transcript``, ``missing_label``,
        ``missing_file``, ``unreadable``, ``empty``, ``nan``, ``silent``, ``too_long``,
        ``duplicate``, ``category``, ``no_items``, ``unreadable_folder``, ``empty_reference``,
        ``bg_looped``, ``digital_silence``, ``few_backgrounds``, ``licence_row``, ``multi_keyword``,
        ``label_normalised``, ``no_licence``, ``keywords``, ``no_targets``, ``symlink_loop``.
    file : str
        The file (or folder, or table) concerned; empty when none.
    message : str
        What is wrong and what to do.
    """

    severity: str
    kind: str
    file: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        return f"{self.severity.upper()} [{self.kind}] {where}{self.message}"


@dataclass
class ValidationReport:
    """Everything :func:`validate_inputs` found, and the usable entries it parsed.

    Attributes
    ----------
    problems : list of Problem
        Fatal problems first, then warnings, each group in the order found.
    speech, kws, backgrounds : list of dict
        One dict per audio file that was read (fields as in :data:`INVENTORY_COLUMNS`);
        ``kws`` includes the skipped multi-word clips with ``used = False``.
    params : dict
        The resolved inputs (absolute paths, keyword list).
    scans : list of dict
        One per input folder scanned (see :func:`_scan`): ``role``, ``folder``, ``n_files``,
        ``n_folders``, ``per_folder`` (relative folder → audio files in it) and ``errors``
        (folders that could not be scanned; each is also a fatal problem).
    """

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

    def summary(self, max_folders: int = 20) -> str:
        """A printable report: counts of files read, the audio files found per folder, then every problem.

        Parameters
        ----------
        max_folders : int
            Subfolders listed one by one per input folder (with their count of audio files) when
            the input folder has at most this many; above it only the total is printed.
        """
        n_kws = sum(1 for r in self.kws if r["used"])
        head = (f"custom inputs: {len(self.speech)} utterances, {n_kws} keyword clips "
                f"({len(self.kws) - n_kws} skipped), {len(self.backgrounds)} backgrounds — "
                f"{len(self.fatal)} fatal problem(s), {len(self.warnings)} warning(s)")
        lines = [head]
        for sc in self.scans:
            bad = f", {len(sc['errors'])} could not be scanned" if sc["errors"] else ""
            lines.append(f"  {sc['role']} {sc['folder']}: {sc['n_files']} audio file(s) found in "
                         f"{sc['n_folders']} folder(s){bad}")
            if 1 < sc["n_folders"] <= max_folders:
                lines += [f"    {rel}/: {n}" for rel, n in sc["per_folder"].items()]
            lines += [f"    {e}: not scanned" for e in sc["errors"]]
        return "\n".join([*lines, *(f"  {p}" for p in self.problems)])

    def to_frame(self):
        """The problems as a pandas DataFrame (columns ``severity, kind, file, message``)."""
        import pandas as pd

        return pd.DataFrame([asdict(p) for p in self.problems], columns=["severity", "kind", "file", "message"])

    def raise_if_fatal(self) -> None:
        """Raise :class:`aiplib.errors.ValidationError` with every problem if any is fatal."""
        if self.fatal:
            raise ValidationError(self.problems)


class _Collector:
    def __init__(self):
        self.items: list[Problem] = []

    def add(self, severity: str, kind: str, file, message: str) -> None:
        assert severity in _SEVERITIES
        self.items.append(Problem(severity, kind, str(file) if file else "", message))

    def sorted(self) -> list[Problem]:
        return [p for p in self.items if p.severity == "fatal"] + [p for p in self.items if p.severity == "warning"]


# ----------------------------------------------------------------------------- helpers
def _abs(p) -> Path:
    """Absolute, normalised path without resolving symlinks (a linked file keeps its own name)."""
    return Path(os.path.normpath(os.path.abspath(os.path.expanduser(str(p)))))


def _scan(folder: Path, probs: _Collector | None = None, *, role: str = "") -> tuple[list[Path], dict]:
    """Audio files under ``folder`` (recursive, sorted, hidden files and folders skipped).

    Every error of the directory walk is recorded instead of being ignored (``os.walk`` drops an
    unreadable subfolder silently by default): a folder that cannot be listed is a fatal
    ``unreadable_folder`` problem naming it, a symbolic-link loop a ``symlink_loop`` warning.

    Parameters
    ----------
    folder : Path
        The input folder (absolute).
    probs : _Collector, optional
        Where scan problems go (none recorded when None).
    role : str
        Which input the folder is (``speech_dir`` …), quoted in the problems.

    Returns
    -------
    files : list of Path
        Absolute paths of the audio files found, sorted.
    scan : dict
        ``role``, ``folder`` (str), ``n_files``, ``n_folders`` (folders listed, ``folder`` included),
        ``per_folder`` (relative folder → number of audio files directly in it, ``"."`` for
        ``folder`` itself), ``errors`` (the paths that could not be scanned).
    """
    out, errors, per_folder, seen = [], [], {}, set()

    def onerror(exc: OSError) -> None:
        where = exc.filename or str(folder)
        errors.append(str(where))
        if probs is not None:
            probs.add("fatal", "unreadable_folder", where,
                      f"{role}: this folder cannot be scanned ({exc.strerror or exc}), so its files would be "
                      "skipped; make it readable (and listable) by this user, or move it out of the folder")

    for root, dirs, files in os.walk(folder, onerror=onerror, followlinks=True):
        try:
            st = os.stat(root)
        except OSError as exc:  # vanished or unreadable between listing and visiting
            onerror(exc)
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            if probs is not None:
                probs.add("warning", "symlink_loop", root, f"{role}: a symbolic link leads back to a folder "
                                                           "already scanned; not scanned twice")
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found = [_abs(Path(root) / n) for n in sorted(files)
                 if not n.startswith(".") and Path(n).suffix.lower() in AUDIO_EXTENSIONS]
        per_folder[Path(os.path.relpath(root, folder)).as_posix()] = len(found)
        out += found
    scan = dict(role=role, folder=str(folder), n_files=len(out), n_folders=len(per_folder),
                per_folder=per_folder, errors=errors)
    return sorted(out), scan


def _not_a(p: Path, kind: str) -> str:
    """Why ``p`` is not an existing file (``kind="file"``) or folder (``"dir"``); "" when it is.

    Unlike ``Path.is_file`` this never raises: a permission error on the way is the reason.
    """
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "not found"
    except OSError as exc:
        return f"cannot be reached ({exc.strerror or exc})"
    import stat

    ok = stat.S_ISDIR(st.st_mode) if kind == "dir" else stat.S_ISREG(st.st_mode)
    return "" if ok else ("not a folder" if kind == "dir" else "not a regular file")


def _normalize_label(text) -> str:
    """A KWS label normalised exactly as a KWS response is (``"Yes!"`` → ``"yes"``); see
    :func:`aiplib.scoring.normalize_kws_label`. Possibly empty (a label of punctuation only)."""
    from ..scoring import normalize_kws_label

    return normalize_kws_label(text)


def _reference_is_empty(text) -> bool:
    """True when a reference transcript holds no word under the paper's or the Whisper-style
    normalisation (``"[music]"``, ``"uh"``, ``"..."``); see :func:`aiplib.scoring.reference_is_empty`."""
    from ..scoring import reference_is_empty

    return reference_is_empty(text)


def _safe_id(text: str) -> str:
    s = _ID_BAD.sub("_", text).strip("._-")
    s = re.sub(r"_+", "_", s)  # "__" separates the parts of a stimulus id
    return s or "item"


def _unique_ids(paths: list[Path], base: Path, reserved=()) -> list[str]:
    """Ids from the path relative to ``base`` without extension; clashes get the extension, then a number."""
    ids, seen = [], set(reserved)
    for p in paths:
        try:
            rel = p.relative_to(base)
        except ValueError:
            rel = Path(p.name)
        stem = _safe_id(rel.with_suffix("").as_posix().replace("/", "-"))
        cand = stem
        if cand in seen:
            cand = f"{stem}_{p.suffix.lstrip('.').lower() or 'x'}"
        k = 2
        while cand in seen:
            cand = f"{stem}-{k}"
            k += 1
        seen.add(cand)
        ids.append(cand)
    return ids


def _read_table(path: Path, required: tuple, probs: _Collector, what: str, aliases=None):
    """Read a CSV/TSV table with string cells; returns a DataFrame or None (problem recorded)."""
    import pandas as pd

    aliases = aliases or {}
    if _not_a(path, "file"):
        probs.add("fatal", "table", path, f"{what} table not found")
        return None
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        probs.add("fatal", "table", path, f"{what} table cannot be read as UTF-8 text ({exc})")
        return None
    if path.suffix.lower() in (".tsv", ".tab"):
        sep = "\t"
    else:
        first = raw.splitlines()[0] if raw.strip() else ""
        try:
            sep = csv.Sniffer().sniff(first, delimiters=",\t;").delimiter
        except csv.Error:
            sep = ","
    try:
        df = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, encoding="utf-8-sig",
                         skipinitialspace=True)
    except Exception as exc:  # noqa: BLE001 - any parser error is a table problem
        probs.add("fatal", "table", path, f"{what} table cannot be parsed ({exc})")
        return None
    df.columns = [str(c).strip().lower() for c in df.columns]
    df = df.rename(columns={a: c for a, c in aliases.items() if a in df.columns and c not in df.columns})
    missing = [c for c in required if c not in df.columns]
    if missing:
        probs.add("fatal", "table", path, f"{what} table lacks the column(s) {', '.join(missing)} "
                                          f"(it has {', '.join(df.columns) or 'none'}; separator {sep!r})")
        return None
    for c in df.columns:
        df[c] = df[c].astype(str).str.strip()
    return df


def _peak_to_median_db(y: np.ndarray, sr: int = SR) -> float:
    """Loudest minus median 100 ms frame RMS level of the first 30 s, dB.

    Frames more than 60 dB below the loudest (digital silence, zero padding) are left out.
    """
    y = y[: int(MAX_UTTERANCE_S * sr)]
    n = int(_LEVEL_FRAME_S * sr)
    k = y.size // n
    if k < 2:
        return 0.0
    rms = np.sqrt(np.mean(y[: k * n].astype(np.float64).reshape(k, n) ** 2, axis=1))
    db = 20 * np.log10(np.maximum(rms, 1e-12))
    db = db[db > db.max() - 60.0]
    return float(db.max() - np.median(db))


def strip_digital_silence(y, *, sr: int = SR, max_gap_s: float = MAX_SILENT_GAP_S,
                          floor_dbfs: float = DIGITAL_SILENCE_DBFS):
    """Shorten long runs of digital silence, so a looped background never falls silent for long.

    Inside the signal a run longer than ``max_gap_s`` keeps its first ``max_gap_s``; at the start
    and end it keeps ``max_gap_s / 2`` next to the sound, so the junction of two loop repetitions
    holds at most ``max_gap_s`` of silence.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int, Hz
    max_gap_s : float ≥ 0, s
        Runs of silent frames up to this length are left alone; longer ones are shortened.
    floor_dbfs : float, dBFS
        A 10 ms frame whose peak |y| is below ``10 ** (floor_dbfs / 20)`` is silent.

    Returns
    -------
    y_out : np.ndarray [shape=(m,)], float32, m ≤ n
        ``y`` itself (as float32) when nothing was removed.
    removed : dict
        Seconds removed: ``start_s``, ``end_s``, ``inside_s``.
    """
    y = np.asarray(y, dtype=np.float32)
    frame = max(1, sr // 100)
    k = -(-y.size // frame)
    padded = np.zeros(k * frame, dtype=np.float32)
    padded[: y.size] = np.abs(y)
    silent = padded.reshape(k, frame).max(axis=1) < 10.0 ** (floor_dbfs / 20.0)
    gap = int(round(max_gap_s * 100))
    half = gap // 2
    keep = np.ones(k, dtype=bool)
    removed = dict(start_s=0.0, end_s=0.0, inside_s=0.0)
    d = np.diff(np.concatenate([[0], silent.astype(np.int8), [0]]))
    for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
        if b - a <= gap:
            continue
        if a == 0:
            keep[: b - half] = False
            removed["start_s"] += (b - half) * frame / sr
        elif b == k:
            keep[a + half:] = False
            removed["end_s"] += (y.size - (a + half) * frame) / sr
        else:
            keep[a + gap:b] = False
            removed["inside_s"] += (b - a - gap) * frame / sr
    if keep.all() or not keep.any():
        return y, dict(start_s=0.0, end_s=0.0, inside_s=0.0)
    mask = np.repeat(keep, frame)[: y.size]
    return np.ascontiguousarray(y[mask]), {k2: round(v, 3) for k2, v in removed.items()}


def _probe(path: Path, probs: _Collector, *, cap_s: float | None, role: str):
    """Read one file as the pipeline will; record problems. Returns (info dict, y) or (None, None)."""
    info = dict(bytes=None, sample_rate=None, channels=None, duration_s=None)
    try:
        info["bytes"] = path.stat().st_size
    except OSError:
        probs.add("fatal", "missing_file", path, f"{role}: file not found")
        return None, None
    try:
        import soundfile as sf

        si = sf.info(str(path))
        info["sample_rate"], info["channels"] = int(si.samplerate), int(si.channels)
    except Exception:  # noqa: BLE001 - not a libsndfile format: ffmpeg decides below
        pass
    try:
        y = load_audio(path, sr=SR)
    except MissingPackageError as exc:
        probs.add("fatal", "unreadable", path, f"{role}: {exc}")
        return None, None
    except AudioFileError as exc:
        msg = str(exc)
        if "NaN" in msg:
            probs.add("fatal", "nan", path, f"{role}: the audio holds NaN or infinite samples")
        elif "no audio samples" in msg:
            probs.add("fatal", "empty", path, f"{role}: the file holds no audio samples")
        else:
            probs.add("fatal", "unreadable", path,
                      f"{role}: unreadable or corrupt audio file (neither soundfile nor ffmpeg decodes it)")
        return None, None
    info["duration_s"] = round(float(y.size / SR), 4)
    bad = False
    if not np.isfinite(loudness_lufs(y, sr=SR, name=str(path))):
        probs.add("fatal", "silent", path,
                  f"{role}: the audio is silent (integrated loudness -inf LUFS: no 400 ms block above "
                  "the BS.1770 gate of -70 LUFS), so it cannot be loudness-normalised")
        bad = True
    if cap_s is not None and y.size / SR > cap_s:
        probs.add("fatal", "too_long", path,
                  f"{role}: {y.size / SR:.1f} s is longer than the {cap_s:g} s cap (every background is "
                  f"{cap_s:g} s); cut it into shorter utterances")
        bad = True
    return (None if bad else info), y


def _keyword_list(keywords) -> list[str]:
    if keywords is None:
        return list(KEYWORDS)
    if isinstance(keywords, str):
        keywords = keywords.split(",")
    return [str(k).strip().lower() for k in keywords if str(k).strip()]


def _licence_of(row: dict) -> tuple[str, str]:
    lic = (row.get("licence") or "").strip() or UNKNOWN_LICENCE
    att = (row.get("attribution") or "").strip() or UNKNOWN_LICENCE
    return lic, att


def _opt(row: dict, key: str):
    v = (row.get(key) or "").strip()
    return v or None


def _param_path(value, name: str, probs: _Collector, *, kind: str, flag: str):
    """Check a path parameter; returns the absolute Path or None (problem recorded)."""
    if value is None or str(value).strip() == "":
        probs.add("fatal", "parameter", "", f"{name} is not set (pass {flag})")
        return None
    p = _abs(value)
    why = _not_a(p, kind)
    if why:
        what = "folder" if kind == "dir" else "file"
        probs.add("fatal", "parameter", p, f"{name}: {what} {why}")
        return None
    return p


# ----------------------------------------------------------------------------- validation
def _match_table(df, folder: Path, files: list[Path], probs: _Collector, *, what: str, value_col: str,
                 missing_kind: str, missing_text: str):
    """Pair table rows with audio files. Returns list of (path, row dict) for rows with a value."""
    pairs, seen = [], {}
    listed = set()
    for i, row in enumerate(df.to_dict("records"), start=2):  # line 1 is the header
        name = row.get("file", "")
        if not name:
            probs.add("fatal", "table", "", f"{what}, line {i}: empty 'file' cell")
            continue
        p = _abs(name) if os.path.isabs(name) else _abs(folder / name)
        if p in seen:
            probs.add("fatal", "duplicate", p, f"{what}: listed twice (lines {seen[p]} and {i})")
            continue
        seen[p] = i
        listed.add(p)
        why = _not_a(p, "file")
        if why:
            probs.add("fatal", "missing_file", p, f"{what}, line {i}: listed file {why}")
            continue
        if not row.get(value_col, ""):
            probs.add("fatal", missing_kind, p, f"{what}, line {i}: {missing_text}")
            continue
        pairs.append((p, row))
    for p in files:
        if p not in listed:
            probs.add("fatal", missing_kind, p, f"{missing_text}: the file is in the folder but not in the {what} table")
    return pairs


def _validate_speech(speech_dir, texts, probs, scans):
    rows = []
    folder = _param_path(speech_dir, "speech_dir", probs, kind="dir", flag="--speech-dir / SPEECH_DIR")
    table = _param_path(texts, "texts", probs, kind="file", flag="--texts / TEXTS")
    if folder is None or table is None:
        return rows
    files, scan = _scan(folder, probs, role="speech_dir")
    scans.append(scan)
    df = _read_table(table, ("file", "text"), probs, "texts", aliases={"transcript": "text", "path": "file"})
    if df is None:
        return rows
    pairs = _match_table(df, folder, files, probs, what=f"texts ({table.name})", value_col="text",
                         missing_kind="missing_transcript", missing_text="missing transcript")
    ids = _unique_ids([p for p, _ in pairs], folder)
    for (p, row), item_id in zip(pairs, ids):
        if _reference_is_empty(row["text"]):
            probs.add("fatal", "empty_reference", p,
                      f"the transcript {row['text']!r} holds no word after normalisation (tags such as [music], "
                      "fillers such as 'uh' and punctuation are removed before scoring): its WER is undefined and "
                      "the words a model outputs for it would go uncounted; give the words spoken or remove "
                      "the file")
            continue
        info, _ = _probe(p, probs, cap_s=MAX_UTTERANCE_S, role="utterance")
        if info is None:
            continue
        lic, att = _licence_of(row)
        rows.append(dict(file=str(p), package="custom/speech", licence=lic, attribution=att, used=True,
                         item_id=item_id, text=" ".join(row["text"].split()),
                         accent_group=_opt(row, "accent_group"), speaker=_opt(row, "speaker") or "unknown",
                         **info))
    if not files and not pairs:
        probs.add("fatal", "no_items", folder, "no audio file found in the folder")
    return rows


def _validate_kws(kws_dir, kws_labels, keywords, probs, scans):
    rows = []
    folder = _param_path(kws_dir, "kws_dir", probs, kind="dir", flag="--kws-dir / KWS_DIR")
    table = _param_path(kws_labels, "kws_labels", probs, kind="file", flag="--kws-labels / KWS_LABELS")
    if folder is None or table is None:
        return rows
    files, scan = _scan(folder, probs, role="kws_dir")
    scans.append(scan)
    df = _read_table(table, ("file", "label"), probs, "kws_labels", aliases={"word": "label", "path": "file"})
    if df is None:
        return rows
    pairs = _match_table(df, folder, files, probs, what=f"kws_labels ({table.name})", value_col="label",
                         missing_kind="missing_label", missing_text="missing keyword label")
    ids = _unique_ids([p for p, _ in pairs], folder)
    kw = set(keywords)
    for (p, row), item_id in zip(pairs, ids):
        raw = row["label"].strip()
        words = [w for w in (_normalize_label(x) for x in _MULTI.split(raw)) if w]
        if not words:
            probs.add("fatal", "missing_label", p, f"the label {raw!r} holds no word after normalisation "
                                                   "(punctuation is stripped as in KWS answers)")
            continue
        multi = len(words) > 1
        label = raw.lower() if multi else words[0]
        info, _ = _probe(p, probs, cap_s=MAX_UTTERANCE_S, role="keyword clip")
        if info is None:
            continue
        lic, att = _licence_of(row)
        note = ""
        if not multi and label != raw.lower():
            role = "one of the keywords" if label in kw else "not a keyword"
            note = f"label {raw!r} normalised to {label!r}"
            probs.add("warning", "label_normalised", p,
                      f"label {raw!r} is read as {label!r} ({role}): labels are normalised as KWS answers are "
                      "(lower-case, first word, punctuation stripped at its ends)")
        if multi:
            note = "skipped: the label holds several words; the first-word KWS rule scores one word per clip"
            probs.add("warning", "multi_keyword", p, f"label {row['label']!r} holds several words: clip skipped "
                                                     "(the closed-set first-word rule scores one word per clip)")
        rows.append(dict(file=str(p), package="custom/kws", licence=lic, attribution=att, used=not multi,
                         item_id=item_id, label=label, is_target=(label in kw) if not multi else None,
                         accent_group=_opt(row, "accent_group"), speaker=_opt(row, "speaker") or "unknown",
                         note=note, **info))
    used = [r for r in rows if r["used"]]
    if rows and not used:
        probs.add("fatal", "no_items", folder, "no usable keyword clip (every label holds several words)")
    elif not files and not pairs:
        probs.add("fatal", "no_items", folder, "no audio file found in the folder")
    if used and not any(r["is_target"] for r in used):
        probs.add("warning", "no_targets", folder, f"no clip is labelled with one of the keywords {', '.join(keywords)}")
    return rows


def _validate_backgrounds(backgrounds_dir, longest_s, probs, scans):
    rows = []
    folder = _param_path(backgrounds_dir, "backgrounds_dir", probs, kind="dir",
                         flag="--backgrounds-dir / BACKGROUNDS_DIR")
    if folder is None:
        return rows
    files, scan = _scan(folder, probs, role="backgrounds_dir")
    scans.append(scan)
    lic_path = folder / "licences.csv"
    if _not_a(lic_path, "file") and not _not_a(folder / "licenses.csv", "file"):
        lic_path = folder / "licenses.csv"
    meta = {}
    if not _not_a(lic_path, "file"):
        df = _read_table(lic_path, ("file",), probs, "licences", aliases={"license": "licence", "path": "file"})
        if df is not None:
            for row in df.to_dict("records"):
                p = _abs(row["file"]) if os.path.isabs(row["file"]) else _abs(folder / row["file"])
                meta[p] = row
            for p in meta:
                if p not in files:
                    probs.add("warning", "licence_row", p,
                              f"listed in {lic_path.name} but not an audio file of the folder")
    elif files:
        probs.add("warning", "no_licence", folder,
                  f"no licences.csv: every background's licence is recorded as '{UNKNOWN_LICENCE}'")
    ids = _unique_ids(files, folder, reserved=("clean",))
    for p, bg_id in zip(files, ids):
        row = meta.get(p, {})
        if meta and p not in meta:
            probs.add("warning", "no_licence", p, f"not in {lic_path.name}: licence recorded as '{UNKNOWN_LICENCE}'")
        cat = (row.get("category") or "").strip().lower()
        if cat and cat not in CATEGORIES:
            probs.add("fatal", "category", p, f"category {row.get('category')!r} in {lic_path.name} is not one of "
                                              f"{', '.join(CATEGORIES)}")
            continue
        info, y = _probe(p, probs, cap_s=None, role="background")
        if info is None:
            continue
        y, removed = strip_digital_silence(y)
        note, prepared_s = "", None
        if any(removed.values()):
            prepared_s = round(y.size / SR, 4)
            note = (f"digital silence shortened: {removed['start_s']:.2f} s removed at the start, {removed['end_s']:.2f} s "
                    f"at the end, {removed['inside_s']:.2f} s inside (runs longer than {MAX_SILENT_GAP_S:g} s); "
                    f"{prepared_s:.2f} s remain")
            probs.add("warning", "digital_silence", p,
                      note + ": a stimulus on such a stretch would hear no background, so stage 1 writes "
                             f"this trimmed copy to raw/backgrounds/{bg_id}.wav and stage 3 uses it")
        source = "licences.csv"
        if not cat:
            pm = _peak_to_median_db(y)
            cat = "transient" if pm >= TRANSIENT_PEAK_DB else "stationary"
            source = f"inferred (peak-to-median level {pm:.1f} dB)"
        desc = (row.get("description") or "").strip() or f"user background {p.name}"
        if not source.startswith("licences"):
            desc += f" (category inferred: {cat})"
        lic, att = _licence_of(row)
        rows.append(dict(file=str(p), package="custom/backgrounds", licence=lic, attribution=att, used=True,
                         bg_id=bg_id, category=cat, category_source=source, description=desc, note=note,
                         prepared_duration_s=prepared_s, **info))
    if not files:
        probs.add("fatal", "no_items", folder, "no background recording found")
    elif 0 < len(files) < MIN_BACKGROUNDS:
        probs.add("warning", "few_backgrounds", folder,
                  f"only {len(files)} backgrounds (fewer than {MIN_BACKGROUNDS}): the descriptor–degradation "
                  "Spearman correlations will be weak and their intervals wide")
    if longest_s:
        for r in rows:
            dur = r["prepared_duration_s"] or r["duration_s"]
            if dur < longest_s:
                trimmed = " (after shortening its digital silence)" if r["prepared_duration_s"] else ""
                probs.add("warning", "bg_looped", r["file"],
                          f"background of {dur:.1f} s{trimmed} is shorter than the longest utterance "
                          f"({longest_s:.1f} s): it is looped end to end to {MAX_UTTERANCE_S:g} s, so longer "
                          "utterances hear it repeat")
    return rows


def validate_inputs(*, speech_dir, texts, kws_dir, kws_labels, backgrounds_dir, keywords=KEYWORDS
                    ) -> ValidationReport:
    """Check the custom profile's folders and tables; find every problem, write nothing.

    Every audio file is decoded once, as the pipeline will decode it (16 kHz mono float32, see
    :func:`aiplib.audio.load_audio`), so a file that passes here can be read by every stage.

    Parameters
    ----------
    speech_dir : str or Path
        Folder of utterances (searched recursively for :data:`AUDIO_EXTENSIONS`).
    texts : str or Path
        CSV or TSV with ``file, text`` and optional ``accent_group, speaker, licence, attribution``.
    kws_dir : str or Path
        Folder of keyword clips.
    kws_labels : str or Path
        CSV or TSV with ``file, label`` and optional ``speaker, accent_group, licence, attribution``.
    backgrounds_dir : str or Path
        Folder of backgrounds, optionally with ``licences.csv`` (``file, licence, attribution``
        and optional ``category, description``).
    keywords : str or sequence of str
        Closed keyword set, a list or a comma-separated string (default :data:`KEYWORDS`).

    Returns
    -------
    ValidationReport
        ``report.ok`` is False when any problem is fatal; ``report.summary()`` prints them all.

    Notes
    -----
    Fatal: a parameter not set or a folder/table not found, a (sub)folder that cannot be scanned,
    a table without its required columns, an audio file without a transcript (or label), a
    transcript or label empty after normalisation, a row whose file is missing, a duplicate row,
    an unreadable or corrupt file, no samples, NaN or infinite samples, silence (−inf LUFS), an
    utterance or clip longer than :data:`MAX_UTTERANCE_S`, a category not in :data:`CATEGORIES`,
    no usable items or no backgrounds. Warnings: backgrounds shorter than the longest utterance
    (looped), backgrounds with long runs of digital silence (trimmed copy, see
    :func:`strip_digital_silence`), fewer than :data:`MIN_BACKGROUNDS` backgrounds, multi-word labels (skipped),
    labels changed by normalisation (``"Yes!"`` → ``yes``), missing licences, a keyword list other
    than the default, no target clip, a symbolic-link loop.
    """
    probs = _Collector()
    kw = _keyword_list(keywords)
    if not kw:
        probs.add("fatal", "keywords", "", "the keyword list is empty")
    elif any(_MULTI.search(k) for k in kw):
        probs.add("fatal", "keywords", "", f"keywords must be single words, got {kw}")
    elif tuple(kw) != KEYWORDS:
        probs.add("warning", "keywords", "",
                  "the keyword list differs from the paper's ten: it sets is_target, travels with the KWS item "
                  "bank (itembanks/kws.json) and is named by the KWS prompt and used by the scoring, so the "
                  "KWS results are not comparable with the paper's")
    scans: list[dict] = []
    speech = _validate_speech(speech_dir, texts, probs, scans)
    kws = _validate_kws(kws_dir, kws_labels, kw, probs, scans)
    longest = max([r["duration_s"] for r in speech] + [r["duration_s"] for r in kws if r["used"]], default=0.0)
    bgs = _validate_backgrounds(backgrounds_dir, longest, probs, scans)
    params = dict(speech_dir=speech_dir, texts=texts, kws_dir=kws_dir, kws_labels=kws_labels,
                  backgrounds_dir=backgrounds_dir)
    params = {k: (str(_abs(v)) if v not in (None, "") else "") for k, v in params.items()}
    params["keywords"] = kw
    return ValidationReport(problems=probs.sorted(), speech=speech, kws=kws, backgrounds=bgs, params=params,
                            scans=scans)


# ----------------------------------------------------------------------------- stage 1


def _inventory_frame(report: ValidationReport):
    import pandas as pd

    rows = []
    for name in ("texts", "kws_labels"):
        p = report.params.get(name)
        if p:
            rows.append(dict(file=p, package="custom/metadata", licence="", attribution="", used=True,
                             note=f"the {name} table", bytes=Path(p).stat().st_size))
    lic = Path(report.params["backgrounds_dir"]) / "licences.csv"
    if lic.is_file():
        rows.append(dict(file=str(lic), package="custom/metadata", licence="", attribution="", used=True,
                         note="background licences", bytes=lic.stat().st_size))
    rows += report.speech + report.kws + report.backgrounds
    df = pd.DataFrame(rows)
    for c in INVENTORY_COLUMNS:
        if c not in df.columns:
            df[c] = None
    df["sha256"] = [sha256_file(f) for f in df["file"]]
    return df[INVENTORY_COLUMNS]


def gather_raw(ws, *, speech_dir, texts, kws_dir, kws_labels, backgrounds_dir, keywords=KEYWORDS):
    """Stage 1 of ``custom``: validate the user's folders, then record them in ``raw/inventory.csv``.

    Nothing is written (no workspace folder is created) unless validation finds no fatal problem.
    The audio is **not copied**: the inventory points at the user's files (absolute paths) with
    size and SHA-256; stage 2 decodes them into the workspace.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        Workspace of the ``custom`` profile; it may not exist yet (``workspace("custom",
        create=False)``).
    speech_dir, texts, kws_dir, kws_labels, backgrounds_dir, keywords
        See :func:`validate_inputs`.

    Returns
    -------
    pandas.DataFrame
        ``raw/inventory.csv``, columns :data:`INVENTORY_COLUMNS`: one row per audio file (and
        per table), ``package`` naming its role (``custom/speech``, ``custom/kws``,
        ``custom/backgrounds``, ``custom/metadata``).

    Raises
    ------
    ValidationError
        If any problem is fatal; ``exc.problems`` lists every problem found (fatal first, then
        warnings), the message has one line per problem.

    Notes
    -----
    Backgrounds with long runs of digital silence are the exception to "no copy": their trimmed
    16 kHz copy is written to ``raw/backgrounds/<bg_id>.wav`` (see :func:`strip_digital_silence`).
    Also writes ``raw/custom_inputs.json`` (the resolved parameters, read by stages 2 and 3) and
    ``raw/validation.csv`` (every problem, warnings included). Warnings are also issued as one
    :class:`UserWarning`.
    """
    report = validate_inputs(speech_dir=speech_dir, texts=texts, kws_dir=kws_dir, kws_labels=kws_labels,
                             backgrounds_dir=backgrounds_dir, keywords=keywords)
    report.raise_if_fatal()
    inv = _inventory_frame(report)  # reads the user's files only: still nothing written
    ws.ensure()
    for i in np.flatnonzero(inv["prepared_duration_s"].notna().to_numpy()):
        y, _ = strip_digital_silence(load_audio(inv.at[i, "file"], sr=SR))
        out = write_wav(ws.raw / "backgrounds" / f"{inv.at[i, 'bg_id']}.wav", y)
        inv.at[i, "prepared"] = ws.rel(out)
    tmp = ws.raw / "inventory.csv.part"
    inv.to_csv(tmp, index=False)
    tmp.replace(ws.raw / "inventory.csv")
    report.to_frame().to_csv(ws.raw / "validation.csv", index=False)
    meta = dict(report.params, max_utterance_s=MAX_UTTERANCE_S, sample_rate_hz=SR,
                validated_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                n_speech=len(report.speech), n_kws=sum(r["used"] for r in report.kws),
                n_kws_skipped=sum(not r["used"] for r in report.kws), n_backgrounds=len(report.backgrounds),
                n_warnings=len(report.warnings))
    (ws.raw / "custom_inputs.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    if report.warnings:
        warnings.warn("custom inputs: " + "; ".join(str(p) for p in report.warnings), UserWarning, stacklevel=2)
    return inv


# ----------------------------------------------------------------------------- stage 2
def _read_inventory(ws):
    import pandas as pd

    path = ws.raw / "inventory.csv"
    if not path.is_file():
        raise AiplibError(f"{path} is missing: run stage 1 (aiplib.corpora.custom.gather_raw) first")
    inv = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in INVENTORY_COLUMNS if c not in inv.columns]
    if missing or not (inv["package"].str.startswith("custom/")).any():
        raise AiplibError(f"{path} is not a custom-profile inventory (lacks {missing or 'custom rows'}); "
                          "re-run stage 1 with PROFILE=custom")
    return inv


def _check_unchanged(inv) -> None:
    changed = []
    for r in inv.itertuples():
        p = Path(r.file)
        if not p.is_file():
            changed.append(f"{p} (gone)")
        elif str(p.stat().st_size) != str(r.bytes) or sha256_file(p) != r.sha256:
            changed.append(f"{p} (changed)")
    if changed:
        raise AiplibError("these input files changed since stage 1; re-run stage 1 to validate them again:\n  "
                          + "\n  ".join(changed))


def _select(idx: np.ndarray, n: int | None, rng, strata=None) -> np.ndarray:
    """Seeded choice of ``n`` of ``idx`` (all when ``n`` is None), kept in original order.

    With ``strata`` (bool per element) both groups keep at least one member when n ≥ 2.
    """
    if n is None or n >= idx.size:
        return idx
    if strata is None or n < 2 or strata.all() or not strata.any():
        return np.sort(rng.choice(idx, size=n, replace=False))
    a, b = idx[strata], idx[~strata]
    na = int(np.clip(round(n * a.size / idx.size), 1, n - 1))
    na, nb = min(na, a.size), n - min(na, a.size)
    nb = min(nb, b.size)
    return np.sort(np.concatenate([rng.choice(a, size=na, replace=False), rng.choice(b, size=nb, replace=False)]))






def _stage1_keywords(ws) -> list[str]:
    """The keyword set stage 1 validated (``keywords`` of ``raw/custom_inputs.json``; default set if absent)."""
    p = ws.raw / "custom_inputs.json"
    kw = json.loads(p.read_text(encoding="utf-8")).get("keywords") if p.is_file() else None
    return _keyword_list(kw)


def _none(v):
    return None if v in ("", None) or (isinstance(v, float) and np.isnan(v)) else v


def build_item_banks(ws, *, seed: int = 20240917, overwrite: bool = False, max_items: int | None = None):
    """Stage 2 of ``custom``: decode the validated files into the item banks.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        Stage 1 (:func:`gather_raw`) must have been run.
    seed : int
        Seed of the item choice when ``max_items`` is set.
    overwrite : bool
        Rebuild even when both item banks are up to date. Without it they are read back only
        when ``itembanks/custom_build.json`` records the current ``raw/inventory.csv`` (its SHA-256:
        every user file's SHA-256, transcript and label), ``seed`` and ``max_items``; otherwise
        they are rebuilt, with a warning naming what changed (an added utterance, a corrected
        transcript, a replaced clip all change the inventory).
    max_items : int > 0, optional
        At most this many items per family (ASR, KWS), a seeded choice; the KWS choice keeps at
        least one target and one non-target clip when both exist and ``max_items`` ≥ 2. None =
        every usable item.

    Returns
    -------
    dict of str → pandas.DataFrame
        ``{"asr": …, "kws": …}`` with the fields of ``docs/ARCHITECTURE.md``: ``item_id``,
        ``path`` (``itembanks/audio/<family>/<item_id>.wav``, 16 kHz mono float32), ``source_file``
        (the user's file, absolute), ``source``, ``licence``, ``attribution``, ``duration_s`` (s),
        ``speaker``, ``accent_group`` (None when the table has no ``accent_group``),
        ``synthetic`` (False), and ``text`` (ASR) or ``label``, ``is_target`` (KWS). Multi-word
        KWS clips are not in the bank.

    Raises
    ------
    AiplibError
        If stage 1 has not been run, or an input file changed since stage 1.
    AiplibParameterError
        If ``max_items`` is not a positive integer.
    """
    from ..errors import AiplibParameterError

    if max_items is not None and (isinstance(max_items, bool) or int(max_items) != max_items or max_items < 1):
        raise AiplibParameterError(f"max_items must be a positive integer or None, got {max_items!r}")
    inv = _read_inventory(ws)
    inv_sha = sha256_file(ws.raw / "inventory.csv")
    paths = {f: ws.item_bank(f) for f in ("asr", "kws")}
    build_meta = ws.itembanks / "custom_build.json"
    want = dict(inventory_sha256=inv_sha, seed=int(seed), max_items=None if max_items is None else int(max_items))
    if not overwrite and all(p.is_file() for p in paths.values()):
        old = json.loads(build_meta.read_text()) if build_meta.is_file() else {}
        if all(old.get(k) == v for k, v in want.items()):
            return {f: pd.DataFrame(read_jsonl(p)) for f, p in paths.items()}
        changed = [k for k, v in want.items() if old.get(k) != v]
        warnings.warn(f"item banks rebuilt: {', '.join(changed)} changed since they were built "
                      "(stage 1 saw other inputs, or other sizes were asked for)", stacklevel=2)
    used = inv[(inv["package"].isin(["custom/speech", "custom/kws"])) & (inv["used"].str.lower() == "true")]
    _check_unchanged(used)
    ws.ensure()
    rng_asr, rng_kws = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    banks = {}
    for fam, pkg, rng in (("asr", "custom/speech", rng_asr), ("kws", "custom/kws", rng_kws)):
        sub = used[used["package"] == pkg].reset_index(drop=True)
        strata = (sub["is_target"].str.lower() == "true").to_numpy() if fam == "kws" else None
        keep = _select(np.arange(len(sub)), max_items, rng, strata)
        rows = []
        for r in sub.iloc[keep].to_dict("records"):
            y = load_audio(r["file"], sr=SR)
            out = write_wav(ws.itembanks / "audio" / fam / f"{r['item_id']}.wav", y)
            item = dict(item_id=r["item_id"], path=ws.rel(out), source_file=r["file"], source=SOURCE,
                        licence=r["licence"], attribution=r["attribution"], duration_s=float(y.size / SR),
                        speaker=r["speaker"] or "unknown", accent_group=_none(r["accent_group"]), synthetic=False)
            if fam == "asr":
                item["text"] = r["text"]
            else:
                item.update(label=r["label"], is_target=r["is_target"].lower() == "true")
            rows.append(item)
        # the keyword set validated in stage 1 travels with the KWS item bank (prompts and scoring read it)
        write_item_bank(ws, fam, rows, keywords=_stage1_keywords(ws) if fam == "kws" else None)
        banks[fam] = rows
    build_meta.write_text(json.dumps(dict(want, n_asr=len(banks["asr"]), n_kws=len(banks["kws"])), indent=2))
    return {f: pd.DataFrame(read_jsonl(p)) for f, p in paths.items()}


# ----------------------------------------------------------------------------- stage 3 input
def battery_specs(ws) -> list[dict]:
    """The background specs of ``custom`` (input of :func:`aiplib.backgrounds.curate_battery`).

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        Stage 1 must have been run.

    Returns
    -------
    list of dict
        One spec per background file (``docs/ARCHITECTURE.md`` format): ``bg_id`` from the file
        name, ``category`` from ``licences.csv`` or inferred (``stationary``/``transient``, see
        module notes), ``description`` (from ``licences.csv``, else the file name),
        ``sources = [absolute path]`` (the user's file, or stage 1's copy without digital silence
        under ``raw/backgrounds/``), ``combine = "concat"``, ``source_package``
        ``"custom (user-supplied)"``, ``licence`` and ``attribution`` from ``licences.csv``
        (else :data:`UNKNOWN_LICENCE`), ``synthetic = False``.

    Raises
    ------
    AiplibError
        If stage 1 has not been run, or a background changed since stage 1.
    """
    inv = _read_inventory(ws)
    bgs = inv[inv["package"] == "custom/backgrounds"]
    _check_unchanged(bgs)
    for r in bgs.to_dict("records"):
        if r["prepared"] and not ws.path(r["prepared"]).is_file():
            raise AiplibError(f"{ws.path(r['prepared'])} is missing: re-run stage 1")
    return [dict(bg_id=r["bg_id"], category=r["category"], description=r["description"],
                 sources=[str(ws.path(r["prepared"])) if r["prepared"] else r["file"]],
                 combine="concat", source_package=SOURCE, licence=r["licence"], attribution=r["attribution"],
                 synthetic=False) for r in bgs.to_dict("records")]


# ----------------------------------------------------------------------------- CLI
def main(argv=None) -> int:
    """Command line: validate the custom inputs only, print every problem.

    ``python -m aiplib.corpora.custom --speech-dir DIR --texts FILE --kws-dir DIR --kws-labels FILE
    --backgrounds-dir DIR [--keywords yes,no,…]``

    Returns
    -------
    int
        Exit status: 1 when any problem is fatal, else 0 (2 for a usage error, from argparse).
    """
    ap = argparse.ArgumentParser(prog="python -m aiplib.corpora.custom",
                                 description="Validate the inputs of the custom profile (writes nothing).")
    ap.add_argument("--speech-dir", default="", help="folder of utterances")
    ap.add_argument("--texts", default="", help="CSV/TSV: file,text[,accent_group,speaker,licence,attribution]")
    ap.add_argument("--kws-dir", default="", help="folder of keyword clips")
    ap.add_argument("--kws-labels", default="", help="CSV/TSV: file,label[,speaker,accent_group,licence,attribution]")
    ap.add_argument("--backgrounds-dir", default="", help="folder of backgrounds (+ optional licences.csv)")
    ap.add_argument("--keywords", default=",".join(KEYWORDS), help="comma-separated closed keyword set")
    a = ap.parse_args(argv)
    report = validate_inputs(speech_dir=a.speech_dir, texts=a.texts, kws_dir=a.kws_dir, kws_labels=a.kws_labels,
                             backgrounds_dir=a.backgrounds_dir, keywords=a.keywords)
    print(report.summary())
    print("FAILED: fix the fatal problems above" if not report.ok else "OK: the inputs can be used")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
