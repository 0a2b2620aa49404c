"""Audio I/O and loudness: every file becomes 16 kHz mono float32.

Reading uses soundfile (libsndfile) and falls back to ffmpeg (G.722, M4A, …); channels are averaged,
the rate converted with ``librosa.resample`` (soxr, high quality). Loudness is pyloudnorm's ITU-R
BS.1770-4 integrated loudness (K-weighted, gated, LUFS). Samples are never clipped here (as the
authors' ``load_audio``): a float or resampled file, or a loudness-normalised signal, can exceed ±1;
the mixer limits the mixture's peak, 16-bit writers saturate, :func:`normalize_loudness` warns.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import struct
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pyloudnorm
import soundfile as sf

from aiplib.core.atomic import atomic_path
from aiplib.core.errors import AiplibParameterError, AudioFileError, MissingPackageError

#: The pipeline's sample rate, Hz.
SR = 16000
#: BS.1770 gating block, s (the pyloudnorm meter's block_size): pyloudnorm refuses shorter signals,
#: so loudness_lufs loops them first and custom-profile validation refuses shorter inputs.
MIN_LOUDNESS_S = 0.4

#: Leading + trailing silence (s) of a clip above which the mixer sets its SNR over the clip's
#: active part (:func:`active_span`; not in the ``paper`` profile); at or below it the authors'
#: whole-clip SNR. The demo's clips have at most 0.71 s (1 s keyword clips); a 1 s clip can never
#: exceed it.
ACTIVE_PART_MIN_SILENCE_S = 1.0

#: Silence for :func:`active_span`: ``librosa.effects.trim`` frames (2048 samples, hop 512) more
#: than this many dB below the loudest (as :func:`aiplib.sources.corpora.tts.trim_silence`).
ACTIVE_PART_TOP_DB = 40.0

#: ffmpeg input options of the file suffixes soundfile cannot read.
_FFMPEG_FORMATS = {".g722": ["-f", "g722"]}


class ClippingWarning(UserWarning):
    """A loudness-normalised signal peaks above full scale (|y| > 1): a 16-bit copy would clip."""


def valid_audio(y, *, name: str = "audio") -> np.ndarray:
    """Check a mono waveform ``y`` (np.ndarray [shape=(n,)], any float dtype) and return it as
    float32; ``name`` names it in the message.

    Raises
    ------
    AiplibParameterError
        If ``y`` is not a 1-D floating-point array, is empty, or holds NaN or infinite samples.
    """
    if not isinstance(y, np.ndarray):
        raise AiplibParameterError(f"{name}: expected a numpy array, got {type(y).__name__}")
    if y.ndim != 1:
        raise AiplibParameterError(
            f"{name}: expected a mono waveform of shape (n,), got shape {y.shape}"
        )
    if not np.issubdtype(y.dtype, np.floating):
        raise AiplibParameterError(f"{name}: expected floating-point samples, got dtype {y.dtype}")
    if y.size == 0:
        raise AiplibParameterError(f"{name}: the waveform is empty")
    if not np.all(np.isfinite(y)):
        raise AiplibParameterError(f"{name}: the waveform holds NaN or infinite samples")
    return y.astype(np.float32, copy=False)


def _read_ffmpeg(path: Path, sr: int) -> np.ndarray:
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise MissingPackageError(
            f"{path}: reading this format needs ffmpeg; "
            "install it with `sudo apt-get install ffmpeg`"
        )
    cmd = [
        exe,
        "-v",
        "error",
        "-nostdin",
        *_FFMPEG_FORMATS.get(path.suffix.lower(), []),
        "-i",
        str(path),
        "-ac",
        "1",
        "-ar",
        str(sr),
        "-f",
        "f32le",
        "-",
    ]
    proc = subprocess.run(cmd, capture_output=True, check=False)
    if proc.returncode != 0 or not proc.stdout:
        msg = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no audio decoded"]
        raise AudioFileError(f"{path}: unreadable or corrupt audio file ({msg[0]})")
    return np.frombuffer(proc.stdout, dtype="<f4").copy()


def load_audio(path, *, sr: int = SR) -> np.ndarray:
    """Read an audio file (any format soundfile or ffmpeg reads; ``.g722`` as raw G.722 at 16 kHz)
    as mono float32 [shape=(n,)] at ``sr`` Hz, not clipped (a full-scale 44.1 kHz 1 kHz square wave
    peaks at 1.196 at 16 kHz).

    Raises
    ------
    AudioFileError
        If the file does not exist, cannot be decoded, is empty or holds NaN/inf samples.
    MissingPackageError
        If ffmpeg is needed and not installed.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioFileError(f"{path}: audio file not found")
    y, file_sr = None, sr
    if path.suffix.lower() not in _FFMPEG_FORMATS:
        with contextlib.suppress(Exception):  # libsndfile cannot read it: ffmpeg below
            data, file_sr = sf.read(str(path), dtype="float32", always_2d=True)
            y = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    if y is None:
        y, file_sr = _read_ffmpeg(path, sr), sr
    if y.size == 0:
        raise AudioFileError(f"{path}: the file holds no audio samples")
    if not np.all(np.isfinite(y)):
        raise AudioFileError(f"{path}: the file holds NaN or infinite samples")
    if file_sr != sr:
        import librosa

        y = librosa.resample(y, orig_sr=file_sr, target_sr=sr, res_type="soxr_hq")
    return np.ascontiguousarray(y, dtype=np.float32)


#: Data-chunk sizes a streaming writer leaves in a WAV header when it cannot seek back (no size
#: known): such a header says nothing about truncation.
_WAV_SIZE_UNKNOWN = (0, 0xFFFFFFFF)


def wav_data_shortfall(path) -> dict | None:
    """Compare the data chunk a RIFF/WAVE file's header declares with the bytes the file holds.

    A copy or download cut short keeps its header: libsndfile then reads only the samples present,
    without an error. Only the chunk headers are read (``struct``, RIFF layout of the Microsoft
    WAVE format); the samples are not decoded.

    Returns
    -------
    dict or None
        ``declared_s``, ``present_s`` (s, at the file's own rate), ``declared_bytes``,
        ``present_bytes`` when the data chunk holds fewer bytes than its header says; None when it
        holds them all, the file is not RIFF/WAVE (RF64, W64, any other format), its ``fmt `` chunk
        is unreadable or the declared size is a streaming placeholder (0 or 0xFFFFFFFF).

    Raises
    ------
    AudioFileError
        If the file cannot be opened.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            return _riff_shortfall(fh, size)
    except OSError as exc:
        raise AudioFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _riff_shortfall(fh, size: int) -> dict | None:
    """:func:`wav_data_shortfall` on an open binary file of ``size`` bytes."""
    head = fh.read(12)
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    rate = align = 0
    while True:
        chunk = fh.read(8)
        if len(chunk) < 8:
            return None
        cid, csize = chunk[:4], struct.unpack("<I", chunk[4:])[0]
        if cid == b"fmt ":
            fmt = fh.read(csize + (csize & 1))
            if len(fmt) < 14:
                return None
            rate = struct.unpack("<I", fmt[4:8])[0]
            align = struct.unpack("<H", fmt[12:14])[0]
        elif cid == b"data":
            present = size - fh.tell()
            if csize in _WAV_SIZE_UNKNOWN or present >= csize or not (rate and align):
                return None
            return dict(
                declared_s=csize / align / rate,
                present_s=max(present, 0) // align / rate,
                declared_bytes=int(csize),
                present_bytes=int(max(present, 0)),
            )
        else:
            fh.seek(csize + (csize & 1), 1)


@functools.lru_cache(maxsize=512)
def _cached(path: str, sr: int, mtime: float) -> np.ndarray:
    y = load_audio(path, sr=sr)
    y.setflags(write=False)
    return y


def load_audio_cached(path, *, sr: int = SR) -> np.ndarray:
    """:func:`load_audio` with an in-memory LRU cache (512 files) keyed on path and mtime; read-only
    array."""
    p = Path(path)
    try:
        mtime = p.stat().st_mtime
    except OSError:
        raise AudioFileError(f"{p}: audio file not found") from None
    return _cached(str(p.resolve()), sr, mtime)


def write_wav(path, y, *, sr: int = SR, subtype: str = "FLOAT") -> Path:
    """Write ``y`` (np.ndarray [shape=(n,)], float, at ``sr`` Hz) to a mono WAV file atomically,
    creating the folder; ``subtype`` ``FLOAT`` keeps samples bit-exact, ``PCM_16`` is for listening
    copies.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`valid_audio`.
    """
    y = valid_audio(np.asarray(y), name=str(path))
    path = Path(path)
    with atomic_path(path) as tmp:
        sf.write(str(tmp), y, sr, subtype=subtype, format="WAV")
        _zero_peak_time(tmp)
    return path


def _zero_peak_time(path: Path) -> None:
    """Zero the time stamp of libsndfile's PEAK chunk (float WAVs store the time of writing), so the
    same samples always give the same bytes."""
    with open(path, "r+b") as fh:
        i = fh.read(512).find(b"PEAK")
        if i >= 0:
            fh.seek(i + 12)
            fh.write(b"\0\0\0\0")


def active_span(s, *, min_silence_s: float | None = ACTIVE_PART_MIN_SILENCE_S, sr: int = SR):
    """The active part of a clip ``s`` [shape=(n,)] at ``sr`` Hz when its leading plus trailing
    silence exceeds ``min_silence_s`` (s): ``(a, b)`` samples from ``librosa.effects.trim`` with
    :data:`ACTIVE_PART_TOP_DB`; None when the silence is shorter, ``min_silence_s`` is None or the
    clip is silent (the whole clip counts). A 3 s clip holding a 0.8 s word after 2 s of silence
    gives about ``(31744, 46000)``.
    """
    import librosa

    s = np.asarray(s, dtype=np.float32)
    if min_silence_s is None or s.size == 0 or not np.any(s):
        return None
    _, (a, b) = librosa.effects.trim(s, top_db=ACTIVE_PART_TOP_DB)
    if b <= a or (s.size - (b - a)) / sr <= min_silence_s:
        return None
    return int(a), int(b)


def loop_or_cut(y, n: int) -> np.ndarray:
    """Repeat ``y`` (np.ndarray [shape=(m,)]) end to end, or cut it, to exactly ``n`` samples
    (np.ndarray [shape=(n,)]); an empty ``y`` raises AiplibParameterError."""
    y = np.asarray(y)
    if y.size == 0:
        raise AiplibParameterError("cannot loop an empty waveform")
    return y[:n].copy() if y.size >= n else np.tile(y, -(-n // y.size))[:n]


@functools.lru_cache(maxsize=8)
def loudness_meter(sr: int = SR):
    """The ``pyloudnorm.Meter`` at ``sr`` Hz with the :data:`MIN_LOUDNESS_S` (0.4 s) block (ITU-R
    BS.1770-4), one per rate."""
    return pyloudnorm.Meter(sr, block_size=MIN_LOUDNESS_S)  # BS.1770-4, 400 ms blocks


def loudness_lufs(y, *, sr: int = SR, name: str = "audio") -> float:
    """Integrated loudness of ``y`` (np.ndarray [shape=(n,)], float, at ``sr`` Hz) in LUFS (ITU-R
    BS.1770-4, pyloudnorm); ``-inf`` for digital silence. A signal shorter than 0.4 s is looped to
    0.4 s first.

    Raises
    ------
    AiplibParameterError
        If ``y`` fails :func:`valid_audio`.
    """
    y = valid_audio(np.asarray(y), name=name).astype(np.float64)
    n_min = int(np.ceil(MIN_LOUDNESS_S * sr)) + 1
    y = loop_or_cut(y, n_min) if y.size < n_min else y
    with np.errstate(divide="ignore"):
        return float(loudness_meter(sr).integrated_loudness(y))


def peak_abs(y) -> float:
    """Largest absolute sample value (linear, full scale = 1); 0.0 for an empty array."""
    y = np.asarray(y)
    return float(np.max(np.abs(y))) if y.size else 0.0


def normalize_loudness(
    y, target_lufs: float, *, sr: int = SR, name: str = "audio", return_peak: bool = False
):
    """Scale ``y`` so that its integrated loudness is ``target_lufs``, and check its peak.

    ``y``: float, shape (n,), at ``sr`` Hz; ``target_lufs`` in LUFS; ``name`` names it in messages.
    Returns ``(y_out, gain_db, lufs_before)``: ``y_out = y * 10 ** (gain_db / 20)`` (float32, shape
    (n,), not clipped, as ``pyloudnorm.normalize.loudness``), the gain in dB and the loudness before
    in LUFS; with ``return_peak`` also ``peak_after = max |y_out|`` (full scale = 1).

    Warns
    -----
    ClippingWarning
        When ``peak_after > 1``, naming ``name``, the peak and its dBFS (samples left as they are).

    Raises
    ------
    AudioFileError
        If the signal is silent (loudness −inf): it cannot be normalised.
    AiplibParameterError
        If ``y`` fails :func:`valid_audio`.
    """
    before = loudness_lufs(y, sr=sr, name=name)
    if not np.isfinite(before):
        raise AudioFileError(
            f"{name}: the audio is silent (loudness -inf LUFS) and cannot be normalised"
        )
    gain_db = target_lufs - before
    out = (np.asarray(y, dtype=np.float64) * 10.0 ** (gain_db / 20.0)).astype(np.float32)
    peak = peak_abs(out)
    if peak > 1.0:
        warnings.warn(
            f"{name}: normalised to {target_lufs:g} LUFS (gain {gain_db:+.2f} dB) it peaks at "
            f"{peak:.4f} ({20 * np.log10(peak):+.2f} dBFS) > full scale; a 16-bit copy would "
            "clip",
            ClippingWarning,
            stacklevel=2,
        )
    return (
        (out, float(gain_db), float(before), peak)
        if return_peak
        else (out, float(gain_db), float(before))
    )
