"""Inaudible power and narrow bands: a background written as 0.2·x + 0.3, anti-phase stereo and a
source resampled up from 8 kHz — measured, warned about, removed where the profile says so."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import soundfile as sf
import soxr
from test_custom import make_inputs

from aiplib.battery.backgrounds import curate_background
from aiplib.io.audio import SR
from aiplib.io.subaudible import effective_bandwidth_hz, remove_subaudible, subaudible_power
from aiplib.sources.corpora.custom import validate_inputs


def _noise(seconds: float, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(int(seconds * SR)) * 0.1


def test_power_shares_of_an_offset_signal():
    x = _noise(10) / 0.1  # unit power
    p = subaudible_power(0.2 * x + 0.3, sr=SR)
    # DC power 0.09 of 0.04·P(x) + 0.09 (P(x) ≈ 1): −1.6 dB; the noise below 20 Hz adds 20/8000 of 0.04
    assert p["dc_db"] == pytest.approx(10 * np.log10(0.09 / (0.04 * np.mean(x ** 2) + 0.09)), abs=0.02)
    assert p["subaudible_db"] == pytest.approx(-1.59, abs=0.05)
    assert p["audible_share"] == pytest.approx(0.04 / 0.13, abs=0.01)
    y = remove_subaudible(0.2 * x + 0.3, sr=SR)
    q = subaudible_power(y, sr=SR)
    assert q["dc_db"] < -60 and q["subaudible_db"] < -30
    # the audible part is kept: above 40 Hz the filtered signal equals 0.2·x within 0.1 dB
    f = np.fft.rfftfreq(y.size, 1 / SR)
    band = f > 40
    ratio = np.sum(np.abs(np.fft.rfft(y))[band] ** 2) / np.sum(np.abs(np.fft.rfft(0.2 * x))[band] ** 2)
    assert abs(10 * np.log10(ratio)) < 0.1


def test_effective_bandwidth_of_full_and_8khz_sources():
    x = _noise(5)
    assert effective_bandwidth_hz(x, sr=SR) > 7900
    narrow = soxr.resample(soxr.resample(x, SR, 8000), 8000, SR)
    assert 3500 < effective_bandwidth_hz(narrow, sr=SR) <= 4000


def _spec(path, **more):
    return dict(bg_id="offset", category="stationary", description="d", sources=[str(path)], combine="concat",
                source_package="user", licence="CC0", attribution="me", synthetic=False, **more)


def test_offset_background_is_curated_audible_when_removed_and_kept_bit_for_bit_otherwise(tmp_path):
    x = _noise(4) / 0.1
    src = tmp_path / "offset.wav"
    sf.write(src, (0.2 * x + 0.3).astype(np.float32), SR, subtype="FLOAT")
    kept, info_k = curate_background(_spec(src), duration_s=4.0)  # the paper profile: nothing removed
    cleaned, info_r = curate_background(_spec(src, subaudible="remove"), duration_s=4.0)
    assert info_k["subaudible_removed"] is False and info_r["subaudible_removed"] is True
    assert info_k["subaudible_db"] == info_r["subaudible_db"] == pytest.approx(-1.59, abs=0.05)
    raw = sf.read(src, dtype="float32")[0]
    gain = 10 ** (info_k["gain_db"] / 20)
    np.testing.assert_allclose(kept, raw * np.float32(gain), rtol=1e-5)  # only the loudness gain
    assert subaudible_power(kept, sr=SR)["subaudible_db"] > -2  # the offset is still there (reported)
    assert subaudible_power(cleaned, sr=SR)["subaudible_db"] < -30
    # the mixer's power-based SNR: with the offset kept only 31 % of the background's power is audible
    assert subaudible_power(kept, sr=SR)["audible_share"] == pytest.approx(0.31, abs=0.01)
    assert subaudible_power(cleaned, sr=SR)["audible_share"] > 0.999
    assert info_r["bandwidth_hz"] > 7900


def test_validation_warns_about_dc_refuses_anti_phase_and_notes_a_narrow_band(tmp_path):
    params = make_inputs(tmp_path / "in")
    bg = tmp_path / "in" / "bg"
    x = _noise(3, seed=5) / 0.1
    sf.write(bg / "offset.wav", (0.2 * x + 0.3).astype(np.float32) / 2, SR, subtype="FLOAT")
    left = _noise(3, seed=6)
    sf.write(bg / "antiphase.wav", np.stack([left, -left], axis=1).astype(np.float32), SR, subtype="FLOAT")
    narrow = soxr.resample(soxr.resample(_noise(3, seed=7), SR, 8000), 8000, SR)
    sf.write(bg / "phone.wav", narrow.astype(np.float32), SR, subtype="FLOAT")
    r = validate_inputs(**params)
    probs = {(p.kind, p.file.rsplit("/", 1)[-1]): p for p in r.problems}
    dc = probs[("subaudible", "offset.wav")]
    assert dc.severity == "warning"
    assert "DC offset -1.6 dB and energy below 20 Hz -1.6 dB re the file's power" in dc.message
    anti = probs[("channels_cancel", "antiphase.wav")]
    assert anti.severity == "fatal" and ("silent", "antiphase.wav") not in probs
    level = 20 * np.log10(np.sqrt(np.mean(left.astype(np.float32) ** 2)))
    assert (f"the channels cancel when averaged to mono (channel 1 {level:.1f} dBFS RMS, channel 2 {level:.1f} "
            "dBFS RMS") in anti.message
    band = probs[("band_limited", "phone.wav")]
    assert band.severity == "warning" and "band-limited: effective bandwidth 3" in band.message
    assert "of the 8000 Hz a 16 kHz file holds" in band.message and ("band_limited", "offset.wav") not in probs
    assert ("subaudible", "noise_0.wav") not in probs and ("band_limited", "noise_0.wav") not in probs
    rows = {b["file"].rsplit("/", 1)[-1]: b for b in r.backgrounds}
    assert "effective bandwidth" in rows["phone.wav"]["note"] and "DC offset" in rows["offset.wav"]["note"]
    assert "DC offset" in r.summary() and "effective bandwidth" in r.summary()


def test_stage6_reports_the_inaudible_share_per_background(tmp_path):
    from aiplib.battery.backgrounds import curate_battery
    from aiplib.core.workspace import workspace
    from aiplib.stimuli import checks

    ws = workspace("custom", data_root=tmp_path / "data").ensure()
    x = _noise(3, seed=1) / 0.1
    src = tmp_path / "offset.wav"
    sf.write(src, (0.2 * x + 0.3).astype(np.float32) / 2, SR, subtype="FLOAT")
    clean = tmp_path / "clean.wav"
    sf.write(clean, _noise(3, seed=2).astype(np.float32), SR, subtype="FLOAT")
    specs = [dict(_spec(src), bg_id="kept"), dict(_spec(src, subaudible="remove"), bg_id="removed"),
             dict(_spec(clean, subaudible="remove"), bg_id="clean")]
    battery = curate_battery(ws, specs, duration_s=3.0).set_index("bg_id")
    assert list(battery["subaudible_removed"]) == [False, True, False]  # clean: under −30 dB, untouched
    assert battery.loc["kept", "subaudible_db"] == pytest.approx(-1.59, abs=0.05)
    with pytest.warns(UserWarning, match=r"1 of 3 backgrounds are heard at a higher SNR than their label.*: "
                                         r"kept \+5\.1[0-9] dB \(-1\.6 dB of its power below 20 Hz\)"):
        t = checks.subaudible_backgrounds(ws).set_index("bg_id")
    assert (ws.checks / "subaudible.csv").is_file()
    # audible SNR = nominal + 10·log10(0.13 / 0.04) ≈ +5.1 dB where the offset was kept
    assert t.loc["kept", "audible_snr_excess_db"] == pytest.approx(5.1, abs=0.1)
    assert t.loc["removed", "audible_snr_excess_db"] < 0.01 and bool(t.loc["removed", "removed_at_curation"])
    assert t.loc["clean", "audible_snr_excess_db"] < 0.02
    assert pd.read_csv(ws.battery_csv)["bandwidth_hz"].min() > 7900
    # the report's background table (Table 3) carries the excess stage 6 measured
    from aiplib.analysis import paper

    ws.scores_dir.mkdir(parents=True, exist_ok=True)
    for task in ("asr", "kws"):
        (ws.scores_dir / f"{task}.csv").write_text("model,stimulus_id,bg_id\n")
    _, _, battery_info = paper.load_inputs(ws)
    ranking = pd.DataFrame({"rank": [1, 2, 3], "asr_delta_wer_pp": [3.0, 2.0, 1.0],
                            "kws_delta_acc_pp": [3.0, 2.0, 1.0]}, index=pd.Index(["kept", "removed", "clean"],
                                                                                 name="bg_id"))
    t3 = paper.table3_descriptor_values(ranking, pd.DataFrame(index=ranking.index), battery=battery_info)
    excess = t3.set_index("bg_id")["audible_snr_excess_db"]
    assert excess["kept"] == pytest.approx(5.1, abs=0.1) and excess["removed"] < 0.01
