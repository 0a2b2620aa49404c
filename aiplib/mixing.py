"""Mixing speech with a background at a target SNR, and materialising manifest rows.

Method (as in the paper): the speech is loudness-normalised to :data:`SPEECH_LUFS` (ITU-R BS.1770
via pyloudnorm); a background segment of the same length starts at the row's seeded offset; its gain
sets the SNR from the speech and background powers over the utterance,

    SNR_dB = 10 · log10( Σ s[n]² / Σ (g·b[n])² ),   g = sqrt( P_s / (P_b · 10^(SNR/10)) );

if the sum would clip (peak above :data:`PEAK_LIMIT`), speech and background are scaled together,
which leaves the SNR exact.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from .audio import SR, load_audio_cached, loudness_lufs, write_wav
from .errors import AiplibParameterError, AudioFileError

__all__ = ["SPEECH_LUFS", "PEAK_LIMIT", "MixInfo", "mix_at_snr", "achieved_snr_db", "speech_gain_db",
           "materialize", "background_segment"]

SPEECH_LUFS = -23.0
"""Loudness of the foreground speech in every stimulus, LUFS (EBU R128 programme level)."""

PEAK_LIMIT = 0.99
"""Largest absolute sample value a stimulus may reach; above it the mixture is scaled down."""


@dataclass(frozen=True)
class MixInfo:
    """What happened when a stimulus was mixed.

    Attributes
    ----------
    achieved_snr_db : float
        SNR measured on the final speech and background parts, dB (``inf`` for clean stimuli).
    target_snr_db : float
        SNR asked for, dB (``inf`` for clean).
    speech_lufs : float
        Speech loudness before any anti-clipping scale, LUFS.
    bg_gain_db : float
        Gain applied to the background segment, dB (``-inf`` for clean).
    peak : float
        Largest absolute sample of the returned mixture.
    clip_scale : float
        Common scale applied to avoid clipping (1.0 when none was needed).
    """

    achieved_snr_db: float
    target_snr_db: float
    speech_lufs: float
    bg_gain_db: float
    peak: float
    clip_scale: float

    def asdict(self) -> dict:
        return asdict(self)


def achieved_snr_db(speech, noise) -> float:
    """SNR of two parts of a mixture, ``10·log10(Σ speech² / Σ noise²)`` in dB.

    Parameters
    ----------
    speech, noise : np.ndarray [shape=(n,)]

    Returns
    -------
    float, dB (``inf`` if ``noise`` is all zeros)
    """
    s = np.asarray(speech)
    b = np.asarray(noise)
    pb = float(np.dot(b, b))
    if pb == 0.0:
        return float("inf")
    return float(10.0 * np.log10(float(np.dot(s, s)) / pb))


def mix_at_snr(speech, background, snr_db: float, *, peak_limit: float = PEAK_LIMIT):
    """Add ``background`` to ``speech`` at ``snr_db``, scaling both together if the sum would clip.

    Parameters
    ----------
    speech : np.ndarray [shape=(n,)], float
        Foreground speech (already at its final level).
    background : np.ndarray [shape=(n,)], float
        Background segment of the same length.
    snr_db : float
        Target SNR in dB, computed from the powers over the utterance.
    peak_limit : float in (0, 1]
        Largest allowed absolute sample of the mixture.

    Returns
    -------
    mixture : np.ndarray [shape=(n,)], float32
    info : MixInfo
        ``speech_lufs`` is NaN here (:func:`materialize` fills it).

    Raises
    ------
    AiplibParameterError
        If the shapes differ, a signal holds NaN, the speech is all zeros, or the background
        segment is silent (no gain can reach the SNR).
    """
    s = np.asarray(speech, dtype=np.float32)
    b = np.asarray(background, dtype=np.float32)
    if s.ndim != 1 or s.shape != b.shape:
        raise AiplibParameterError(f"speech shape {s.shape} and background shape {b.shape} must be equal and 1-D")
    # Powers in float64 from float32 dot products; a NaN or inf sample makes them non-finite,
    # which replaces a full finiteness scan of both signals.
    ps = float(np.dot(s, s))
    pb = float(np.dot(b, b))
    if not (np.isfinite(ps) and np.isfinite(pb)):
        raise AiplibParameterError("speech or background holds NaN or infinite samples")
    if ps == 0.0:
        raise AiplibParameterError("speech is all zeros: the SNR is undefined")
    if pb == 0.0:
        raise AiplibParameterError("the background segment is silent: no gain reaches the SNR")
    gain = np.sqrt(ps / (pb * 10.0 ** (snr_db / 10.0)))
    noise = b * np.float32(gain)
    mix = s + noise
    peak = float(np.max(np.abs(mix)))
    scale = 1.0 if peak <= peak_limit else peak_limit / peak
    if scale != 1.0:
        mix *= np.float32(scale)
        s = s * np.float32(scale)
        noise *= np.float32(scale)
    info = MixInfo(achieved_snr_db=achieved_snr_db(s, noise), target_snr_db=float(snr_db),
                   speech_lufs=float("nan"), bg_gain_db=float(20 * np.log10(gain)),
                   peak=float(peak * scale), clip_scale=float(scale))
    return mix, info


@functools.lru_cache(maxsize=4096)
def _speech_gain(path: str, mtime: float, target: float) -> float:
    y = load_audio_cached(path)
    lufs = loudness_lufs(y, name=path)
    if not np.isfinite(lufs):
        raise AudioFileError(f"{path}: the speech is silent (loudness -inf LUFS)")
    return float(target - lufs)


def speech_gain_db(path, *, target_lufs: float = SPEECH_LUFS) -> float:
    """Gain in dB that brings the speech file at ``path`` to ``target_lufs`` (cached per file).

    Raises
    ------
    AudioFileError
        If the file is missing, unreadable or silent.
    """
    p = Path(path)
    if not p.is_file():
        raise AudioFileError(f"{p}: speech file not found")
    return _speech_gain(str(p.resolve()), p.stat().st_mtime, float(target_lufs))


def background_segment(bg, offset: int, n: int) -> np.ndarray:
    """``n`` samples of ``bg`` from ``offset``, wrapping round to the start if needed.

    Parameters
    ----------
    bg : np.ndarray [shape=(m,)]
    offset : int >= 0, samples
    n : int > 0, samples

    Returns
    -------
    np.ndarray [shape=(n,)]
    """
    m = bg.shape[0]
    offset = int(offset) % m
    if offset + n <= m:
        return bg[offset:offset + n]
    return np.take(bg, np.arange(offset, offset + n) % m)


def materialize(row: Mapping, ws, *, write=None):
    """Return the exact samples of one manifest row (a stimulus), mixed on the fly.

    The same row always gives the same samples, bit for bit: the offset and SNR are stored in the
    row, and no other randomness is involved.

    Parameters
    ----------
    row : Mapping
        A manifest row with ``speech_path``, ``bg_id``, ``bg_path``, ``bg_offset``, ``snr_db``
        (paths relative to the workspace root or absolute). ``bg_id == "clean"`` gives the
        loudness-normalised speech alone.
    ws : aiplib.workspace.Workspace
    write : str or Path, optional
        Also write the stimulus to this WAV file (float32).

    Returns
    -------
    y : np.ndarray [shape=(n,)], float32, 16 kHz
    info : MixInfo

    Raises
    ------
    AudioFileError
        If a file is missing, unreadable, or silent.
    AiplibParameterError
        If the row is incomplete.
    """
    try:
        speech_path = ws.path(row["speech_path"])
        bg_id = str(row["bg_id"])
    except KeyError as exc:
        raise AiplibParameterError(f"manifest row lacks {exc}") from None
    gain_db = speech_gain_db(speech_path)
    speech = load_audio_cached(speech_path) * np.float32(10.0 ** (gain_db / 20.0))
    lufs = SPEECH_LUFS
    if bg_id == "clean":
        peak = float(np.max(np.abs(speech)))
        scale = 1.0 if peak <= PEAK_LIMIT else PEAK_LIMIT / peak
        y = (speech * np.float32(scale)).astype(np.float32)
        info = MixInfo(float("inf"), float("inf"), lufs, float("-inf"), peak * scale, scale)
    else:
        bg = load_audio_cached(ws.path(row["bg_path"]))
        seg = background_segment(bg, int(row["bg_offset"]), speech.shape[0])
        y, info = mix_at_snr(speech, seg, float(row["snr_db"]))
        info = MixInfo(info.achieved_snr_db, info.target_snr_db, lufs, info.bg_gain_db, info.peak,
                       info.clip_scale)
    if write is not None:
        write_wav(write, y, sr=SR)
    return y, info
