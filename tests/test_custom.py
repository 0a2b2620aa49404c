"""The custom profile: validation of the user's folders (all problems at once), stage 1–3 inputs."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from aiplib.core.errors import AiplibError, ValidationError
from aiplib.core.workspace import workspace
from aiplib.io.audio import SR
from aiplib.sources import pipeline
from aiplib.sources.corpora import custom

REPO = Path(__file__).resolve().parents[1]


def voice_like(seconds: float, sr: int = SR, *, f0: float = 180.0, seed: int = 0) -> np.ndarray:
    """A harmonic tone with a 4 Hz syllable-rate envelope and a little noise, peak ≈ 0.3."""
    t = np.arange(int(round(seconds * sr))) / sr
    y = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    y = y * (0.55 + 0.45 * np.sin(2 * np.pi * 4 * t))
    y = y + 0.01 * np.random.default_rng(seed).standard_normal(t.size)
    return (0.3 * y / np.max(np.abs(y))).astype(np.float32)


def noise(seconds: float, sr: int = SR, *, seed: int = 0, bursts: bool = False) -> np.ndarray:
    y = 0.05 * np.random.default_rng(seed).standard_normal(int(round(seconds * sr)))
    if bursts:  # quiet floor with loud 100 ms events every second
        env = np.full(y.size, 0.05)
        for s in range(0, y.size, sr):
            env[s:s + sr // 10] = 1.0
        y = y * env
    return y.astype(np.float32)


def write(path: Path, y, sr: int = SR, **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), y, sr, **kw)
    return path


def make_inputs(root: Path, *, n_bg: int = 9, bg_seconds: float = 3.0, licences: bool = True) -> dict:
    """A small valid set of custom inputs under ``root``; returns the gather_raw parameters."""
    sp, kw, bg = root / "speech", root / "kws", root / "bg"
    write(sp / "a.wav", voice_like(1.5))
    write(sp / "sub" / "b.flac", voice_like(2.0, f0=140), subtype="PCM_16")
    pd.DataFrame({"file": ["a.wav", "sub/b.flac"], "text": ["hello there", "good morning, friend"],
                  "accent_group": ["g1", "g2"], "speaker": ["s1", "s2"]}).to_csv(root / "texts.csv", index=False)
    for i, w in enumerate(["yes", "go", "cat", "happy"]):
        write(kw / f"{w}.wav", voice_like(1.0, f0=150 + 10 * i, seed=i))
    write(kw / "seq.wav", voice_like(3.0, seed=9))
    pd.DataFrame({"file": ["yes.wav", "go.wav", "cat.wav", "happy.wav", "seq.wav"],
                  "label": ["Yes", "go", "cat", "happy", "yes|no|go"]}).to_csv(root / "kws.tsv", sep="\t", index=False)
    for j in range(n_bg):
        write(bg / f"noise_{j}.wav", noise(bg_seconds, seed=j, bursts=j % 2 == 1))
    if licences:
        pd.DataFrame({"file": ["noise_0.wav", "noise_1.wav"], "licence": ["CC0 1.0", "CC BY 4.0"],
                      "attribution": ["me", "you"], "category": ["stationary", ""],
                      "description": ["steady hiss", ""]}).to_csv(bg / "licences.csv", index=False)
    return dict(speech_dir=str(sp), texts=str(root / "texts.csv"), kws_dir=str(kw),
                kws_labels=str(root / "kws.tsv"), backgrounds_dir=str(bg))


def broken_speech(root: Path) -> dict:
    """Inputs whose speech folder has a missing transcript, a silent file, a 45 s utterance, a corrupt file."""
    params = make_inputs(root)
    sp = Path(params["speech_dir"])
    write(sp / "no_transcript.wav", voice_like(1.0))
    write(sp / "silent.wav", np.zeros(SR, dtype=np.float32))
    write(sp / "long.wav", voice_like(45.0))
    (sp / "corrupt.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt garbage, not audio" * 3)
    pd.DataFrame({"file": ["a.wav", "sub/b.flac", "silent.wav", "long.wav", "corrupt.wav"],
                  "text": ["hello there", "good morning", "nothing", "a very long story", "broken"]}
                 ).to_csv(params["texts"], index=False)
    return params


def cli_args(params: dict) -> list[str]:
    return [sys.executable, "-m", "aiplib.sources.corpora.custom",
            "--speech-dir", params["speech_dir"], "--texts", params["texts"],
            "--kws-dir", params["kws_dir"], "--kws-labels", params["kws_labels"],
            "--backgrounds-dir", params["backgrounds_dir"]]


def cli(params: dict, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(cli_args(params), capture_output=True, text=True, cwd=REPO, env=env, check=False)


# ------------------------------------------------------------------ Done-when: all four problems, exit 1
def test_all_four_problems_reported_in_one_run(tmp_path):
    params = broken_speech(tmp_path / "in")
    report = custom.validate_inputs(**params)
    assert not report.ok
    fatal = {(p.kind, Path(p.file).name) for p in report.fatal}
    assert fatal == {("missing_transcript", "no_transcript.wav"), ("silent", "silent.wav"),
                     ("too_long", "long.wav"), ("unreadable", "corrupt.wav")}
    assert "45.0 s" in next(p.message for p in report.fatal if p.kind == "too_long")
    summary = report.summary()
    for name in ("no_transcript.wav", "silent.wav", "long.wav", "corrupt.wav"):
        assert name in summary
    # the good items are still parsed, so a fixed folder needs no second round of surprises
    assert sorted(r["item_id"] for r in report.speech) == ["a", "sub-b"]


@pytest.mark.slow
def test_cli_exits_1_lists_all_and_writes_nothing(tmp_path):
    params = broken_speech(tmp_path / "in")
    data_root = tmp_path / "data"
    env = dict(os.environ, AIP_DATA_ROOT=str(data_root), AIP_PROFILE="custom")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    proc = cli(params, env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name in ("no_transcript.wav", "silent.wav", "long.wav", "corrupt.wav"):
        assert name in proc.stdout
    assert "4 fatal problem(s)" in proc.stdout
    assert not data_root.exists()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_gather_raw_raises_with_every_problem_before_creating_the_workspace(tmp_path):
    params = broken_speech(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.raises(ValidationError) as exc:
        custom.gather_raw(ws, keywords="yes,no,up,down,left,right,on,off,stop,go", **params)
    kinds = {p.kind for p in exc.value.problems if p.severity == "fatal"}
    assert kinds == {"missing_transcript", "silent", "too_long", "unreadable"}
    assert "corrupt.wav" in str(exc.value) and "long.wav" in str(exc.value)
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_cli_exits_0_on_valid_inputs(tmp_path):
    proc = cli(make_inputs(tmp_path / "in"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 fatal problem(s)" in proc.stdout and "OK" in proc.stdout


# ------------------------------------------------------------------ other problems
def test_nan_empty_missing_file_label_and_parameters(tmp_path):
    params = make_inputs(tmp_path / "in")
    sp, kw = Path(params["speech_dir"]), Path(params["kws_dir"])
    y = voice_like(1.0)
    y[100] = np.nan
    write(sp / "nan.wav", y, subtype="FLOAT")
    write(sp / "empty.wav", np.zeros(0, dtype=np.float32))
    texts = pd.read_csv(params["texts"])
    extra = pd.DataFrame({"file": ["nan.wav", "empty.wav", "gone.wav"], "text": ["x y", "x", "z"]})
    pd.concat([texts, extra]).to_csv(params["texts"], index=False)
    write(kw / "unlabelled.wav", voice_like(1.0))
    r = custom.validate_inputs(**params)
    got = {(p.kind, Path(p.file).name) for p in r.fatal}
    assert {("nan", "nan.wav"), ("empty", "empty.wav"), ("missing_file", "gone.wav"),
            ("missing_label", "unlabelled.wav")} <= got
    r2 = custom.validate_inputs(**dict(params, kws_dir="", backgrounds_dir=str(tmp_path / "nowhere")))
    msgs = [p.message for p in r2.fatal if p.kind == "parameter"]
    assert any("kws_dir is not set" in m for m in msgs) and any("folder not found" in m for m in msgs)


def test_tables_bad_columns_empty_transcript_duplicates(tmp_path):
    params = make_inputs(tmp_path / "in")
    pd.DataFrame({"file": ["a.wav", "a.wav", "sub/b.flac"], "text": ["hi", "hi again", "  "]}
                 ).to_csv(params["texts"], index=False)
    params["kws_labels"] = str(tmp_path / "in" / "labels.csv")
    pd.DataFrame({"path": ["yes.wav"], "word": ["yes"], "x": [1]}).to_csv(params["kws_labels"], sep=";", index=False)
    r = custom.validate_inputs(**params)
    kinds = {(p.kind, Path(p.file).name) for p in r.fatal}
    assert ("duplicate", "a.wav") in kinds
    assert ("missing_transcript", "b.flac") in kinds
    # ";"-separated table with alias columns is understood: the remaining kws clips lack labels
    assert ("missing_label", "cat.wav") in kinds and not any(p.kind == "table" for p in r.fatal)
    pd.DataFrame({"name": ["a.wav"], "words": ["hi"]}).to_csv(params["texts"], index=False)
    r = custom.validate_inputs(**params)
    assert any(p.kind == "table" and "file, text" in p.message for p in r.fatal)


def test_warnings_multi_keyword_looping_few_backgrounds_licences_keywords(tmp_path):
    params = make_inputs(tmp_path / "in", n_bg=3, bg_seconds=1.0)
    r = custom.validate_inputs(**params, keywords="yes,go,maybe")
    assert r.ok, r.summary()
    kinds = [p.kind for p in r.warnings]
    assert kinds.count("multi_keyword") == 1
    assert kinds.count("bg_looped") == 3  # 1 s backgrounds, 2 s longest utterance
    assert "few_backgrounds" in kinds and "keywords" in kinds
    assert kinds.count("no_licence") == 1  # noise_2.wav is not in licences.csv
    seq = next(k for k in r.kws if k["item_id"] == "seq")
    assert seq["used"] is False and "skipped" in seq["note"]
    targets = {k["label"]: k["is_target"] for k in r.kws if k["used"]}
    assert targets == {"yes": True, "go": True, "cat": False, "happy": False}


def test_bad_category_is_fatal_and_no_background_is_fatal(tmp_path):
    params = make_inputs(tmp_path / "in")
    lic = Path(params["backgrounds_dir"]) / "licences.csv"
    pd.DataFrame({"file": ["noise_0.wav"], "licence": ["CC0"], "category": ["noisy"]}).to_csv(lic, index=False)
    r = custom.validate_inputs(**params)
    assert [(p.kind, Path(p.file).name) for p in r.fatal] == [("category", "noise_0.wav")]
    empty = tmp_path / "empty_bg"
    empty.mkdir()
    r = custom.validate_inputs(**dict(params, backgrounds_dir=str(empty)))
    assert any(p.kind == "no_items" for p in r.fatal)


def test_multi_keyword_only_is_fatal(tmp_path):
    params = make_inputs(tmp_path / "in")
    kw = Path(params["kws_dir"])
    for f in kw.iterdir():
        if f.name != "seq.wav":
            f.unlink()
    pd.DataFrame({"file": ["seq.wav"], "label": ["yes|no|go"]}).to_csv(params["kws_labels"], sep="\t", index=False)
    r = custom.validate_inputs(**params)
    assert any(p.kind == "no_items" and "several words" in p.message for p in r.fatal)


# ------------------------------------------------------------------ formats → 16 kHz mono
def _formats(folder: Path) -> dict[str, tuple[float, float]]:
    """Write the same 1.2 s voice-like signal in several formats; name → (seconds, expected peak scale)."""
    out = {}
    y44 = voice_like(1.2, 44100)
    write(folder / "stereo_44k.flac", np.stack([y44, np.zeros_like(y44)], axis=1), 44100, subtype="PCM_24")
    out["stereo_44k"] = (1.2, 0.5)  # channels are averaged: one silent channel halves the level
    write(folder / "int16_8k.wav", voice_like(1.2, 8000), 8000, subtype="PCM_16")
    out["int16_8k"] = (1.2, 1.0)
    y48 = voice_like(1.2, 48000)
    write(folder / "quad_48k_24bit.wav", np.stack([y48] * 4, axis=1), 48000, subtype="PCM_24")
    out["quad_48k_24bit"] = (1.2, 1.0)
    write(folder / "float_22k.wav", voice_like(1.2, 22050), 22050, subtype="FLOAT")
    out["float_22k"] = (1.2, 1.0)
    write(folder / "vorbis_32k.ogg", voice_like(1.2, 32000), 32000, format="OGG", subtype="VORBIS")
    out["vorbis_32k"] = (1.2, 1.0)
    if shutil.which("ffmpeg"):  # a format only ffmpeg reads (AAC in MP4)
        src = folder / "_tmp.wav"
        write(src, voice_like(1.2, 44100), 44100)
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(src), "-c:a", "aac", "-b:a", "96k",
                        str(folder / "aac_44k.m4a")], check=True)
        src.unlink()
        out["aac_44k"] = (1.2, 1.0)
    return out


def test_formats_rates_channels_become_16k_mono(tmp_path):
    params = make_inputs(tmp_path / "in")
    sp = Path(params["speech_dir"])
    for f in sp.rglob("*"):
        if f.is_file():
            f.unlink()
    expect = _formats(sp)
    files = sorted(p.name for p in sp.iterdir() if p.is_file())
    pd.DataFrame({"file": files, "text": [f"utterance {i}" for i in range(len(files))]}).to_csv(
        params["texts"], index=False)
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning, match="multi_keyword"):
        inv = custom.gather_raw(ws, **params)
    assert (inv["package"] == "custom/speech").sum() == len(expect)
    rates = dict(zip(inv["item_id"], inv["sample_rate"]))
    assert rates["stereo_44k"] == 44100 and rates["int16_8k"] == 8000
    banks = custom.build_item_banks(ws, seed=1)
    asr = banks["asr"].set_index("item_id")
    assert set(asr.index) == set(expect)
    for item_id, (seconds, scale) in expect.items():
        wav = ws.path(asr.loc[item_id, "path"])
        info = sf.info(str(wav))
        assert (info.samplerate, info.channels, info.subtype) == (16000, 1, "FLOAT"), item_id
        assert abs(info.duration - seconds) < 0.06, (item_id, info.duration)  # AAC adds priming samples
        y, _ = sf.read(str(wav))
        assert abs(np.max(np.abs(y)) - 0.3 * scale) < 0.06, (item_id, np.max(np.abs(y)))
        assert Path(asr.loc[item_id, "source_file"]).is_file()
        assert asr.loc[item_id, "accent_group"] is None


# ------------------------------------------------------------------ stage 1–3 on valid inputs
def test_gather_raw_item_banks_and_battery_specs(tmp_path):
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        inv = custom.gather_raw(ws, **params)
    assert list(inv.columns) == custom.INVENTORY_COLUMNS
    assert (ws.raw / "inventory.csv").is_file() and (ws.raw / "validation.csv").is_file()
    meta = json.loads((ws.raw / "custom_inputs.json").read_text())
    assert meta["keywords"] == list(custom.KEYWORDS) and meta["n_kws_skipped"] == 1
    assert not list(ws.raw.rglob("*.wav")), "stage 1 must not copy audio"
    assert inv["file"].map(lambda f: Path(f).is_absolute()).all()

    banks = custom.build_item_banks(ws, seed=3)
    asr, kws = banks["asr"], banks["kws"]
    assert list(asr["item_id"]) == ["a", "sub-b"]
    assert list(asr["accent_group"]) == ["g1", "g2"] and list(asr["speaker"]) == ["s1", "s2"]
    assert list(asr["text"]) == ["hello there", "good morning, friend"]
    assert not asr["synthetic"].any() and (asr["licence"] == custom.UNKNOWN_LICENCE).all()
    assert dict(zip(kws["label"], kws["is_target"])) == {"yes": True, "go": True, "cat": False, "happy": False}
    assert "seq" not in set(kws["item_id"])
    for fam in ("asr", "kws"):
        lines = (ws.itembanks / f"{fam}.jsonl").read_text().splitlines()
        need = {"item_id", "path", "source_file", "source", "licence", "attribution", "duration_s",
                "speaker", "accent_group", "synthetic"}
        assert all(need <= set(json.loads(x)) for x in lines)

    specs = custom.battery_specs(ws)
    assert len(specs) == 9
    by_id = {s["bg_id"]: s for s in specs}
    assert by_id["noise_0"]["licence"] == "CC0 1.0" and by_id["noise_0"]["attribution"] == "me"
    assert by_id["noise_0"]["category"] == "stationary" and by_id["noise_0"]["description"] == "steady hiss"
    assert by_id["noise_1"]["licence"] == "CC BY 4.0" and by_id["noise_1"]["category"] == "transient"
    assert "inferred" in by_id["noise_1"]["description"]
    assert by_id["noise_2"]["licence"] == custom.UNKNOWN_LICENCE and by_id["noise_2"]["category"] == "stationary"
    assert all(s["combine"] == "concat" and not s["synthetic"] and Path(s["sources"][0]).is_file() for s in specs)

    from aiplib.battery.backgrounds import curate_battery

    battery = curate_battery(ws, specs, duration_s=4.0)
    assert len(battery) == 9 and battery["looped"].all()
    assert sf.info(str(ws.path(battery["path"].iloc[0]))).frames == 4 * SR


def test_build_item_banks_max_items_seeded_and_reuse(tmp_path):
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        custom.gather_raw(ws, **params)
    b1 = custom.build_item_banks(ws, seed=7, max_items=2)
    assert len(b1["asr"]) == 2 and len(b1["kws"]) == 2
    assert set(b1["kws"]["is_target"]) == {True, False}
    b2 = custom.build_item_banks(ws, seed=7, max_items=2, overwrite=True)
    assert list(b1["kws"]["item_id"]) == list(b2["kws"]["item_id"])
    b3 = custom.build_item_banks(ws, seed=7, max_items=2)  # exists: read back
    assert b3["kws"].equals(b2["kws"])
    b4 = pipeline.build_item_banks(ws, seed=7, max_items=1)  # other sizes (the stage-2 stamp): rebuilt, not kept
    assert len(b4["asr"]) == 1 and len(b4["kws"]) == 1
    assert pipeline.build_item_banks(ws, seed=7, max_items=1)["kws"].equals(b4["kws"])
    with pytest.raises(ValueError):
        custom.build_item_banks(ws, max_items=0)


def test_stage2_refuses_changed_inputs_and_needs_stage1(tmp_path):
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.raises(AiplibError, match="stage 1"):
        custom.build_item_banks(ws)
    with pytest.warns(UserWarning):
        custom.gather_raw(ws, **params)
    write(Path(params["speech_dir"]) / "a.wav", voice_like(1.5, f0=300))
    with pytest.raises(AiplibError, match="changed since stage 1"):
        custom.build_item_banks(ws, overwrite=True)


def test_ids_are_unique_and_never_clean(tmp_path):
    params = make_inputs(tmp_path / "in")
    bg = Path(params["backgrounds_dir"])
    write(bg / "clean.wav", noise(2.0, seed=40))
    write(bg / "noise_0.flac", noise(2.0, seed=41))
    write(bg / "My Noise (2).wav", noise(2.0, seed=42))
    r = custom.validate_inputs(**params)
    ids = [b["bg_id"] for b in r.backgrounds]
    assert len(ids) == len(set(ids))
    # sorted file order decides which of noise_0.flac / noise_0.wav keeps the bare stem
    assert "clean" not in ids and "clean_wav" in ids and "My_Noise_2" in ids
    assert {"noise_0", "noise_0_wav"} <= set(ids)
    assert all("__" not in i for i in ids)


def test_pipeline_dispatch_and_notebook_parameters(tmp_path):
    from aiplib.sources import pipeline
    from aiplib.sources.corpora import get_profile

    assert get_profile("custom") is custom
    assert pipeline.stage_sizes("custom", smoke=True) == {"max_items": 3}
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):  # the exact call of notebook 01, keywords as a comma string
        pipeline.gather_raw(ws, keywords="yes,no,up,down,left,right,on,off,stop,go", **params)
    banks = pipeline.build_item_banks(ws, seed=1, overwrite=False, **pipeline.stage_sizes("custom", True))
    assert len(banks["asr"]) == 2 and len(banks["kws"]) == 3
    assert len(pipeline.battery_specs(ws)) == 9


# ------------------------------------------------------------------ digital silence in backgrounds
def test_strip_digital_silence_shortens_long_zero_runs():
    sr = SR
    burst = noise(0.3, seed=5)
    y = np.concatenate([np.zeros(2 * sr), burst, np.zeros(sr), burst, np.zeros(int(0.1 * sr)), burst,
                        np.zeros(int(2.4 * sr))]).astype(np.float32)
    out, removed = custom.strip_digital_silence(y)
    assert removed["start_s"] == pytest.approx(2.0 - 0.12, abs=0.011)  # keeps half the 0.25 s gap
    assert removed["end_s"] == pytest.approx(2.4 - 0.12, abs=0.011)
    assert removed["inside_s"] == pytest.approx(1.0 - 0.25, abs=0.011)  # the 0.1 s run is left alone
    assert out.size == pytest.approx(y.size - sum(removed.values()) * sr, abs=2)
    assert np.array_equal(np.sort(np.abs(out))[-100:], np.sort(np.abs(y))[-100:])  # no sound is lost
    steady = noise(2.0, seed=6)
    same, r0 = custom.strip_digital_silence(steady)
    assert same is steady or np.array_equal(same, steady)
    assert r0 == {"start_s": 0.0, "end_s": 0.0, "inside_s": 0.0}


def test_zero_padded_background_gets_a_trimmed_copy(tmp_path):
    params = make_inputs(tmp_path / "in")
    bg = Path(params["backgrounds_dir"])
    write(bg / "bark.wav", np.concatenate([np.zeros(2 * SR), noise(0.4, seed=7), np.zeros(2 * SR)]), subtype="PCM_16")
    r = custom.validate_inputs(**params)
    assert r.ok
    assert [Path(p.file).name for p in r.warnings if p.kind == "digital_silence"] == ["bark.wav"]
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        inv = custom.gather_raw(ws, **params)
    row = inv.set_index("bg_id").loc["bark"]
    assert row["prepared"] == "raw/backgrounds/bark.wav" and row["prepared_duration_s"] == pytest.approx(0.64, abs=0.02)
    assert [p.name for p in ws.raw.rglob("*.wav")] == ["bark.wav"]
    spec = {s["bg_id"]: s for s in custom.battery_specs(ws)}["bark"]
    assert spec["sources"] == [str(ws.root / "raw/backgrounds/bark.wav")]
    from aiplib.battery.backgrounds import curate_battery
    from aiplib.stimuli.checks import active_fraction

    battery = curate_battery(ws, [spec], duration_s=30.0)
    y, _ = sf.read(str(ws.path(battery["path"].iloc[0])), dtype="float32")
    worst = min(np.abs(y[s:s + SR]).max() for s in range(0, y.size - SR, SR // 4))
    assert worst > 0, "every 1 s window of the looped background holds sound"
    assert active_fraction(y) > 0.5


# ------------------------------------------------------------------ folder scans never skip silently
def _lock_bg_subfolder(params: dict) -> Path:
    """Add backgrounds in a subfolder ``locked/`` of the backgrounds folder; returns it."""
    locked = Path(params["backgrounds_dir"]) / "locked"
    write(locked / "rain.wav", noise(2.0, seed=30))
    write(locked / "wind.wav", noise(2.0, seed=31))
    return locked


def test_unreadable_subfolder_is_a_fatal_problem_naming_it(tmp_path, monkeypatch):
    params = make_inputs(tmp_path / "in")
    locked = _lock_bg_subfolder(params)
    r = custom.validate_inputs(**params)
    bg_scan = next(s for s in r.scans if s["role"] == "backgrounds_dir")
    assert (bg_scan["n_files"], bg_scan["n_folders"], bg_scan["errors"]) == (11, 2, [])
    assert bg_scan["per_folder"] == {".": 9, "locked": 2}
    assert r.ok and "11 audio file(s) found in 2 folder(s)" in r.summary()

    # root reads any folder whatever its mode, so a chmod 000 folder is simulated here: listing it
    # raises the PermissionError os.scandir raises for a non-root user (the real chmod runs below).
    real_scandir = os.scandir

    def scandir(path="."):
        if os.path.abspath(os.fspath(path)) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    r = custom.validate_inputs(**params)
    assert not r.ok
    assert [(p.kind, p.file) for p in r.fatal] == [("unreadable_folder", str(locked))]
    assert "Permission denied" in r.fatal[0].message and "backgrounds_dir" in r.fatal[0].message
    bg_scan = next(s for s in r.scans if s["role"] == "backgrounds_dir")
    assert (bg_scan["n_files"], bg_scan["n_folders"], bg_scan["errors"]) == (9, 1, [str(locked)])
    assert len(r.backgrounds) == 9
    summary = r.summary()
    assert f"backgrounds_dir {Path(params['backgrounds_dir'])}: 9 audio file(s) found in 1 folder(s), " \
           "1 could not be scanned" in summary
    assert f"{locked}: not scanned" in summary
    assert "speech_dir" in summary and "2 audio file(s) found in 2 folder(s)" in summary  # a.wav, sub/b.flac


def _as_nobody() -> list[str] | None:
    """Command prefix that runs as an unprivileged user ([] when not root; None when impossible)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        return None
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


@pytest.mark.slow
def test_chmod_000_subfolder_fails_the_cli_for_a_normal_user(tmp_path):
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("running as root without setpriv: the monkeypatched test above covers the scan")
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="aip-chmod-"))
    try:
        root.chmod(0o755)
        params = make_inputs(root / "in")
        for d in [root, *root.rglob("*")]:
            d.chmod(0o755 if d.is_dir() else 0o644)
        locked = _lock_bg_subfolder(params)
        locked.chmod(0o755)
        for f in locked.iterdir():
            f.chmod(0o644)
        env = dict(os.environ, PYTHONPATH=str(REPO), HOME=str(root), NUMBA_CACHE_DIR=str(root / ".numba"),
                   MPLCONFIGDIR=str(root / ".mpl"))
        (root / ".numba").mkdir(mode=0o777)
        (root / ".mpl").mkdir(mode=0o777)
        (root / ".numba").chmod(0o777)
        (root / ".mpl").chmod(0o777)
        probe = subprocess.run([*prefix, sys.executable, "-c", "import aiplib.sources.corpora.custom"], env=env,
                               cwd=str(root), capture_output=True, text=True, check=False)
        if probe.returncode != 0:
            pytest.skip(f"the unprivileged user cannot run the project's Python: {probe.stderr[-300:]}")
        ok = subprocess.run([*prefix, *cli_args(params)], env=env, cwd=str(root), capture_output=True,
                            text=True, check=False)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "11 audio file(s) found in 2 folder(s)" in ok.stdout
        locked.chmod(0o000)
        # not vacuous: the unprivileged user really cannot list the folder
        assert subprocess.run([*prefix, "ls", str(locked)], capture_output=True, check=False).returncode != 0
        bad = subprocess.run([*prefix, *cli_args(params)], env=env, cwd=str(root), capture_output=True,
                             text=True, check=False)
        assert bad.returncode == 1, bad.stdout + bad.stderr
        assert f"FATAL [unreadable_folder] {locked}: backgrounds_dir: this folder cannot be scanned " \
               "(Permission denied)" in bad.stdout
        assert "9 audio file(s) found in 1 folder(s), 1 could not be scanned" in bad.stdout
        assert "FAILED" in bad.stdout and "OK:" not in bad.stdout
    finally:
        for d in [root, *root.rglob("*")] if root.exists() else []:
            if d.is_dir():
                d.chmod(0o755)
        shutil.rmtree(root, ignore_errors=True)


# ------------------------------------------------------------------ labels and references as the scorer reads them
def test_label_yes_bang_is_the_keyword_yes_and_listed(tmp_path):
    params = make_inputs(tmp_path / "in")
    kw = Path(params["kws_dir"])
    write(kw / "dots.wav", voice_like(1.0, seed=12))
    pd.DataFrame({"file": ["yes.wav", "go.wav", "cat.wav", "happy.wav", "seq.wav", "dots.wav"],
                  "label": ["Yes!", "GO", "\"cat\",", "happy", "yes|no|go", "..."]}).to_csv(
        params["kws_labels"], sep="\t", index=False)
    r = custom.validate_inputs(**params)
    targets = {k["item_id"]: (k["label"], k["is_target"]) for k in r.kws if k["used"]}
    assert targets == {"yes": ("yes", True), "go": ("go", True), "cat": ("cat", False), "happy": ("happy", False)}
    changed = {Path(p.file).name: p.message for p in r.warnings if p.kind == "label_normalised"}
    assert set(changed) == {"yes.wav", "cat.wav"}  # "GO" → "go" is a change of case only: not listed
    assert changed["yes.wav"].startswith("label 'Yes!' is read as 'yes' (one of the keywords)")
    assert "'cat' (not a keyword)" in changed["cat.wav"]
    assert next(k for k in r.kws if k["item_id"] == "yes")["note"] == "label 'Yes!' normalised to 'yes'"
    assert [(p.kind, Path(p.file).name) for p in r.fatal] == [("missing_label", "dots.wav")]
    assert "after normalisation" in r.fatal[0].message
    assert "label_normalised" in r.summary() and "Yes!" in r.summary()


@pytest.mark.parametrize("text", ["[music]", "uh", "...", "(laughs) um"])
def test_reference_empty_after_normalisation_is_refused(tmp_path, text):
    params = make_inputs(tmp_path / "in")
    write(Path(params["speech_dir"]) / "filler.wav", voice_like(1.0, seed=13))
    texts = pd.read_csv(params["texts"])
    pd.concat([texts, pd.DataFrame({"file": ["filler.wav"], "text": [text]})]).to_csv(params["texts"], index=False)
    r = custom.validate_inputs(**params)
    assert [(p.kind, Path(p.file).name) for p in r.fatal] == [("empty_reference", "filler.wav")]
    assert repr(text) in r.fatal[0].message and "WER is undefined" in r.fatal[0].message
    assert sorted(x["item_id"] for x in r.speech) == ["a", "sub-b"]
    from aiplib.core.textnorm import reference_is_empty  # the rule validation applies

    assert not reference_is_empty("uh, yes") and not reference_is_empty("[music] go")


# ------------------------------------------------------------------ ids that look like missing values
def test_files_named_na_keep_the_string_id_everywhere(tmp_path):
    params = make_inputs(tmp_path / "in")
    sp, kw, bg = (Path(params[k]) for k in ("speech_dir", "kws_dir", "backgrounds_dir"))
    write(sp / "NA.wav", voice_like(1.2, seed=20))
    pd.concat([pd.read_csv(params["texts"]), pd.DataFrame({"file": ["NA.wav"], "text": ["not available"],
                                                           "speaker": ["NA"], "accent_group": ["g1"]})]
              ).to_csv(params["texts"], index=False)
    write(kw / "NA.wav", voice_like(1.0, seed=21))
    labels = pd.read_csv(params["kws_labels"], sep="\t")
    pd.concat([labels, pd.DataFrame({"file": ["NA.wav"], "label": ["null"]})]).to_csv(
        params["kws_labels"], sep="\t", index=False)
    write(bg / "NA.wav", noise(3.0, seed=22))
    lic = pd.read_csv(bg / "licences.csv", keep_default_na=False)
    pd.concat([lic, pd.DataFrame({"file": ["NA.wav"], "licence": ["CC0 1.0"], "attribution": ["NA"],
                                  "category": ["stationary"], "description": ["None"]})]).to_csv(
        bg / "licences.csv", index=False)
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        custom.gather_raw(ws, **params)
    inv = custom._read_inventory(ws)
    assert "NA" in set(inv.loc[inv["package"] == "custom/speech", "item_id"])
    assert "NA" in set(inv.loc[inv["package"] == "custom/kws", "item_id"])
    assert "NA" in set(inv.loc[inv["package"] == "custom/backgrounds", "bg_id"])
    assert not inv[["item_id", "bg_id", "label", "speaker", "attribution", "description"]].isna().any().any()
    banks = custom.build_item_banks(ws, seed=1)
    asr = banks["asr"].set_index("item_id")
    assert asr.loc["NA", "speaker"] == "NA" and asr.loc["NA", "text"] == "not available"
    kws = banks["kws"].set_index("item_id")
    assert kws.loc["NA", "label"] == "null" and not kws.loc["NA", "is_target"]
    spec = {s["bg_id"]: s for s in custom.battery_specs(ws)}["NA"]
    assert (spec["attribution"], spec["description"], spec["category"]) == ("NA", "None", "stationary")
    assert spec["sources"] == [str(bg / "NA.wav")]
