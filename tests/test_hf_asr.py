"""``hf_asr`` backend: any transformers ASR checkpoint, on tiny random-weight wav2vec2-CTC and
Whisper checkpoints built offline (tests/tiny_models.py)."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tiny_models as tm  # noqa: I001 - sets HF_HUB_OFFLINE before transformers loads
from conftest import make_tiny_workspace

from aiplib.core.textnorm import kws_first_word
from aiplib.inference.keys import entry_sha256
from aiplib.inference.models import load_model, load_registry
from aiplib.inference.models.transformers_backend import check_batch_invariance
from aiplib.inference.runner import not_applicable, raise_if_not_run, run_inference
from aiplib.io.formats import read_manifest, read_results
from aiplib.stimuli.families import materialize
from aiplib.stimuli.manifests import build_manifests

pytest.importorskip("transformers")
REPO = Path(__file__).resolve().parents[1]
COMMIT = "0123456789abcdef0123456789abcdef01234567"
MAX_NEW = 12  # max_new_tokens of the test entries (one byte-level token = one letter)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_asr")
    return {"ctc": tm.build_wav2vec2_ctc(root / "ctc"),
            "ctc_nomask": tm.build_wav2vec2_ctc(root / "ctc_nomask", attention_mask=False),
            "whisper": tm.build_whisper_asr(root / "whisper")}


@pytest.fixture(scope="module")
def reg(ckpts, tmp_path_factory):
    entries = {f"tiny_{k}": tm.hf_asr_entry(v, max_new_tokens=MAX_NEW) for k, v in ckpts.items()}
    return tm.registry_yaml(tmp_path_factory.mktemp("reg") / "registry.yaml", entries)


def _clips(seed=0):
    rng = np.random.default_rng(seed)
    return [(a * rng.standard_normal(n)).astype(np.float32)
            for n, a in ((16000, .1), (12000, .5), (20000, .02), (16000, .3), (12000, .2), (16000, .05))]


def test_registry_hf_asr_entry_takes_no_prompt_and_refuses_a_prompt_style(tmp_path):
    e = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {"m": tm.hf_asr_entry("org/m")}))["m"]
    assert (e.backend, e.model_type, e.prompt_style, e.takes_prompt) == ("hf_asr", "auto", "none", False)
    assert not_applicable(e, ["asr", "kws", "asr_steer_p5", "kws_steer_p5"]).keys() == {"asr_steer_p5", "kws_steer_p5"}
    # padded batches: a changed batch size re-decodes (the resume key holds it), as for transformers
    assert entry_sha256(e) != entry_sha256(dataclasses.replace(e, batch_size=1))
    with pytest.raises(ValueError, match=r"'m': backend 'hf_asr' sends no task prompt; prompt_style must be none"):
        load_registry(tm.registry_yaml(tmp_path / "r.yaml", {"m": tm.hf_asr_entry("org/m", prompt_style="chat")}))
    with pytest.raises(ValueError, match=r"'m': model_type of backend 'hf_asr' must be one of auto, ctc, seq2seq"):
        load_registry(tm.registry_yaml(tmp_path / "r.yaml", {"m": tm.hf_asr_entry("org/m", model_type="whisper")}))


@pytest.mark.slow
def test_cuda_entry_without_a_gpu_is_one_line(ckpts, tmp_path):
    import torch

    from aiplib.core.errors import ModelUnavailableError

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    regs = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
        "on_cuda": tm.hf_asr_entry(ckpts["ctc"], device="cuda"),
        "needs_cuda": tm.hf_asr_entry(ckpts["ctc"], requires="cuda", precision="float16")}))
    with pytest.raises(ModelUnavailableError, match="^on_cuda is set to run on CUDA but torch sees no GPU"):
        load_model(regs["on_cuda"])
    with pytest.raises(ModelUnavailableError, match="^needs_cuda needs a CUDA GPU"):
        load_model(regs["needs_cuda"])


def test_wrong_checkpoints_are_one_line_naming_the_entry(ckpts, tmp_path):
    from aiplib.core.errors import ModelUnavailableError

    llm = tm.build("qwen2_audio", tmp_path / "qwen")  # a Speech LLM, not an ASR checkpoint
    (tmp_path / "empty").mkdir()
    regs = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
        "not_asr": tm.hf_asr_entry(llm),
        "as_ctc": tm.hf_asr_entry(ckpts["whisper"], model_type="ctc"),
        "as_s2s": tm.hf_asr_entry(ckpts["ctc"], model_type="seq2seq"),
        "gone": tm.hf_asr_entry(tmp_path / "nothere"),
        "empty": tm.hf_asr_entry(tmp_path / "empty")}))
    expect = {"not_asr": f"^not_asr: {llm}: model type 'qwen2_audio' is neither a CTC nor a speech",
              "as_ctc": "^as_ctc: .*model_type 'ctc', but transformers runs a 'whisper' checkpoint as seq2seq; "
                        "set model_type: seq2seq",
              "as_s2s": "^as_s2s: .*model_type 'seq2seq', but transformers runs a 'wav2vec2' checkpoint as ctc",
              "gone": f"^gone: weights folder {tmp_path / 'nothere'} does not exist",
              "empty": f"^empty: weights folder {tmp_path / 'empty'} has no config.json"}
    for name, pattern in expect.items():
        with pytest.raises(ModelUnavailableError, match=pattern) as err:
            load_model(regs[name])
        assert "\n" not in str(err.value)
    assert load_model(load_registry(tm.registry_yaml(tmp_path / "ok.yaml", {
        "ok": tm.hf_asr_entry(ckpts["ctc"], model_type="ctc")}))["ok"]).kind == "ctc"


@pytest.mark.parametrize("name, kind, batching", [("ctc", "ctc", "padded with attention mask"),
                                                  ("ctc_nomask", "ctc", "equal-length clips only"),
                                                  ("whisper", "seq2seq", "fixed window")])
@pytest.mark.slow
def test_batch_4_gives_batch_1s_transcripts(name, kind, batching, reg):
    rec = load_model(load_registry(reg)[f"tiny_{name}"])
    try:
        info = rec.info()
        assert (info["kind"], info["batching"], info["revision"], info["backend"]) == (kind, batching, "local", "hf_asr")
        assert len(info["weights_sha256"]) == 64 and info["prompt"].startswith("none")
        assert info["numerics"]["torch"]["cpu_capability"] and info["numerics"]["cpu_model"]
        clips = _clips()
        res = check_batch_invariance(rec, clips, [None] * len(clips), batch_size=4)
        assert res["equal"], res["differences"]
        texts = rec.generate(clips, [None] * len(clips))
        assert len(set(texts)) >= 3  # the transcript depends on the audio (random weights, not constant)
        assert all(t and t == t.strip() for t in texts)
        if kind == "seq2seq":  # greedy, at most max_new_tokens letters; letters and spaces only
            assert info["decoding"] == {"greedy": True, "max_audio_s": 30.0, "do_sample": False, "num_beams": 1,
                                        "max_new_tokens": MAX_NEW}
            assert all(len(t) <= MAX_NEW and set(t) <= set("abcdefghijklmnopqrstuvwxyz ") for t in texts)
        else:  # CTC: upper-case letters, apostrophes and word breaks; blanks and specials removed
            assert all(set(t) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ' ") for t in texts)
        assert rec.stats()["n_stimuli"] == 3 * len(clips)
    finally:
        rec.close()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ctc", "whisper"])
def test_audio_is_cut_at_30_s_and_prompts_are_ignored(name, reg):
    rec = load_model(load_registry(reg)[f"tiny_{name}"])
    try:
        rng = np.random.default_rng(1)
        y = (0.1 * rng.standard_normal(40 * 16000)).astype(np.float32)
        long, cut = rec.generate([y, y[: 30 * 16000]], ["Transcribe the audio.", None])
        assert long == cut
        assert rec.stats()["n_prompts_ignored"] == 1
    finally:
        rec.close()


def test_hub_checkpoint_records_the_commit_loaded(ckpts, tmp_path, monkeypatch):
    """A hub id read from the Hugging Face cache (offline): the snapshot's commit is the revision."""
    import huggingface_hub.constants as hub_constants

    repo = tmp_path / "hub" / "models--tiny-org--tiny-ctc"
    shutil.copytree(ckpts["ctc"], repo / "snapshots" / COMMIT)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    regs = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
        "unpinned": tm.hf_asr_entry("tiny-org/tiny-ctc"), "pinned": tm.hf_asr_entry("tiny-org/tiny-ctc", revision=COMMIT),
        "absent": tm.hf_asr_entry("tiny-org/not-cached")}))
    for mid in ("unpinned", "pinned"):
        rec = load_model(regs[mid])
        info = rec.info()
        assert (info["revision"], info["revision_requested"], info["weights_sha256"]) == (
            COMMIT, regs[mid].revision, None)
        rec.close()
    from aiplib.core.errors import ModelUnavailableError

    with pytest.raises(ModelUnavailableError, match="absent: tiny-org/not-cached is not in the local Hugging Face cache"):
        load_model(regs["absent"])


@pytest.mark.slow
def test_stage7_sends_no_prompt_and_marks_steering_not_applicable(reg, tmp_path, monkeypatch):
    tm.use_registry(monkeypatch, reg)
    ws = make_tiny_workspace(tmp_path / "data", n_asr=2, n_kws=2, n_bg=1)
    build_manifests(ws)
    s = run_inference(ws, models="tiny_ctc,tiny_whisper", tasks="all", progress=False)
    raise_if_not_run(s)  # not_applicable is not a failure
    st = s.set_index(["model", "task"])["status"]
    for m in ("tiny_ctc", "tiny_whisper"):
        assert (st[(m, "asr")], st[(m, "kws")]) == ("done", "done")
        assert (st[(m, "asr_steer_p5")], st[(m, "kws_steer_p5")]) == ("not_applicable", "not_applicable")
        d = ws.inference / m
        assert sorted(p.name for p in d.glob("*.jsonl")) == ["asr.jsonl", "kws.jsonl", "run_log.jsonl"]
        for task in ("asr", "kws"):
            df = read_results(d / f"{task}.jsonl")
            assert len(df) == len(read_manifest(ws, task)) and df["error"].isna().all()
            assert set(df["prompt_id"]) == {"none"}
        log = [json.loads(x) for x in (d / "run_log.jsonl").read_text().splitlines()]
        assert log[0]["event"] == "not_applicable" and set(log[0]["tasks"]) == {"asr_steer_p5", "kws_steer_p5"}
        run = log[-1]
        assert run["event"] == "run" and run["revision"] == "local" and run["info"]["stats"]["n_prompts_ignored"] == 0
    # the rows equal the model decoding each stimulus alone (batch 1), the stage decoded 4 at a time
    rec = load_model(load_registry(reg)["tiny_whisper"], batch_size=1)
    rows = read_manifest(ws, "asr").to_dict("records")
    one = rec.generate([materialize(r, ws)[0] for r in rows], [None] * len(rows))
    rec.close()
    got = read_results(ws.inference / "tiny_whisper" / "asr.jsonl").set_index("id")["raw"]
    assert [got[r["id"]] for r in rows] == one
    # a second run decodes nothing: the rows are current
    again = run_inference(ws, models="tiny_ctc,tiny_whisper", tasks="all", progress=False)
    assert int(again["n_run"].sum()) == 0


# ----------------------------------------------------------------------------------- stages 7–9
def _make(args, root, timeout=900):
    env = {**os.environ, "AIP_SMOKE": "1"}
    env.pop("MAKEFLAGS", None)
    return subprocess.run(["make", "--no-print-directory", *args, f"DATA_ROOT={root}"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ctc", "whisper"])
def test_stages_7_to_9_on_the_smoke_workspace(name, reg, smoke_demo_root, tmp_path, monkeypatch):
    """Stage 7 (in this process, with the test registry), then `make 08 09`: rows, scores, report."""
    from aiplib.core.workspace import workspace
    from aiplib.inference.runner import run_suite

    root = tmp_path / "data"
    shutil.copytree(smoke_demo_root, root, ignore=shutil.ignore_patterns("inference", "results"))
    ws = workspace("demo", data_root=root)
    tm.use_registry(monkeypatch, reg)
    mid = f"tiny_{name}"
    summary, _ = run_suite(ws, "background", models=mid, tasks="all", limit=12, prompt_set=None)
    raise_if_not_run(summary)
    assert set(summary.loc[summary["status"] == "done", "task"]) == {"asr", "kws"}
    out = _make(["08", "09"], root)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    scores = {t: pd.read_csv(ws.results / "scores" / f"{t}.csv") for t in ("asr", "kws")}
    assert set(scores["asr"]["model"]) == {mid} and len(scores["asr"]) == 12
    assert scores["asr"]["wer"].notna().all() and (scores["asr"]["wer"] >= 0).all()
    assert not (ws.results / "scores" / "asr_steer_p5.csv").exists()
    kws = scores["kws"]
    raw = read_results(ws.inference / mid / "kws.jsonl").set_index("id")["raw"]
    first = kws["stimulus_id"].map(lambda i: kws_first_word(raw[i]))
    assert len(kws) == 12 and (first == kws["response"].map(kws_first_word)).all()
    report = (ws.results / "report.md").read_text()
    assert (f"_Not applicable (the model takes no task prompt, so a steering prompt would repeat its baseline "
            f"decode): {mid} — asr_steer_p5, kws_steer_p5._") in report
    assert f"{mid}: revision local, weights {reg_weights(reg, mid)}" in report
    prov = json.loads((ws.results / "provenance.json").read_text())
    assert prov["models"][mid]["revision"] == "local" and set(prov["models"][mid]["not_applicable"]) == {
        "asr_steer_p5", "kws_steer_p5"}


def reg_weights(reg, mid):
    return load_registry(reg)[mid].weights
