"""Stages know their inputs: stamps rebuild what changed, stage 7 resumes on stimulus content.

The fake recogniser answers each stimulus with the SHA-256 of its audio samples, so "this row's
transcript belongs to this stimulus" is checked exactly: every kept row must equal the answer to
the stimulus its manifest row makes *now*.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_tiny_workspace
from test_custom import make_inputs, noise, voice_like, write

import aiplib.inference.models
from aiplib.battery.backgrounds import curate_battery
from aiplib.core import stage_records, stamps
from aiplib.core.workspace import MODELS_ENV, MODELS_FILE_NAME, workspace
from aiplib.inference import keys
from aiplib.inference.models import Recogniser, get_entry, registry
from aiplib.inference.runner import run_inference
from aiplib.io.formats import read_inference_jsonl, read_manifest, read_results
from aiplib.scoring.score import score_inference
from aiplib.sources import pipeline
from aiplib.stimuli.families import materialize
from aiplib.stimuli.manifests import build_manifests


def answer(audio: np.ndarray) -> str:
    """The fake model's transcript of a stimulus: a digest of its float32 samples."""
    return "w" + hashlib.sha256(np.asarray(audio, dtype=np.float32).tobytes()).hexdigest()[:12]


class HashRecogniser(Recogniser):
    def __init__(self, entry):
        self.name, self.entry, self.batch_size = entry.id, entry, 4
        self.calls = 0

    def info(self):
        return {"path": "fake", "window": None, "weights_path": "none"}

    def generate(self, audios, prompts):
        self.calls += len(audios)
        return [answer(a) for a in audios]

    def close(self):
        pass


@pytest.fixture
def fake_model(monkeypatch):
    made = []

    def load(entry, **_):
        rec = HashRecogniser(get_entry(entry) if isinstance(entry, str) else entry)
        made.append(rec)
        return rec

    monkeypatch.setattr(aiplib.inference.models, "load_model", load)
    return made


def decoded_ids(ws, model="whisper_tiny_en", task="asr", since=0) -> list[str]:
    """Ids of the rows appended to inference/<model>/<task>.jsonl after line ``since``."""
    rows, _ = read_inference_jsonl(ws.inference / model / f"{task}.jsonl")
    return [r["id"] for r in rows[since:]]


def n_rows(ws, model="whisper_tiny_en", task="asr") -> int:
    p = ws.inference / model / f"{task}.jsonl"
    return len(read_inference_jsonl(p)[0]) if p.is_file() else 0


def assert_every_row_answers_its_current_stimulus(ws, family, task):
    """The exact check: each scored row's transcript is the answer to the current stimulus."""
    man = read_manifest(ws, family).set_index("id", drop=False)
    res = read_results(ws.inference / "whisper_tiny_en" / f"{task}.jsonl", keep_errors=False)
    assert sorted(res["id"]) == sorted(man["id"])
    for r in res.itertuples():
        y, _ = materialize(man.loc[r.id].to_dict(), ws)
        assert r.raw == answer(y[: 30 * 16000]), r.id


# ------------------------------------------------------------------------------ unit level
def test_stamp_differences_name_what_changed(tmp_path):
    ws = workspace("demo", data_root=tmp_path)
    a = ws.raw / "a.txt"
    a.write_text("one")
    old = stamps.make_stamp("x", params={"snrs_db": [10, 5, 0]}, inputs=[a], ws=ws)
    stamps.write_stamp(ws.raw / "x.stamp.json", old, outputs=[a], ws=ws)
    rec = stamps.read_stamp(ws.raw / "x.stamp.json")
    assert rec["inputs"] == {"raw/a.txt": hashlib.sha256(b"one").hexdigest()}
    assert rec["outputs"] == rec["inputs"] and rec["stage"] == "x" and rec["stamp_version"] == 1
    assert stamps.differences(rec, old, ws=ws) == []
    a.write_text("two")
    new = stamps.make_stamp("x", params={"snrs_db": [10, 5]}, inputs=[a], ws=ws)
    one, two = hashlib.sha256(b"one").hexdigest(), hashlib.sha256(b"two").hexdigest()
    assert stamps.differences(rec, new, ws=ws) == [
        f"input changed: raw/a.txt ({one[:12]}… → {two[:12]}…)", "parameter snrs_db: [10,5,0] → [10,5]",
        "output changed since it was written: raw/a.txt"]
    assert stamps.differences(None, new)[0].startswith("no stamp")


def test_difference_message_names_the_nested_key_that_differs():
    """New-user trial: a background's spec differed in one key, and the message showed two
    identical cut-off copies of the whole spec."""
    spec = {"attribution": "unknown — supplied by the user", "bg_id": "sc_bg_running_tap", "combine": "concat",
            "category": "stationary", "sha256": "3fa2" + "0" * 60}
    old = {"stamp_version": 1, "params": {"seed": 1, "spec": spec}, "inputs": {}}
    new = {"stamp_version": 1, "params": {"seed": 1, "spec": dict(spec, category="transient", sha256="9c1b" + "1" * 60,
                                                                   licence="CC0")}, "inputs": {}}
    assert stamps.differences(old, new) == [
        'parameter spec.category: "stationary" → "transient"', 'parameter spec.licence: added "CC0"',
        "parameter spec.sha256: 3fa200000000… → 9c1b11111111…"]
    del new["params"]["spec"]["combine"]
    assert 'parameter spec.combine: removed (was "concat")' in stamps.differences(old, new)
    # long texts are shown from where they start to differ
    a, b = "user background " * 8 + "(stationary)", "user background " * 8 + "(transient)"
    (line,) = stamps.value_differences("description", a, b)
    assert "stationary" in line and "transient" in line and len(line) < 100


def test_resume_key_covers_row_files_prompt_and_entry(tmp_path):
    ws = make_tiny_workspace(tmp_path, n_asr=1, n_kws=1, n_bg=2)
    build_manifests(ws, snrs=[10])
    man = read_manifest(ws, "asr")
    row = man.iloc[1].to_dict()
    base = keys.stimulus_base(row, ws)
    e = get_entry("whisper_tiny_en")
    key = keys.stimulus_key(base, prompt_sha256=stamps.text_sha256("p"), entry_sha256=keys.entry_sha256(e))
    assert len(key) == 16 and int(key, 16) >= 0
    other = {"seed": row["seed"] + 1, "snr_db": 0, "bg_path": "bg/bg01.wav", "speech_path": "x.wav"}
    for k, v in other.items():
        assert keys.stimulus_base(dict(row, **{k: v}), ws) != base, k
    assert keys.stimulus_key(base, prompt_sha256=stamps.text_sha256("q"),
                               entry_sha256=keys.entry_sha256(e)) != key
    e2 = dict(e.to_dict(), revision="other")
    assert keys.entry_sha256(e2) != keys.entry_sha256(e)
    assert keys.entry_sha256(dict(e.to_dict(), notes="edited")) == keys.entry_sha256(e)
    # the background file's content counts, not only its path
    write(ws.bg / "bg00.wav", noise(3.0, seed=77))
    assert keys.stimulus_base(row, ws) != base
    # a clean row does not depend on its seed
    clean = man.iloc[0].to_dict()
    assert keys.stimulus_base(dict(clean, seed=999), ws) == keys.stimulus_base(clean, ws)


def test_manifest_rebuilt_when_snrs_seed_or_inputs_change(tiny_ws):
    """Stage 5 is rebuilt on every run (no stamp): the same inputs give the same bytes."""
    p = tiny_ws.manifests / "asr.csv"
    build_manifests(tiny_ws, snrs=[10, 0])
    assert not (tiny_ws.manifests / "asr.stamp.json").exists()
    df = build_manifests(tiny_ws, snrs=[10, 5])["asr"]
    assert sorted(df.loc[df["condition"] == "noisy", "snr_db"].unique()) == [5, 10]
    df = build_manifests(tiny_ws, snrs=[10, 5], seed_start=500)["asr"]
    assert df["seed"].iloc[0] == 500
    data = p.read_bytes()
    build_manifests(tiny_ws, snrs=[10, 5], seed_start=500)  # nothing changed: rebuilt byte-identical
    assert p.read_bytes() == data
    write(tiny_ws.bg / "bg03.wav", noise(3.0, seed=55))  # a background WAV changed
    before = read_manifest(tiny_ws, "asr")
    after = build_manifests(tiny_ws, snrs=[10, 5], seed_start=500)["asr"]
    assert before["id"].equals(after["id"])


# ------------------------------------------------------------------------------ (b) seeds and SNRs
def test_changed_seed_or_snrs_rerun_only_changed_stimuli(tmp_path, fake_model):
    ws = make_tiny_workspace(tmp_path, n_asr=2, n_kws=1, n_bg=3)
    build_manifests(ws, snrs=[10, 0])
    run_inference(ws, tasks="asr", progress=False)
    assert n_rows(ws) == 2 * (1 + 3 * 2) == 14
    assert_every_row_answers_its_current_stimulus(ws, "asr", "asr")
    old_noisy = {r["id"]: r["raw"] for r in read_inference_jsonl(ws.inference / "whisper_tiny_en" / "asr.jsonl")[0]
                 if r["condition"] == "noisy"}

    # (1) another first seed: every noisy stimulus has another offset; clean ones are unchanged
    man = build_manifests(ws, snrs=[10, 0], seed_start=1000)["asr"]
    noisy = set(man.loc[man["condition"] == "noisy", "id"])
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_run"] == 12 and s.loc[0, "n_done_before"] == 2
    assert set(decoded_ids(ws, since=2)) == noisy and n_rows(ws) == 14  # stale rows left the file
    assert_every_row_answers_its_current_stimulus(ws, "asr", "asr")
    res = read_results(ws.inference / "whisper_tiny_en" / "asr.jsonl").set_index("id")
    changed = [i for i in noisy if res.loc[i, "raw"] != old_noisy[i]]
    assert len(changed) >= 10  # other audio, other answer (an offset can coincide by chance)
    superseded = read_inference_jsonl(ws.inference / "whisper_tiny_en" / "superseded" / "asr.jsonl")[0]
    assert sorted(r["id"] for r in superseded) == sorted(noisy)
    assert {r["raw"] for r in superseded} == set(old_noisy.values())

    # (2) other SNRs: 0 dB leaves, 5 dB comes; 10 dB rows keep their seeds and are not re-run
    man = build_manifests(ws, snrs=[10, 5], seed_start=1000)["asr"]
    s = run_inference(ws, tasks="asr", progress=False)
    new = set(man.loc[man["snr_db"] == 5, "id"])
    assert s.loc[0, "n_run"] == 6 and set(decoded_ids(ws, since=8)) == new
    assert_every_row_answers_its_current_stimulus(ws, "asr", "asr")
    assert not any(i.endswith("_snr0") for i in decoded_ids(ws))

    # (3) nothing changed: the model is not loaded
    n_loaded = len(fake_model)
    s = run_inference(ws, tasks="asr", progress=False)
    assert len(fake_model) == n_loaded and s.loc[0, "n_run"] == 0


def test_rows_without_key_authors_rule(tmp_path, fake_model):
    """Rows without stim_key (the authors' files) count as done when prompt id, seed and SNR agree;
    a row of another seed is re-run, and rerun_unkeyed=True re-runs them all."""
    ws = make_tiny_workspace(tmp_path, n_asr=1, n_kws=1, n_bg=2)
    man = build_manifests(ws, snrs=[10])["asr"]
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    path.parent.mkdir(parents=True)
    rows = []
    for r in man.to_dict("records"):
        row = {k: r[k] for k in ["id", "speech_id", "background_id", "snr_db", "condition", "seed"]}
        rows.append(dict(row, raw="authors", model="whisper_tiny_en", task="asr"))
    rows[2]["seed"] += 7  # written for another seed: another stimulus
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_run"] == 1 and decoded_ids(ws, since=2) == [man["id"].iloc[2]]
    res = read_results(path).set_index("id")
    assert list(res["raw"].iloc[:2]) == ["authors", "authors"] and res["raw"].iloc[2].startswith("w")
    s = run_inference(ws, tasks="asr", progress=False, rerun_unkeyed=True)
    assert s.loc[0, "n_run"] == 2
    assert_every_row_answers_its_current_stimulus(ws, "asr", "asr")


# ------------------------------------------------------------------------------ (a) the custom profile
def run_stages(ws, params, *, snrs=(10, 0)):
    """Stages 01–08 through the functions the notebooks call (stage 4 and 6 are not needed here)."""
    with pytest.warns(UserWarning):
        pipeline.gather_raw(ws, keywords="yes,no,up,down,left,right,on,off,stop,go", **params)
    pipeline.build_item_banks(ws, seed=1, overwrite=False)
    curate_battery(ws, pipeline.battery_specs(ws), duration_s=4.0, seed=3)
    build_manifests(ws, snrs=list(snrs))
    summary = run_inference(ws, tasks="asr,kws", progress=False)
    scores = score_inference(ws)
    return summary.set_index("task"), scores


@pytest.mark.slow
def test_custom_profile_rerun_after_adding_correcting_and_replacing(tmp_path, fake_model):
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    s1, sc1 = run_stages(ws, params)
    n_bg = 9
    assert s1.loc["asr", "n_run"] == 2 * (1 + n_bg * 2) and s1.loc["kws", "n_run"] == 4 * (1 + n_bg * 2)
    ref = sc1["asr"].drop_duplicates("item_id").set_index("item_id")["reference"]
    assert ref.to_dict() == {"a": "hello there", "sub-b": "good morning, friend"}
    bg3 = (ws.bg / "noise_3.wav").read_bytes()
    bg4 = (ws.bg / "noise_4.wav").read_bytes()
    n_asr, n_kws = n_rows(ws, task="asr"), n_rows(ws, task="kws")

    # the user adds an utterance with its text, corrects a transcript, replaces a background file
    sp, bg = Path(params["speech_dir"]), Path(params["backgrounds_dir"])
    write(sp / "c.wav", voice_like(1.2, f0=210, seed=31))
    texts = pd.read_csv(params["texts"], keep_default_na=False)
    texts.loc[texts["file"] == "a.wav", "text"] = "hello their friend"
    texts = pd.concat([texts, pd.DataFrame({"file": ["c.wav"], "text": ["brand new words"],
                                            "accent_group": ["g1"], "speaker": ["s3"]})])
    texts.to_csv(params["texts"], index=False)
    write(bg / "noise_3.wav", noise(3.0, seed=99, bursts=True))
    s2, sc2 = run_stages(ws, params)

    # item bank, manifest, scores: the new utterance is in, the corrected text is the reference
    bank = pd.read_json(ws.itembanks / "asr.jsonl", lines=True, dtype={"item_id": str}).set_index("item_id")
    assert list(bank.index) == ["a", "sub-b", "c"] and bank.loc["a", "text"] == "hello their friend"
    man = read_manifest(ws, "asr")
    assert (man["speech_id"] == "c").sum() == 1 + n_bg * 2
    assert set(man.loc[man["speech_id"] == "a", "transcript"]) == {"hello their friend"}
    ref = sc2["asr"].drop_duplicates("item_id").set_index("item_id")["reference"]
    assert ref.to_dict() == {"a": "hello their friend", "sub-b": "good morning, friend", "c": "brand new words"}
    assert (sc2["asr"]["item_id"] == "c").sum() == 1 + n_bg * 2
    # the new background is in the battery; the others were kept as they were
    assert (ws.bg / "noise_3.wav").read_bytes() != bg3 and (ws.bg / "noise_4.wav").read_bytes() == bg4
    bat = pd.read_csv(ws.descriptors / "battery.csv", dtype={"bg_id": str}).set_index("bg_id")
    assert len(bat) == n_bg and abs(bat.loc["noise_3", "lufs_after"] + 23.0) < 0.05
    # stage 7 re-ran exactly: every stimulus of "c", and every stimulus on noise_3; nothing else
    want_asr = set(man.loc[(man["speech_id"] == "c") | (man["background_id"] == "noise_3"), "id"])
    kman = read_manifest(ws, "kws")
    want_kws = set(kman.loc[kman["background_id"] == "noise_3", "id"])
    assert len(want_asr) == 19 + 2 * 2 and len(want_kws) == 4 * 2
    assert set(decoded_ids(ws, task="asr", since=n_asr - 4)) == want_asr
    assert set(decoded_ids(ws, task="kws", since=n_kws - 8)) == want_kws
    assert s2.loc["asr", "n_run"] == len(want_asr) and s2.loc["kws", "n_run"] == len(want_kws)
    assert_every_row_answers_its_current_stimulus(ws, "asr", "asr")
    assert_every_row_answers_its_current_stimulus(ws, "kws", "kws")
    # a third run with nothing changed decodes nothing and loads no model
    n_loaded = len(fake_model)
    s3, _ = run_stages(ws, params)
    assert len(fake_model) == n_loaded and s3["n_run"].sum() == 0


# ------------------------------------------------------------------------------ make stamps
def _stage_1_to_5(ws, params):
    with pytest.warns(UserWarning):
        pipeline.gather_raw(ws, keywords="yes,no,up,down,left,right,on,off,stop,go", **params)
    pipeline.build_item_banks(ws, seed=1, overwrite=False)
    curate_battery(ws, pipeline.battery_specs(ws), duration_s=4.0, seed=3)
    build_manifests(ws, snrs=[10])


def _changes(ws) -> dict:
    return {r["path"]: r["changes"] for r in pipeline.stale_stamps(ws)}


def test_make_stamps_tells_what_the_next_run_rebuilds_after_user_edits(tmp_path, caplog):
    """New-user trial: after adding an utterance and correcting a transcript, ``make stamps`` said
    raw and itembanks were up to date although ``make all`` then rebuilt the item banks."""
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    _stage_1_to_5(ws, params)
    before = _changes(ws)
    assert set(before) == {"raw/raw.stamp.json", "itembanks/itembanks.stamp.json"}  # stages 3 and 5: rebuilt
    assert all(v == [] for v in before.values()), before
    rec = stamps.read_stamp(ws.raw / "raw.stamp.json")
    sp = Path(params["speech_dir"])
    assert str(sp / "a.wav") in rec["inputs"] and params["texts"] in rec["inputs"]
    assert len(rec["inputs"]) == 2 + 5 + 9 + 3  # utterances, clips, backgrounds, tables

    # the user adds an utterance and corrects a transcript (no background changes)
    old_texts = stamps.file_sha256(params["texts"])
    write(sp / "c.wav", voice_like(1.2, f0=210, seed=31))
    texts = pd.read_csv(params["texts"], keep_default_na=False)
    texts.loc[texts["file"] == "a.wav", "text"] = "hello their friend"
    texts = pd.concat([texts, pd.DataFrame({"file": ["c.wav"], "text": ["brand new words"]})])
    texts.to_csv(params["texts"], index=False)
    now = _changes(ws)
    new_texts = stamps.file_sha256(params["texts"])
    assert now["raw/raw.stamp.json"] == [
        f"input added: {sp / 'c.wav'}",
        f"input changed: {params['texts']} ({old_texts[:12]}… → {new_texts[:12]}…)"]
    assert now["itembanks/itembanks.stamp.json"] == [
        "upstream: raw/inventory.csv is rewritten by 01_download_data"]

    # and that is what the stages then do: the asr manifest changes, the kws one and the battery
    # are rebuilt byte-identical
    kws_man = (ws.manifests / "kws.csv").read_bytes()
    asr_man = (ws.manifests / "asr.csv").read_bytes()
    bg = {p.name: p.read_bytes() for p in ws.bg.glob("*.wav")}
    caplog.clear()
    with caplog.at_level("WARNING"):
        _stage_1_to_5(ws, params)
    msgs = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("item banks are rebuilt: input changed: raw/inventory.csv") for m in msgs), msgs
    assert (ws.manifests / "asr.csv").read_bytes() != asr_man
    assert (ws.manifests / "kws.csv").read_bytes() == kws_man
    assert {p.name: p.read_bytes() for p in ws.bg.glob("*.wav")} == bg
    assert all(v == [] for v in _changes(ws).values())

    # a stamp of an older version, without inputs: compared with raw/inventory.csv
    rec = stamps.read_stamp(ws.raw / "raw.stamp.json")
    (ws.raw / "raw.stamp.json").write_text(json.dumps(dict(rec, inputs={})))
    assert _changes(ws)["raw/raw.stamp.json"] == []
    write(sp / "c.wav", voice_like(1.3, f0=190, seed=32))
    (line,) = _changes(ws)["raw/raw.stamp.json"]
    assert line.startswith(f"input changed: {sp / 'c.wav'} (")


def test_make_stamps_command_line(tmp_path, capsys):
    params = make_inputs(tmp_path / "in")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    _stage_1_to_5(ws, params)
    assert pipeline.main(["--profile", "custom", "--data-root", str(tmp_path / "data")]) == 0
    out = capsys.readouterr().out
    assert "raw/raw.stamp.json (01_download_data," in out and "0 of 2 stamp(s) stale" in out
    Path(params["texts"]).write_text(Path(params["texts"]).read_text().replace("hello there", "hello, there"))
    assert pipeline.main(["--profile", "custom", "--data-root", str(tmp_path / "data")]) == 1
    out = capsys.readouterr().out
    assert "raw/raw.stamp.json (01_download_data" in out and f"STALE — input changed: {params['texts']}" in out
    assert "itembanks/itembanks.stamp.json (02_build_item_banks" in out and "2 of 2 stamp(s) stale" in out


# ------------------------------------------------------------------------------ stage records
def _record_04(ws, start_ns=None):
    """Record of stage 4 (as scripts/run_stage.sh writes it after a success) on ``ws``."""
    if start_ns is None:
        time.sleep(0.2)
        start_ns = time.time_ns()
    nb = Path(__file__).resolve().parents[1] / "notebooks" / "04_extract_descriptors.ipynb"
    out = ws.root / "executed"
    out.mkdir(exist_ok=True)
    (out / "04_extract_descriptors.ipynb").write_text("{}")
    (ws.descriptors / "acoustic_descriptors.csv").write_text("bg_id,x\nbg00,1\n")
    stage_records.write_record("04_extract_descriptors", nb, out, ["-p", "profile", "demo"], start_ns)
    cache = stage_records.HashCache(out / stage_records.CACHE_NAME)
    return lambda args=("-p", "profile", "demo"): stage_records.differences(
        "04_extract_descriptors", nb, out, list(args), cache)


def test_stage_record_names_what_changed_and_ignores_a_touch(tmp_path):
    """A stage record (executed/04_*.stamp.json): up to date after it is written and after a file is
    rewritten with the same bytes; an edited background, another parameter, a deleted output or a
    new AIP_ variable each make the stage run again, named in one line."""
    ws = make_tiny_workspace(tmp_path, n_bg=2)
    check = _record_04(ws)
    rec = json.loads((ws.root / "executed" / "04_extract_descriptors.stamp.json").read_text())
    assert set(rec["inputs"]) == {"bg/bg00.wav", "bg/bg01.wav", "descriptors/battery.csv"}
    assert list(rec["outputs"]) == ["descriptors/acoustic_descriptors.csv"]
    assert check() == []
    bg = ws.bg / "bg00.wav"
    data = bg.read_bytes()
    bg.write_bytes(data)  # same content, new mtime: still up to date
    assert check() == []
    bg.write_bytes(data[:-2] + b"\x01\x02")
    assert check() == ["input changed: bg/bg00.wav"]
    bg.write_bytes(data)
    assert check(["-p", "profile", "demo", "-p", "vad_threshold", "0.5"])[0].startswith("parameters changed")
    (ws.descriptors / "acoustic_descriptors.csv").unlink()
    assert check() == ["output missing: descriptors/acoustic_descriptors.csv"]


def test_stage_record_outputs_are_the_files_written_during_the_run(tmp_path):
    """Files changed since the run started are the stage's outputs (so a deleted one re-runs it),
    and a file a later stage's record owns is not an input of an earlier stage."""
    ws = make_tiny_workspace(tmp_path, n_bg=1)
    time.sleep(0.2)
    start = time.time_ns()
    (ws.descriptors / "extra_written_by_4.csv").write_text("a\n1\n")
    _record_04(ws, start_ns=start)
    rec = json.loads((ws.root / "executed" / "04_extract_descriptors.stamp.json").read_text())
    assert "descriptors/extra_written_by_4.csv" in rec["outputs"]
    assert "bg/bg00.wav" in rec["inputs"] and "bg/bg00.wav" not in rec["outputs"]  # older than start
    assert stage_records.external_files(["-r", "speech_dir", str(ws.bg), "-p", "seed", "1"]) == [
        (ws.bg / "bg00.wav").resolve()]


def test_a_models_file_reaches_the_records_of_stages_6_to_10_only(tmp_path, monkeypatch):
    """Adding a models file (``MODELS=``, i.e. ``$AIP_MODELS``, or ``<data root>/models.yaml``) leaves
    the record of stage 4 up to date and makes stage 6's stale, naming the file: a new model never
    re-runs the download, the item banks, the backgrounds, the descriptors or the manifests."""
    monkeypatch.delenv(MODELS_ENV, raising=False)
    ws = make_tiny_workspace(tmp_path, n_bg=2)
    check_04 = _record_04(ws)
    nb_06 = Path(__file__).resolve().parents[1] / "notebooks" / "06_manipulation_checks.ipynb"
    out = ws.root / "executed"
    args = ["-p", "profile", "demo"]
    (out / "06_manipulation_checks.ipynb").write_text("{}")
    started = time.time_ns()  # nothing written since: stage 6's record owns no file of stage 4
    stage_records.write_record("06_manipulation_checks", nb_06, out, args, started)
    cache = stage_records.HashCache(out / stage_records.CACHE_NAME)

    def check_06():
        return stage_records.differences("06_manipulation_checks", nb_06, out, args, cache)

    assert check_06() == []
    models = tmp_path / "my_models.yaml"
    models.write_text("mine:\n  backend: command\n  command: ./asr {file}\n")
    monkeypatch.setenv(MODELS_ENV, str(models))
    assert check_04() == []
    assert check_06() == ["environment added: AIP_MODELS", "environment added: models file"]

    monkeypatch.delenv(MODELS_ENV)
    (tmp_path / MODELS_FILE_NAME).write_text(models.read_text())  # read from the data root without MODELS=
    assert check_04() == []
    assert check_06() == ["environment added: models file"]


def test_stages_outside_the_models_list_import_no_layer_that_reads_the_models_file():
    """The notebooks of the stages left out of ``STAGES_READING_MODELS`` import only the packages
    before ``aiplib.inference`` (core, io, sources, battery, stimuli), and the registry reads the
    models file's variable from core (the package's own top level, ``aiplib.workspace`` and the
    like, is core)."""
    assert registry.MODELS_ENV is MODELS_ENV
    before_inference = {"core", "io", "sources", "battery", "stimuli"}
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    for stage in stage_records.STAGES:
        if stage in stage_records.STAGES_READING_MODELS:
            continue
        source = (notebooks / f"{stage}.py").read_text(encoding="utf-8")
        packages = set(re.findall(r"^\s*(?:from|import)\s+aiplib\.(\w+)", source, flags=re.M))
        assert packages, f"{stage}: no aiplib import found"
        assert packages <= before_inference, f"{stage} imports aiplib.{sorted(packages - before_inference)}"


def test_make_nn_on_a_fresh_data_folder_runs_the_stages_that_never_ran_here(tmp_path, capsys):
    """``make 03`` upstream check (``next --before 03``): on an empty data folder stage 1 has never
    run (no record, no executed copy, no raw/), so it runs first; once raw/ holds files without a
    record (a run before records, or in JupyterLab) it is left alone and stage 2, never run, is
    next."""
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    out = tmp_path / "demo" / "executed"

    def upstream_of_03() -> tuple[str, str]:
        stage_records.main(["next", "--notebooks", str(notebooks), "--out", str(out),
                            "--before", "03_curate_backgrounds", "--"])
        captured = capsys.readouterr()
        return captured.out.strip(), captured.err.strip()

    assert upstream_of_03() == ("01_download_data",
                                "=== stage 01_download_data: runs — never run in this data folder")
    assert stage_records.never_run("01_download_data", out)
    (tmp_path / "demo" / "raw").mkdir(parents=True)
    (tmp_path / "demo" / "raw" / "inventory.csv").write_text("file\n")
    assert not stage_records.never_run("01_download_data", out)
    assert upstream_of_03() == ("02_build_item_banks",
                                "=== stage 02_build_item_banks: runs — never run in this data folder")
    # a folder scored by `make score` (stage 8's executed copy, no stage 1-7): nothing upstream runs
    scored = tmp_path / "scored" / "demo" / "executed"
    scored.mkdir(parents=True)
    (scored / "08_score_outputs.ipynb").write_text("{}")
    assert not any(stage_records.never_run(s, scored) for s in stage_records.STAGES[:8])
    assert stage_records.never_run("09_make_figures", scored)


def test_a_record_written_with_aip_smoke_on_says_the_folder_is_smoke_size(tmp_path):
    """``make verify`` notes a smoke-size folder: stage 2's record holds $AIP_SMOKE's SHA-256."""
    out = tmp_path / "executed"
    out.mkdir()
    assert not stage_records.built_at_smoke_size(out)  # no record
    for value, smoke_size in (("1", True), ("yes", True), ("0", False)):
        digest = hashlib.sha256(value.encode()).hexdigest()
        record = {"stage": "02_build_item_banks", "environment": {"AIP_SMOKE": digest}}
        stage_records.record_path(out, "02_build_item_banks").write_text(json.dumps(record))
        assert stage_records.built_at_smoke_size(out) is smoke_size, value


def test_a_params_typo_is_refused_before_a_stage_is_chosen(tmp_path, capsys):
    """`make NN` on an up-to-date stage, `make all` and `make stamps` ask `next`/`status` first: a
    name no notebook declares stops them with the stage filter's line (exit 2), never a skip."""
    notebooks = Path(__file__).resolve().parents[1] / "notebooks"
    out = tmp_path / "demo" / "executed"
    for command in ("next", "status"):
        status = stage_records.main([command, "--notebooks", str(notebooks), "--out", str(out), "--",
                                     "-p", "profile", "demo", "-p", "n_resampls", "500"])
        err = capsys.readouterr().err
        assert status == 2
        assert err.splitlines() == [
            f"make: PARAMS: no notebook in {notebooks} declares n_resampls (did you mean n_resamples?) (a "
            "parameter reaches only the notebooks whose parameters cell declares it)"]
