"""aiplib.io.audio: the full-scale contract of load_audio, and the peak check of normalize_loudness."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import soundfile as sf

from aiplib.io.audio import ClippingWarning, load_audio, loudness_lufs, normalize_loudness, peak_abs, write_wav

SR = 16000


def _square(f=1000.0, sr=44100, dur=1.0):
    t = np.arange(int(sr * dur)) / sr
    y = np.sign(np.sin(2 * np.pi * f * t))
    y[y == 0] = 1.0
    return y.astype(np.float32)


@pytest.mark.parametrize("subtype", ["PCM_16", "FLOAT"])
def test_resampled_square_wave_overshoots_and_is_not_clipped(tmp_path, subtype):
    """Issue 15 item 12: load_audio's contract is "not clipped" (the Gibbs overshoot of
    band-limiting a full-scale 44.1 kHz square wave is kept: peak 1.196 at 16 kHz)."""
    path = tmp_path / "square.wav"
    sf.write(path, _square(), 44100, subtype=subtype)
    y = load_audio(path)
    assert y.dtype == np.float32 and y.shape == (16000,)
    assert peak_abs(y) == pytest.approx(1.1957, abs=5e-4)
    # not clipped: many samples beyond full scale, the waveform is the band-limited square
    assert np.sum(np.abs(y) > 1.0) > 100


def test_integer_file_at_its_own_rate_stays_in_full_scale(tmp_path):
    path = tmp_path / "square16k.wav"
    sf.write(path, _square(sr=SR), SR, subtype="PCM_16")
    y = load_audio(path)
    assert peak_abs(y) <= 1.0
    assert np.array_equal(np.unique(y), np.array([-1.0, 32767 / 32768], np.float32))


def test_float_file_is_read_bit_exactly_beyond_full_scale(tmp_path):
    y = np.array([0.0, 1.5, -2.0, 0.25] * 100, np.float32)
    write_wav(tmp_path / "f.wav", y)
    assert np.array_equal(load_audio(tmp_path / "f.wav"), y)


def _sine997(dur=2.0, amp=0.5):
    t = np.arange(int(dur * SR)) / SR
    return (amp * np.sin(2 * np.pi * 997 * t)).astype(np.float32)


def test_normalisation_that_clips_warns_and_reports_the_peak():
    """Issue 15 item 13: a 2 s 997 Hz sine normalised to -3 LUFS peaks at 1.0096."""
    with pytest.warns(ClippingWarning, match=r"my_sine.*1\.0096.*\+0\.08 dBFS"):
        out, gain_db, before, peak = normalize_loudness(_sine997(), -3.0, name="my_sine",
                                                        return_peak=True)
    assert peak == pytest.approx(1.0096, abs=1e-4)
    assert peak == peak_abs(out)
    assert loudness_lufs(out) == pytest.approx(-3.0, abs=0.01)
    assert gain_db == pytest.approx(-3.0 - before)
    assert np.sum(np.abs(out) > 1.0) > 0          # left as it is, not clipped


def test_normalisation_within_full_scale_is_silent_and_three_valued():
    with warnings.catch_warnings():
        warnings.simplefilter("error")                # any warning fails the test
        res = normalize_loudness(_sine997(), -23.0)
        out, gain_db, before, peak = normalize_loudness(_sine997(), -23.0, return_peak=True)
    assert len(res) == 3 and np.array_equal(res[0], out)
    # -23 LUFS is 20 dB below -3 LUFS: the peak scales by 10^(-20/20)
    assert peak == pytest.approx(1.0096 / 10, abs=1e-4)
