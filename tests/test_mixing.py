import numpy as np
import pytest

from aiplib.audio import loudness_lufs, normalize_loudness
from aiplib.errors import AiplibParameterError
from aiplib.mixing import achieved_snr_db, background_segment, mix_at_snr


def _sig(seed, scale, n=48000):
    return (scale * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("snr", [0.0, 5.0, 10.0])
def test_achieved_snr_within_001_db(snr):
    s, b = _sig(1, 0.05), _sig(2, 0.2)
    y, info = mix_at_snr(s, b, snr)
    assert info.clip_scale == 1.0
    # measure independently in float64 from the returned mixture
    noise = y.astype(np.float64) - s.astype(np.float64)
    assert abs(achieved_snr_db(s.astype(np.float64), noise) - snr) < 0.01
    assert abs(info.achieved_snr_db - snr) < 0.01


@pytest.mark.parametrize("snr", [0.0, 5.0, 10.0])
def test_snr_exact_when_sum_would_clip(snr):
    s, b = _sig(3, 0.6), _sig(4, 0.9)  # peaks well above 1
    y, info = mix_at_snr(s, b, snr)
    assert info.clip_scale < 1.0
    assert np.max(np.abs(y)) <= 0.99 + 1e-6
    sc = info.clip_scale
    noise = y.astype(np.float64) - s.astype(np.float64) * sc
    assert abs(achieved_snr_db(s.astype(np.float64) * sc, noise) - snr) < 0.01


def test_sine_normalised_to_minus_23_lufs():
    t = np.arange(16000 * 3) / 16000
    y = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    out, gain_db, before = normalize_loudness(y, -23.0)
    assert abs(loudness_lufs(out) - (-23.0)) < 0.1
    assert abs(before + gain_db - (-23.0)) < 1e-9


def test_nan_and_silent_background_are_errors():
    s = _sig(5, 0.1)
    bad = s.copy()
    bad[10] = np.nan
    with pytest.raises(AiplibParameterError, match="NaN"):
        mix_at_snr(bad, s, 5)
    with pytest.raises(AiplibParameterError, match="silent"):
        mix_at_snr(s, np.zeros_like(s), 5)


def test_background_segment_wraps():
    bg = np.arange(10, dtype=np.float32)
    assert background_segment(bg, 8, 5).tolist() == [8, 9, 0, 1, 2]
    assert background_segment(bg, 2, 3).tolist() == [2, 3, 4]


def test_write_wav_same_samples_same_bytes(tmp_path):
    import time

    from aiplib.audio import load_audio, write_wav

    y = _sig(9, 0.1, 1600)
    a = write_wav(tmp_path / "a.wav", y).read_bytes()
    time.sleep(1.1)  # libsndfile's PEAK chunk would record a different second
    b = write_wav(tmp_path / "b.wav", y).read_bytes()
    assert a == b
    assert np.array_equal(load_audio(tmp_path / "a.wav"), y)
