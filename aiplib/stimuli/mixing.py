"""Mixing speech with a background at a target SNR, exactly as the authors' mixer.

``mix`` of the authors' ``mixing/mix.py`` (IvLabs/AIP-Speech) with ``loudness_normalize`` /
``load_audio`` of their ``scripts/utils.py`` (written again here, not copied):

1. the speech (16 kHz, float32) → :data:`SPEECH_LUFS` = −23 LUFS with pyloudnorm (unchanged when its
   loudness is ±inf), float32;
2. the background (float32) tiled ``ceil(n / len(bg))`` times if shorter than the ``n`` speech
  samples;
3. the segment starts at ``off = numpy.random.default_rng(seed).integers(0, max(1, len(bg) − n))``;
4. it is multiplied by ``sqrt(ps / (pb · 10^(snr_db / 10)))`` with ``ps = mean(s²) + 1e-9``,
   ``pb = mean(b²) + 1e-9`` (float64);
5. ``y = s + b``, divided by ``max|y|`` when that exceeds 1, cast to float32.

A clean row is the normalised speech alone; a digitally silent segment gives an effectively clean
stimulus (``bg_active`` False).

Ours, outside the ``paper`` profile (:data:`WHOLE_CLIP_PROFILES`): when a clip's leading plus
trailing silence exceeds :data:`aiplib.io.audio.ACTIVE_PART_MIN_SILENCE_S` (1 s; a keyword clip of
3 s with 2 s of silence before the word), ``ps`` and ``pb`` of step 4 are the mean powers over the
clip's active part (:func:`aiplib.io.audio.active_span`), so the word itself hears the label's SNR;
the clip is not trimmed. A 1 s clip (Speech Commands, the demo's) can never cross the threshold, so
its mixture is the authors'.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from aiplib.core.errors import AiplibParameterError, AudioFileError
from aiplib.io.audio import (
    ACTIVE_PART_MIN_SILENCE_S,
    MIN_LOUDNESS_S,
    SR,
    active_span,
    load_audio_cached,
    loudness_meter,
    peak_abs,
)

#: Loudness of the foreground speech in every stimulus, LUFS (the authors' ``SPEECH_LUFS``).
SPEECH_LUFS = -23.0

#: Added to each mean power before the SNR gain is computed (the authors' mixer).
POWER_FLOOR = 1e-9

#: Profiles whose mixer keeps the authors' whole-clip SNR for every clip (no active-part rule).
WHOLE_CLIP_PROFILES = ("paper",)

#: A segment whose mean power ``mean(b²)`` (float64, before scaling) is below this (−100 dB re full
#: scale) is *digital silence*: ``bg_active`` False.
BG_SILENCE_POWER = 1e-10


@dataclass(frozen=True)
class MixInfo:
    """What happened when a stimulus was mixed.

    Attributes
    ----------
    achieved_snr_db, target_snr_db : float, dB
        ``10·log10(Σ s² / Σ b²)`` of the final parts, and the target (``inf`` for clean; achieved
        ``inf`` for a silent segment).
    speech_lufs : float, LUFS
        After normalisation (``-inf`` for silent speech).
    bg_gain_db : float, dB
        ``-inf`` for clean.
    peak, speech_peak : float
        Largest absolute sample of the stimulus, and of the normalised speech (can exceed 1).
    clip_scale : float
        ``1 / max|s + b|`` when the sum exceeded 1, else 1.0.
    bg_offset : int or None, samples
        Start of the segment after tiling; None for clean.
    bg_power : float
        Mean power of the segment before scaling (NaN for clean).
    bg_active : bool or None
        False for digital silence (:data:`BG_SILENCE_POWER`); None for clean.
    """

    achieved_snr_db: float
    target_snr_db: float
    speech_lufs: float
    bg_gain_db: float
    peak: float
    clip_scale: float
    bg_offset: int | None = None
    bg_power: float = float("nan")
    bg_active: bool | None = None
    speech_peak: float = float("nan")


def loudness_normalize(x, target_lufs: float = SPEECH_LUFS, *, name: str = "audio"):
    """Loudness-normalise a signal as the authors' ``scripts/utils.py::loudness_normalize``.

    Parameters
    ----------
    x : np.ndarray [shape=(n,)], float32, 16 kHz
    target_lufs : float, LUFS
    name : str
        What ``x`` is, for the error message.

    Returns
    -------
    y : np.ndarray [shape=(n,)]
        ``x`` itself when its loudness is ±inf, else ``pyloudnorm.normalize.loudness`` as float32.
    measured : float, LUFS
        Integrated loudness of ``x`` (ITU-R BS.1770-4, 0.4 s blocks).

    Raises
    ------
    AudioFileError
        If the signal is shorter than one 0.4 s block, naming ``name`` and its length.
    """
    import pyloudnorm as pyln

    try:
        measured = loudness_meter(SR).integrated_loudness(x)
    except ValueError as exc:
        n = len(x)
        raise AudioFileError(
            f"{name}: loudness cannot be measured ({n} samples = {n / SR:.3f} s at {SR} Hz, "
            f"shorter than the {MIN_LOUDNESS_S:g} s BS.1770 block): {exc}"
        ) from None
    if np.isinf(measured):
        return x, float(measured)
    with warnings.catch_warnings():  # "Possible clipped samples": the peak is recorded instead
        warnings.simplefilter("ignore", UserWarning)
        y = pyln.normalize.loudness(x, measured, target_lufs).astype(np.float32)
    return y, float(measured)


def bg_offset(seed: int, n_bg: int, n_speech: int) -> int:
    """Start sample of the background segment, the authors' rule (without loading the background):
    ``default_rng(seed).integers(0, max(1, L − n_speech))``, ``L`` the length (samples) after tiling
    the ``n_bg`` samples ``ceil(n_speech / n_bg)`` times when shorter than the ``n_speech`` samples.

    Raises
    ------
    AudioFileError
        If the background holds no samples.
    """
    n_bg = int(n_bg)
    n_speech = int(n_speech)
    if n_bg <= 0:
        raise AudioFileError("the background holds no samples")
    if n_bg < n_speech:
        n_bg *= int(np.ceil(n_speech / n_bg))
    return int(np.random.default_rng(int(seed)).integers(0, max(1, n_bg - n_speech)))


def background_segment(bg, seed: int, n: int) -> tuple[np.ndarray, int]:
    """The ``n`` background samples a row with ``seed`` uses, and their offset (samples, into
    the tiled background); ``bg`` [shape=(m,)], the segment [shape=(n,)] in its dtype.
    """
    bg = np.asarray(bg)
    off = bg_offset(seed, bg.shape[0], n)  # raises on an empty background
    return (np.tile(bg, int(np.ceil(n / bg.shape[0]))) if bg.shape[0] < n else bg)[
        off : off + n
    ], off


def segment_active(segment) -> tuple[bool, float]:
    """Whether a background segment is not digital silence: ``(mean(segment²) >= BG_SILENCE_POWER,
    that mean power)`` (float64).
    """
    seg = np.asarray(segment, dtype=np.float64)
    p = float(np.mean(seg * seg)) if seg.size else 0.0
    return bool(p >= BG_SILENCE_POWER), p


@dataclass(frozen=True)
class _Mixed:
    """The authors' mixing steps 2–5 on normalised speech: every part."""

    y: np.ndarray  # the stimulus, float32
    bs: np.ndarray  # the scaled segment
    b: np.ndarray  # the segment before scaling
    offset: int
    gain: float
    peak: float  # max|s + bs| before the peak division
    scale: float  # clip scale
    span: tuple | None = None  # samples [a, b) the SNR is set over; None: the whole clip

    def info(self, s, snr_db, lufs, speech_peak) -> MixInfo:
        active, p_b = segment_active(self.b)
        a, b = self.span or (0, len(s))
        return MixInfo(
            achieved_snr_db=achieved_snr_db(s[a:b], self.bs[a:b]),
            target_snr_db=float(snr_db),
            speech_lufs=lufs,
            bg_gain_db=float(20 * np.log10(self.gain)) if self.gain > 0 else float("-inf"),
            peak=float(min(self.peak, 1.0)),
            clip_scale=float(self.scale),
            bg_offset=int(self.offset),
            bg_power=p_b,
            bg_active=active,
            speech_peak=speech_peak,
        )


def mix_normalized(s, bg, snr_db: float, seed: int, *, span=None) -> _Mixed:
    """The authors' mixing steps 2–5 on normalised speech ``s`` [shape=(n,)]; ``span`` (samples
    ``(a, b)``, :func:`active_span`) sets the SNR over ``s[a:b]`` and the same background samples
    instead of the whole clip (None: the authors' rule, bit for bit)."""
    n = s.shape[0]
    b, off = background_segment(bg, seed, n)
    if span is None:
        ps = float(np.mean(s**2)) + POWER_FLOOR
        pb = float(np.mean(b**2)) + POWER_FLOOR
    else:
        ps = float(np.mean(s[span[0] : span[1]] ** 2)) + POWER_FLOOR
        pb = float(np.mean(b[span[0] : span[1]] ** 2)) + POWER_FLOOR
    gain = np.sqrt(ps / (pb * (10 ** (float(snr_db) / 10))))
    bs = b * gain
    y = s + bs
    peak = peak_abs(y)
    scale = 1.0 / peak if peak > 1.0 else 1.0
    return _Mixed(
        (y / peak if peak > 1.0 else y).astype(np.float32),
        bs,
        b,
        off,
        float(gain),
        peak,
        scale,
        span,
    )


def snr_rule(ws) -> float | None:
    """The leading + trailing silence (s) above which a profile's mixer sets the SNR over a clip's
    active part: None (never: the authors' whole-clip SNR) for :data:`WHOLE_CLIP_PROFILES`, else
    :data:`aiplib.io.audio.ACTIVE_PART_MIN_SILENCE_S`."""
    if getattr(ws, "profile", None) in WHOLE_CLIP_PROFILES:
        return None
    return ACTIVE_PART_MIN_SILENCE_S


@functools.lru_cache(maxsize=512)
def _span(path: str, mtime: float, target: float, min_silence_s: float | None):
    return active_span(_normalized(path, mtime, target)[0], min_silence_s=min_silence_s)


def row_snr_span(row: Mapping, ws):
    """The samples ``(a, b)`` of a manifest row's speech its SNR is set over (:func:`active_span`
    under the workspace's :func:`snr_rule`), None for the whole clip."""
    p = Path(ws.path(str(_row_value(row, "speech_path"))))
    if not p.is_file():
        raise AudioFileError(f"{p}: speech file not found")
    return _span(str(p.resolve()), p.stat().st_mtime, SPEECH_LUFS, snr_rule(ws))


def mix(speech, bg, snr_db: float, seed: int, *, speech_lufs: float = SPEECH_LUFS):
    """Mix speech and a background at ``snr_db``, as the authors' ``mixing/mix.py::mix``.

    Parameters
    ----------
    speech : np.ndarray [shape=(n,)], float32, 16 kHz
        At any level (normalised to ``speech_lufs`` LUFS here).
    bg : np.ndarray [shape=(m,)], float32, or None
        Tiled if shorter; ``None`` gives the normalised speech.
    snr_db : float, dB
    seed : int
        Seeds the background offset.

    Returns
    -------
    y : np.ndarray [shape=(n,)], float32
    info : MixInfo
    """
    s, measured = loudness_normalize(np.asarray(speech, dtype=np.float32), speech_lufs)
    lufs = float(speech_lufs) if np.isfinite(measured) else measured
    speech_peak = peak_abs(s)
    if bg is None:
        return s, _clean_info(lufs, speech_peak)
    m = mix_normalized(s, np.asarray(bg, dtype=np.float32), snr_db, seed)
    return m.y, m.info(s, snr_db, lufs, speech_peak)


def _clean_info(lufs, speech_peak) -> MixInfo:
    return MixInfo(
        float("inf"), float("inf"), lufs, float("-inf"), speech_peak, 1.0, speech_peak=speech_peak
    )


def achieved_snr_db(speech, noise) -> float:
    """``10·log10(Σ speech² / Σ noise²)`` in dB of two parts [shape=(n,)] of a mixture (``inf`` if
    ``noise`` is all zeros).
    """
    s = np.asarray(speech, dtype=np.float64)
    b = np.asarray(noise, dtype=np.float64)
    pb = float(np.dot(b, b))
    if pb == 0.0:
        return float("inf")
    ps = float(np.dot(s, s))
    return float(10.0 * np.log10(ps / pb)) if ps > 0 else float("-inf")


@functools.lru_cache(maxsize=512)
def _normalized(path: str, mtime: float, target: float):
    y = load_audio_cached(path)
    s, measured = loudness_normalize(y, target, name=path)
    s = y.copy() if s is y else s
    s.setflags(write=False)
    return s, measured


def normalized_speech(path, *, target_lufs: float = SPEECH_LUFS):
    """The speech file at ``path`` loudness-normalised as the authors' mixer (cached per file).

    Returns
    -------
    s : np.ndarray [shape=(n,)], float32, read-only
    measured : float, LUFS
        Loudness before normalisation (``-inf``: silent, returned unchanged).

    Raises
    ------
    AudioFileError
        If the file is missing, unreadable or shorter than 0.4 s.
    """
    p = Path(path)
    if not p.is_file():
        raise AudioFileError(f"{p}: speech file not found")
    return _normalized(str(p.resolve()), p.stat().st_mtime, float(target_lufs))


def is_clean_row(row: Mapping) -> bool:
    """True for a clean stimulus: ``condition == "clean"`` or ``background_id == "clean"`` (the
    authors' inference rule)."""
    return str(row.get("condition", "")) == "clean" or str(row.get("background_id", "")) == "clean"


def _row_value(row: Mapping, key: str):
    try:
        return row[key]
    except KeyError:
        raise AiplibParameterError(f"manifest row lacks {key!r} (columns: {sorted(row)})") from None


def mix_row(row: Mapping, ws) -> dict:
    """Materialise a ``background`` row or any clean row with the authors' mixer.

    The SNR is the authors' whole-clip one, or over the speech's active part when the clip's
    silence exceeds the workspace's :func:`snr_rule` (:func:`row_snr_span`).

    Returns
    -------
    dict
        ``mixture``, ``speech`` (the normalised speech as in the mixture: divided by the peak when
        the sum was) and ``background`` (the scaled segment as in the mixture; zeros for clean),
        float32 (n,); ``info`` (:class:`MixInfo`).

    Raises
    ------
    AiplibParameterError
        An incomplete row.
    """
    s, measured = normalized_speech(ws.path(str(_row_value(row, "speech_path"))))
    lufs = SPEECH_LUFS if np.isfinite(measured) else measured
    speech_peak = peak_abs(s)
    if is_clean_row(row):
        return dict(
            mixture=s.copy(),
            speech=s.copy(),
            background=np.zeros_like(s),
            info=_clean_info(lufs, speech_peak),
        )
    snr_cell = _row_value(row, "snr_db")
    seed_cell = _row_value(row, "seed")
    try:
        snr = float(snr_cell)
        seed = int(seed_cell)
    except (TypeError, ValueError):
        raise AiplibParameterError(
            f"row {row.get('id')!r}: snr_db {snr_cell!r} / seed {seed_cell!r} are not numbers"
        ) from None
    if not math.isfinite(snr):
        raise AiplibParameterError(f"row {row.get('id')!r}: snr_db is {snr} on a noisy row")
    bg_path = str(_row_value(row, "bg_path") or "")
    if not bg_path or bg_path == "nan":
        raise AiplibParameterError(f"row {row.get('id')!r}: noisy row without bg_path")
    span = row_snr_span(row, ws)
    m = mix_normalized(s, load_audio_cached(ws.path(bg_path)), snr, seed, span=span)
    sp = (s / m.peak if m.peak > 1.0 else s).astype(np.float32)
    bp = (m.bs / m.peak if m.peak > 1.0 else m.bs).astype(np.float32)
    return dict(mixture=m.y, speech=sp, background=bp, info=m.info(s, snr, lufs, speech_peak))
