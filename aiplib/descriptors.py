"""The nine acoustic descriptors of a background, and the Silero VAD speech fraction.

Each background of the battery is summarised by nine numbers (:data:`DESCRIPTORS`), written to
``descriptors/acoustic_descriptors.csv`` by :func:`descriptor_table`. Eight come from librosa [1]_
short-time features, one from the Silero voice-activity detector [2]_.

Framing (fixed, the same for every descriptor; durations at the pipeline rate of 16 kHz):

* ``n_fft = win_length = 512`` samples (32 ms), Hann window, ``hop_length = 256`` (16 ms, 50 %
  overlap), ``center=False`` (every frame lies wholly inside the signal, no edge padding), so a
  signal of ``n`` samples gives ``1 + (n - 512) // 256`` frames (1 874 for a 30 s background).
* ``S`` is the magnitude STFT, ``|librosa.stft(y, n_fft=512, hop_length=256, center=False)|``,
  shape ``(257, t)``; the spectral descriptors are computed from this one ``S``.
* Each per-frame series is summarised by its **mean over frames** (``rms_variance``: variance).
* Frames of digital silence (mean square < :data:`SILENCE_POWER`, −120 dBFS) have no spectral
  shape: they are left out of the means of centroid, roll-off, bandwidth, flatness and contrast.
  ZCR, RMS variance and flux use every frame (silence → sound is an onset, and the spread of level
  includes the pauses).

See :data:`DESCRIPTOR_INFO` for each descriptor's unit and exact definition.

References
----------
.. [1] McFee, B. et al. (2015). librosa: Audio and music signal analysis in Python. Proc. 14th
   Python in Science Conf., 18–25. https://librosa.org (version 0.11 used here).
.. [2] Silero Team (2021). Silero VAD: pre-trained enterprise-grade Voice Activity Detector (VAD),
   Number Detector and Language Classifier. https://github.com/snakers4/silero-vad
.. [3] Tzanetakis, G. & Cook, P. (2002). Musical genre classification of audio signals. IEEE Trans.
   Speech and Audio Processing 10(5), 293–302 (spectral flux of normalised magnitude spectra).
.. [4] Jiang, D.-N. et al. (2002). Music type classification by spectral contrast feature. Proc.
   IEEE ICME, 113–116.
.. [5] Dubnov, S. (2004). Generalization of spectral flatness measure for non-Gaussian linear
   processes. IEEE Signal Processing Letters 11(8), 698–701.
"""
from __future__ import annotations

import contextlib
import functools
import json
from importlib import metadata
from pathlib import Path

import numpy as np

from .audio import SR, load_audio, valid_audio
from .errors import AiplibParameterError
from .hashing import sha256_file

__all__ = [
    "DESCRIPTORS",
    "DESCRIPTOR_INFO",
    "FRAME",
    "SILENCE_POWER",
    "VAD_SETTINGS",
    "compute_descriptors",
    "spectral_descriptors",
    "vad_speech_fraction",
    "load_vad_model",
    "descriptor_table",
]

DESCRIPTORS = [
    "zcr",
    "spectral_centroid",
    "spectral_rolloff",
    "spectral_bandwidth",
    "spectral_flux",
    "spectral_flatness",
    "spectral_contrast",
    "rms_variance",
    "vad_speech_fraction",
]
"""The nine descriptor names, in the column order of ``acoustic_descriptors.csv``."""

FRAME = {
    "sr": SR,
    "n_fft": 512,
    "win_length": 512,
    "hop_length": 256,
    "window": "hann",
    "center": False,
    "summary": "mean over frames (rms_variance: population variance over frames)",
    "rolloff_percent": 0.85,
    "contrast_n_bands": 6,
    "contrast_fmin_hz": 200.0,
    "contrast_quantile": 0.02,
}
"""Frame and summary settings shared by every descriptor (recorded in the JSON sidecar)."""

SILENCE_POWER = 1e-12
"""Mean-square level (linear, = −120 dBFS) below which a frame counts as digital silence."""

VAD_SETTINGS = {
    "model": "silero_vad.jit (TorchScript, shipped in the silero-vad wheel)",
    "min_speech_duration_ms": 250,
    "min_silence_duration_ms": 100,
    "speech_pad_ms": 30,
    "window_size_samples": "512 at 16 kHz, 256 at 8 kHz",
}
"""``get_speech_timestamps`` settings (the silero-vad defaults) used by :func:`vad_speech_fraction`."""

DESCRIPTOR_INFO = {
    "zcr": (
        "crossings per sample (fraction, 0–1)",
        "mean over frames of (sign changes between consecutive samples inside the frame) / 512, "
        "librosa's definition (so at most 511/512; a 1 kHz sine at 16 kHz gives 63/512 ≈ 0.123)",
        "librosa.feature.zero_crossing_rate(y, frame_length=512, hop_length=256, center=False)",
    ),
    "spectral_centroid": (
        "Hz",
        "mean over non-silent frames of the magnitude-weighted mean frequency",
        "librosa.feature.spectral_centroid(S=|STFT|, sr=16000)",
    ),
    "spectral_rolloff": (
        "Hz",
        "mean over non-silent frames of the lowest bin-centre frequency below which 85 % of the "
        "frame's spectral magnitude (sum of |STFT|, librosa's convention) lies",
        "librosa.feature.spectral_rolloff(S=|STFT|, sr=16000, roll_percent=0.85)",
    ),
    "spectral_bandwidth": (
        "Hz",
        "mean over non-silent frames of the magnitude-weighted standard deviation of frequency "
        "around the centroid (p = 2)",
        "librosa.feature.spectral_bandwidth(S=|STFT|, sr=16000, p=2)",
    ),
    "spectral_flux": (
        "unitless, 0–√2",
        "mean over consecutive frame pairs of ||N_t − N_(t−1)||_2, where N_t = S_t / ||S_t||_2 is the "
        "unit-L2-normalised magnitude spectrum (all-zero for a silent frame); level-invariant "
        "(Tzanetakis & Cook 2002)",
        "numpy, on librosa.stft magnitudes",
    ),
    "spectral_flatness": (
        "ratio, 0–1",
        "mean over non-silent frames of geometric / arithmetic mean of the power spectrum |STFT|²",
        "librosa.feature.spectral_flatness(S=|STFT|, power=2.0)",
    ),
    "spectral_contrast": (
        "dB (librosa: 10·log10 of the magnitude peak / valley ratio)",
        "mean over the 7 sub-bands (6 octave bands from 200 Hz plus the residual top band) and over "
        "non-silent frames of peak-minus-valley level (top vs bottom 2 % of magnitudes in the band)",
        "librosa.feature.spectral_contrast(S=|STFT|, sr=16000, n_fft=512, n_bands=6, fmin=200)",
    ),
    "rms_variance": (
        "linear amplitude squared (full scale = 1)",
        "population variance over frames of the frame RMS (un-windowed 512-sample frames); 0 for a "
        "steady level, large for intermittent sound; not level-invariant, but the battery is "
        "loudness-normalised to −30 LUFS so values are comparable across backgrounds",
        "numpy.var(librosa.feature.rms(y=y, frame_length=512, hop_length=256, center=False))",
    ),
    "vad_speech_fraction": (
        "fraction of samples, 0–1",
        "share of the samples that lie inside the speech segments found by Silero VAD "
        "(threshold 0.5 unless set; min speech 250 ms, min silence 100 ms, 30 ms padding)",
        "silero_vad.get_speech_timestamps (Silero Team 2021)",
    ),
}
"""``name -> (unit, one-line meaning, librosa function or other source)``."""

_DESCRIPTOR_DEFINITION_VERSION = 1  # bump when a definition changes: cached tables are recomputed


# ---------------------------------------------------------------------------------------------
# spectral descriptors


def _check_input(y, sr, *, name="audio"):
    y = valid_audio(np.asarray(y) if not isinstance(y, np.ndarray) else y, name=name)
    if sr != SR:
        raise AiplibParameterError(
            f"{name}: descriptors are defined at {SR} Hz only (got sr={sr}); resample first, e.g. "
            f"aiplib.audio.load_audio(path, sr={SR})")
    if y.size < FRAME["n_fft"]:
        raise AiplibParameterError(
            f"{name}: need at least {FRAME['n_fft']} samples (one {FRAME['n_fft']}-sample frame), "
            f"got shape {y.shape}")
    return y


def spectral_descriptors(y, sr: int = SR, *, name: str = "audio") -> dict[str, float]:
    """The eight librosa descriptors of a waveform (every descriptor except the VAD fraction).

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float, n >= 512
        Mono waveform, nominally in [-1, 1].
    sr : int
        Sample rate in Hz; must be 16 000 (the pipeline rate), so that frame durations and
        frequency bins are the same for every background.
    name : str
        What to call the signal in error messages.

    Returns
    -------
    dict[str, float]
        Keys ``DESCRIPTORS[:8]`` (``zcr`` … ``rms_variance``) in that order; units in
        :data:`DESCRIPTOR_INFO`.

    Raises
    ------
    AiplibParameterError
        If ``y`` is not a 1-D float array, holds NaN/inf, has fewer than 512 samples, is digital
        silence throughout (no spectral shape), or ``sr != 16000``.

    See Also
    --------
    compute_descriptors : all nine descriptors, including the Silero VAD speech fraction.

    Notes
    -----
    One magnitude STFT ``S`` (``n_fft=512``, hop 256, Hann, ``center=False``) feeds the spectral
    features; ZCR and RMS use the same frames of the waveform. Summary = mean over frames, except
    ``rms_variance`` (variance). Silent frames are dropped from the spectral-shape means (see the
    module docstring). librosa [1]_; flux after Tzanetakis & Cook [3]_; contrast after Jiang et
    al. [4]_.

    References
    ----------
    .. [1] McFee, B. et al. (2015). librosa: Audio and music signal analysis in Python.
    .. [3] Tzanetakis, G. & Cook, P. (2002). Musical genre classification of audio signals.
    .. [4] Jiang, D.-N. et al. (2002). Music type classification by spectral contrast feature.

    Examples
    --------
    >>> t = np.arange(16000) / 16000
    >>> d = spectral_descriptors(np.sin(2 * np.pi * 1000 * t + 0.1).astype(np.float32))
    >>> round(d["zcr"], 3), round(d["spectral_centroid"]), d["spectral_flatness"] < 1e-6
    (0.123, 1000, True)
    """
    import librosa

    y = _check_input(y, sr, name=name)
    n_fft, hop, win = FRAME["n_fft"], FRAME["hop_length"], FRAME["win_length"]
    y64 = y.astype(np.float64)

    # time-domain frames: the same (512, 256, center=False) grid as the STFT
    frames = librosa.util.frame(y64, frame_length=n_fft, hop_length=hop)  # (512, t)
    power = np.mean(frames ** 2, axis=0)  # (t,)
    active = power >= SILENCE_POWER
    if not active.any():
        raise AiplibParameterError(
            f"{name}: the signal is digital silence (every frame below -120 dBFS); its spectral "
            "descriptors are undefined")

    zcr = librosa.feature.zero_crossing_rate(y64, frame_length=n_fft, hop_length=hop, center=False)[0]
    rms = librosa.feature.rms(y=y64, frame_length=n_fft, hop_length=hop, center=False)[0]

    S = np.abs(librosa.stft(y64, n_fft=n_fft, hop_length=hop, win_length=win, window=FRAME["window"],
                            center=False))  # (257, t)
    t = min(S.shape[1], active.size, zcr.size, rms.size)  # identical by construction; guard anyway
    S, active, zcr, rms = S[:, :t], active[:t], zcr[:t], rms[:t]
    Sa = S[:, active]

    centroid = librosa.feature.spectral_centroid(S=Sa, sr=sr, n_fft=n_fft)[0]
    rolloff = librosa.feature.spectral_rolloff(S=Sa, sr=sr, n_fft=n_fft,
                                               roll_percent=FRAME["rolloff_percent"])[0]
    bandwidth = librosa.feature.spectral_bandwidth(S=Sa, sr=sr, n_fft=n_fft, p=2)[0]
    flatness = librosa.feature.spectral_flatness(S=Sa, power=2.0)[0]
    contrast = librosa.feature.spectral_contrast(
        S=Sa, sr=sr, n_fft=n_fft, n_bands=FRAME["contrast_n_bands"], fmin=FRAME["contrast_fmin_hz"],
        quantile=FRAME["contrast_quantile"])  # (7, t_active)

    # spectral flux of unit-L2-normalised magnitude spectra (silent frame -> zero vector)
    norms = np.linalg.norm(S, axis=0)
    N = np.divide(S, norms, out=np.zeros_like(S), where=norms > 0)
    N[:, ~active] = 0.0
    flux = np.linalg.norm(np.diff(N, axis=1), axis=0) if t > 1 else np.zeros(1)

    return {
        "zcr": float(np.mean(zcr)),
        "spectral_centroid": float(np.mean(centroid)),
        "spectral_rolloff": float(np.mean(rolloff)),
        "spectral_bandwidth": float(np.mean(bandwidth)),
        "spectral_flux": float(np.mean(flux)),
        "spectral_flatness": float(np.mean(flatness)),
        "spectral_contrast": float(np.mean(contrast)),
        "rms_variance": float(np.var(rms)),
    }


# ---------------------------------------------------------------------------------------------
# Silero VAD


@functools.lru_cache(maxsize=1)
def load_vad_model():
    """Load the Silero VAD TorchScript model shipped in the ``silero-vad`` wheel (once, cached).

    Works offline: the model file is package data, nothing is downloaded.

    Returns
    -------
    torch.jit.ScriptModule
        Stateful model; :func:`silero_vad.get_speech_timestamps` resets its state on every call,
        but do not share one model between threads.

    Raises
    ------
    MissingPackageError
        If ``silero-vad`` (or torch) is not installed.

    References
    ----------
    .. [2] Silero Team (2021). Silero VAD. https://github.com/snakers4/silero-vad
    """
    silero_vad = _import_silero()
    with _torch_threads(None):  # restores the thread count whatever loading does
        return silero_vad.load_silero_vad(onnx=False)


def _import_silero():
    """Import ``silero_vad`` without letting it change torch's global thread count.

    ``silero_vad/model.py`` calls ``torch.set_num_threads(1)`` at import time (silero-vad 6.2.3);
    the previous setting is put back here so that other torch users (the recognisers) keep theirs.
    """
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise _missing() from exc
    old = torch.get_num_threads()
    try:
        import silero_vad
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise _missing() from exc
    finally:
        torch.set_num_threads(old)
    return silero_vad


def _missing():
    from .errors import MissingPackageError

    return MissingPackageError("the VAD speech fraction needs silero-vad and torch; install them with "
                               "`pip install silero-vad torch==2.13.0`")


@contextlib.contextmanager
def _torch_threads(n):
    """Run with ``torch.set_num_threads(n)`` (``None``: unchanged) and restore the previous count after."""
    import torch

    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)


def vad_speech_fraction(y, *, sr: int = SR, threshold: float = 0.5, model=None,
                        name: str = "audio") -> float:
    """Fraction of samples that Silero VAD marks as speech.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
        Mono waveform, nominally in [-1, 1].
    sr : int
        Sample rate in Hz: 8 000 or 16 000 (the rates Silero VAD models). Other rates are refused
        rather than silently resampled.
    threshold : float in (0, 1)
        Speech-probability threshold of ``get_speech_timestamps`` (Silero default 0.5).
    model : optional
        A loaded Silero VAD model; default :func:`load_vad_model` (loaded once per process).
    name : str
        What to call the signal in error messages.

    Returns
    -------
    float in [0, 1]
        ``sum(end - start) / n`` over the speech segments (sample indices) returned by
        ``silero_vad.get_speech_timestamps(..., threshold=threshold, sampling_rate=sr)`` with the
        silero-vad defaults in :data:`VAD_SETTINGS` (min speech 250 ms, min silence 100 ms, 30 ms
        padding), segments clipped to ``[0, n)``.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`aiplib.audio.valid_audio` (wrong shape/dtype, empty, NaN/inf), if
        ``sr`` is not 8000 or 16000, or if ``threshold`` is not in (0, 1).
    MissingPackageError
        If silero-vad / torch are not installed.

    Notes
    -----
    Inference runs single-threaded under ``torch.no_grad``; the global torch thread count is
    restored afterwards (silero-vad itself sets it to 1 on import; that is undone too).
    About 0.3 s of CPU per 30 s of 16 kHz audio.

    References
    ----------
    .. [2] Silero Team (2021). Silero VAD: pre-trained enterprise-grade Voice Activity Detector.
       https://github.com/snakers4/silero-vad
    """
    y = valid_audio(np.asarray(y) if not isinstance(y, np.ndarray) else y, name=name)
    if sr not in (8000, 16000):
        raise AiplibParameterError(
            f"{name}: Silero VAD accepts 8000 or 16000 Hz only, got sr={sr}; resample first")
    if not (0.0 < float(threshold) < 1.0):
        raise AiplibParameterError(f"VAD threshold must lie in (0, 1), got {threshold}")
    import torch

    get_speech_timestamps = _import_silero().get_speech_timestamps
    model = load_vad_model() if model is None else model
    wav = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))
    with _torch_threads(1), torch.no_grad():
        stamps = get_speech_timestamps(wav, model, threshold=float(threshold), sampling_rate=sr,
                                       min_speech_duration_ms=VAD_SETTINGS["min_speech_duration_ms"],
                                       min_silence_duration_ms=VAD_SETTINGS["min_silence_duration_ms"],
                                       speech_pad_ms=VAD_SETTINGS["speech_pad_ms"])
    n = y.size
    covered = np.zeros(n, dtype=bool)  # union, in case padded segments ever touch
    for s in stamps:
        covered[max(0, int(s["start"])):min(n, int(s["end"]))] = True
    return float(covered.mean())


# ---------------------------------------------------------------------------------------------
# all nine


def compute_descriptors(y, *, sr: int = SR, vad_threshold: float = 0.5, vad_model=None,
                        name: str = "audio") -> dict[str, float]:
    """All nine descriptors of a waveform.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float, n >= 512
        Mono waveform at 16 kHz, nominally in [-1, 1].
    sr : int
        Sample rate in Hz; must be 16 000.
    vad_threshold : float in (0, 1)
        Silero VAD speech-probability threshold.
    vad_model : optional
        A loaded Silero VAD model (default: :func:`load_vad_model`).
    name : str
        What to call the signal in error messages.

    Returns
    -------
    dict[str, float]
        Keys :data:`DESCRIPTORS`, in order; units and definitions in :data:`DESCRIPTOR_INFO`.

    Raises
    ------
    AiplibParameterError
        If ``y`` is not a 1-D float array, holds NaN/inf, has fewer than 512 samples or is digital
        silence, if ``sr != 16000``, or if ``vad_threshold`` is outside (0, 1).

    See Also
    --------
    spectral_descriptors, vad_speech_fraction, descriptor_table
    """
    y = _check_input(y, sr, name=name)
    out = spectral_descriptors(y, sr, name=name)
    out["vad_speech_fraction"] = vad_speech_fraction(y, sr=sr, threshold=vad_threshold,
                                                     model=vad_model, name=name)
    return {k: out[k] for k in DESCRIPTORS}


# ---------------------------------------------------------------------------------------------
# the battery table


def _versions() -> dict[str, str]:
    out = {}
    for pkg in ("librosa", "silero-vad", "torch", "numpy", "aiplib"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _settings(vad_threshold: float) -> dict:
    return {"definition_version": _DESCRIPTOR_DEFINITION_VERSION, "frame": FRAME,
            "vad_threshold": float(vad_threshold), "vad": VAD_SETTINGS}




def _read_previous(csv_path: Path, json_path: Path, settings: dict):
    """Rows of an earlier table whose settings match, with the file hashes they were computed from."""
    import pandas as pd

    if not (csv_path.is_file() and json_path.is_file()):
        return None, {}
    try:
        side = json.loads(json_path.read_text())
        old = pd.read_csv(csv_path, dtype={"bg_id": str})
    except (OSError, ValueError):
        return None, {}
    # JSON round trip so tuples/ints compare like for like
    if side.get("settings") != json.loads(json.dumps(settings)):
        return None, {}
    if list(old.columns) != ["bg_id", *DESCRIPTORS]:
        return None, {}
    return old.set_index("bg_id"), side.get("files", {})


def descriptor_table(ws, *, vad_threshold: float = 0.5, overwrite: bool = False,
                     progress: bool = True):
    """Compute (or read back) the nine descriptors of every background in the battery.

    Reads ``ws.descriptors / "battery.csv"`` (columns ``bg_id`` and ``path``, the WAV path relative
    to ``ws.root``), computes :func:`compute_descriptors` for each background, and writes
    ``ws.descriptors / "acoustic_descriptors.csv"`` (columns ``bg_id`` + :data:`DESCRIPTORS`) and
    the sidecar ``acoustic_descriptors.json`` (frame settings, VAD threshold and settings, package
    versions, the SHA-256 of every WAV, and :data:`DESCRIPTOR_INFO`).

    Resumable: a background whose row is already in the CSV, computed with the same settings from a
    WAV with the same SHA-256, is read back, not recomputed. When every background is found the
    files are left untouched.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        The profile's workspace.
    vad_threshold : float in (0, 1)
        Silero VAD threshold; a different value than the cached table's recomputes everything.
    overwrite : bool
        Recompute every background even if cached.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    pandas.DataFrame [shape=(n_backgrounds, 10)]
        Columns ``bg_id`` + :data:`DESCRIPTORS`, rows in ``battery.csv`` order.

    Raises
    ------
    FileNotFoundError
        If ``battery.csv`` does not exist (the message names it and the stage that writes it).
    AiplibParameterError
        If ``battery.csv`` lacks the ``bg_id`` or ``path`` column or repeats a ``bg_id``, or a
        background fails :func:`compute_descriptors`.
    AudioFileError
        If a background WAV is missing or unreadable (the message names the file).
    """
    import pandas as pd
    from tqdm.auto import tqdm

    battery_path = Path(ws.descriptors) / "battery.csv"
    if not battery_path.is_file():
        raise FileNotFoundError(
            f"{battery_path}: battery list not found; curate the backgrounds first "
            "(aiplib.backgrounds.curate_battery, notebook stage 3)")
    battery = pd.read_csv(battery_path, dtype={"bg_id": str, "path": str})
    missing_cols = [c for c in ("bg_id", "path") if c not in battery.columns]
    if missing_cols:
        raise AiplibParameterError(f"{battery_path}: missing column(s) {', '.join(missing_cols)}")
    dup = battery["bg_id"][battery["bg_id"].duplicated()].tolist()
    if dup:
        raise AiplibParameterError(f"{battery_path}: duplicate bg_id {', '.join(map(str, dup))}")
    if not (0.0 < float(vad_threshold) < 1.0):
        raise AiplibParameterError(f"VAD threshold must lie in (0, 1), got {vad_threshold}")

    csv_path = Path(ws.descriptors) / "acoustic_descriptors.csv"
    json_path = csv_path.with_suffix(".json")
    settings = _settings(vad_threshold)
    old, old_files = (None, {}) if overwrite else _read_previous(csv_path, json_path, settings)

    files, rows, todo = {}, {}, []
    for bg_id, rel in zip(battery["bg_id"], battery["path"]):
        wav = ws.path(rel)
        if not wav.is_file():
            from .errors import AudioFileError

            raise AudioFileError(f"{wav}: background audio file not found (bg_id {bg_id})")
        digest = sha256_file(wav)
        files[bg_id] = {"path": str(rel), "sha256": digest}
        if (old is not None and bg_id in old.index and old_files.get(bg_id, {}).get("sha256") == digest
                and old.loc[bg_id, DESCRIPTORS].notna().all()):
            rows[bg_id] = {k: float(old.loc[bg_id, k]) for k in DESCRIPTORS}
        else:
            todo.append((bg_id, wav))

    up_to_date = not todo and old is not None and list(old.index) == list(battery["bg_id"])
    if todo:
        model = load_vad_model()
        for bg_id, wav in tqdm(todo, desc="descriptors", unit="bg", disable=not progress):
            y = load_audio(wav, sr=SR)
            rows[bg_id] = compute_descriptors(y, sr=SR, vad_threshold=vad_threshold, vad_model=model,
                                              name=f"{wav} (bg_id {bg_id})")

    table = pd.DataFrame([{"bg_id": b, **rows[b]} for b in battery["bg_id"]],
                         columns=["bg_id", *DESCRIPTORS])
    if not up_to_date:
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = csv_path.with_name(csv_path.name + ".part")
        table.to_csv(tmp, index=False)
        tmp.replace(csv_path)
        sidecar = {"settings": settings, "versions": _versions(), "n_backgrounds": len(table),
                   "files": files, "descriptor_info": {k: list(v) for k, v in DESCRIPTOR_INFO.items()}}
        tmp = json_path.with_name(json_path.name + ".part")
        tmp.write_text(json.dumps(sidecar, indent=2) + "\n")
        tmp.replace(json_path)
    return table
