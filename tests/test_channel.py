"""Channel conditions (issue 14, item 4): each transform's defining property, determinism, the
registry and the skip-with-reason contract for codecs the local ffmpeg cannot encode."""
from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from scipy import signal

from aiplib.core.errors import AiplibParameterError
from aiplib.stimuli import channel, channel_external
from aiplib.stimuli.channel import CHANNEL_CONDITIONS, ChannelUnavailableError, apply, rms_dbfs

SR = 16000
needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed")


def noise(n=4 * SR, seed=0, scale=0.1):
    return (scale * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


def speech_like(n=2 * SR, level_dbfs=-23.0):
    """Voiced-speech stand-in: 23 harmonics of a 140 Hz (±10 %) glottal tone, 1/k amplitudes
    (all below 3.5 kHz), a 4 Hz syllabic envelope, RMS ``level_dbfs``."""
    t = np.arange(n) / SR
    phase = 2 * np.pi * np.cumsum(140 * (1 + 0.1 * np.sin(2 * np.pi * 0.7 * t))) / SR
    x = sum(np.sin(k * phase) / k for k in range(1, 24)) * (0.5 * (1 + np.sin(2 * np.pi * 4 * t))) ** 2
    return (x / np.sqrt(np.mean(x ** 2)) * 10 ** (level_dbfs / 20)).astype(np.float32)


def snr_db(ref, out):
    ref, out = ref.astype(np.float64), out.astype(np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((ref - out) ** 2))


# ---- telephone band ---------------------------------------------------------------------------

def test_telephone_band_energy_outside_300_3400_is_40_db_down_on_white_noise():
    y, _ = apply("telephone", noise(8 * SR), seed=0)
    f, p = signal.welch(y.astype(np.float64), fs=SR, nperseg=4096)
    inband = (f >= 300) & (f <= 3400)
    ratio_db = 10 * np.log10(p[~inband].sum() / p[inband].sum())
    assert ratio_db <= -40.0, ratio_db
    assert ratio_db <= -50.0  # measured -62 dB: the FIR has a 60 dB stopband


def test_telephone_passes_1_khz_at_unity_gain_and_keeps_length():
    t = np.arange(SR + 7) / SR
    x = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    y, info = apply("telephone", x, seed=0)
    assert y.shape == x.shape and y.dtype == np.float32
    mid = slice(2000, -2000)
    assert abs(rms_dbfs(y[mid]) - rms_dbfs(x[mid])) < 0.05
    assert snr_db(x[mid], y[mid]) > 40  # zero delay: in phase with the input
    assert info["taps"] == 583 and info["applies_to"] == "mixture"


# ---- codecs -----------------------------------------------------------------------------------

@needs_ffmpeg
def test_mulaw_and_alaw_round_trip_snr_is_the_textbook_35_to_40_db():
    x = speech_like()
    for name in ("g711_mulaw", "g711_alaw"):
        y, info = apply(name, x, seed=0)
        assert info["delay_samples"] == 0 and info["bytes"] > 2 * 8000  # 8 kHz, 8 bit, 2 s
        assert 35.0 <= snr_db(x, y) <= 40.0, (name, snr_db(x, y))  # measured 37.4 / 37.8 dB


@pytest.mark.slow
@needs_ffmpeg
def test_every_available_codec_output_is_aligned_and_as_long_as_the_input():
    x = speech_like(SR * 2 + 123)
    names = [n for n, p in CHANNEL_CONDITIONS.items() if p["transform"] == "codec"]
    ran = 0
    for name in names:
        if channel.skip_reason(name):
            continue
        y, info = apply(name, x, seed=0)
        ran += 1
        assert y.shape == x.shape and y.dtype == np.float32, name
        # after compensation the output's best lag against the input is 0
        _, residual = channel_external.align_to(y, x, 400)
        assert residual == 0, (name, residual)
    assert ran >= 3  # G.711 A-law, μ-law and GSM are in every Debian ffmpeg


def test_align_to_compensates_a_known_delay_and_pads():
    x = noise(1000, seed=3)
    out, lag = channel_external.align_to(np.concatenate([np.zeros(37, np.float32), x]), x, 100)
    assert lag == 37 and np.array_equal(out, x)
    out, lag = channel_external.align_to(x[5:], x, 100)  # the codec ate 5 samples
    assert lag == -5 and np.array_equal(out[5:], x[5:]) and not out[:5].any()


def test_a_codec_the_local_ffmpeg_cannot_encode_is_skipped_with_the_reason(monkeypatch):
    fake = ("ffmpeg version 9.9 Copyright x", frozenset({"pcm_alaw", "pcm_mulaw"}))
    monkeypatch.setattr(channel_external, "ffmpeg_encoders", lambda: fake)
    reason = channel.skip_reason("opus_8k")
    assert "libopus" in reason and "ffmpeg version 9.9" in reason and "skipped" in reason
    with pytest.raises(ChannelUnavailableError) as exc:
        apply("opus_8k", speech_like(), seed=0)
    assert exc.value.reason == reason
    assert channel.skip_reason("g711_alaw") is None and channel.skip_reason("clip_+12db") is None
    avail = list(channel.describe().query("available")["condition"])
    assert "g711_alaw" in avail and "opus_8k" not in avail and "gsm_fr" not in avail
    table = channel.describe().set_index("condition")
    assert not table.loc["gsm_fr", "available"] and "libgsm" in table.loc["gsm_fr", "skip_reason"]


@needs_ffmpeg
def test_local_skip_reasons_follow_ffmpeg_encoders():
    import subprocess

    listed = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True, text=True).stdout
    for name, spec in channel_external.CODECS.items():
        has = any(ln.split()[1:2] == [spec["encoder"]] for ln in listed.splitlines())
        assert (channel_external.codec_skip_reason(name) is None) == has, name


# ---- packet loss ------------------------------------------------------------------------------

def test_packet_loss_zeroes_exactly_the_stated_frames_and_the_seed_fixes_them():
    x = noise(SR * 3 + 100) + 0.5  # no zero sample anywhere
    y, info = apply("packet_loss_10pct", x, seed=7)
    flen, n_frames = info["frame_samples"], info["n_frames"]
    assert flen == 320 and n_frames == 151  # 20 ms at 16 kHz; the last frame is 100 samples
    lost = info["lost_frames"]
    assert len(lost) == round(0.10 * n_frames) == 15 and lost == sorted(set(lost))
    expected = np.zeros(x.size, bool)
    for f in lost:
        expected[f * flen:(f + 1) * flen] = True
    assert np.array_equal(y == 0, expected)
    assert np.array_equal(y[~expected], x[~expected])
    y2, info2 = apply("packet_loss_10pct", x, seed=7)
    assert info2["lost_frames"] == lost and np.array_equal(y, y2)
    assert apply("packet_loss_10pct", x, seed=8)[1]["lost_frames"] != lost


# ---- clipping, level --------------------------------------------------------------------------

@pytest.mark.parametrize("name,gain_db", [("clip_+12db", 12), ("clip_+20db", 20), ("clip_+30db", 30)])
def test_clipping_share_of_a_sine_matches_the_arcsine_law(name, gain_db):
    t = np.arange(10 * SR) / SR
    x = (0.5 * np.sin(2 * np.pi * 101 * t)).astype(np.float32)
    y, info = apply(name, x, seed=0)
    amp = 0.5 * 10 ** (gain_db / 20)
    share = 1 - (2 / np.pi) * np.arcsin(1 / amp)  # time a sine of amplitude amp spends above 1
    assert info["clipped_share"] == pytest.approx(share, abs=2e-3)
    assert np.mean(np.abs(y) == 1.0) == pytest.approx(info["clipped_share"], abs=1e-4)
    assert np.max(np.abs(y)) == 1.0


@pytest.mark.parametrize("dbfs", [-40.0, -50.0, -60.0])
def test_low_level_sets_the_rms_level_in_dbfs(dbfs):
    x = speech_like()
    y, info = apply(f"level_{int(dbfs)}dbfs", x, seed=0)
    assert 10 * np.log10(np.mean(y.astype(np.float64) ** 2)) == pytest.approx(dbfs, abs=1e-3)
    assert info["dbfs_before"] == pytest.approx(-23.0, abs=1e-3)
    assert info["gain_db"] == pytest.approx(dbfs + 23.0, abs=1e-3)


def test_rms_dbfs_reference_full_scale_sine_is_minus_3_01():
    t = np.arange(SR) / SR
    assert rms_dbfs(np.sin(2 * np.pi * 1000 * t)) == pytest.approx(-3.0103, abs=1e-3)
    with pytest.raises(AiplibParameterError, match="silence"):
        apply("level_-40dbfs", np.zeros(100, np.float32), seed=0)


# ---- reverberation ----------------------------------------------------------------------------

def schroeder_t20(h, sr):
    """RT60 from a line fitted to the Schroeder energy decay curve between −5 and −25 dB (×3)."""
    edc = np.cumsum((h.astype(np.float64) ** 2)[::-1])[::-1]
    edc_db = 10 * np.log10(edc / edc[0])
    i0, i1 = np.argmax(edc_db <= -5), np.argmax(edc_db <= -25)
    slope = np.polyfit(np.arange(i0, i1) / sr, edc_db[i0:i1], 1)[0]
    return -60.0 / slope


@pytest.mark.slow
@pytest.mark.parametrize("rt60", [0.3, 0.6, 0.9, 1.2])
def test_reverb_room_measured_rt60_is_within_20_percent_of_its_target(rt60):
    x = noise(SR, seed=1)
    y, info = apply(f"reverb_rt60_{rt60:.1f}s", x, seed=5)
    room = info["room"]
    h, params = channel_external.room(rt60, 0, SR)
    assert params == room and info["applies_to"] == "speech"
    assert abs(schroeder_t20(h, SR) / rt60 - 1) <= 0.20
    assert abs(room["rt60_measured_s"] / rt60 - 1) <= 0.05
    hashed = {k: v for k, v in room.items() if k not in ("room_sha256", "rt60_measured_s", "rir_sha256")}
    import hashlib

    assert room["room_sha256"] == hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()
    assert y.shape == x.shape and rms_dbfs(y) == pytest.approx(rms_dbfs(x), abs=1e-3)


# ---- echo, cut --------------------------------------------------------------------------------

def test_echo_autocorrelation_peaks_at_the_delay():
    x = noise(4 * SR, seed=2)
    y, info = apply("echo_100ms_-6db", x, seed=0)
    assert info["delay_samples"] == 1600
    yy = y.astype(np.float64)
    ac = signal.correlate(yy, yy, mode="full", method="fft")[yy.size - 1:]
    assert int(np.argmax(ac[1:4000])) + 1 == 1600
    g = 10 ** (-6 / 20)
    assert ac[1600] / ac[0] == pytest.approx(g / (1 + g * g), abs=0.02)  # 0.40


def test_cut_head_and_tail_remove_300_ms():
    x = noise(SR, seed=4)
    head, info = apply("cut_head_300ms", x, seed=0)
    tail, _ = apply("cut_tail_300ms", x, seed=0)
    assert info["removed_samples"] == 4800 and head.size == tail.size == SR - 4800
    assert np.array_equal(head, x[4800:]) and np.array_equal(tail, x[:-4800])
    with pytest.raises(AiplibParameterError, match="leaves nothing"):
        apply("cut_head_300ms", x[:4800], seed=0)


# ---- registry, determinism --------------------------------------------------------------------

@pytest.mark.slow
def test_every_condition_is_bit_identical_twice_and_its_info_is_json():
    x = speech_like(SR + 11)
    for name in channel.describe().query("available")["condition"]:
        a, ia = apply(name, x, seed=3)
        b, ib = apply(name, x.copy(), seed=3)
        assert a.dtype == np.float32 and np.array_equal(a, b), name
        assert json.loads(json.dumps(ia)) == json.loads(json.dumps(ib)), name
        assert ia["condition"] == name and ia["seed"] == 3 and ia["n_in"] == x.size


def test_registry_describe_and_parameter_errors():
    table = channel.describe()
    assert list(table["condition"]) == list(CHANNEL_CONDITIONS)
    assert set(table["applies_to"]) == {"speech", "mixture"}
    assert table.set_index("condition").loc["clip_+20db", "parameters"] == "gain_db=20.0"
    assert sum(p["transform"] == "reverb" for p in CHANNEL_CONDITIONS.values()) == 4
    y, info = apply("clip", noise(100), seed=0, params={"gain_db": 6.0})  # a transform name with parameters
    assert info["params"] == {"gain_db": 6.0} and info["transform"] == "clip"
    with pytest.raises(AiplibParameterError, match="unknown channel condition"):
        apply("telephon", noise(100), seed=0)
    with pytest.raises(AiplibParameterError, match="bad parameters"):
        apply("clip", noise(100), seed=0, params={"gain": 6.0})
    with pytest.raises(AiplibParameterError, match="seed"):
        apply("clip_+12db", noise(100), seed=1.5)
    assert math.isinf(rms_dbfs(np.zeros(4)))
