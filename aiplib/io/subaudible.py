"""Power a listener cannot hear (a DC offset, rumble below 20 Hz) and the band a recording fills.

A background with most of its power in an offset (``0.2·x + 0.3``) makes loudness normalisation and
the mixer's power-based SNR describe the offset, not the sound: :func:`subaudible_power` measures
that share,
:func:`remove_subaudible` takes it out (custom and demo curation), :func:`effective_bandwidth_hz`
  finds
where a band-limited source's spectrum ends.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import butter, sosfiltfilt, welch

from aiplib.core.errors import AiplibParameterError

#: Lower limit of hearing, Hz.
SUBAUDIBLE_HZ = 20.0
#: DC + sub-20 Hz share of the power (dB, 1 %) from which a background is warned about /
#: high-passed; below it nominal and audible SNR differ by < 0.044 dB (white noise has -26 dB below
#: 20 Hz at 16 kHz).
SUBAUDIBLE_LIMIT_DB = -20.0
#: Butterworth order of the steeper high-pass (:func:`remove_subaudible_steep`) used when the
#: order-4 one leaves a share at or above :data:`SUBAUDIBLE_LIMIT_DB` (a strong rumble just below
#: 20 Hz: order 4 run forwards and backwards takes 20.8 dB off at 15 Hz, order 16 takes 80 dB off
#: and is within 0.01 dB of unity from 25 Hz; scipy.signal.butter's second-order sections stay
#: stable at 20 Hz / 16 kHz).
STEEP_ORDER = 16
#: Sub-20 Hz share (dB re the total power, 10 %) still left after the steeper high-pass from which a
#: background or a speech file is refused: its audible SNR would lie 0.46 dB or more above the
#: nominal one (:func:`audible_excess_db`).
SUBAUDIBLE_REFUSE_DB = -10.0
#: Longest stretch (s) of each end of a signal wrapped around it before the steeper high-pass runs
#: (:func:`remove_subaudible_steep`): the filter's start-up transient then falls outside it.
WRAP_S = 10.0
#: The effective bandwidth ends where the spectrum falls this many dB below its maximum.
BANDWIDTH_FLOOR_DB = 60.0
#: Below this fraction of Nyquist (7 kHz at 16 kHz) a source is band-limited.
BAND_LIMITED_SHARE = 0.875

#: dB reported for a zero power share (keeps the logarithm finite).
_FLOOR_DB = -150.0


def _db(share: float) -> float:
    return float(10.0 * np.log10(share)) if share > 0 else _FLOOR_DB


def subaudible_power(y, *, sr: int, cutoff_hz: float = SUBAUDIBLE_HZ) -> dict[str, float]:
    """Share of the power of ``y`` [shape=(n,)] at ``sr`` Hz that is DC or below ``cutoff_hz`` (Hz),
    in dB re its total power.

    Returns ``dc_db``: 10·log10(mean(y)² / mean(y²)); ``subaudible_db``: 10·log10 of the power in
    the DFT bins below ``cutoff_hz`` (DC included) over the total (Parseval); ``audible_share``: 1 −
    that share (linear). Shares of 0 are reported as −150 dB. For ``0.2·x + 0.3`` with unit-power
    ``x``: ``dc_db`` = 10·log10(0.09 / 0.13) = −1.6 dB.

    Raises
    ------
    AiplibParameterError
        If ``y`` is empty or all zeros, or ``sr`` / ``cutoff_hz`` is not positive.
    """
    y = np.asarray(y, dtype=np.float64).ravel()
    if sr <= 0 or cutoff_hz <= 0:
        raise AiplibParameterError(f"sr ({sr} Hz) and cutoff_hz ({cutoff_hz} Hz) must be > 0")
    total = float(np.mean(y**2)) if y.size else 0.0
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


def audible_excess_db(subaudible_db: float) -> float:
    """How many dB the audible SNR lies above the nominal one when a share ``subaudible_db`` (dB re
    the total power, :func:`subaudible_power`) of a background's power is inaudible:
    ``−10·log10(1 − share)`` (0.044 dB at −20 dB; notebook 06's ``audible_snr_excess_db``)."""
    return float(-10 * np.log10(max(1 - 10 ** (subaudible_db / 10), 1e-15)))


def remove_subaudible(
    y, *, sr: int, cutoff_hz: float = SUBAUDIBLE_HZ, order: int = 4
) -> np.ndarray:
    """Remove the DC offset and rumble below ``cutoff_hz``: mean subtraction, then a Butterworth
    high-pass run forwards and backwards (``scipy.signal.sosfiltfilt``: zero phase, −6 dB at
    ``cutoff_hz``, within 0.01 dB of unity above 2 × ``cutoff_hz`` for ``order=4``). ``y``
    [shape=(n,)] at ``sr`` Hz, ``0 < cutoff_hz < sr / 2`` (Hz); returns float32 [shape=(n,)].

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
        raise AiplibParameterError(
            f"remove_subaudible: {y.size} samples is too short (> {pad} needed)"
        )
    return sosfiltfilt(sos, y - y.mean()).astype(np.float32)


def remove_subaudible_steep(y, *, sr: int, n: int | None = None) -> tuple[np.ndarray, dict]:
    """:func:`remove_subaudible` (order 4), then, when the DC + sub-20 Hz share left is still at or
    above :data:`SUBAUDIBLE_LIMIT_DB` (−20 dB, 1 % of the power), a steeper one on the original
    ``y`` instead: Butterworth order :data:`STEEP_ORDER`, zero-phase (``scipy.signal.sosfiltfilt``)
    over ``y`` with up to :data:`WRAP_S` s of its other end wrapped around each end, as it is looped
    in a background (a strong rumble otherwise leaves the filter's start-up transient at the ends).
    Shares are :func:`subaudible_power`'s, measured over ``y`` looped or cut to ``n`` samples (the
    length a background uses; None: ``y`` as it is). ``y`` [shape=(m,)] at ``sr`` Hz.

    Returns
    -------
    y_out : np.ndarray [shape=(m,)], float32
    record : dict
        ``subaudible_db`` (dB re the total power, before), ``residual_db`` (dB, after), ``order``
        (the Butterworth order used). The caller refuses a signal whose ``residual_db`` is still at
        or above :data:`SUBAUDIBLE_REFUSE_DB` (power just below 20 Hz that no filter takes out
        without taking audible power too). A 15 Hz sine 37 dB above white noise over 3 s: order 4
        leaves −0.3 dB (93 % of the power below 20 Hz), order 16 −42 dB.

    Raises
    ------
    AiplibParameterError
        As :func:`remove_subaudible`.
    """
    y = np.asarray(y, dtype=np.float32).ravel()
    size = y.size if n is None else int(n)

    def share(x) -> float:
        """The DC + sub-20 Hz share of ``x`` over ``size`` samples, dB."""
        return subaudible_power(np.resize(x, size), sr=sr)["subaudible_db"]

    before = share(y)
    out = remove_subaudible(y, sr=sr)
    order = 4
    residual = share(out)
    if residual >= SUBAUDIBLE_LIMIT_DB:
        x = np.asarray(y, dtype=np.float64) - float(np.mean(y, dtype=np.float64))
        k = min(x.size, int(WRAP_S * sr))
        sos = butter(STEEP_ORDER, SUBAUDIBLE_HZ, btype="highpass", fs=sr, output="sos")
        wrapped = np.concatenate([x[x.size - k :], x, x[:k]])
        out = sosfiltfilt(sos, wrapped, padtype="odd", padlen=min(k, sr))[k : k + x.size]
        out = out.astype(np.float32)
        order = STEEP_ORDER
        residual = share(out)
    return out, {"subaudible_db": before, "residual_db": residual, "order": order}


def effective_bandwidth_hz(y, *, sr: int, floor_db: float = BANDWIDTH_FLOOR_DB) -> float:
    """Highest frequency (Hz) whose Welch power spectrum (2048-sample Hann windows) is within
    ``floor_db`` of its maximum above 20 Hz (about 4000 Hz for a recording resampled up from 8 kHz);
    ``y`` [shape=(n,)] at ``sr`` Hz; 0.0 for an all-zero signal."""
    y = np.asarray(y, dtype=np.float64).ravel()
    f, p = welch(y, fs=sr, nperseg=min(2048, y.size))
    audible = f >= SUBAUDIBLE_HZ
    if not np.any(p[audible] > 0):
        return 0.0
    top = p[audible].max()
    above = np.flatnonzero(audible & (p >= top * 10.0 ** (-floor_db / 10.0)))
    return float(f[above[-1]])
