"""Channel transforms that need an external tool: speech codecs through ffmpeg, rooms from
pyroomacoustics (call them through :func:`aiplib.stimuli.channel.apply`).

Codecs (:func:`codec`): resampled to the codec's rate with soxr "HQ", quantised to 16-bit PCM,
encoded and decoded by two ``ffmpeg`` processes, resampled back and aligned to the input by
cross-correlation (within ±``max_lag_ms``), cut / zero-padded to the input length. A codec the
local ffmpeg cannot encode is *skipped* with the reason (:class:`ChannelUnavailableError`).

Rooms (:func:`reverb`): shoebox rooms by the image-source method of pyroomacoustics (Scheibler et
al., ICASSP 2018; Allen & Berkley, JASA 1979); the wall absorption starts from the inverse Sabine
formula and is calibrated until the RIR's measured RT60 (T30, Schroeder backward integration) is
within 5 % of the target.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess

import numpy as np

from aiplib.core.errors import AiplibParameterError, MissingPackageError


class ChannelUnavailableError(MissingPackageError):
    """A channel condition cannot run here (its ffmpeg encoder is missing); ``reason`` says why.

    The condition is to be skipped and reported with ``reason``, never replaced.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


#: Codec name → ffmpeg encoder, container, sample rate (Hz), allowed bitrates (kbit/s; None: any
#: 6–510) and the standard it implements.
CODECS = {
    "g711_alaw": {
        "encoder": "pcm_alaw",
        "format": "wav",
        "rate_hz": 8000,
        "bitrates_kbps": (64.0,),
        "source": "ITU-T G.711 (11/1988), A-law companding, 64 kbit/s",
    },
    "g711_mulaw": {
        "encoder": "pcm_mulaw",
        "format": "wav",
        "rate_hz": 8000,
        "bitrates_kbps": (64.0,),
        "source": "ITU-T G.711 (11/1988), μ-law companding, 64 kbit/s",
    },
    "gsm_fr": {
        "encoder": "libgsm",
        "format": "gsm",
        "rate_hz": 8000,
        "bitrates_kbps": (13.2,),
        "source": "ETSI GSM 06.10 full-rate RPE-LTP, 13 kbit/s (libgsm)",
    },
    "amr_nb": {
        "encoder": "libopencore_amrnb",
        "format": "amr",
        "rate_hz": 8000,
        "bitrates_kbps": (4.75, 5.15, 5.9, 6.7, 7.4, 7.95, 10.2, 12.2),
        "source": "3GPP TS 26.090 AMR-NB (opencore-amr)",
    },
    "opus": {
        "encoder": "libopus",
        "format": "ogg",
        "rate_hz": 16000,
        "bitrates_kbps": None,
        "source": "IETF RFC 6716 Opus (libopus), VoIP mode, constant bitrate",
    },
}


def _ffmpeg() -> str:
    """The path of the ffmpeg executable; ChannelUnavailableError when it is not installed."""
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise ChannelUnavailableError("ffmpeg is not installed (`sudo apt-get install ffmpeg`)")
    return exe


@functools.lru_cache(maxsize=1)
def ffmpeg_encoders() -> tuple[str, frozenset]:
    """The local ffmpeg's version line and the set of audio encoder names of ``ffmpeg -encoders``.

    Raises
    ------
    ChannelUnavailableError
        If ffmpeg is not installed.
    """
    exe = _ffmpeg()
    ver = subprocess.run([exe, "-version"], capture_output=True, text=True).stdout.splitlines()[:1]
    out = subprocess.run([exe, "-hide_banner", "-encoders"], capture_output=True, text=True).stdout
    names = {
        p[1] for p in (ln.split() for ln in out.splitlines()) if len(p) > 2 and p[0][:1] == "A"
    }
    return (ver[0] if ver else "ffmpeg (unknown version)"), frozenset(names)


def codec_skip_reason(name: str) -> str | None:
    """Why codec ``name`` cannot run here, or None if the local ffmpeg can encode it.

    Raises
    ------
    AiplibParameterError
        If ``name`` is not a key of :data:`CODECS`.
    """
    if name not in CODECS:
        raise AiplibParameterError(f"unknown codec {name!r}; known: {', '.join(CODECS)}")
    try:
        version, encoders = ffmpeg_encoders()
    except ChannelUnavailableError as exc:
        return exc.reason
    enc = CODECS[name]["encoder"]
    return (
        None
        if enc in encoders
        else (
            f"`ffmpeg -encoders` of the local {version.split(' Copyright')[0]} lists no {enc} "
            f"encoder, so {name} cannot be encoded (it needs an ffmpeg built with {enc}); skipped"
        )
    )


def _run(cmd: list[str], data: bytes, what: str) -> bytes:
    proc = subprocess.run(cmd, input=data, capture_output=True, check=False)
    if proc.returncode != 0 or not proc.stdout:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"ffmpeg failed to {what}: {tail[0]}")
    return proc.stdout


def resample(y: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Resample with soxr at "HQ" quality: bit-identical to ``librosa.resample(res_type="soxr_hq")``
    (what :mod:`aiplib.io.audio` uses), without importing librosa (seconds)."""
    if sr_in == sr_out:
        return np.asarray(y, dtype=np.float32)
    import soxr  # librosa's resampling backend

    return soxr.resample(np.asarray(y, dtype=np.float32), sr_in, sr_out, quality="HQ").astype(
        np.float32
    )


def align_to(d: np.ndarray, x: np.ndarray, max_lag: int) -> tuple[np.ndarray, int]:
    """Shift ``d`` [shape=(m,)] onto ``x`` [shape=(n,)] by the cross-correlation peak within
    ``±max_lag`` samples, cut / zero-padded to ``len(x)``.

    Returns
    -------
    out : np.ndarray [shape=(n,)], float32
        ``out[i] = d[i + lag]`` where that index exists, else 0.
    lag : int, samples
        0 if ``x`` or ``d`` is silent.
    """
    from scipy import signal

    d = np.asarray(d, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    lag = 0
    if np.any(d) and np.any(x):
        c = signal.correlate(d, x, mode="full", method="fft")
        lags = signal.correlation_lags(d.size, x.size, mode="full")
        keep = np.abs(lags) <= max_lag
        lag = int(lags[keep][np.argmax(c[keep])])
    out = np.zeros(x.size, dtype=np.float32)
    lo = max(0, -lag)
    hi = min(x.size, d.size - lag)
    if hi > lo:
        out[lo:hi] = d[lo + lag : hi + lag]
    return out, lag


def codec(
    y: np.ndarray,
    sr: int,
    *,
    codec: str,
    bitrate_kbps: float | None = None,
    max_lag_ms: float = 50.0,
) -> tuple[np.ndarray, dict]:
    """Encode and decode ``y`` with a speech codec through ffmpeg (module notes).

    Parameters
    ----------
    y : np.ndarray [shape=(n,)], float32
    sr : int, Hz
    codec : str
        A key of :data:`CODECS`.
    bitrate_kbps : float or None, kbit/s
        AMR-NB: one of its eight modes (default 12.2); Opus: 6–510 (default 8); fixed for G.711 and
        GSM.
    max_lag_ms : float, ms
        Largest codec delay searched when aligning.

    Returns
    -------
    y_out : np.ndarray [shape=(n,)], float32
    info : dict
        ``codec, encoder, codec_rate_hz, bitrate_kbps, bytes, delay_samples`` (at ``sr``),
        ``saturated_samples`` (|y| > 1 before 16-bit quantisation), ``ffmpeg`` (version line).

    Raises
    ------
    ChannelUnavailableError
        If the local ffmpeg cannot encode ``codec``.
    AiplibParameterError
        For an unknown codec or an impossible bitrate.
    RuntimeError
        If ffmpeg fails.
    """
    reason = codec_skip_reason(codec)
    if reason:
        raise ChannelUnavailableError(reason)
    spec = CODECS[codec]
    rate = spec["rate_hz"]
    extra: list[str] = []
    if codec == "amr_nb":
        bitrate_kbps = 12.2 if bitrate_kbps is None else float(bitrate_kbps)
        if bitrate_kbps not in spec["bitrates_kbps"]:
            raise AiplibParameterError(
                f"AMR-NB bitrate {bitrate_kbps} kbit/s is not one of {spec['bitrates_kbps']}"
            )
        extra = ["-b:a", str(int(round(bitrate_kbps * 1000)))]
    elif codec == "opus":
        bitrate_kbps = 8.0 if bitrate_kbps is None else float(bitrate_kbps)
        if not 6.0 <= bitrate_kbps <= 510.0:
            raise AiplibParameterError(f"Opus bitrate {bitrate_kbps} kbit/s is outside 6–510")
        extra = [
            "-b:a",
            str(int(round(bitrate_kbps * 1000))),
            "-vbr",
            "off",
            "-application",
            "voip",
            "-frame_duration",
            "20",
        ]
    else:
        bitrate_kbps = spec["bitrates_kbps"][0]
    x = resample(y, sr, rate)
    saturated = int(np.count_nonzero(np.abs(x) > 1.0))
    pcm = np.clip(np.round(x.astype(np.float64) * 32768.0), -32768, 32767).astype("<i2").tobytes()
    base = [_ffmpeg(), "-v", "error", "-nostdin", "-threads", "1"]
    bits = _run(
        [
            *base,
            "-f",
            "s16le",
            "-ar",
            str(rate),
            "-ac",
            "1",
            "-i",
            "pipe:0",
            "-c:a",
            spec["encoder"],
            *extra,
            "-f",
            spec["format"],
            "pipe:1",
        ],
        pcm,
        f"encode {codec}",
    )
    raw = _run(
        [
            *base,
            "-f",
            spec["format"],
            "-i",
            "pipe:0",
            "-f",
            "s16le",
            "-ac",
            "1",
            "-ar",
            str(rate),
            "pipe:1",
        ],
        bits,
        f"decode {codec}",
    )
    d = resample(np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0, rate, sr)
    out, lag = align_to(d, y, int(round(max_lag_ms * sr / 1000.0)))
    return out, {
        "codec": codec,
        "encoder": spec["encoder"],
        "codec_rate_hz": rate,
        "bitrate_kbps": float(bitrate_kbps),
        "bytes": len(bits),
        "delay_samples": lag,
        "saturated_samples": saturated,
        "ffmpeg": ffmpeg_encoders()[0].split(" Copyright")[0],
    }


# ---- rooms ------------------------------------------------------------------------------------

#: Ranges (m) of length, width and height the shoebox rooms are drawn from.
ROOM_DIMS_M = ((5.0, 8.0), (4.0, 6.0), (2.7, 3.5))
#: Least distance (m) of source and microphone from every wall.
WALL_MARGIN_M = 0.5
#: Range (m) of the source–microphone distance.
SRC_MIC_M = (1.0, 3.0)
#: Calibration stops when the measured RT60 is within this relative error of the target.
RT60_TOLERANCE = 0.05


@functools.lru_cache(maxsize=32)
def room(rt60_s: float, index: int = 0, sr: int = 16000) -> tuple[np.ndarray, dict]:
    """The room impulse response of synthetic room ``index`` (int >= 0) of the ``rt60_s`` (s > 0)
    bin at ``sr`` Hz (cached).

    Dimensions uniform in :data:`ROOM_DIMS_M`; source and microphone at least :data:`WALL_MARGIN_M`
    from the walls and :data:`SRC_MIC_M` apart, from ``default_rng([round(rt60_s * 1000), index,
    14])``; one calibrated absorption for all walls (module notes); no air absorption.

    Returns
    -------
    h : np.ndarray [shape=(m,)], float32, read-only
    params : dict
        ``rt60_target_s, rt60_measured_s`` (T30), ``dims_m, source_m, mic_m, distance_m, absorption,
        max_order, calibration_steps, sr, pyroomacoustics, room_sha256`` (of these parameters) and
        ``rir_sha256`` (of the float32 little-endian RIR).

    Raises
    ------
    AiplibParameterError
        If ``rt60_s`` is not positive or ``index`` negative.
    MissingPackageError
        If pyroomacoustics is not installed.
    """
    if not rt60_s > 0 or index < 0:
        raise AiplibParameterError(f"room needs rt60_s > 0 and index >= 0, got {rt60_s}, {index}")
    try:
        import pyroomacoustics as pra
    except ImportError:
        raise MissingPackageError(
            "reverberation needs pyroomacoustics: `pip install pyroomacoustics`"
        ) from None
    from pyroomacoustics.experimental import measure_rt60

    rng = np.random.default_rng([int(round(rt60_s * 1000)), int(index), 14])
    dims = np.array([rng.uniform(lo, hi) for lo, hi in ROOM_DIMS_M])
    while True:
        src, mic = (rng.uniform(WALL_MARGIN_M, dims - WALL_MARGIN_M) for _ in range(2))
        dist = float(np.linalg.norm(src - mic))
        if SRC_MIC_M[0] <= dist <= SRC_MIC_M[1]:
            break
    absorption, max_order = pra.inverse_sabine(rt60_s, dims)

    def rir(a):
        """The RIR with wall absorption ``a`` and its measured RT60 (T30, s)."""
        shoebox = pra.ShoeBox(
            dims,
            fs=sr,
            materials=pra.Material(float(a)),
            max_order=int(max_order),
            air_absorption=False,
        )
        shoebox.add_source(src)
        shoebox.add_microphone(mic)
        shoebox.compute_rir()
        h = np.asarray(shoebox.rir[0][0], dtype=np.float32)
        return h, float(measure_rt60(h, fs=sr, decay_db=30))

    h, measured = rir(absorption)
    steps = 0
    while abs(measured / rt60_s - 1.0) > RT60_TOLERANCE and steps < 6:
        absorption = float(min(0.99, absorption * measured / rt60_s))
        h, measured = rir(absorption)
        steps += 1
    params = {
        "rt60_target_s": float(rt60_s),
        "index": int(index),
        "sr": int(sr),
        "dims_m": [round(float(v), 4) for v in dims],
        "source_m": [round(float(v), 4) for v in src],
        "mic_m": [round(float(v), 4) for v in mic],
        "distance_m": round(dist, 4),
        "absorption": round(float(absorption), 6),
        "max_order": int(max_order),
        "calibration_steps": steps,
        "pyroomacoustics": pra.__version__,
    }
    params["room_sha256"] = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
    params["rt60_measured_s"] = round(measured, 4)
    params["rir_sha256"] = hashlib.sha256(h.astype("<f4").tobytes()).hexdigest()
    h.setflags(write=False)
    return h, params


def reverb(
    y: np.ndarray, sr: int, *, seed: int, rt60_s: float, n_rooms: int = 1
) -> tuple[np.ndarray, dict]:
    """Convolve ``y`` with the RIR of room ``seed % n_rooms`` of the ``rt60_s`` bin (:func:`room`),
    aligned on the direct path (the largest tap at sample 0), cut to ``len(y)`` and scaled to the
    input's RMS.

    Returns
    -------
    y_out : np.ndarray [shape=(n,)], float32
    info : dict
        ``room`` (:func:`room`'s params), ``direct_index`` (samples), ``gain_db``.
    """
    from scipy import signal

    if n_rooms < 1:
        raise AiplibParameterError(f"n_rooms must be >= 1, got {n_rooms}")
    h, params = room(float(rt60_s), int(seed) % int(n_rooms), int(sr))
    d0 = int(np.argmax(np.abs(h)))
    wet = signal.fftconvolve(np.asarray(y, dtype=np.float64), h.astype(np.float64))[
        d0 : d0 + y.size
    ]
    rms_in = np.sqrt(np.mean(np.square(y, dtype=np.float64)))
    rms_out = np.sqrt(np.mean(wet**2))
    gain = rms_in / rms_out if rms_out > 0 else 1.0
    return (wet * gain).astype(np.float32), {
        "room": dict(params),
        "direct_index": d0,
        "gain_db": float(20 * np.log10(gain)) if gain > 0 else 0.0,
    }
