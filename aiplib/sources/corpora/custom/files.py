"""Folder scan, CSV/TSV tables, item ids and the one decode of each file for
:mod:`aiplib.sources.corpora.custom.validate`; each problem recorded, never raised."""

from __future__ import annotations

import contextlib
import csv
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import soundfile as sf

from aiplib.core.errors import AudioFileError, MissingPackageError
from aiplib.io.audio import MIN_LOUDNESS_S, SR, load_audio, loudness_lufs, wav_data_shortfall
from aiplib.sources.corpora.custom.report import Collector

#: File name extensions treated as audio when the folders are scanned (case-insensitive).
AUDIO_EXTENSIONS = frozenset(
    {
        ".wav",
        ".wave",
        ".flac",
        ".ogg",
        ".oga",
        ".opus",
        ".mp3",
        ".m4a",
        ".mp4",
        ".aac",
        ".wma",
        ".aif",
        ".aiff",
        ".aifc",
        ".au",
        ".snd",
        ".caf",
        ".w64",
        ".rf64",
        ".sph",
        ".nist",
        ".webm",
        ".mka",
        ".amr",
        ".ac3",
        ".g722",
        ".spx",
    }
)

#: Characters not allowed in an item id (each run becomes ``_``).
_ID_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def absolute_path(p) -> Path:
    """Absolute, normalised path without resolving symlinks (a linked file keeps its own name)."""
    return Path(os.path.normpath(os.path.abspath(os.path.expanduser(str(p)))))


def scan_audio_files(folder) -> list[Path]:
    """The audio files stage 1 finds under ``folder`` (:func:`scan`), sorted absolute paths; walk
    problems are left to :func:`aiplib.sources.corpora.custom.validate_inputs`."""
    return scan(absolute_path(folder), Collector())[0]


def scan(folder: Path, probs: Collector, *, role: str = "") -> tuple[list[Path], dict]:
    """Audio files under ``folder`` (recursive, sorted, hidden entries skipped), recording every
    walk error: an unlistable folder is a fatal ``unreadable_folder``, a link loop a
    ``symlink_loop`` warning.

    Returns
    -------
    files : list of Path
        Absolute, sorted.
    scan : dict
        ``role``, ``folder``, ``n_files``, ``n_folders``, ``per_folder`` (relative folder → audio
        files directly in it, ``"."`` for ``folder``), ``errors``.
    """
    out = []
    errors = []
    per_folder = {}
    seen = set()

    def onerror(exc: OSError) -> None:
        """Record a folder that cannot be listed as a fatal ``unreadable_folder``."""
        where = exc.filename or str(folder)
        errors.append(str(where))
        probs.add(
            "fatal",
            "unreadable_folder",
            where,
            f"{role}: this folder cannot be scanned ({exc.strerror or exc}), so its files would be "
            "skipped; make it readable (and listable) by this user, or move it out of the folder",
        )

    for root, dirs, files in os.walk(folder, onerror=onerror, followlinks=True):
        try:
            st = os.stat(root)
        except OSError as exc:  # vanished or unreadable between listing and visiting
            onerror(exc)
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs[:] = []
            probs.add(
                "warning",
                "symlink_loop",
                root,
                f"{role}: a symbolic link leads back to a folder "
                "already scanned; not scanned twice",
            )
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found = [
            absolute_path(Path(root) / n)
            for n in sorted(files)
            if not n.startswith(".") and Path(n).suffix.lower() in AUDIO_EXTENSIONS
        ]
        per_folder[Path(os.path.relpath(root, folder)).as_posix()] = len(found)
        out += found
    scan = dict(
        role=role,
        folder=str(folder),
        n_files=len(out),
        n_folders=len(per_folder),
        per_folder=per_folder,
        errors=errors,
    )
    return sorted(out), scan


def licence_table(folder) -> Path | None:
    """The licence table of a backgrounds folder: ``licences.csv``, else ``licenses.csv``; None
    without either."""
    for name in ("licences.csv", "licenses.csv"):
        path = Path(folder) / name
        if path.is_file():
            return path
    return None


def _not_a(p: Path, kind: str) -> str:
    """Why ``p`` is not an existing file (``kind="file"``) or folder (``"dir"``), "" when it is;
    never raises."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return "not found"
    except OSError as exc:
        return f"cannot be reached ({exc.strerror or exc})"
    if kind == "dir":
        if stat.S_ISDIR(st.st_mode):
            return ""
        return "not a folder"
    if stat.S_ISREG(st.st_mode):
        return ""
    return "not a regular file"


def _safe_id(text: str) -> str:
    """``text`` as an item id: runs of characters other than ``A-Za-z0-9._-`` become one ``_``."""
    s = _ID_BAD.sub("_", text).strip("._-")
    s = re.sub(r"_+", "_", s)  # "__" separates the parts of a stimulus id
    return s or "item"


def unique_ids(paths: list[Path], base: Path, reserved=()) -> list[str]:
    """Ids from the path relative to ``base`` without extension; clashes get the extension, then a
    number."""
    ids = []
    seen = set(reserved)
    for p in paths:
        rel = p.relative_to(base) if p.is_relative_to(base) else Path(p.name)
        stem = _safe_id(rel.with_suffix("").as_posix().replace("/", "-"))
        cand = stem if stem not in seen else f"{stem}_{p.suffix.lstrip('.').lower() or 'x'}"
        k = 2
        while cand in seen:
            cand = f"{stem}-{k}"
            k += 1
        seen.add(cand)
        ids.append(cand)
    return ids


def _separator(path: Path, raw: str) -> str:
    """The column separator of a table: tab for ``.tsv``/``.tab``, else the one of its first line
    (comma, tab or semicolon; comma when it cannot be told)."""
    if path.suffix.lower() in (".tsv", ".tab"):
        return "\t"
    sep = ","
    if raw.strip():
        with contextlib.suppress(csv.Error):
            sep = csv.Sniffer().sniff(raw.splitlines()[0], delimiters=",\t;").delimiter
    return sep


def read_table(path: Path, required: tuple, probs: Collector, what: str, aliases=None):
    """Read the CSV/TSV table ``path`` (a file checked by the caller) with string cells.

    Column names are stripped and lower-cased; ``aliases`` (dict other name → column) renames a
    column the table lacks; every cell is stripped. A fatal ``table`` problem is recorded in
    ``probs`` when the file is not UTF-8 text, cannot be parsed or lacks a ``required`` column.

    Returns
    -------
    pandas.DataFrame or None
        The table (str cells), None when a problem was recorded; nothing is raised.
    """
    aliases = aliases or {}
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        probs.add("fatal", "table", path, f"{what} table cannot be read as UTF-8 text ({exc})")
        return None
    sep = _separator(path, raw)
    try:
        df = pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            encoding="utf-8-sig",
            skipinitialspace=True,
        )
    except Exception as exc:  # noqa: BLE001 - any parser error is a table problem
        probs.add("fatal", "table", path, f"{what} table cannot be parsed ({exc})")
        return None
    df.columns = [str(c).strip().lower() for c in df.columns]
    df = df.rename(
        columns={a: c for a, c in aliases.items() if a in df.columns and c not in df.columns}
    )
    missing = [c for c in required if c not in df.columns]
    if missing:
        probs.add(
            "fatal",
            "table",
            path,
            f"{what} table lacks the column(s) {', '.join(missing)} "
            f"(it has {', '.join(df.columns) or 'none'}; separator {sep!r})",
        )
        return None
    for c in df.columns:
        df[c] = df[c].astype(str).str.strip()
    return df


def _cancelling_channels(path: Path, channels) -> str:
    """``"channel 1 -20.3 dBFS RMS, channel 2 …"`` when some channel of a multichannel file is not
    silent, else ``""``."""
    if not channels or channels < 2:
        return ""
    try:
        data, _ = sf.read(str(path), dtype="float64", always_2d=True)
    except Exception:  # noqa: BLE001 - not readable by soundfile: no per-channel levels
        return ""
    rms = np.sqrt(np.mean(data**2, axis=0))
    if not np.any(rms > 10 ** (-70 / 20)):
        return ""
    return ", ".join(
        f"channel {i + 1} {20 * np.log10(r):.1f} dBFS RMS" if r > 0 else f"channel {i + 1} silent"
        for i, r in enumerate(rms)
    )


def _check_truncated(path: Path, probs: Collector, role: str) -> None:
    """Record a fatal ``truncated`` problem when ``path`` is a WAV file whose data chunk holds fewer
    bytes than its header declares (:func:`aiplib.io.audio.wav_data_shortfall`)."""
    try:
        short = wav_data_shortfall(path)
    except AudioFileError:  # unreadable: the decode reports it
        return
    if short is None:
        return
    lost = "the missing words would count as recogniser deletions"
    if role == "background":
        lost = "the background would be looped from what is left"
    probs.add(
        "fatal",
        "truncated",
        path,
        f"{role}: the WAV header declares {short['declared_s']:.2f} s of audio but only "
        f"{short['present_s']:.2f} s are in the file ({short['present_bytes']} of "
        f"{short['declared_bytes']} bytes of its data chunk): the file was cut short (an "
        f"interrupted copy or download?) and {lost}; give the complete file",
    )


def probe(path: Path, probs: Collector, *, cap_s: float | None, role: str):
    """Read one file as the pipeline will (16 kHz mono float32); record its problems.

    Fatal problems recorded: ``missing_file``, ``empty`` (0 bytes, or no samples), ``unreadable``,
    ``truncated`` (a WAV data chunk shorter than its header says),
    ``nan``, ``too_short`` (shorter than the 0.4 s ITU-R BS.1770 gating block pyloudnorm needs,
    :data:`aiplib.io.audio.MIN_LOUDNESS_S`), ``silent`` (``channels_cancel`` for anti-phase channels
    whose mono mix is silent) and ``too_long`` (longer than ``cap_s``, s).

    Returns
    -------
    (info, y) : dict, np.ndarray [shape=(n,)] float32 at 16 kHz
        ``info`` is None when a fatal problem was recorded; ``(None, None)`` when the file could
        not be decoded.
    """
    info = dict(bytes=None, sample_rate=None, channels=None, duration_s=None)
    try:
        info["bytes"] = path.stat().st_size
    except OSError:
        probs.add("fatal", "missing_file", path, f"{role}: file not found")
        return None, None
    if info["bytes"] == 0:
        probs.add("fatal", "empty", path, f"{role}: empty file (0 bytes)")
        return None, None
    with contextlib.suppress(Exception):  # not a libsndfile format: ffmpeg decides below
        si = sf.info(str(path))
        info["sample_rate"] = int(si.samplerate)
        info["channels"] = int(si.channels)
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
            probs.add(
                "fatal",
                "unreadable",
                path,
                f"{role}: unreadable or corrupt audio file "
                "(neither soundfile nor ffmpeg decodes it)",
            )
        return None, None
    info["duration_s"] = round(float(y.size / SR), 4)
    n_problems = len(probs)  # each problem below is fatal
    _check_truncated(path, probs, role)
    if y.size < MIN_LOUDNESS_S * SR:  # pyloudnorm's own test (util.valid_audio)
        if role == "background":
            what = (
                f"looped to fill a stimulus it would repeat every {y.size / SR:.3f} s, "
                "a buzz rather than a background"
            )
        else:
            what = "it cannot be loudness-normalised: the mixer would fail on it at stage 6 or 7"
        probs.add(
            "fatal",
            "too_short",
            path,
            f"{role}: {y.size / SR:.3f} s ({y.size} samples at {SR} Hz) is shorter than the "
            f"{MIN_LOUDNESS_S:g} s ITU-R BS.1770 gating block, so its loudness cannot be measured "
            f"({what}); is the file truncated? "
            f"Give a recording of at least {MIN_LOUDNESS_S:g} s or remove it",
        )
    if not np.isfinite(loudness_lufs(y, sr=SR, name=str(path))):
        cancel = _cancelling_channels(path, info["channels"])
        if cancel:
            probs.add(
                "fatal",
                "channels_cancel",
                path,
                f"{role}: the channels cancel when averaged to mono ({cancel}; their mean is "
                "silent, -inf LUFS): one channel is polarity-inverted (anti-phase); give one "
                "channel, or the channels with the same polarity",
            )
        else:
            probs.add(
                "fatal",
                "silent",
                path,
                f"{role}: the audio is silent (integrated loudness -inf LUFS: no 400 ms block "
                "above the BS.1770 gate of -70 LUFS), so it cannot be loudness-normalised",
            )
    if cap_s is not None and y.size / SR > cap_s:
        probs.add(
            "fatal",
            "too_long",
            path,
            f"{role}: {y.size / SR:.1f} s is longer than the {cap_s:g} s cap (every background is "
            f"{cap_s:g} s); cut it into shorter utterances",
        )
    return (None if len(probs) > n_problems else info), y


def param_path(value, name: str, probs: Collector, *, kind: str = "file"):
    """Check the path parameter ``name`` (flag ``--name`` / ``NAME``): set, and an existing file
    (``kind="file"``) or folder (``kind="dir"``).

    Returns
    -------
    Path or None
        The absolute path; None when it is not set or not usable (a fatal ``parameter`` problem
        recorded in ``probs``, nothing raised).
    """
    if value is None or str(value).strip() == "":
        probs.add(
            "fatal",
            "parameter",
            "",
            f"{name} is not set (pass --{name.replace('_', '-')} / {name.upper()})",
        )
        return None
    p = absolute_path(value)
    why = _not_a(p, kind)
    if why:
        what = "folder" if kind == "dir" else "file"
        probs.add("fatal", "parameter", p, f"{name}: {what} {why}")
        return None
    return p


def match_table(
    df,
    folder: Path,
    files: list[Path],
    probs: Collector,
    *,
    what: str,
    value_col: str,
    missing_kind: str,
    missing_text: str,
):
    """Pair the rows of table ``df`` (a ``file`` column, relative to ``folder`` or absolute) with
    the audio ``files`` of the folder.

    Fatal problems recorded in ``probs``: an empty ``file`` cell, a file listed twice, a listed file
    not found, a row without ``value_col`` and a file of the folder the table does not list
    (``missing_kind`` / ``missing_text``); ``what`` names the table in messages.

    Returns
    -------
    list of (Path, dict)
        The absolute path and row of each usable row, in table order.
    """
    pairs = []
    seen = {}
    for i, row in enumerate(df.to_dict("records"), start=2):  # line 1 is the header
        name = row.get("file", "")
        if not name:
            probs.add("fatal", "table", "", f"{what}, line {i}: empty 'file' cell")
            continue
        p = absolute_path(folder / name)  # an absolute name replaces folder
        if p in seen:
            probs.add("fatal", "duplicate", p, f"{what}: listed twice (lines {seen[p]} and {i})")
            continue
        seen[p] = i
        why = _not_a(p, "file")
        if why:
            probs.add("fatal", "missing_file", p, f"{what}, line {i}: listed file {why}")
            continue
        if not row.get(value_col, ""):
            probs.add("fatal", missing_kind, p, f"{what}, line {i}: {missing_text}")
            continue
        pairs.append((p, row))
    for p in files:
        if p not in seen:
            probs.add(
                "fatal",
                missing_kind,
                p,
                f"{missing_text}: the file is in the folder but not in the {what} table",
            )
    return pairs
