"""The nine acoustic descriptors of a background (:data:`DESCRIPTORS`), as the authors compute them.

Eight are librosa [1]_ short-time features, one the Silero VAD [2]_ speech fraction
(:mod:`aiplib.battery.vad`), computed as the authors' ``extract_acoustic_descriptors``
(``scripts/generate_results_new_2.py``; VAD settings of ``scripts/vad_classify_bg.py``), so Table 2
and Figures 2–3 correlate the same numbers in every profile. :func:`descriptor_table` writes
``descriptors/acoustic_descriptors.csv``.

Framing (:data:`FRAME`): librosa's defaults at 16 kHz, 2048-sample Hann frames, hop 512, centred,
so ``n`` samples give ``1 + n // 512`` frames; each series is summarised by its mean over all
frames. Silent frames are included, as in the authors' code (a half-silent background has about half
the centroid of its sounding part; ``silent_frame_share`` reports their share). Units and
definitions:
:data:`DESCRIPTOR_INFO`.

References
----------
.. [1] McFee, B. et al. (2015). librosa: Audio and music signal analysis in Python. Proc. 14th
   Python in Science Conf., 18–25. https://librosa.org (version 0.11 used here).
.. [2] Silero Team (2021). Silero VAD: pre-trained enterprise-grade Voice Activity Detector (VAD),
   Number Detector and Language Classifier. https://github.com/snakers4/silero-vad
.. [3] Böck, S. & Widmer, G. (2013). Maximum filter vibrato suppression for onset detection. Proc.
   DAFx-13 (librosa's ``onset_strength``: half-wave-rectified log-mel spectral flux).
.. [4] Jiang, D.-N. et al. (2002). Music type classification by spectral contrast feature. Proc.
   IEEE ICME, 113–116.
.. [5] Dubnov, S. (2004). Generalization of spectral flatness measure for non-Gaussian linear
   processes. IEEE Signal Processing Letters 11(8), 698–701.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.battery.vad import VAD_SETTINGS, load_vad_model, vad_speech_fraction
from aiplib.core.errors import AiplibParameterError, AudioFileError
from aiplib.core.hashing import file_sha256
from aiplib.core.progress import track
from aiplib.core.versions import package_versions
from aiplib.io.audio import SR, load_audio, valid_audio
from aiplib.io.formats import (
    DESCRIPTOR_TABLE_COLUMNS as TABLE_COLUMNS,
)  # columns of acoustic_descriptors.csv
from aiplib.io.formats import (
    DESCRIPTORS,
    read_battery_csv,
    read_descriptor_table,
    write_descriptor_table,
    write_json_atomic,
)

#: Frame and summary settings shared by every descriptor (recorded in the JSON sidecar).
FRAME = {
    "sr": SR,
    "n_fft": 2048,
    "win_length": 2048,
    "hop_length": 512,
    "window": "hann",
    "center": True,
    "pad_mode": "constant (zeros) for STFT, RMS and onset strength; "
    "edge for ZCR (librosa defaults)",
    "summary": "mean over all frames (rms_variance: population variance over frames; "
    "spectral_contrast: mean over bands and frames)",
    "silent_frames": "included in every frame mean and in the RMS variance (as the authors' code); "
    "a digitally silent frame gives centroid/rolloff/bandwidth 0 Hz, contrast 0 dB, flatness 1, "
    "ZCR 0, RMS 0",
    "rolloff_percent": 0.85,
    "contrast_n_bands": 6,
    "contrast_fmin_hz": 200.0,
    "contrast_quantile": 0.02,
    "flux": "librosa.onset.onset_strength defaults: 128-band mel power spectrogram in dB "
    "(ref 1, amin 1e-10, top_db 80), lag 1, max_size 1, mean over mel bands, centred",
    "source": "the authors' scripts/generate_results_new_2.py (extract_acoustic_descriptors), "
    "librosa defaults at 16 kHz",
}

#: ``name -> (unit, one-line meaning, librosa function or other source)``, from
#: ``descriptor_info.csv``.
with open(Path(__file__).with_name("descriptor_info.csv"), newline="", encoding="utf-8") as _f:
    DESCRIPTOR_INFO = {
        r["descriptor"]: (r["unit"], r["meaning"], r["source"]) for r in csv.DictReader(_f)
    }

#: Version of the descriptor definitions; bump when a definition changes: cached tables are
#: recomputed. 1: n_fft 512 / hop 256 uncentred, silent frames dropped, L2-normalised flux
#: (aiplib's own); 2: librosa defaults (2048 / 512, centred), all frames, onset-strength flux (the
#: authors').
_DESCRIPTOR_DEFINITION_VERSION = 2


# ---------------------------------------------------------------------------------------------
# spectral descriptors
def _check_input(y, sr, *, name="audio"):
    """``y`` checked as a descriptor input (:func:`valid_audio`, 16 kHz, ≥ 2048 samples, not
    digital silence); AiplibParameterError otherwise."""
    if not isinstance(y, np.ndarray):
        y = np.asarray(y)
    y = valid_audio(y, name=name)
    if sr != SR:
        raise AiplibParameterError(
            f"{name}: descriptors are defined at {SR} Hz only (got sr={sr}); resample "
            f"first, e.g. aiplib.io.audio.load_audio(path, sr={SR})"
        )
    if y.size < FRAME["n_fft"]:
        raise AiplibParameterError(
            f"{name}: need at least {FRAME['n_fft']} samples (one {FRAME['n_fft']}-sample "
            f"frame, {FRAME['n_fft'] / SR * 1000:.0f} ms), got shape {y.shape}"
        )
    if not np.any(y):
        raise AiplibParameterError(
            f"{name}: the signal is digital silence (every sample is zero); its "
            "descriptors are undefined"
        )
    return y


def silent_frame_share(y) -> float:
    """Share in [0, 1] of the ``1 + n // 512`` descriptor frames of ``y`` [shape=(n,)]
    (:data:`FRAME`, zero-padded as librosa's STFT) whose samples are all exactly 0; they are
    included in the means.

    Examples
    --------
    >>> round(silent_frame_share(np.r_[np.zeros(16000), np.ones(16000)].astype(np.float32)), 3)
    0.476
    """
    import librosa

    y = np.asarray(y)
    half = FRAME["n_fft"] // 2
    frames = librosa.util.frame(
        np.pad(y != 0, half), frame_length=FRAME["n_fft"], hop_length=FRAME["hop_length"]
    )
    return float(np.mean(~frames.any(axis=0)))


def spectral_descriptors(y, sr: int = SR, *, name: str = "audio") -> dict[str, float]:
    """The eight librosa descriptors (``DESCRIPTORS[:8]``, in order; units in
    :data:`DESCRIPTOR_INFO`) of ``y`` [shape=(n,)], float, n >= 2048, at ``sr`` = 16 000 Hz, as the
    authors' ``extract_acoustic_descriptors`` (computed in float64; flux = mean of
    ``librosa.onset.onset_strength`` [3]_, contrast after Jiang et al. [4]_).

    Raises
    ------
    AiplibParameterError
        If ``y`` is not a 1-D float array, holds NaN/inf, has fewer than 2048 samples, is digital
        silence throughout, or ``sr != 16000`` (``name`` in the message).

    Examples
    --------
    >>> t = np.arange(16000) / 16000
    >>> d = spectral_descriptors(np.sin(2 * np.pi * 1000 * t + 0.1).astype(np.float32))
    >>> # 1 s: edge frames weigh
    >>> round(d["zcr"], 3), round(d["spectral_centroid"]), d["spectral_flatness"] < 1e-3
    (0.119, 1010, True)
    """
    import librosa

    y = _check_input(y, sr, name=name).astype(np.float64)
    feat = librosa.feature
    return {
        "zcr": float(np.mean(feat.zero_crossing_rate(y=y))),
        "spectral_centroid": float(np.mean(feat.spectral_centroid(y=y, sr=sr))),
        "spectral_rolloff": float(np.mean(feat.spectral_rolloff(y=y, sr=sr))),
        "spectral_bandwidth": float(np.mean(feat.spectral_bandwidth(y=y, sr=sr))),
        "spectral_flux": float(np.mean(librosa.onset.onset_strength(y=y, sr=sr))),
        "spectral_flatness": float(np.mean(feat.spectral_flatness(y=y))),
        "spectral_contrast": float(np.mean(feat.spectral_contrast(y=y, sr=sr))),
        "rms_variance": float(np.var(feat.rms(y=y)[0])),
    }


# --------------------------------------------------------------------------------------------- all
# nine
def compute_descriptors(
    y, *, sr: int = SR, vad_threshold: float = 0.5, vad_model=None, name: str = "audio"
) -> dict[str, float]:
    """All nine descriptors (:data:`DESCRIPTORS`, in order) of ``y`` [shape=(n,)], float, n >= 2048,
    mono at ``sr`` = 16 000 Hz: :func:`spectral_descriptors` + the Silero VAD fraction with
    ``vad_threshold`` in (0, 1) and ``vad_model`` (default
    :func:`aiplib.battery.vad.load_vad_model`).

    Raises
    ------
    AiplibParameterError
        As :func:`spectral_descriptors`, or if ``vad_threshold`` is outside (0, 1).
    """
    out = spectral_descriptors(y, sr, name=name)  # checks y (the VAD checks it too)
    out["vad_speech_fraction"] = vad_speech_fraction(
        y, sr=sr, threshold=vad_threshold, model=vad_model, name=name
    )
    return {k: out[k] for k in DESCRIPTORS}


# --------------------------------------------------------------------------------------------- the
# battery table
def _read_previous(csv_path: Path, json_path: Path, settings: dict):
    """Rows of an earlier table whose settings match, with the file hashes they were computed
    from."""
    try:
        side = json.loads(json_path.read_text(encoding="utf-8"))  # OSError when it is missing
        old = read_descriptor_table(csv_path)  # None when it is missing
    except (OSError, ValueError):
        return None, {}
    # JSON round trip so tuples/ints compare like for like
    if (
        old is None
        or side.get("settings") != json.loads(json.dumps(settings))
        or list(old.columns) != TABLE_COLUMNS
    ):
        return None, {}
    return old.set_index("bg_id"), side.get("files", {})


def descriptor_table(
    ws, *, vad_threshold: float = 0.5, overwrite: bool = False, progress: bool = True
):
    """Compute (or read back) the nine descriptors of every background of ``battery.csv``.

    Writes ``descriptors/acoustic_descriptors.csv`` (columns :data:`TABLE_COLUMNS`, rows in
    ``battery.csv`` order, returned) and the sidecar ``acoustic_descriptors.json`` (settings,
    package versions, SHA-256 and silent-frame share of every WAV, :data:`DESCRIPTOR_INFO`). A row
    computed with the same settings from a WAV with the same SHA-256 is read back (unless
    ``overwrite``); when all are, the files are left untouched.

    Raises
    ------
    FileNotFoundError
        If ``battery.csv`` does not exist.
    AiplibParameterError
        If ``battery.csv`` lacks ``bg_id`` or ``path`` or repeats a ``bg_id``, ``vad_threshold`` is
        not in (0, 1), or a background fails :func:`compute_descriptors`.
    AudioFileError
        If a background WAV is missing or unreadable (the message names the file).
    """
    battery = _read_battery(Path(ws.descriptors) / "battery.csv")
    if not (0.0 < float(vad_threshold) < 1.0):
        raise AiplibParameterError(f"VAD threshold must lie in (0, 1), got {vad_threshold}")

    csv_path = Path(ws.descriptors) / "acoustic_descriptors.csv"
    json_path = csv_path.with_suffix(".json")
    settings = _descriptor_settings(vad_threshold)
    if overwrite:
        old = None
        old_files = {}
    else:
        old, old_files = _read_previous(csv_path, json_path, settings)

    files, rows, todo = _reuse_rows(ws, battery, old, old_files)
    up_to_date = not todo and old is not None and list(old.index) == list(battery["bg_id"])
    if todo:
        _compute_rows(todo, rows, vad_threshold, progress)
    for bg_id in files:
        files[bg_id]["silent_frame_share"] = rows[bg_id]["silent_frame_share"]

    table_rows = [{"bg_id": b, **rows[b]} for b in battery["bg_id"]]
    table = pd.DataFrame(table_rows, columns=TABLE_COLUMNS)
    if not up_to_date:
        _write_table(table, files, settings, csv_path, json_path)
    return table


def _read_battery(battery_path: Path) -> pd.DataFrame:
    """``battery.csv``, checked: FileNotFoundError when missing, AiplibParameterError when it lacks
    ``bg_id`` or ``path`` or repeats a ``bg_id``."""
    battery = read_battery_csv(battery_path)
    if battery is None:
        raise FileNotFoundError(
            f"{battery_path}: battery list not found; curate the backgrounds first "
            "(aiplib.battery.backgrounds.curate_battery, notebook stage 3)"
        )
    missing_cols = [c for c in ("bg_id", "path") if c not in battery.columns]
    if missing_cols:
        raise AiplibParameterError(f"{battery_path}: missing column(s) {', '.join(missing_cols)}")
    dup = battery["bg_id"][battery["bg_id"].duplicated()].tolist()
    if dup:
        raise AiplibParameterError(f"{battery_path}: duplicate bg_id {', '.join(map(str, dup))}")
    return battery


def _descriptor_settings(vad_threshold: float) -> dict:
    """The settings recorded in the sidecar; a cached row is reused only when they are equal."""
    return {
        "definition_version": _DESCRIPTOR_DEFINITION_VERSION,
        "frame": FRAME,
        "silent_frames_in_means": True,
        "vad_threshold": float(vad_threshold),
        "vad": VAD_SETTINGS,
    }


def _cached_row(old, old_files: dict, bg_id: str, digest: str):
    """The earlier row of ``bg_id`` (dict of floats) when it was computed from a WAV with SHA-256
    ``digest`` and has every value, else None."""
    if old is None or bg_id not in old.index:
        return None
    if old_files.get(bg_id, {}).get("sha256") != digest:
        return None
    if not old.loc[bg_id, TABLE_COLUMNS[1:]].notna().all():
        return None
    return {k: float(old.loc[bg_id, k]) for k in TABLE_COLUMNS[1:]}


def _reuse_rows(ws, battery: pd.DataFrame, old, old_files: dict):
    """Hash every background WAV and reuse the earlier rows that still hold.

    Returns ``(files, rows, todo)``: ``{bg_id: {path, sha256}}``, ``{bg_id: row}`` of the reused
    rows, and the ``(bg_id, wav)`` still to compute. AudioFileError when a WAV is missing.
    """
    files = {}
    rows = {}
    todo = []
    for bg_id, rel in zip(battery["bg_id"], battery["path"]):
        wav = ws.path(rel)
        if not wav.is_file():
            raise AudioFileError(f"{wav}: background audio file not found (bg_id {bg_id})")
        digest = file_sha256(wav)
        files[bg_id] = {"path": str(rel), "sha256": digest}
        cached = _cached_row(old, old_files, bg_id, digest)
        if cached is not None:
            rows[bg_id] = cached
        else:
            todo.append((bg_id, wav))
    return files, rows, todo


def _compute_rows(todo: list, rows: dict, vad_threshold: float, progress: bool) -> None:
    """Compute the descriptors and silent-frame share of each ``(bg_id, wav)`` of ``todo`` into
    ``rows``."""
    model = load_vad_model()
    for bg_id, wav in track(todo, "descriptors", unit="bg", enabled=progress):
        y = load_audio(wav, sr=SR)
        rows[bg_id] = compute_descriptors(
            y,
            sr=SR,
            vad_threshold=vad_threshold,
            vad_model=model,
            name=f"{wav} (bg_id {bg_id})",
        )
        rows[bg_id]["silent_frame_share"] = silent_frame_share(y)


def _write_table(table, files: dict, settings: dict, csv_path: Path, json_path: Path) -> None:
    """Write the descriptor table and its JSON sidecar (settings, versions, files, info)."""
    write_descriptor_table(table, csv_path)
    versions = package_versions(("librosa", "silero-vad", "torch", "numpy", "aiplib"))
    sidecar = {
        "settings": settings,
        "versions": versions,
        "n_backgrounds": len(table),
        "files": files,
        "descriptor_info": {k: list(v) for k, v in DESCRIPTOR_INFO.items()},
    }
    write_json_atomic(sidecar, json_path)
