"""The embedded Whisper's decoding paths, encoder-window policy and CPU arrangements (no model
needed: stage 7's resume key is computed before any model loads; the paths are described in
:mod:`aiplib.inference.models.whisper`).
"""

from __future__ import annotations

import math

from aiplib.core.errors import AiplibParameterError
from aiplib.io.audio import SR

#: decoding paths (aiplib.inference.models.whisper)
PATHS = ("window", "fast", "standard")
#: Whisper's 30 s window in mel frames
FULL_WINDOW_FRAMES = 3000
#: mel frames per second of audio (hop of 160 samples at 16 kHz)
FRAMES_PER_S = 100
#: encoder windows of the window path, whole seconds <= 30
WINDOWS_S = (15, 20, 30)
#: zero-padded seconds the window path leaves at least after the stimulus
MIN_PAD_S = 5.0
#: The encoder windows of the ``fast`` and ``standard`` paths: Whisper's 30 s only.
FULL_WINDOW_S = (30,)
#: How the fast path spreads a batch over the CPU (``WhisperOptions.arrangement``): ``per_clip``,
#: one CTranslate2 worker whose intra-op threads take every usable core, one clip per encoder call
#: (the log-mel features of the next clips computed in a helper thread meanwhile) and the whole
#: batch in one decoder call; ``sub_batches``, one worker per core with one thread each, the batch
#: split into a sub-batch per worker, each encoded in one call then decoded. Both give the same
#: transcripts (tests/test_whisper.py). ``per_clip`` is opt-in: on 2 idle cores its loop took
#: 1.09-1.13x the time of ``sub_batches`` (192 identical transcripts per pair), and on loaded cores
#: its intra-op threads wait on each other (``benchmarks/bench_inference.py --arrangements``,
#: docs/BENCHMARKS.md).
ARRANGEMENTS = ("per_clip", "sub_batches")
#: The fast path's arrangement on CPU unless told (:data:`ARRANGEMENTS`).
DEFAULT_ARRANGEMENT = "sub_batches"


def check_arrangement(name: str | None) -> str:
    """``name`` (None: :data:`DEFAULT_ARRANGEMENT`) checked against :data:`ARRANGEMENTS`.

    Raises
    ------
    AiplibParameterError
        ``name`` is not one of :data:`ARRANGEMENTS`.
    """
    if name is None:
        return DEFAULT_ARRANGEMENT
    if name not in ARRANGEMENTS:
        raise AiplibParameterError(
            f"arrangement must be one of {', '.join(ARRANGEMENTS)}, got {name!r}"
        )
    return name


def _check_windows(windows_s) -> tuple[int, ...]:
    """``windows_s`` as sorted distinct whole seconds in 1 … 30 (AiplibParameterError otherwise)."""
    try:
        vals = [float(w) for w in windows_s]
    except (TypeError, ValueError):
        vals = []
    if not vals or any(
        not v.is_integer() or not 1 <= v <= FULL_WINDOW_FRAMES / FRAMES_PER_S for v in vals
    ):
        raise AiplibParameterError(
            f"windows_s must be whole seconds between 1 and 30, got {windows_s!r}"
        )
    return tuple(sorted({int(v) for v in vals}))


def window_frames(n_frames: int, *, windows_s=WINDOWS_S, min_pad_s: float = MIN_PAD_S) -> int:
    """Encoder window, in mel frames, for a clip of ``n_frames`` mel frames (100 per second).

    The shortest ``w`` of ``windows_s`` (whole seconds in 1 … 30) with ``w * 100 >= n_frames +
    min_pad_s
    * 100``; 3,000 frames (30 s) when none is long enough.

    Raises
    ------
    AiplibParameterError
        ``windows_s`` not whole seconds in 1 … 30, or ``min_pad_s`` negative.

    Examples
    --------
    >>> window_frames(400), window_frames(1200), window_frames(1500), window_frames(2600)
    (1500, 2000, 2000, 3000)
    """
    if min_pad_s < 0:
        raise AiplibParameterError(f"min_pad_s must be >= 0 seconds, got {min_pad_s!r}")
    need = int(n_frames) + int(math.ceil(float(min_pad_s) * FRAMES_PER_S))
    return next(
        (w * FRAMES_PER_S for w in _check_windows(windows_s) if w * FRAMES_PER_S >= need),
        FULL_WINDOW_FRAMES,
    )


def window_s(n_samples: int, *, windows_s=WINDOWS_S, min_pad_s: float = MIN_PAD_S) -> int:
    """Encoder window, in seconds, for a 16 kHz clip of ``n_samples`` samples (cut to 30 s):
    :func:`window_frames` of ``n_samples // 160`` frames, divided by 100.

    >>> window_s(4 * 16000), window_s(12 * 16000), window_s(26 * 16000)
    (15, 20, 30)
    """
    n_frames = min(FULL_WINDOW_FRAMES, int(n_samples) // (SR // FRAMES_PER_S))
    return window_frames(n_frames, windows_s=windows_s, min_pad_s=min_pad_s) // FRAMES_PER_S


def decoding_config(
    decoding: str = "fast", *, windows_s=None, min_pad_s: float = MIN_PAD_S
) -> dict:
    """``{"path": "fast" | "standard", "decoding", "windows_s", "min_pad_s"}`` (seconds) of
    ``decoding``.

    ``windows_s`` defaults to :data:`WINDOWS_S` for ``window`` and ``(30,)`` for ``fast``;
    ``standard`` is always 30 s. Raises :class:`AiplibParameterError` for an unknown ``decoding`` or
    a bad window set.
    """
    if decoding not in PATHS:
        raise AiplibParameterError(f"path must be one of {', '.join(PATHS)}, got {decoding!r}")
    if decoding == "standard":
        if windows_s is not None and _check_windows(windows_s) != FULL_WINDOW_S:
            raise AiplibParameterError("the standard path always uses Whisper's 30 s window")
        windows = FULL_WINDOW_S
    else:
        windows = _check_windows(
            windows_s
            if windows_s is not None
            else (WINDOWS_S if decoding == "window" else FULL_WINDOW_S)
        )
    return {
        "path": "standard" if decoding == "standard" else "fast",
        "decoding": decoding,
        "windows_s": list(windows),
        "min_pad_s": float(min_pad_s) if windows != FULL_WINDOW_S else 0.0,
    }


def decoding_key(
    decoding: str = "fast", *, windows_s=None, min_pad_s: float = MIN_PAD_S
) -> dict | None:
    """The part of the decoding configuration that enters stage 7's resume key: None for Whisper's
    30 s window (``fast`` and ``standard``), else ``{"windows_s": [...], "min_pad_s": s}``, so rows
    of another window policy are re-run, never mixed."""
    cfg = decoding_config(decoding, windows_s=windows_s, min_pad_s=min_pad_s)
    return (
        None
        if cfg["windows_s"] == list(FULL_WINDOW_S)
        else {k: cfg[k] for k in ("windows_s", "min_pad_s")}
    )
