"""Power a listener cannot hear (a DC offset, rumble below 20 Hz) and the band a recording fills.

A background written as ``0.2·x + 0.3`` has most of its power in the offset: loudness
normalisation and the mixer's power-based SNR then describe the offset, not the sound, and a
"0 dB" stimulus is in effect clean. :func:`subaudible_power` measures that share,
:func:`remove_subaudible` takes it out (the custom and demo profiles' curation does so before
loudness normalisation; the paper profile keeps the authors' files as they are),
:func:`effective_bandwidth_hz` finds where the spectrum of a band-limited source (e.g. resampled up
from 8 kHz) ends.
"""
from __future__ import annotations

import numpy as np
from scipy.signal import butter, sosfiltfilt, welch

from aiplib.core.errors import AiplibParameterError

__all__ = ["SUBAUDIBLE_HZ", "SUBAUDIBLE_LIMIT_DB", "BANDWIDTH_FLOOR_DB", "BAND_LIMITED_SHARE",
           "subaudible_power", "remove_subaudible", "effective_bandwidth_hz"]

SUBAUDIBLE_HZ = 20.0
"""Lower limit of hearing used here, Hz (the usual 20 Hz – 20 kHz audible range)."""

SUBAUDIBLE_LIMIT_DB = -20.0
"""A background whose DC + sub-20 Hz power is at least this share of its total power (dB, i.e.
1 %) gets a validation warning and, where the profile removes it, is high-passed. Below it the
nominal and the audible SNR differ by less than 0.044 dB and the file is used bit for bit (white
noise itself has 20/8000 of its power, −26 dB, below 20 Hz at 16 kHz)."""

BANDWIDTH_FLOOR_DB = 60.0
"""The effective bandwidth ends at the highest frequency whose smoothed spectrum is within this
many dB of the spectrum's maximum."""

BAND_LIMITED_SHARE = 0.875
"""A source whose effective bandwidth is below this fraction of the Nyquist frequency (7 kHz at
16 kHz) is noted as band-limited."""

_FLOOR_DB = -150.0


def _db(share: float) -> float:
    return float(10.0 * np.log10(share)) if share > 0 else _FLOOR_DB


def subaudible_power(y, *, sr: int, cutoff_hz: float = SUBAUDIBLE_HZ) -> dict[str, float]:
    """Share of a signal's power that is DC or below ``cutoff_hz``, in dB re its total power.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int > 0, Hz
    cutoff_hz : float > 0, Hz

    Returns
    -------
    dict
        ``dc_db``: 10·log10(mean(y)² / mean(y²)); ``subaudible_db``: 10·log10 of the power in the
        DFT bins below ``cutoff_hz`` (DC included) over the total (Parseval); ``audible_share``:
        1 − that share (linear). Shares of 0 are reported as −150 dB. For ``0.2·x + 0.3`` with
        unit-power ``x``: ``dc_db`` = 10·log10(0.09 / 0.13) = −1.6 dB.

    Raises
    ------
    AiplibParameterError
        If ``y`` is empty or all zeros, or ``sr`` / ``cutoff_hz`` is not positive.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    if sr <= 0 or cutoff_hz <= 0:
        raise AiplibParameterError(f"sr ({sr} Hz) and cutoff_hz ({cutoff_hz} Hz) must be > 0")
    total = float(np.mean(y ** 2)) if y.size else 0.0
    if total == 0.0:
        raise AiplibParameterError("subaudible_power: the signal is empty or all zeros")
    dc = float(np.mean(y)) ** 2
    spec = np.abs(np.fft.rfft(y)) ** 2
    spec[1:] *= 2.0  # one-sided: every bin but DC (and Nyquist, negligible) stands for two
    if y.size % 2 == 0:
        spec[-1] /= 2.0
    f = np.fft.rfftfreq(y.size, d=1.0 / sr)
    share = float(spec[f < cutoff_hz].sum() / spec.sum())
    return {"dc_db": _db(dc / total), "subaudible_db": _db(share), "audible_share": 1.0 - share}


def remove_subaudible(y, *, sr: int, cutoff_hz: float = SUBAUDIBLE_HZ, order: int = 4) -> np.ndarray:
    """Remove the DC offset and rumble below ``cutoff_hz``: mean subtraction, then a zero-phase
    Butterworth high-pass.

    The filter is ``scipy.signal.butter(order, cutoff_hz, "highpass", fs=sr, output="sos")`` run
    forwards and backwards (``scipy.signal.sosfiltfilt``, odd padding): no phase shift or delay,
    magnitude response squared (−6 dB at ``cutoff_hz``, ``2 * order`` × 6 dB per octave below,
    within 0.01 dB of unity above 2 × ``cutoff_hz`` for ``order=4``).

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int > 0, Hz
    cutoff_hz : float, Hz, 0 < cutoff_hz < sr / 2
    order : int ≥ 1

    Returns
    -------
    np.ndarray [shape=(n,)], float32

    Raises
    ------
    AiplibParameterError
        If the cut-off is outside (0, sr / 2) or ``y`` is too short for the filter's padding.
    """
    if not 0 < cutoff_hz < sr / 2:
        raise AiplibParameterError(f"cutoff_hz must be in (0, {sr / 2:g}) Hz, got {cutoff_hz}")
    y = np.asarray(y, dtype=np.float64).ravel()
    sos = butter(int(order), float(cutoff_hz), btype="highpass", fs=sr, output="sos")
    pad = 3 * (2 * len(sos) + 1)
    if y.size <= pad:
        raise AiplibParameterError(f"remove_subaudible: {y.size} samples is too short (> {pad} needed)")
    return sosfiltfilt(sos, y - y.mean()).astype(np.float32)


def effective_bandwidth_hz(y, *, sr: int, floor_db: float = BANDWIDTH_FLOOR_DB) -> float:
    """Highest frequency (Hz) whose power spectrum is within ``floor_db`` of its maximum.

    The spectrum is Welch's estimate (``scipy.signal.welch``, Hann window of 2048 samples, 50 %
    overlap), DC and the sub-20 Hz bins left out of the maximum. A recording resampled up from
    8 kHz gives about 4000 Hz; broadband noise at 16 kHz gives about 8000 Hz.

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float
    sr : int > 0, Hz
    floor_db : float > 0, dB

    Returns
    -------
    float, Hz
        0.0 for an all-zero signal.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    f, p = welch(y, fs=sr, nperseg=min(2048, y.size))
    audible = f >= SUBAUDIBLE_HZ
    if not np.any(p[audible] > 0):
        return 0.0
    top = p[audible].max()
    above = np.flatnonzero(audible & (p >= top * 10.0 ** (-floor_db / 10.0)))
    return float(f[above[-1]])
