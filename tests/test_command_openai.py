"""``command`` and ``openai`` backends: stage 7 through an external program and a fake HTTP server."""
from __future__ import annotations

import base64
import io
import json
import shlex
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import soundfile as sf
import tiny_models as tm
from conftest import make_tiny_workspace

from aiplib.core.errors import ModelUnavailableError
from aiplib.inference.models import get_entry, load_model, load_registry
from aiplib.inference.models.command_backend import CommandError
from aiplib.inference.plan import stratified_sample
from aiplib.inference.prompts import prompt_for
from aiplib.inference.runner import run_inference
from aiplib.io.formats import read_manifest, read_results
from aiplib.scoring import wer_check
from aiplib.stimuli.families import materialize
from aiplib.stimuli.manifests import build_manifests

KEY = "sk-test-DO-NOT-LEAK-7f3a9c"
CMD_SECRET = "cmd-secret-Q4Z9"

WHISPER_SCRIPT = """\
import sys
from aiplib.io.audio import load_audio
from aiplib.inference.models import load_model
rec = load_model("whisper_tiny_en")
print(rec.generate([load_audio(sys.argv[1])], [None])[0])
"""
FAIL_SCRIPT = f"""\
import sys
print("{CMD_SECRET} stdout"); print("{CMD_SECRET} stderr", file=sys.stderr)
sys.exit(3)
"""
SLOW_SCRIPT = "import time; time.sleep(30)\n"
COUNTER_SCRIPT = """\
import pathlib, sys
c = pathlib.Path(sys.argv[1]); n = int(c.read_text() or 0) + 1 if c.exists() else 1
c.write_text(str(n))
if n == 2:
    sys.exit(5)
print(f"call {n} " + str(pathlib.Path(sys.argv[2]).stat().st_size))
"""
#: A program that counts the copies of itself running (files in a folder), sleeps, and prints the
#: sample count of its WAV: the answer of its own stimulus.
IN_FLIGHT_SCRIPT = """\
import os, pathlib, sys, time
import soundfile as sf
folder, log = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
me = folder / str(os.getpid())
me.touch()
with open(log, "a") as f:
    f.write(f"{len(list(folder.iterdir()))}\\n")
time.sleep(0.3)
me.unlink()
print(f"samples {sf.info(sys.argv[3]).frames}")
"""


@pytest.fixture
def ws(tmp_path):
    w = make_tiny_workspace(tmp_path / "data", n_asr=2, n_kws=1, n_bg=1)
    build_manifests(w)
    return w


def _script(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(p))}"


def _cmd_entry(command, **more):
    return {"backend": "command", "model_type": "external", "command": command, "requires": "cpu",
            "max_new_tokens": 64, "prompt_style": "initial_prompt", **more}


# ------------------------------------------------------------------------------------------ command
@pytest.mark.slow
def test_command_backend_runs_the_embedded_whisper_model(ws, tmp_path, monkeypatch):
    whisper = get_entry("whisper_tiny_en")
    reg = tm.registry_yaml(tmp_path / "r.yaml", {
        "cmd_whisper": _cmd_entry(_script(tmp_path, "asr.py", WHISPER_SCRIPT) + " {file}", timeout_s=120)})
    tm.use_registry(monkeypatch, reg)
    s = run_inference(ws, models="cmd_whisper", tasks="asr", limit=3, progress=False)
    assert s.loc[0, "status"] == "done" and s.loc[0, "n_errors"] == 0 and s.loc[0, "n_run"] == 3
    df = read_results(ws.inference / "cmd_whisper" / "asr.jsonl")
    assert df["error"].isna().all()
    # same transcripts as the model in-process on the same 16-bit WAVs
    rec = load_model(whisper)
    rows = stratified_sample(read_manifest(ws, "asr"), 3).to_dict("records")  # what `limit` 3 decoded
    for r in rows:
        buf = io.BytesIO()
        sf.write(buf, materialize(r, ws)[0], 16000, subtype="PCM_16", format="WAV")
        buf.seek(0)
        y = sf.read(buf, dtype="float32")[0]
        got = df.set_index("id").loc[r["id"], "raw"]
        assert got == rec.generate([y], [None])[0]
    rec.close()


@pytest.mark.slow
def test_command_concurrency_runs_copies_at_once_and_keeps_each_answer_with_its_stimulus(ws, tmp_path,
                                                                                        monkeypatch):
    """``concurrency: 2`` runs two copies of the program at once; the rows are those of one at a time."""
    script = _script(tmp_path, "in_flight.py", IN_FLIGHT_SCRIPT)
    rows = {}
    for conc in (1, 2):
        running, log = tmp_path / f"running{conc}", tmp_path / f"in_flight{conc}.log"
        running.mkdir()
        entry = _cmd_entry(f"{script} {running} {log} {{file}}", concurrency=conc, batch_size=4)
        reg = tm.registry_yaml(tmp_path / f"r{conc}.yaml", {f"cmd_c{conc}": entry})
        tm.use_registry(monkeypatch, reg)
        s = run_inference(ws, models=f"cmd_c{conc}", tasks="asr", progress=False)
        assert s.loc[0, "n_errors"] == 0 and s.loc[0, "n_run"] == len(read_manifest(ws, "asr"))
        assert max(int(n) for n in log.read_text().split()) == conc   # copies running at once
        rows[conc] = read_results(ws.inference / f"cmd_c{conc}" / "asr.jsonl").set_index("id")["raw"]
    assert rows[2].to_dict() == rows[1].to_dict()
    for r in read_manifest(ws, "asr").to_dict("records"):   # each answer is its own stimulus' length
        assert rows[2][r["id"]] == f"samples {len(materialize(r, ws)[0])}"


def test_command_errors_hold_only_status_or_timeout(ws, tmp_path, monkeypatch):
    fail = _script(tmp_path, "fail.py", FAIL_SCRIPT) + f" --api-key {CMD_SECRET} {{file}}"
    slow = _script(tmp_path, "slow.py", SLOW_SCRIPT) + " {file}"
    reg = tm.registry_yaml(tmp_path / "r.yaml", {"cmd_fail": _cmd_entry(fail),
                                                  "cmd_slow": _cmd_entry(slow, timeout_s=0.5)})
    tm.use_registry(monkeypatch, reg)
    run_inference(ws, models="cmd_fail,cmd_slow", tasks="asr", limit=2, progress=False)
    fails = read_results(ws.inference / "cmd_fail" / "asr.jsonl")
    slows = read_results(ws.inference / "cmd_slow" / "asr.jsonl")
    assert (fails["raw"] == "__ERROR__").all() and (slows["raw"] == "__ERROR__").all()
    assert set(fails["error"]) == {"generate: CommandError: exit status 3"}
    assert set(slows["error"]) == {"generate: CommandError: timeout"}
    for p in (ws.inference / "cmd_fail").iterdir():  # rows and run log: no output, no secret
        assert CMD_SECRET not in p.read_text().replace(f"--api-key {CMD_SECRET}", ""), p


def test_command_batch_failure_is_not_rerun(tmp_path, monkeypatch):
    counter = tmp_path / "count.txt"
    reg = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
        "cmd": _cmd_entry(_script(tmp_path, "c.py", COUNTER_SCRIPT) + f" {counter} {{file}}")}))
    rec = load_model(reg["cmd"])
    assert rec.batch_size == 1
    audios = [np.full(8000 + 100 * i, 0.01 * (i + 1), np.float32) for i in range(3)]
    with pytest.raises(CommandError, match="^exit status 5$"):
        rec.generate(audios, [None] * 3)
    assert counter.read_text() == "3"
    # the runner's per-item retry is answered from the results just computed
    assert rec.generate(audios[:1], [None])[0].startswith("call 1 ")
    with pytest.raises(CommandError, match="exit status 5"):
        rec.generate(audios[1:2], [None])
    assert rec.generate(audios[2:], [None])[0].startswith("call 3 ")
    assert counter.read_text() == "3"
    assert rec.generate(audios[:1], [None])[0].startswith("call 4 ")  # a fresh call runs again
    tmp = rec._tmp
    rec.close()
    assert not list(tmp_path.glob("*.wav")) and not __import__("os").path.exists(tmp)


def test_command_needs_file_placeholder_and_a_program(tmp_path):
    reg = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
        "nofile": _cmd_entry("echo hi"), "noprog": _cmd_entry("no-such-asr-program-xyz {file}")}))
    with pytest.raises(ValueError, match="{file}"):
        load_model(reg["nofile"])
    with pytest.raises(ModelUnavailableError, match="not found"):
        load_model(reg["noprog"])


# ------------------------------------------------------------------------------------------ openai
class _Fake(BaseHTTPRequestHandler):
    log = []
    throttled = {"done": False}

    def log_message(self, *a):  # keep the test output clean
        pass

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        auth = self.headers.get("Authorization")
        type(self).log.append({"path": self.path, "auth_ok": auth == f"Bearer {KEY}", "body": body,
                               "ctype": self.headers.get("Content-Type", "")})
        if auth != f"Bearer {KEY}":
            return self._send(401, {"error": {"message": f"bad key {auth}"}})
        if not type(self).throttled["done"]:
            type(self).throttled["done"] = True
            return self._send(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"})
        if self.path == "/v1/chat/completions":
            return self._send(200, {"choices": [{"message": {"role": "assistant", "content": " yes \n"}}]})
        if self.path == "/v1/audio/transcriptions":
            return self._send(200, {"text": " hello world "})
        return self._send(404, {"error": {"message": "no route"}})

    def _send(self, status, obj, headers=None):
        raw = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def fake_server():
    _Fake.log = []
    _Fake.throttled = {"done": False}
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()
    srv.server_close()


def _api_entry(base_url, style, **more):
    return {"backend": "openai", "model_type": "api", "base_url": base_url, "model": "fake-model",
            "api_key_env": "AIP_TEST_API_KEY", "prompt_style": style, "requires": "cpu", "max_new_tokens": 64,
            "engine_args": {"backoff_s": 0.01, "max_retries": 3}, **more}


def test_openai_backend_against_fake_server(ws, tmp_path, monkeypatch, fake_server):
    monkeypatch.setenv("AIP_TEST_API_KEY", KEY)
    reg = tm.registry_yaml(tmp_path / "r.yaml", {"api_llm": _api_entry(fake_server, "chat"),
                                                  "api_asr": _api_entry(fake_server, "initial_prompt")})
    tm.use_registry(monkeypatch, reg)
    s = run_inference(ws, models="api_llm,api_asr", tasks="asr", limit=3, progress=False)
    assert (s["status"] == "done").all() and (s["n_errors"] == 0).all(), s.to_dict("records")
    llm = read_results(ws.inference / "api_llm" / "asr.jsonl")
    asr = read_results(ws.inference / "api_asr" / "asr.jsonl")
    assert set(llm["raw"]) == {"yes"} and set(asr["raw"]) == {"hello world"}

    log = _Fake.log
    assert all(r["auth_ok"] for r in log)
    assert len(log) == 1 + 3 + 3  # one 429, retried, then one request per stimulus
    _, task_text = prompt_for("asr")
    chat = json.loads(log[1]["body"])
    assert chat["model"] == "fake-model" and chat["temperature"] == 0 and chat["max_tokens"] == 64
    parts = chat["messages"][0]["content"]
    wav = base64.b64decode(parts[0]["input_audio"]["data"])
    y, sr = sf.read(io.BytesIO(wav))
    assert sr == 16000 and len(y) == 16000 and parts[1]["text"] == task_text
    tr = log[-1]
    assert tr["path"] == "/v1/audio/transcriptions" and tr["ctype"].startswith("multipart/form-data")
    assert b'name="model"\r\n\r\nfake-model' in tr["body"] and task_text.encode() in tr["body"]
    run_log = (ws.inference / "api_llm" / "run_log.jsonl").read_text()
    assert "AIP_TEST_API_KEY" in run_log
    assert tm.scan_for(tmp_path, KEY) == []


def test_openai_wrong_key_and_missing_key(ws, tmp_path, monkeypatch, fake_server):
    monkeypatch.setenv("AIP_TEST_API_KEY", KEY + "-wrong")
    reg = tm.registry_yaml(tmp_path / "r.yaml", {"api_llm": _api_entry(fake_server, "chat")})
    tm.use_registry(monkeypatch, reg)
    run_inference(ws, models="api_llm", tasks="asr", limit=2, progress=False)
    df = read_results(ws.inference / "api_llm" / "asr.jsonl")
    assert (df["raw"] == "__ERROR__").all()
    assert all(e.startswith("generate: OpenAIBackendError: HTTP 401") for e in df["error"])
    assert tm.scan_for(tmp_path, KEY) == []  # the server echoed the key: scrubbed
    monkeypatch.delenv("AIP_TEST_API_KEY")
    s = run_inference(ws, models="api_llm", tasks="asr", limit=2, progress=False)
    assert s.loc[0, "status"] == "unavailable" and "AIP_TEST_API_KEY" in s.loc[0, "error"]


def test_openai_gives_up_after_retries(tmp_path, monkeypatch):
    monkeypatch.setenv("AIP_TEST_API_KEY", KEY)
    calls = []

    class Always503(_Fake):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            calls.append(1)
            self._send(503, {"error": {"message": "overloaded"}})

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Always503)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        reg = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {
            "api": _api_entry(f"http://127.0.0.1:{srv.server_address[1]}/v1", "chat")}))
        rec = load_model(reg["api"])
        from aiplib.inference.models.openai_backend import OpenAIBackendError

        with pytest.raises(OpenAIBackendError, match="HTTP 503.*after 4 attempts"):
            rec.generate([np.zeros(1600, np.float32)], ["x"])
        assert len(calls) == 4
        assert KEY not in json.dumps(rec.info())
        assert "server" in rec.info()["numerics"]["computed_by"]
    finally:
        srv.shutdown()
        srv.server_close()


# ------------------------------------------------------------------------------------------ concurrency
def _bench():
    """benchmarks/bench_openai_concurrency.py as a module (its fake server and comparison)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_openai_concurrency.py"
    spec = importlib.util.spec_from_file_location("bench_openai_concurrency", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_loopback_concurrency_benchmark_untimed_parts():
    """The loopback benchmark at a small size (16 rows, 50 ms): the server sees 8 requests in
    flight at concurrency 8 and 1 at concurrency 1; rows identical, in input order, and equal
    to what the server derived from each request's own audio and prompt. (The rows/s ratio is
    the benchmark's to print; timing is not asserted here.)"""
    bench = _bench()
    r = bench.compare(n=16, latency_s=0.05, concurrency=8, batch_size=16)
    assert r["max_in_flight_serial"] == 1
    assert r["max_in_flight_parallel"] == 8
    assert r["parallel"]["stats"]["max_in_flight"] == 8 and r["serial"]["stats"]["max_in_flight"] == 1
    assert r["identical"] and r["expected"]
    assert r["n_requests"] == 32 and r["parallel"]["stats"]["n_requests"] == 16
    # rows carry each input's own length and prompt: 8000 + 160 i samples, prompt on even rows
    _, task_text = prompt_for("asr")
    for i, row in enumerate(r["parallel"]["rows"]):
        n, _, text = row.split(" ", 2)
        assert int(n) == 8000 + 160 * i and text == (task_text if i % 2 == 0 else "-")
    # the request body: one user turn, input_audio (base64 WAV, format wav) then the task text
    body = r["bodies"][0]
    assert body["model"] == bench.MODEL and body["temperature"] == 0 and body["max_tokens"] == 64
    (msg,) = body["messages"]
    assert msg["role"] == "user"
    audio, text = msg["content"]
    assert audio["type"] == "input_audio" and audio["input_audio"]["format"] == "wav"
    y, sr = sf.read(io.BytesIO(base64.b64decode(audio["input_audio"]["data"])), dtype="int16")
    assert sr == 16000 and y.ndim == 1
    assert text == {"type": "text", "text": task_text}
    no_prompt = [b for b in r["bodies"] if len(b["messages"][0]["content"]) == 1]
    assert len(no_prompt) == 16  # half the rows of both runs had no task text: audio part only


def _vllm_like(tmp_path, monkeypatch, bench, url, **more):
    e = {"backend": "openai", "model_type": "api", "base_url": "http://127.0.0.1:9/v1", "base_url_env": "AIP_TEST_URL",
         "model": bench.MODEL, "prompt_style": "chat", "requires": "cpu", "max_new_tokens": 64,
         "batch_size": 8, "concurrency": 4, "engine_args": {"backoff_s": 0.01, "max_retries": 1}, **more}
    monkeypatch.setenv("AIP_TEST_URL", url)
    return e


def test_stage7_rows_in_manifest_order_and_resume_exact_with_concurrency(ws, tmp_path, monkeypatch):
    bench = _bench()
    with bench.fake_server(0.02, max_requests=100) as (url, state):
        reg = tm.registry_yaml(tmp_path / "r.yaml", {"fake_vllm": _vllm_like(tmp_path, monkeypatch, bench, url)})
        tm.use_registry(monkeypatch, reg)
        s = run_inference(ws, models="fake_vllm", tasks="asr", limit=6, progress=False)
        assert s.loc[0, "status"] == "done" and s.loc[0, "n_run"] == 6 and s.loc[0, "n_errors"] == 0
        assert state["max_in_flight"] == 4 and state["n_requests"] == 6  # base_url_env won over base_url
        s = run_inference(ws, models="fake_vllm", tasks="asr", progress=False)  # resume: the rest only
        assert s.loc[0, "n_done_before"] == 6 and s.loc[0, "n_run"] == s.loc[0, "n_stimuli"] - 6
        n_total = int(s.loc[0, "n_stimuli"])
        assert state["n_requests"] == n_total
        s = run_inference(ws, models="fake_vllm", tasks="asr", progress=False)  # nothing left
        assert s.loc[0, "n_run"] == 0 and state["n_requests"] == n_total
    df = read_results(ws.inference / "fake_vllm" / "asr.jsonl")
    manifest = read_manifest(ws, "asr")
    # each run writes its stimuli in manifest order: limit 6's stratified sample, then the rest
    sample = stratified_sample(manifest, 6)
    rest = manifest[~manifest["id"].isin(sample["id"])]
    assert list(df["id"]) == list(sample["id"]) + list(rest["id"])
    _, task_text = prompt_for("asr")
    for r in manifest.to_dict("records"):  # each row holds its own stimulus' answer
        y = materialize(r, ws)[0]
        got = df.set_index("id").loc[r["id"], "raw"]
        assert got.startswith(f"{len(y)} ") and got.endswith(task_text)


def test_failed_request_in_a_concurrent_batch_is_not_sent_twice(tmp_path, monkeypatch):
    bench = _bench()
    from aiplib.inference.models.openai_backend import OpenAIBackendError, OpenAIRecogniser

    bad_len = 8000 + 160 * 2
    refuse = lambda answer: 400 if answer.startswith(f"{bad_len} ") else None  # noqa: E731 - the 3rd stimulus
    with bench.fake_server(0.01, max_requests=100, fail=refuse) as (url, state):
        reg = load_registry(tm.registry_yaml(tmp_path / "r.yaml", {"v": _vllm_like(tmp_path, monkeypatch, bench, url)}))
        rec = OpenAIRecogniser(reg["v"])
        audios = bench.stimuli(5)
        prompts = ["p"] * 5
        with pytest.raises(OpenAIBackendError, match="^HTTP 400: refused"):
            rec.generate(audios, prompts)
        sent = state["n_requests"]
        assert sent == 5  # one request per stimulus (a 400 is not retried)
        # the runner's per-item retry: answered from the batch just run, nothing is sent again
        outs = []
        for i in range(5):
            if i == 2:
                with pytest.raises(OpenAIBackendError, match="^HTTP 400: refused"):
                    rec.generate(audios[i:i + 1], prompts[i:i + 1])
            else:
                outs.append(rec.generate(audios[i:i + 1], prompts[i:i + 1])[0])
        assert state["n_requests"] == sent
        assert [int(o.split()[0]) for o in outs] == [8000, 8160, 8480, 8640]
        assert rec.stats()["n_errors"] == 1
        rec.close()


def test_probe_refuses_a_missing_server_and_a_wrong_model(tmp_path, monkeypatch):
    import socket

    bench = _bench()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    entries = {"down": _vllm_like(tmp_path, monkeypatch, bench, f"http://127.0.0.1:{port}/v1")}
    reg = load_registry(tm.registry_yaml(tmp_path / "r.yaml", entries))
    with pytest.raises(ModelUnavailableError, match=f"no server answers at http://127.0.0.1:{port}/v1.*AIP_TEST_URL"):
        load_model(reg["down"])
    with bench.fake_server(0.0) as (url, _):
        reg = load_registry(tm.registry_yaml(tmp_path / "r2.yaml", {
            "wrong": _vllm_like(tmp_path, monkeypatch, bench, url, model="Qwen/Qwen2-Audio-7B-Instruct")}))
        with pytest.raises(ModelUnavailableError, match=f"serves {bench.MODEL}, not Qwen/Qwen2-Audio-7B-Instruct"):
            load_model(reg["wrong"])


class _FlakyFake(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses every ``every``-th request with HTTP 400."""
    every, count, lock = 4, [0], threading.Lock()

    def log_message(self, *a):
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with type(self).lock:
            type(self).count[0] += 1
            n = type(self).count[0]
        if n % type(self).every == 0:
            return _Fake._send(self, 400, {"error": {"message": f"request {n} refused (fake)"}})
        if self.path == "/v1/audio/transcriptions":
            return _Fake._send(self, 200, {"text": " word 1 "})
        return _Fake._send(self, 200, {"choices": [{"message": {"role": "assistant", "content": "yes"}}]})


@pytest.mark.slow
def test_one_request_in_n_refused_during_stages_6_to_8(tmp_path, monkeypatch):
    """Stage 6's WER-constancy check, stage 7 and stage 8 against an endpoint failing one request in
    four (HTTP 400): no stage raises; the failures are counted and named; the report's table gives
    the failed count per model × task and failed_stimuli.csv lists them; the next run retries them."""
    from aiplib.scoring.failures import failure_markdown, write_failure_tables
    from aiplib.scoring.score import score_inference
    from aiplib.stimuli import checks

    ws = make_tiny_workspace(tmp_path / "data", n_asr=3, n_kws=2, n_bg=2)
    build_manifests(ws)
    _FlakyFake.count = [0]
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyFake)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    monkeypatch.setenv("AIP_TEST_API_KEY", KEY)
    entry = _api_entry(url, "initial_prompt", engine_args={"backoff_s": 0.01, "max_retries": 0})
    tm.use_registry(monkeypatch, tm.registry_yaml(tmp_path / "r.yaml", {"api_asr": entry}))
    try:
        # stage 6: 3 items × 3 levels, one call per item; a refused batch is retried level by level
        wc = wer_check.wer_constancy(ws, model="api_asr", n_items=3, seed=0)
        assert len(wc) == 9 and wc.attrs["n_failed"] == int(wc["error"].notna().sum()) >= 1
        assert all("400" in e and "refused (fake)" in e for e in wc["error"].dropna())
        assert wc.loc[wc["error"].isna(), "wer"].notna().all() and wc.loc[wc["error"].notna(), "wer"].isna().all()
        assert len(wc.attrs["failed"]) == wc.attrs["n_failed"] and wc.attrs["failed"][0].endswith(" LUFS")
        # stage 7: failed requests are __ERROR__ rows
        s = run_inference(ws, models="api_asr", tasks="asr,kws", progress=False)
        errors = dict(zip(s["task"], s["n_errors"]))
        assert sum(errors.values()) >= 2 and (s["status"] == "done").all()
        # stage 8: scores the rest, and says what it left out
        scores = score_inference(ws)
        summary, failed = write_failure_tables(ws)
        n_asr, n_kws = len(read_manifest(ws, "asr")), len(read_manifest(ws, "kws"))
        by = summary.set_index("task")
        assert list(by.loc[["asr", "kws"], "n_stimuli"]) == [n_asr, n_kws]
        for task in ("asr", "kws"):
            assert by.loc[task, "n_failed"] == errors[task] and by.loc[task, "n_missing"] == 0
            assert by.loc[task, "n_scored"] == len(scores[task]) == {"asr": n_asr, "kws": n_kws}[task] - errors[task]
        assert (ws.tables_dir / "failed_stimuli.csv").is_file() and len(failed) == sum(errors.values())
        assert failed["error"].str.contains("400").all() and set(failed["status"]) == {"failed"}
        md = failure_markdown(summary)
        assert (f"api_asr × asr: {errors['asr']} of {n_asr} left out ({errors['asr']} failed, 0 missing)" in md)
        assert f"| api_asr | kws | {n_kws} | {n_kws - errors['kws']} | {errors['kws']} | 0 | {errors['kws']} | 0 |" in md
        # the next stage-7 run retries exactly the failed stimuli
        before = _FlakyFake.count[0]
        s2 = run_inference(ws, models="api_asr", tasks="asr,kws", progress=False)
        assert int(s2["n_run"].sum()) == sum(errors.values())
        assert _FlakyFake.count[0] - before >= sum(errors.values())
    finally:
        srv.shutdown()
        srv.server_close()
