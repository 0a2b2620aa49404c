"""The ``channel`` condition family: the phone / codec / room chain as named, seeded transforms.

Every condition is ``apply(name, y, sr, *, seed, params) -> (y_out, info)`` on a mono float32
waveform; the output is float32 and, except for the cuts, as long as the input. The same
``(y, sr, name, seed, params)`` gives bit-identical output (codecs: with the same ffmpeg build;
rooms: with the same pyroomacoustics). :data:`CHANNEL_CONDITIONS` is the default grid;
``applies_to`` is ``"speech"`` (the room: before the mixer) or ``"mixture"`` (everything after the
microphone: band, codec, network, level, echo, cut).

Levels in dBFS are RMS levels re full scale, ``10·log10(mean(y²))`` over the whole signal (the
mixer's mean-power definition; not the ITU-T P.56 active speech level).
"""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Mapping
from importlib import metadata

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.io.audio import SR, valid_audio
from aiplib.stimuli.channel_external import (
    CODECS,
    ChannelUnavailableError,
    codec,
    codec_skip_reason,
    ffmpeg_encoders,
    resample,
    reverb,
)
from aiplib.stimuli.manifests import FamilyOptions, ManifestPlan, compact_json, item_row
from aiplib.stimuli.mixing import SPEECH_LUFS, MixInfo, normalized_speech

#: Seeded draws use ``default_rng([seed, SEED_STREAM])``, independent of the mixer's
#: ``default_rng(seed)``.
SEED_STREAM = 14


def rms_dbfs(y) -> float:
    """RMS level in dBFS, ``10·log10(mean(y²))`` (float64); ``-inf`` for digital silence."""
    p = float(np.mean(np.square(np.asarray(y, dtype=np.float64))))
    return 10.0 * math.log10(p) if p > 0 else -math.inf


# ---- telephone band ---------------------------------------------------------------------------

#: Sampling rate of the telephone channel, Hz.
TEL_RATE_HZ = 8000
#: Width of the band-pass's transition bands, Hz.
TEL_TRANSITION_HZ = 50.0
#: Stopband attenuation of the band-pass, dB.
TEL_STOPBAND_DB = 60.0


def telephone_filter(
    low_hz: float = 300.0, high_hz: float = 3400.0, rate_hz: int = TEL_RATE_HZ
) -> np.ndarray:
    """FIR taps of the telephone band-pass at ``rate_hz``.

    Linear-phase Kaiser-window FIR (``scipy.signal.kaiserord`` / ``firwin``), ≥ 60 dB stopband
    attenuation outside ``[low_hz, high_hz]`` with 50 Hz transition bands inside it (−6 dB at
    ``low_hz + 25`` and ``high_hz − 25`` Hz). 300–3400 Hz is the channel of ITU-T G.712 / G.120; at
    8 kHz the filter has 583 taps (odd, so its delay is removed exactly).

    Returns
    -------
    np.ndarray [shape=(taps,)], float64
    """
    from scipy import signal

    if not 0 < low_hz + TEL_TRANSITION_HZ < high_hz - TEL_TRANSITION_HZ < rate_hz / 2:
        raise AiplibParameterError(
            f"telephone band {low_hz}–{high_hz} Hz does not fit {rate_hz} Hz"
        )
    taps, beta = signal.kaiserord(TEL_STOPBAND_DB, TEL_TRANSITION_HZ / (rate_hz / 2))
    taps += 1 - taps % 2
    half = TEL_TRANSITION_HZ / 2
    return signal.firwin(
        taps, [low_hz + half, high_hz - half], pass_zero=False, window=("kaiser", beta), fs=rate_hz
    )


def telephone(
    y: np.ndarray,
    sr: int,
    *,
    low_hz: float = 300.0,
    high_hz: float = 3400.0,
    rate_hz: int = TEL_RATE_HZ,
) -> tuple[np.ndarray, dict]:
    """Narrowband telephone channel: resample to 8 kHz (soxr "HQ"), band-pass 300–3400 Hz
    (:func:`telephone_filter`, ``fftconvolve(mode="same")``), resample back; cut / zero-padded to
    ``len(y)``.
    """
    from scipy import signal

    h = telephone_filter(low_hz, high_hz, rate_hz)
    nb = signal.fftconvolve(resample(y, sr, rate_hz).astype(np.float64), h, mode="same")
    back = resample(nb.astype(np.float32), rate_hz, sr)[: y.size]
    out = np.pad(back, (0, y.size - back.size))  # cut, then zero-padded to len(y)
    return out, {
        "filter": "Kaiser-window linear-phase FIR",
        "taps": int(h.size),
        "stopband_db": TEL_STOPBAND_DB,
        "transition_hz": TEL_TRANSITION_HZ,
        "resampler": "soxr_hq",
    }


# ---- network, level, echo, cut ----------------------------------------------------------------


def packet_loss(
    y: np.ndarray, sr: int, *, seed: int, loss_rate: float = 0.10, frame_ms: float = 20.0
) -> tuple[np.ndarray, dict]:
    """Zero ``round(loss_rate · n_frames)`` frames of ``frame_ms`` ms, chosen at random (seeded).

    Frames are consecutive blocks of ``round(frame_ms · sr / 1000)`` samples; the lost ones are
    ``sorted(rng.choice(n_frames, k, replace=False))`` with ``rng = default_rng([seed, 14])``:
    independent losses, zero-filled (no concealment). 20 ms is the usual RTP / VoIP packet.

    Returns
    -------
    y_out, info
        ``info``: ``lost_frames``, ``frame_samples``, ``n_frames``.
    """
    if not 0.0 <= loss_rate <= 1.0 or frame_ms <= 0:
        raise AiplibParameterError(
            f"packet_loss needs 0 <= loss_rate <= 1 and frame_ms > 0, got {loss_rate}, {frame_ms}"
        )
    flen = max(1, int(round(frame_ms * sr / 1000.0)))
    n_frames = -(-y.size // flen)
    k = int(round(loss_rate * n_frames))
    rng = np.random.default_rng([int(seed), SEED_STREAM])
    lost = np.sort(rng.choice(n_frames, size=k, replace=False)) if k else np.zeros(0, dtype=int)
    out = y.copy()
    for f in lost:
        out[f * flen : (f + 1) * flen] = 0.0
    return out, {
        "lost_frames": [int(f) for f in lost],
        "frame_samples": flen,
        "n_frames": int(n_frames),
    }


def clip(y: np.ndarray, sr: int, *, gain_db: float) -> tuple[np.ndarray, dict]:
    """Overdrive: multiply by ``10^(gain_db/20)`` then hard-clip to [−1, 1];
    ``info["clipped_share"]`` is the share of samples now at ±1.
    """
    g = 10.0 ** (gain_db / 20.0)
    z = y.astype(np.float64) * g
    share = float(np.mean(np.abs(z) > 1.0))
    return np.clip(z, -1.0, 1.0).astype(np.float32), {"gain_linear": g, "clipped_share": share}


def level(y: np.ndarray, sr: int, *, dbfs: float) -> tuple[np.ndarray, dict]:
    """Scale to an RMS level of ``dbfs`` dBFS (no clipping).

    Raises
    ------
    AiplibParameterError
        If ``y`` is digital silence.
    """
    before = rms_dbfs(y)
    if not math.isfinite(before):
        raise AiplibParameterError("level: the signal is digital silence and cannot be scaled")
    gain_db = dbfs - before
    out = (y.astype(np.float64) * 10.0 ** (gain_db / 20.0)).astype(np.float32)
    return out, {"dbfs_before": before, "dbfs_after": rms_dbfs(out), "gain_db": gain_db}


def echo(y: np.ndarray, sr: int, *, delay_ms: float, gain_db: float) -> tuple[np.ndarray, dict]:
    """Add one copy of ``y`` delayed by ``delay_ms`` ms and scaled by ``gain_db`` dB (≤ 0), same
    length, not clipped (a talker/line echo path, ITU-T G.131 / G.168).
    """
    d = int(round(delay_ms * sr / 1000.0))
    if d <= 0 or gain_db > 0:
        raise AiplibParameterError(
            f"echo needs delay_ms > 0 and gain_db <= 0, got {delay_ms}, {gain_db}"
        )
    g = 10.0 ** (gain_db / 20.0)
    out = y.astype(np.float64)
    if d < y.size:
        out[d:] += g * y[:-d].astype(np.float64)
    return out.astype(np.float32), {"delay_samples": d, "gain_linear": g}


def cut(y: np.ndarray, sr: int, *, where: str, ms: float) -> tuple[np.ndarray, dict]:
    """Remove the first (``where="head"``) or last (``"tail"``) ``ms`` ms (late VAD, push-to-talk).

    Raises
    ------
    AiplibParameterError
        If ``where`` is neither ``head`` nor ``tail`` or nothing would be left.
    """
    n = int(round(ms * sr / 1000.0))
    if where not in ("head", "tail") or n < 0:
        raise AiplibParameterError(
            f"cut needs where in (head, tail) and ms >= 0, got {where!r}, {ms}"
        )
    if n >= y.size:
        raise AiplibParameterError(
            f"cut {where} {ms} ms ({n} samples) leaves nothing of {y.size} samples"
        )
    return (y[n:] if where == "head" else y[: y.size - n]).copy(), {"removed_samples": n}


#: Transform name → (function(y, sr, [*, seed], **params), applies_to, what it models, source);
#: the functions with a ``seed`` parameter (``packet_loss``, ``reverb``) are given the row's seed.
TRANSFORMS = {
    "telephone": (
        telephone,
        "mixture",
        "narrowband telephone channel: 8 kHz sampling and the 300–3400 Hz voice band",
        "ITU-T G.712 / G.120 (300–3400 Hz channel)",
    ),
    "codec": (codec, "mixture", "a speech codec's encode/decode round trip (ffmpeg)", None),
    "packet_loss": (
        packet_loss,
        "mixture",
        "lost VoIP packets, zero-filled (no concealment)",
        "20 ms RTP/VoIP frames; independent losses",
    ),
    "clip": (
        clip,
        "mixture",
        "a front end overdriven past full scale, hard clipping",
        "hard clip at ±1 (full scale) after the gain",
    ),
    "level": (
        level,
        "mixture",
        "a very quiet input (distant talker, low gain)",
        "RMS dBFS, the mixer's mean-power definition",
    ),
    "reverb": (
        reverb,
        "speech",
        "a reverberant room (image-source shoebox)",
        "pyroomacoustics ISM (Scheibler et al. 2018; Allen & Berkley 1979); T30 calibrated",
    ),
    "echo": (
        echo,
        "mixture",
        "one echo path: a delayed, attenuated copy",
        "ITU-T G.131 / G.168 (talker and line echo)",
    ),
    "cut": (cut, "mixture", "speech cut off at the start or end (late VAD / push-to-talk)", "—"),
}

#: The default grid: condition name → parameters (``transform`` + its keyword arguments; units in
#: the key names: Hz, ms, s, dB, dBFS, kbit/s). Treat as read-only; :func:`apply` copies.
CHANNEL_CONDITIONS: dict[str, dict] = {
    "telephone": {"transform": "telephone", "low_hz": 300.0, "high_hz": 3400.0},
    **{c: {"transform": "codec", "codec": c} for c in ("g711_alaw", "g711_mulaw", "gsm_fr")},
    "amr_nb_12k2": {"transform": "codec", "codec": "amr_nb", "bitrate_kbps": 12.2},
    "opus_8k": {"transform": "codec", "codec": "opus", "bitrate_kbps": 8.0},
    "packet_loss_10pct": {"transform": "packet_loss", "loss_rate": 0.10, "frame_ms": 20.0},
    **{f"clip_+{db}db": {"transform": "clip", "gain_db": float(db)} for db in (12, 20, 30)},
    **{f"level_{db}dbfs": {"transform": "level", "dbfs": float(db)} for db in (-40, -50, -60)},
    **{
        f"reverb_rt60_{rt:.1f}s": {"transform": "reverb", "rt60_s": rt, "n_rooms": 1}
        for rt in (0.3, 0.6, 0.9, 1.2)
    },
    "echo_100ms_-6db": {"transform": "echo", "delay_ms": 100.0, "gain_db": -6.0},
    **{f"cut_{w}_300ms": {"transform": "cut", "where": w, "ms": 300.0} for w in ("head", "tail")},
}


def _resolve(name: str, params: Mapping | None) -> dict:
    """The parameters of condition (or transform) ``name``: the grid's, overridden by ``params``."""
    params = dict(params or {})
    if name in CHANNEL_CONDITIONS:
        resolved = {**CHANNEL_CONDITIONS[name], **params}
    elif name in TRANSFORMS:
        resolved = {"transform": name, **params}
    else:
        raise AiplibParameterError(
            f"unknown channel condition {name!r}; known conditions: "
            f"{', '.join(CHANNEL_CONDITIONS)}; transforms: {', '.join(TRANSFORMS)}"
        )
    if resolved["transform"] not in TRANSFORMS:
        raise AiplibParameterError(f"{name}: unknown transform {resolved['transform']!r}")
    return resolved


def skip_reason(name: str, params: Mapping | None = None) -> str | None:
    """Why condition ``name`` (with ``params`` over the grid's) cannot run here (a codec the local
    ffmpeg cannot encode), or None."""
    p = _resolve(name, params)
    if p["transform"] == "codec":
        return codec_skip_reason(p["codec"])
    return None


def apply(
    name: str, y, sr: int = SR, *, seed: int, params: Mapping | None = None
) -> tuple[np.ndarray, dict]:
    """Apply channel condition ``name`` to a mono waveform.

    Parameters
    ----------
    name : str
        A key of :data:`CHANNEL_CONDITIONS` (its parameters are the defaults) or of
        :data:`TRANSFORMS`.
    y : np.ndarray [shape=(n,)], float
        Mono, full scale ±1 (:func:`aiplib.io.audio.valid_audio`).
    sr : int, Hz
    seed : int
        Used by ``packet_loss`` and ``reverb``; recorded by all.
    params : Mapping, optional
        Override the grid's parameters (units in the key names).

    Returns
    -------
    y_out : np.ndarray [shape=(n,) or shorter for ``cut``], float32
    info : dict (JSON-serialisable)
        ``condition, transform, params, seed, applies_to, sr, n_in, n_out`` and the transform's own.

    Raises
    ------
    AiplibParameterError
        Unknown name, invalid ``y`` or parameters.
    ChannelUnavailableError
        A codec the local ffmpeg cannot encode (skip the condition, report ``exc.reason``).
    """
    p = _resolve(name, params)
    y = valid_audio(np.asarray(y), name=f"channel {name}")
    if not isinstance(seed, (int, np.integer)):
        raise AiplibParameterError(f"channel {name}: seed must be an int, got {seed!r}")
    transform = p.pop("transform")
    fn, applies_to = TRANSFORMS[transform][:2]
    kw = dict(p)
    if "seed" in inspect.signature(fn).parameters:
        kw["seed"] = int(seed)
    try:
        inspect.signature(fn).bind(y, int(sr), **kw)
    except TypeError as exc:
        raise AiplibParameterError(f"channel {name}: bad parameters {p}: {exc}") from None
    out, extra = fn(y, int(sr), **kw)
    info = {
        "condition": name,
        "transform": transform,
        "params": p,
        "seed": int(seed),
        "applies_to": applies_to,
        "sr": int(sr),
        "n_in": int(y.size),
        "n_out": int(out.size),
        **extra,
    }
    return out, info


def describe():
    """The channel-conditions table for the report, one row per :data:`CHANNEL_CONDITIONS` entry:
    ``condition, transform, parameters, applies_to, models, source, available, skip_reason``.
    """
    rows = []
    for name, p in CHANNEL_CONDITIONS.items():
        _, applies_to, models, source = TRANSFORMS[p["transform"]]
        if p["transform"] == "codec":
            models = f"{p['codec']} encode/decode round trip through ffmpeg"
            source = CODECS[p["codec"]]["source"]
        reason = skip_reason(name)
        rows.append(
            {
                "condition": name,
                "transform": p["transform"],
                "parameters": ", ".join(f"{k}={v}" for k, v in p.items() if k != "transform"),
                "applies_to": applies_to,
                "models": models,
                "source": source,
                "available": reason is None,
                "skip_reason": reason or "",
            }
        )
    return pd.DataFrame(rows)


# ---- the family's stages 5 and 7 (:data:`aiplib.stimuli.families.MIXERS`) -------------------


def _channel_rows(names: list, reasons: dict):
    """The ``item_rows`` of :class:`aiplib.stimuli.manifests.ManifestPlan`: one item's row per
    runnable condition of ``names``; every condition, skipped ones too, takes a seed."""

    def item_rows(item, spec, extra, n, seed):  # snr_db: the clean rows' 99
        rows = []
        for k, name in enumerate(names):
            if reasons[name] is not None:
                continue
            condition = dict(
                id=f"{item['item_id']}_ch_{name}",
                background_id=name,
                condition=f"channel_{name}",
                channel_condition=name,
                applied_to="speech",
                condition_params=compact_json(_resolve(name, {})),
            )
            rows.append(item_row(item, spec, extra, seed + k, condition))
        return rows, len(names)

    return item_rows


def manifest_plan(ws, task, options: FamilyOptions) -> ManifestPlan:
    """Stage 5's channel rows: every condition of ``options.conditions`` (default
    :data:`CHANNEL_CONDITIONS`) the local tools can run, applied to the clean speech.

    A row: id ``<item>_ch_<name>``, ``background_id = <name>``, ``snr_db = 99`` (no added noise),
    ``condition = channel_<name>``; ``channel_condition``, ``applied_to`` (``speech``) and
    ``condition_params`` (the resolved parameters, compact JSON). A condition that cannot run here
    (a codec the local ffmpeg cannot encode) is no row but is listed in ``skipped`` with the reason;
    it keeps its seed, so the other rows' seeds do not depend on the local ffmpeg.
    """
    if options.conditions is None:
        names = list(CHANNEL_CONDITIONS)
    else:
        names = list(options.conditions)
    reasons = {c: skip_reason(c) for c in names}
    runnable = [c for c in names if reasons[c] is None]
    skipped = pd.DataFrame(
        [(c, r) for c, r in reasons.items() if r], columns=["condition", "reason"]
    )
    params = dict(
        conditions={c: _resolve(c, {}) for c in runnable},
        skipped=skipped.values.tolist(),
        seeds="one per condition, skipped ones too",
    )
    return ManifestPlan(
        params=params, inputs=[], item_rows=_channel_rows(names, reasons), skipped=skipped
    )


def key_fields(row, rec, ws, hashes) -> dict:
    """The resume key's channel part: ``tools``, the version of the external tool that decides the
    output (:func:`tool_versions`), so a new ffmpeg re-runs the codec stimuli."""
    name = rec.get("channel_condition") or str(rec.get("background_id"))
    try:
        return {"tools": tool_versions(name)}
    except Exception as exc:  # noqa: BLE001 - an unknown condition fails at materialisation
        return {"tools": f"unknown: {type(exc).__name__}"}


def tool_versions(name: str, params: Mapping | None = None) -> dict:
    """The external tool whose build decides condition ``name``'s output: ``{"ffmpeg": version}``
    for codecs, ``{"pyroomacoustics": version}`` for rooms, ``{}`` otherwise.
    """
    t = _resolve(name, params)["transform"]
    if t == "codec":
        try:
            return {"ffmpeg": ffmpeg_encoders()[0].split(" Copyright")[0]}
        except ChannelUnavailableError as exc:
            return {"ffmpeg": exc.reason}
    if t == "reverb":
        try:
            return {"pyroomacoustics": metadata.version("pyroomacoustics")}
        except metadata.PackageNotFoundError:
            return {"pyroomacoustics": "missing"}
    return {}


def _row_params(row) -> dict:
    """A channel row's ``condition_params`` (JSON; ``{}`` when empty or NaN)."""
    raw = row.get("condition_params")
    if raw in (None, "") or raw != raw:
        return {}
    return json.loads(str(raw))


def row_components(row, ws) -> dict:
    """Materialise a channel manifest row (the family's ``row_components``): the speech at −23
    LUFS as by the mixer, then :func:`apply` ``(channel_condition, s, 16000, seed=row seed,
    params=condition_params)``; not peak-scaled.

    Returns
    -------
    dict
        ``mixture`` (float32 (m,), ``m = n`` except for the cuts), ``speech``, ``background``
        (``mixture − speech``; zeros for a cut), ``info`` (:class:`aiplib.stimuli.mixing.MixInfo`,
        SNR ``inf``), ``detail`` (:func:`apply`'s info).

    Raises
    ------
    AiplibParameterError
        Bad ``condition_params`` or seed; ChannelUnavailableError for a codec ffmpeg lacks.
    """
    rid = row.get("id")
    name = str(row.get("channel_condition") or row.get("background_id"))
    try:
        params = _row_params(row)
        seed = int(row["seed"])
        speech_rel = str(row["speech_path"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AiplibParameterError(
            f"channel row {rid!r}: bad condition_params/seed/speech_path ({exc})"
        ) from None
    s, measured = normalized_speech(ws.path(speech_rel))
    try:
        y, info = apply(name, s, SR, seed=seed, params=params)
    except AiplibParameterError as exc:
        raise AiplibParameterError(f"channel row {rid!r} ({speech_rel}): {exc}") from None
    if y.size == s.size:
        speech = s.copy()
        bg = (y.astype(np.float64) - s).astype(np.float32)
    else:  # a cut: the output is the speech that is left
        speech = y.copy()
        bg = np.zeros_like(y)
    lufs = SPEECH_LUFS if np.isfinite(measured) else measured
    mi = MixInfo(
        math.inf,
        math.inf,
        lufs,
        -math.inf,
        float(np.max(np.abs(y))),
        1.0,
        speech_peak=float(np.max(np.abs(s))),
    )
    return dict(mixture=y, speech=speech, background=bg, info=mi, detail=info)
