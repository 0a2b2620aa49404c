"""Stage 7 runner: resumability, error retry, file format — with a fake recogniser."""
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import aiplib.inference.models
from aiplib.core.errors import ModelUnavailableError
from aiplib.core.workspace import Workspace
from aiplib.inference.models import Recogniser, get_entry
from aiplib.inference.plan import LIMIT_SEED, stratified_sample
from aiplib.inference.run_records import MIX_DIAG_FIELDS
from aiplib.inference.runner import run_inference
from aiplib.io.audio import SR, write_wav
from aiplib.io.formats import ERROR_RESPONSE, EXTRA_FIELDS, read_inference_jsonl, read_results, repair_jsonl
from aiplib.stimuli.manifests import manifest_columns, stimulus_id


class Killed(BaseException):
    """Stands in for SIGKILL: not an Exception, so the runner cannot catch it."""


class FakeRecogniser(Recogniser):
    def __init__(self, entry, *, kill_after=None, fail_ids=(), **_):
        self.name, self.entry, self.batch_size = entry.id, entry, 2
        self.kill_after, self.fail_lengths = kill_after, set(fail_ids)
        self.seen: list[int] = []
        self.closed = False

    def info(self):
        return {"path": "fake", "window": None, "weights_path": "none"}

    def generate(self, audios, prompts):
        out = []
        for a, p in zip(audios, prompts):
            if self.kill_after is not None and len(self.seen) >= self.kill_after:
                raise Killed()
            if len(a) in self.fail_lengths:
                raise RuntimeError("CUDA out of memory (fake)")
            self.seen.append(len(a))
            out.append(f"n{len(a)} {p[:10]}")
        return out

    def close(self):
        self.closed = True


@pytest.fixture
def ws(tmp_path):
    """A workspace with 3 ASR items × (clean + 1 background × 2 SNRs) = 9 stimuli."""
    w = Workspace(profile="demo", root=tmp_path / "demo").ensure()
    rng = np.random.default_rng(1)
    t = np.arange(SR * 3) / SR
    bg = (0.1 * rng.standard_normal(SR * 30)).astype(np.float32)
    write_wav(w.bg / "white.wav", bg)
    rows = []
    for k in range(3):
        n = SR + 1000 * k  # distinct lengths identify items in the fake
        y = (0.2 * np.sin(2 * np.pi * (200 + 50 * k) * t[:n])).astype(np.float32)
        rel = f"itembanks/audio/asr/it{k}.wav"
        (w.root / rel).parent.mkdir(parents=True, exist_ok=True)
        write_wav(w.root / rel, y)
        for bg_id, snr in (("clean", None), ("white", 10), ("white", 0)):
            rows.append(_mrow(f"it{k}", bg_id, snr, len(rows), rel, "bg/white.wav", "tone", n))
    pd.DataFrame(rows, columns=manifest_columns("asr")).to_csv(w.manifests / "asr.csv", index=False)
    return w


def _mrow(item, bg_id, snr, seed, speech_path, bg_path, text, n):
    clean = bg_id == "clean"
    return {"id": stimulus_id(item, bg_id, snr), "speech_id": item, "background_id": bg_id,
            "snr_db": 99 if clean else snr, "condition": "clean" if clean else "noisy", "seed": seed,
            "speech_path": speech_path, "bg_path": "" if clean else bg_path, "accent": "", "gender": "",
            "transcript": text, "family": "asr", "accent_group": "", "bg_offset": None, "bg_active": None,
            "duration_s": n / SR, "n_samples": n}


def _patch(monkeypatch, **kw):
    made = []

    def fake_load(entry, **opts):
        entry = get_entry(entry) if isinstance(entry, str) else entry
        rec = FakeRecogniser(entry, **kw)
        made.append(rec)
        return rec

    monkeypatch.setattr(aiplib.inference.models, "load_model", fake_load)
    return made


def _lines(path):
    return path.read_text().splitlines()


def test_rows_have_exactly_the_contract_fields(ws, monkeypatch):
    made = _patch(monkeypatch)
    summary = run_inference(ws, tasks="asr", progress=False)
    assert summary.loc[0, "status"] == "done" and summary.loc[0, "n_run"] == 9
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    objs = [json.loads(line) for line in _lines(path)]
    assert len(objs) == 9
    for o in objs:
        # the authors' row: manifest columns, raw, model, task; then ours
        assert list(o) == manifest_columns("asr") + ["raw", "model", "task"] + EXTRA_FIELDS
        assert "error" not in o and o["model"] == "whisper_tiny_en" and o["task"] == "asr"
        assert o["prompt_id"] == "asr_baseline_v1"
        assert o["raw"].startswith("n")
        assert o["audio_s"] > 0.9
    clean = [o for o in objs if o["background_id"] == "clean"]
    assert all(o["snr_db"] == 99 and o["condition"] == "clean" and o["bg_path"] == "" for o in clean)
    assert sorted({o["snr_db"] for o in objs if o["background_id"] != "clean"}) == [0, 10]
    assert objs[0]["id"] == "it0_clean" and objs[1]["id"] == "it0_white_snr10"
    assert made[0].closed
    log = [json.loads(line) for line in _lines(ws.inference / "whisper_tiny_en" / "run_log.jsonl")]
    assert log[-1]["event"] == "run" and log[-1]["n_done"] == 9 and log[-1]["decoding"] == "fake"
    assert {"start", "end", "seconds", "versions", "window", "weights"} <= set(log[-1])


def test_kill_and_half_line_then_rerun_gives_each_stimulus_once(ws, monkeypatch):
    _patch(monkeypatch, kill_after=5)
    with pytest.raises(Killed):
        run_inference(ws, tasks="asr", progress=False)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    n_first = len(_lines(path))
    assert n_first == 4  # batches of 2: the third batch died after its first item, unwritten
    with open(path, "a") as f:  # a process killed mid-write
        f.write('{"id": "it2_white_snr0", "speech_id": "it')
    made = _patch(monkeypatch)
    run_inference(ws, tasks="asr", progress=False)
    assert len(made[0].seen) == 9 - n_first
    objs = [json.loads(line) for line in _lines(path)]  # every line parses: the fragment was cut
    assert len(objs) == 9
    df = read_results(path)
    assert len(df) == 9 and df["id"].is_unique
    assert set(df["prompt_set"]) == {"aip-closed-v1"}  # every row names its prompt set (demo profile)
    manifest = pd.read_csv(ws.manifests / "asr.csv", dtype=str)
    assert set(df["id"]) == set(manifest["id"])
    # a third run has nothing left to do: the model is not even loaded
    made = _patch(monkeypatch)
    s = run_inference(ws, tasks="asr", progress=False)
    assert made == [] and s.loc[0, "n_run"] == 0 and s.loc[0, "n_done_before"] == 9
    assert s.loc[0, "status"] == "done"
    log = json.loads(_lines(ws.inference / "whisper_tiny_en" / "run_log.jsonl")[-1])
    assert log["event"] == "up_to_date"


def test_error_row_is_retried_next_run(ws, monkeypatch):
    _patch(monkeypatch, fail_ids={SR + 1000})  # every stimulus of item it1 fails
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_errors"] == 3
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    df = read_results(path)
    err = df[df["raw"] == ERROR_RESPONSE]
    assert sorted(err["id"]) == ["it1_clean", "it1_white_snr0", "it1_white_snr10"]
    assert err["error"].str.contains("CUDA out of memory").all()
    # the authors' error row: id, raw, error, model, task (then our extras)
    first_err = next(json.loads(x) for x in _lines(path) if ERROR_RESPONSE in x)
    assert list(first_err) == ["id", "raw", "error", "model", "task"] + EXTRA_FIELDS
    assert len(read_results(path, keep_errors=False)) == 6
    made = _patch(monkeypatch)
    s = run_inference(ws, tasks="asr", progress=False)
    assert made[0].seen == [SR + 1000] * 3 and s.loc[0, "n_run"] == 3 and s.loc[0, "n_errors"] == 0
    assert len(_lines(path)) == 12  # retries are appended
    df = read_results(path)
    assert len(df) == 9 and (df["raw"] != ERROR_RESPONSE).all() and df["error"].isna().all()


def test_materialize_failure_is_an_error_row(ws, monkeypatch):
    _patch(monkeypatch)
    (ws.root / "itembanks/audio/asr/it0.wav").unlink()
    run_inference(ws, tasks="asr", progress=False)
    df = read_results(ws.inference / "whisper_tiny_en" / "asr.jsonl")
    bad = df[df["id"].str.startswith("it0_")]
    assert len(bad) == 3 and (bad["raw"] == ERROR_RESPONSE).all()
    assert bad["error"].str.startswith("materialize:").all()


def test_unloadable_model_is_logged_and_stage_goes_on(ws, monkeypatch):
    made = _patch(monkeypatch)
    fake = aiplib.inference.models.load_model

    def load(entry, **opts):
        if entry.id == "whisper_base":
            raise ModelUnavailableError("whisper_base: cannot open weights (test)")
        return fake(entry, **opts)

    monkeypatch.setattr(aiplib.inference.models, "load_model", load)
    s = run_inference(ws, models="whisper_base,whisper_tiny_en", tasks="asr", progress=False)
    assert list(s["status"]) == ["unavailable", "done"]
    assert "cannot open weights" in s.loc[0, "error"]
    rec = json.loads(_lines(ws.inference / "whisper_base" / "run_log.jsonl")[-1])
    assert rec["event"] == "load_failed" and "cannot open weights" in rec["error"]
    assert len(made) == 1 and len(made[0].seen) == 9


def test_mix_diagnostics_deduplicated_and_limit(ws, monkeypatch):
    made = _patch(monkeypatch)
    s = run_inference(ws, tasks="asr,asr_steer_p5", limit=4, progress=False)
    assert list(s["n_stimuli"]) == [4, 4]
    assert len(made[0].seen) == 8
    # limit 4 decodes the stratified sample: 2 items, each noisy row with its item's clean row
    # (the first 4 manifest rows would be it0's 3 rows and it1's clean row)
    sample = stratified_sample(pd.read_csv(ws.manifests / "asr.csv"), 4)
    decoded = read_results(ws.inference / "whisper_tiny_en" / "asr.jsonl")
    assert set(decoded["id"]) == set(sample["id"])
    assert sample["speech_id"].nunique() == 2 and (sample["condition"] == "clean").sum() == 2
    log = json.loads(ws.run_log("whisper_tiny_en").read_text().splitlines()[-1])
    assert (log["limit"], log["limit_seed"]) == (4, LIMIT_SEED)
    diag = pd.read_csv(ws.checks / "mix_diagnostics.csv")
    assert list(diag.columns) == MIX_DIAG_FIELDS
    assert len(diag) == 4 and diag["stimulus_id"].is_unique
    noisy = diag[diag["condition"] != "clean"]
    assert np.allclose(noisy["achieved_snr_db"], noisy["snr_db"], atol=0.01)
    assert np.allclose(diag["speech_lufs"], -23.0)
    run_inference(ws, tasks="asr", progress=False)  # the 5 remaining stimuli
    diag = pd.read_csv(ws.checks / "mix_diagnostics.csv")
    assert len(diag) == 9 and diag["stimulus_id"].is_unique


def test_read_results_is_tolerant(tmp_path):
    p = tmp_path / "x.jsonl"
    rows = [dict(id="a", raw="one", model="m", task="asr"), dict(id="a", raw="two", model="m", task="asr"),
            dict(id="b", raw=ERROR_RESPONSE, error="boom", model="m", task="asr")]
    p.write_bytes((json.dumps(rows[0]) + "\nnot json\n").encode() + b'{"id": "z", "raw": "\xff\xfe"}\n'
                  + (json.dumps(rows[1]) + "\n" + json.dumps(rows[2]) + "\n" + '{"id": "c"').encode())
    objs, n_bad = read_inference_jsonl(p)  # not UTF-8, not JSON, half line: skipped and counted
    assert [o["id"] for o in objs] == ["a", "a", "b"] and n_bad == 3
    df = read_results(p)
    assert list(df["id"]) == ["a", "b"] and list(df["raw"]) == ["two", ERROR_RESPONSE]
    assert repair_jsonl(p) == len('{"id": "c"')
    assert p.read_bytes().endswith(b"\n") and repair_jsonl(p) == 0
    assert {"id", "raw", "error", "model", "task", "prompt_id"} <= set(read_results(tmp_path / "missing.jsonl").columns)


def test_authors_rows_count_as_done(ws, monkeypatch):
    """An inference file written by the authors' script (no prompt_id, NaN bg_path) resumes here."""
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    path.parent.mkdir(parents=True)
    man = pd.read_csv(ws.manifests / "asr.csv")
    with open(path, "w") as f:
        for r in man.head(4).to_dict("records"):
            f.write(json.dumps({k: r[k] for k in ["id", "speech_id", "background_id", "snr_db", "condition", "seed",
                                                  "speech_path", "bg_path", "accent", "gender", "transcript"]}
                               | {"raw": "tone", "model": "whisper_tiny_en", "task": "asr"}) + "\n")
    assert "NaN" in path.read_text()  # the authors' clean rows carry pandas' NaN
    made = _patch(monkeypatch)
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_done_before"] == 4 and len(made[0].seen) == 5


_FK = Path(__file__).resolve().parents[2] / "shared" / "fieldkit"  # ../shared beside the project
FK_CLIP = str(_FK / "speech_asr" / "ls_test-clean_1089-134691-0000.flac")
FK_BG = str(_FK / "backgrounds" / "sc_bg_running_tap.wav")


@pytest.mark.slow
@pytest.mark.skipif(not (Path(FK_CLIP).is_file() and Path(FK_BG).is_file()), reason="fieldkit absent")
def test_real_whisper_run(tmp_path):
    """whisper_tiny_en end to end on one fieldkit utterance, clean and at 0 dB, two prompts."""
    w = Workspace(profile="demo", root=tmp_path / "demo").ensure()
    rows = []
    for bg_id, snr in (("clean", None), ("tap", 0)):
        rows.append(_mrow("ls0", bg_id, snr, len(rows), FK_CLIP, FK_BG, "HE COULD WAIT NO LONGER", 33360))
    pd.DataFrame(rows, columns=manifest_columns("asr")).to_csv(w.manifests / "asr.csv", index=False)
    s = run_inference(w, tasks="asr,asr_steer_p5", progress=False)
    assert list(s["status"]) == ["done", "done"] and s["n_errors"].sum() == 0
    df = read_results(w.inference / "whisper_tiny_en" / "asr.jsonl")
    clean = df[df["background_id"] == "clean"].iloc[0]
    assert clean["raw"].lower().strip(".") == "he could wait no longer"
    assert 2.0 < clean["audio_s"] < 2.2 and clean["decode_s"] > 0
    log = json.loads(_lines(w.inference / "whisper_tiny_en" / "run_log.jsonl")[-1])
    # stage 7's default decoding: Whisper's 30 s window, also for this 2.1 s utterance
    assert log["decoding"] == "fast" and log["window"]["windows_s"] == [30]
    assert clean["window_s"] == 30 and log["decoding_key"] is None
    assert len(log["weights_sha256"]) == 64 and log["versions"]["faster_whisper"]
    diag = pd.read_csv(w.checks / "mix_diagnostics.csv")
    assert len(diag) == 2 and abs(diag.loc[diag["background_id"] == "tap", "achieved_snr_db"].iloc[0]) < 0.01


class _WindowRecogniser(FakeRecogniser):
    """Fake that, like the embedded Whisper, chooses an encoder window per stimulus."""

    def window_s(self, n_samples):
        return 15 if n_samples < 1.5 * SR else 20


def test_rows_record_the_window_and_a_changed_window_reruns(ws, monkeypatch):
    made = []

    def fake_load(entry, **opts):
        made.append((_WindowRecogniser(get_entry(entry) if isinstance(entry, str) else entry), opts))
        return made[-1][0]

    monkeypatch.setattr(aiplib.inference.models, "load_model", fake_load)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    s = run_inference(ws, tasks="asr", decoding="fast", progress=False)
    assert s.loc[0, "n_run"] == 9 and made[-1][1]["path"] == "fast"
    rows = [json.loads(x) for x in _lines(path)]
    # items of 1.0, 1.06, 1.13 s (x3 stimuli): 15 s windows
    assert [r["window_s"] for r in rows] == [15] * 9
    keys_30 = {r["id"]: r["stim_key"] for r in rows}
    # the standard path decodes on the same 30 s window: the same key, nothing to do
    s = run_inference(ws, tasks="asr", decoding="standard", progress=False)
    assert s.loc[0, "n_run"] == 0 and len(made) == 1
    # another window policy: every row is set aside and re-run, never mixed with the old ones
    s = run_inference(ws, tasks="asr", decoding="window", progress=False)
    assert s.loc[0, "n_done_before"] == 0 and s.loc[0, "n_run"] == 9 and made[-1][1]["path"] == "window"
    rows = [json.loads(x) for x in _lines(path)]
    assert len(rows) == 9 and all(r["stim_key"] != keys_30[r["id"]] for r in rows)
    assert len(_lines(path.parent / "superseded" / "asr.jsonl")) == 9
    log = json.loads(_lines(path.parent / "run_log.jsonl")[-1])
    assert log["decoding_key"] == {"windows_s": [15, 20, 30], "min_pad_s": 5.0}
    # and back: the 30 s rows answer the 30 s keys again, so they come back from superseded/ and
    # nothing is decoded; the window rows take their place there
    s = run_inference(ws, tasks="asr", decoding="fast", progress=False)
    assert s.loc[0, "n_run"] == 0 and s.loc[0, "n_done_before"] == 9 and len(made) == 2
    rows = [json.loads(x) for x in _lines(path)]
    assert {r["id"]: r["stim_key"] for r in rows} == keys_30 and [r["window_s"] for r in rows] == [15] * 9
    side = [json.loads(x) for x in _lines(path.parent / "superseded" / "asr.jsonl")]
    assert len(side) == 9 and all(r["stim_key"] != keys_30[r["id"]] for r in side)


def test_rows_set_aside_by_a_run_whose_model_failed_to_load_come_back(ws, monkeypatch, caplog):
    """A run with another decoding sets the rows aside, then its model fails to load; the next run
    with the first decoding finds every row again in superseded/ and decodes nothing."""
    made = _patch(monkeypatch)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    assert run_inference(ws, tasks="asr", decoding="fast", progress=False).loc[0, "n_run"] == 9
    before = _lines(path)
    fake = aiplib.inference.models.load_model

    def load(entry, **opts):
        if opts.get("path") == "window":
            raise ModelUnavailableError("whisper_tiny_en: cannot open weights (test)")
        return fake(entry, **opts)

    monkeypatch.setattr(aiplib.inference.models, "load_model", load)
    s = run_inference(ws, tasks="asr", decoding="window", progress=False)
    assert s.loc[0, "status"] == "unavailable"
    assert _lines(path) == [] and len(_lines(path.parent / "superseded" / "asr.jsonl")) == 9
    with caplog.at_level("WARNING", logger="aiplib.inference.resume"):
        s = run_inference(ws, tasks="asr", decoding="fast", progress=False)
    # no model loaded after the first run's: nothing was decoded again
    assert s.loc[0, "n_run"] == 0 and s.loc[0, "n_done_before"] == 9 and len(made) == 1
    assert sorted(_lines(path)) == sorted(before)
    assert _lines(path.parent / "superseded" / "asr.jsonl") == []
    assert "9 row(s) set aside earlier answer the current stimuli" in caplog.text


def test_raise_if_not_run_lists_every_model_that_did_not_run():
    import pandas as pd

    from aiplib.core.errors import ModelUnavailableError
    from aiplib.inference.runner import raise_if_not_run

    ok = pd.DataFrame([{"model": "whisper_tiny_en", "task": "asr", "status": "done", "error": None}])
    raise_if_not_run(ok)  # nothing to report
    bad = pd.concat([ok, pd.DataFrame([
        {"model": "qwen2_audio_7b", "task": "asr", "status": "unavailable", "error": "needs a CUDA GPU"},
        {"model": "qwen2_audio_7b", "task": "kws", "status": "unavailable", "error": "needs a CUDA GPU"}])])
    with pytest.raises(ModelUnavailableError) as exc:
        raise_if_not_run(bad)
    msg = str(exc.value)
    assert "qwen2_audio_7b / asr: unavailable — needs a CUDA GPU" in msg
    assert "qwen2_audio_7b / kws" in msg and "whisper_tiny_en" not in msg


class _SharedEncoderRecogniser(FakeRecogniser):
    """Fake with a fake clock: 1.0 s to encode a stimulus not seen before, 0.1 s per decode, so the
    first prompt on a stimulus pays the shared encoder (as the faster-whisper fast path)."""

    def __init__(self, entry, clock, **kw):
        super().__init__(entry, **kw)
        self.clock, self.encoded = clock, set()

    def generate(self, audios, prompts):
        for a in audios:
            key = (len(a), float(a[len(a) // 2]))
            if key not in self.encoded:
                self.encoded.add(key)
                self.clock.t += 1.0
            self.clock.t += 0.1
        return super().generate(audios, prompts)


def _patch_shared_encoder(monkeypatch):
    """Stage 7 on a fake clock (``aiplib.inference.runner.time.perf_counter``) with every model loaded as a
    new :class:`_SharedEncoderRecogniser` that advances it."""
    import types

    class Clock:
        t = 0.0

        def __call__(self):
            return self.t

    clock = Clock()
    monkeypatch.setattr("aiplib.inference.runner.time", types.SimpleNamespace(perf_counter=clock))
    monkeypatch.setattr(aiplib.inference.models, "load_model",
                        lambda entry, **o: _SharedEncoderRecogniser(get_entry(entry) if isinstance(entry, str)
                                                                    else entry, clock))


def test_time_split_between_prompts_adds_up_and_is_fair(ws, monkeypatch, capsys):
    """Two prompts decoded on shared encodings: each task gets half of every batch's wall time,
    the tasks' seconds sum to the loop's wall time, and the throughput goes to run_log.jsonl."""
    _patch_shared_encoder(monkeypatch)
    monkeypatch.setenv("AIP_PLAIN_PROGRESS", "1")
    s = run_inference(ws, tasks="asr,asr_steer_p5", progress=True).set_index("task")
    # 9 stimuli × (1.0 s encoder + 2 × 0.1 s decode) = 10.8 s of loop time, 5.4 s per prompt
    assert s.loc["asr", "seconds"] == pytest.approx(5.4) and s.loc["asr_steer_p5", "seconds"] == pytest.approx(5.4)
    assert s.loc["asr", "stimuli_per_s"] == pytest.approx(9 / 5.4, abs=1e-3)
    log = json.loads(_lines(ws.inference / "whisper_tiny_en" / "run_log.jsonl")[-1])
    assert log["tasks"]["asr"]["decode_seconds"] == pytest.approx(9.9)  # its own generate calls (with the encoder)
    assert log["tasks"]["asr_steer_p5"]["decode_seconds"] == pytest.approx(0.9)
    thr = log["throughput"]
    assert sum(t["seconds"] for t in log["tasks"].values()) == pytest.approx(thr["seconds"]) == pytest.approx(10.8)
    audio = (3 * SR + 3 * (SR + 1000) + 3 * (SR + 2000)) / SR  # 3 items × 3 conditions
    assert thr["stimuli"] == 9 and thr["decodes"] == 18 and thr["audio_s"] == pytest.approx(audio, abs=1e-3)
    assert thr["stimuli_per_s"] == pytest.approx(9 / 10.8, abs=1e-3) and thr["rtfx"] == pytest.approx(audio / 10.8, abs=0.01)
    err = capsys.readouterr().err.splitlines()
    prog = [x for x in err if x.startswith("[progress]")]
    assert prog[0] == "[progress] whisper_tiny_en · asr+asr_steer_p5:   0%|          | 0/9 [00:00<?, ?stim/s]"
    assert prog[-2].startswith("[progress] whisper_tiny_en · asr+asr_steer_p5: 100%|##########| 9/9 [")
    assert prog[-2].endswith("stim/s]")
    assert prog[-1] == (f"[progress] whisper_tiny_en · throughput · 9 stimuli, 18 decodes, {audio:.0f} s of audio "
                        f"in 10.8 s · 0.833 stimuli/s · RTFx {audio / 10.8:.3g}")


def test_resumed_run_splits_time_only_over_the_prompt_that_ran(ws, monkeypatch):
    """Only asr_steer_p5 has work left: it gets the whole loop time; asr gets 0 s."""
    _patch_shared_encoder(monkeypatch)
    run_inference(ws, tasks="asr", progress=False)
    s = run_inference(ws, tasks="asr,asr_steer_p5", progress=False).set_index("task")
    assert s.loc["asr", "n_run"] == 0 and s.loc["asr", "seconds"] == 0
    assert s.loc["asr_steer_p5", "seconds"] == pytest.approx(9 * 1.1)  # a new fake: encodes again


def test_shard_runs_its_part_and_an_unsharded_run_merges_it_first(ws, monkeypatch):
    """shard=(0, 2): only its stimuli, into its own files; a shard with nothing left is not loaded;
    the next unsharded run merges the shard file, then decodes only the rest."""
    from aiplib.inference.shards import select_shard

    manifest = pd.read_csv(ws.manifests / "asr.csv", dtype=str)
    mine = set(select_shard(manifest, (0, 2))["id"])
    assert 0 < len(mine) < 9
    made = _patch(monkeypatch)
    s = run_inference(ws, tasks="asr", progress=False, shard="0/2")
    mdir = ws.inference / "whisper_tiny_en"
    shard_file = mdir / "asr.shard-0-of-2.jsonl"
    assert s.loc[0, "n_stimuli"] == len(mine) == s.loc[0, "n_run"] and s.loc[0, "file"] == str(shard_file)
    assert {json.loads(x)["id"] for x in _lines(shard_file)} == mine and len(made[0].seen) == len(mine)
    assert not (mdir / "asr.jsonl").exists() and not (mdir / "run_log.jsonl").exists()
    assert json.loads(_lines(mdir / "run_log.shard-0-of-2.jsonl")[-1])["shard"] == "0/2"
    assert len(pd.read_csv(ws.checks / "mix_diagnostics.shard-0-of-2.csv")) == len(mine)
    made = _patch(monkeypatch)
    assert run_inference(ws, tasks="asr", progress=False, shard=(0, 2)).loc[0, "n_run"] == 0 and made == []
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "0")  # False: unsharded whatever Slurm says
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    s = run_inference(ws, tasks="asr", progress=False, shard=False)
    assert s.loc[0, "n_done_before"] == len(mine) and len(made[0].seen) == 9 - len(mine)
    assert not shard_file.exists() and (mdir / "merged-shards" / shard_file.name).exists()
    df = read_results(mdir / "asr.jsonl")
    assert len(df) == 9 and df["id"].is_unique
    assert [json.loads(x).get("shard") for x in _lines(mdir / "run_log.jsonl")] == ["0/2", "0/2", None]


def test_paper_speech_llms_decode_one_at_a_time_and_rows_record_it(ws, monkeypatch):
    from aiplib.inference.keys import entry_sha256
    from aiplib.inference.plan import PAPER_BATCH_SIZE, effective_batch_size

    qwen, whisper = get_entry("qwen25_omni_3b"), get_entry("whisper_tiny_en")
    assert qwen.batch_size == 4 and PAPER_BATCH_SIZE == 1
    assert effective_batch_size(qwen, None, "paper") == 1          # as the authors
    assert effective_batch_size(qwen, None, "demo") == 4           # the registry's
    assert effective_batch_size(qwen, 8, "paper") == 8             # the parameter wins
    assert effective_batch_size(whisper, None, "paper") == whisper.batch_size
    # a changed batch size is a changed decoding config for transformers only
    import dataclasses

    assert entry_sha256(qwen) != entry_sha256(dataclasses.replace(qwen, batch_size=1))
    assert entry_sha256(whisper) == entry_sha256(dataclasses.replace(whisper, batch_size=1))

    made = _patch(monkeypatch)
    paper_ws = Workspace(profile="paper", root=ws.root)
    path = ws.inference / "qwen25_omni_3b" / "asr.jsonl"
    s = run_inference(paper_ws, models="qwen25_omni_3b", tasks="asr", progress=False, prompt_set="demo")
    assert s.loc[0, "n_run"] == 9
    rows = [json.loads(x) for x in _lines(path)]
    assert [r["batch_size"] for r in rows] == [1] * 9
    # the same run again: nothing to do; with batch 4: every stimulus decoded again (4 + 4 + 1)
    s = run_inference(paper_ws, models="qwen25_omni_3b", tasks="asr", progress=False, prompt_set="demo")
    assert s.loc[0, "n_run"] == 0
    s = run_inference(paper_ws, models="qwen25_omni_3b", tasks="asr", progress=False, prompt_set="demo",
                      batch_size=4)
    assert s.loc[0, "n_run"] == 9
    rows = [json.loads(x) for x in _lines(path)]                   # the batch-1 rows set aside
    assert [r["batch_size"] for r in rows] == [4] * 8 + [1]
    assert len(_lines(ws.inference / "qwen25_omni_3b" / "superseded" / "asr.jsonl")) == 9
    log = [json.loads(x) for x in _lines(ws.inference / "qwen25_omni_3b" / "run_log.jsonl")]
    assert [e["entry"]["batch_size"] for e in log if e["event"] == "run"] == [1, 4]


def test_non_utf8_line_is_quarantined_and_its_stimulus_decoded_again(ws, monkeypatch, caplog):
    """A line that is not UTF-8 (here a row whose bytes were damaged) before stage 7: the run moves
    it, with its line number, to quarantine/asr.jsonl and decodes that stimulus again; no reader
    raises, and a run after that has nothing left to do."""
    from aiplib.io.formats import quarantine_path

    _patch(monkeypatch)
    run_inference(ws, tasks="asr", progress=False)
    path = ws.inference / "whisper_tiny_en" / "asr.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 9
    damaged = lines[3].replace(b'"raw": "n', b'"raw": "\xff\xfe')  # it1_clean's answer, not UTF-8 now
    path.write_bytes(b"".join(lines[:3] + [damaged] + lines[4:]))
    bad_id = json.loads(lines[3])["id"]
    with pytest.raises(UnicodeDecodeError):
        path.read_text()  # what a plain reader meets
    assert read_inference_jsonl(path)[1] == 1
    assert f"line 4" in caplog.text and str(path) in caplog.text
    made = _patch(monkeypatch)
    s = run_inference(ws, tasks="asr", progress=False)
    assert s.loc[0, "n_run"] == 1 and len(made[0].seen) == 1  # only the stimulus of the bad line
    q = [json.loads(x) for x in quarantine_path(path).read_text().splitlines()]
    assert [(r["file"], r["line"]) for r in q] == [("asr.jsonl", 4)]
    assert bytes.fromhex(q[0]["bytes_hex"]) == damaged.rstrip(b"\n") and "\ufffd" in q[0]["text"]
    df = read_results(path)
    assert len(df) == 9 and df["id"].is_unique and bad_id in set(df["id"])
    path.read_text()  # every line is UTF-8 again
    assert read_inference_jsonl(path)[1] == 0
    made = _patch(monkeypatch)
    assert run_inference(ws, tasks="asr", progress=False).loc[0, "n_run"] == 0 and made == []


def test_no_notebook_reads_a_results_file_by_hand():
    """Inference and results files are read by aiplib's readers only (the tolerant JSONL reader,
    read_scores …): the notebooks' sources hold no read_text / open / json.loads, except the one
    provenance sidecar notebook 09 has just written itself."""
    import re

    allowed = {("09_make_figures.py", "rec = json.loads(sidecars[0].read_text())")}
    found = set()
    for py in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.py")):
        for line in py.read_text(encoding="utf-8").splitlines():
            code = line.split("#", 1)[0]
            if re.search(r"\.read_text\(|\bopen\(|json\.loads?\(|\.read_bytes\(|readlines\(", code):
                found.add((py.name, line.strip()))
    assert found == allowed


def test_a_shard_restores_no_row_that_its_tasks_main_file_already_answers(tmp_path):
    """restore_superseded in a shard's file: a set-aside row whose (id, key) <task>.jsonl already
    answers stays aside (the merge would otherwise meet two answers); the other comes back, and
    only its line leaves superseded/ (an older copy of the same key stays)."""
    from aiplib.inference.resume import restore_superseded

    def line(rid, raw):
        return json.dumps({"id": rid, "raw": raw, "stim_key": "K", "prompt_id": "p"}) + "\n"

    main = tmp_path / "asr.jsonl"
    shard = tmp_path / "asr.shard-0-of-2.jsonl"
    side = tmp_path / "superseded" / shard.name
    side.parent.mkdir()
    main.write_text(line("a", "answer a"))
    shard.write_text("")
    side.write_text(line("a", "old a") + line("b", "older b") + line("b", "old b"))
    assert restore_superseded(shard, {"a": "K", "b": "K"}, main) == 1
    assert shard.read_text() == line("b", "old b")
    assert side.read_text() == line("a", "old a") + line("b", "older b")
