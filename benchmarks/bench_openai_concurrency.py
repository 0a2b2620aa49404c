"""Benchmark: the ``openai`` backend at concurrency 8 against concurrency 1, on loopback.

A fake OpenAI-compatible server (``http.server.ThreadingHTTPServer`` on 127.0.0.1, a free port)
answers ``POST /v1/chat/completions`` after a fixed latency (default 100 ms, the stand-in for a
``vllm serve`` endpoint that batches concurrent requests on its GPU). Its answer is derived from
the request itself — the number of audio samples in the ``input_audio`` WAV, a hash of the WAV
and the prompt text — so a response that lands on the wrong row is caught. It counts requests
and the largest number in flight at once, and refuses (HTTP 400, not retried) every request
beyond a bound, so a bug can never keep it busy.

The same stimuli go through :class:`aiplib.inference.models.openai_backend.OpenAIRecogniser` in batches of
``batch_size`` rows (as stage 7 hands them over), once at concurrency 1 and once at concurrency
8. The script prints rows/s for both, their ratio (goal ≥ 6× at 100 ms), the server's peak
in-flight count and whether the rows are identical and in input order.

Run: ``.venv/bin/python benchmarks/bench_openai_concurrency.py [--n 64] [--latency-ms 100]
[--concurrency 8] [--batch-size 32]``. Exit status 1 if the rows differ or the ratio misses the
goal. ``tests/test_command_openai.py`` runs :func:`compare` at a small size (16 rows, 50 ms)
and asserts the untimed parts (peak in flight = 8, identical ordered rows).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODEL = "fake/speech-llm"
GOAL = 6.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog (5) would drop concurrent connects


def answer_for(wav: bytes, prompt: str | None) -> str:
    """The fake server's deterministic answer: ``"<n samples> <sha1(wav)[:10]> <prompt>"``."""
    import soundfile as sf  # noqa: PLC0415

    n = len(sf.read(io.BytesIO(wav), dtype="int16")[0])
    return f"{n} {hashlib.sha1(wav).hexdigest()[:10]} {prompt or '-'}"


@contextmanager
def fake_server(latency_s: float = 0.1, max_requests: int = 1000, fail=None):
    """Start the fake endpoint; yields ``(base_url, state)``.

    ``fail``, optional: a function of the answer a request would get returning an HTTP status to
    send instead (e.g. 400 for one stimulus), or None.

    ``state`` holds ``n_requests``, ``in_flight``, ``max_in_flight`` and ``bodies`` (the parsed
    JSON of every chat request, in arrival order).
    """
    state = {"n_requests": 0, "in_flight": 0, "max_in_flight": 0, "bodies": [], "lock": threading.Lock()}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _leave(self) -> None:
            # a request stops counting as in flight before its response is written: the client may
            # send its next request as soon as it has read this one, before this thread runs again
            if getattr(self, "_counted", False):
                self._counted = False
                with state["lock"]:
                    state["in_flight"] -= 1

        def _send(self, status: int, obj) -> None:
            raw = json.dumps(obj).encode()
            self._leave()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self):  # noqa: N802 - the load-time probe
            if self.path == "/v1/models":
                return self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            return self._send(404, {"error": {"message": "no route"}})

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            lock = state["lock"]
            with lock:
                state["n_requests"] += 1
                over = state["n_requests"] > max_requests
                state["in_flight"] += 1
                state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
            self._counted = True
            try:
                if over:
                    return self._send(400, {"error": {"message": "request budget exhausted"}})
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "no route"}})
                req = json.loads(body)
                with lock:
                    state["bodies"].append(req)
                parts = req["messages"][0]["content"]
                audio = [p for p in parts if p.get("type") == "input_audio"]
                texts = [p["text"] for p in parts if p.get("type") == "text"]
                if len(audio) != 1 or audio[0]["input_audio"].get("format") != "wav":
                    return self._send(400, {"error": {"message": "expected one input_audio part (wav)"}})
                wav = base64.b64decode(audio[0]["input_audio"]["data"])
                time.sleep(latency_s)
                content = answer_for(wav, texts[0] if texts else None)
                status = fail(content) if fail is not None else None
                if status:
                    return self._send(status, {"error": {"message": f"refused: {content[:20]}"}})
                return self._send(200, {"object": "chat.completion", "model": req.get("model"),
                                        "choices": [{"index": 0, "finish_reason": "stop",
                                                     "message": {"role": "assistant", "content": content}}]})
            finally:
                self._leave()

    srv = _Server(("127.0.0.1", 0), Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1", state
    finally:
        srv.shutdown()
        srv.server_close()


def stimuli(n: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` noise clips of distinct lengths (0.5 s + 10 ms · i, 16 kHz float32)."""
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(8000 + 160 * i)).astype(np.float32) for i in range(n)]


def entry(base_url: str, *, concurrency: int, batch_size: int):
    """A registry entry for the fake endpoint (``openai`` backend, chat)."""
    from aiplib.inference.models import ModelEntry  # noqa: PLC0415

    return ModelEntry(id=f"fake_c{concurrency}", backend="openai", model_type="api", prompt_style="chat",
                      max_new_tokens=64, batch_size=batch_size, requires="cpu",
                      extra={"base_url": base_url, "model": MODEL, "concurrency": concurrency,
                             "engine_args": {"max_retries": 0}})


def run(base_url: str, audios, prompts, *, concurrency: int, batch_size: int) -> dict:
    """Decode ``audios`` in stage-7 style batches; returns ``rows``, ``seconds``, ``rows_per_s``
    and the recogniser's ``stats``."""
    from aiplib.inference.models.openai_backend import OpenAIRecogniser  # noqa: PLC0415

    rec = OpenAIRecogniser(entry(base_url, concurrency=concurrency, batch_size=batch_size))
    rows: list[str] = []
    t0 = time.perf_counter()
    for s in range(0, len(audios), batch_size):
        rows += rec.generate(audios[s: s + batch_size], prompts[s: s + batch_size])
    dt = time.perf_counter() - t0
    stats = rec.stats()
    rec.close()
    return {"rows": rows, "seconds": dt, "rows_per_s": len(rows) / dt, "stats": stats}


def compare(n: int = 64, latency_s: float = 0.1, concurrency: int = 8, batch_size: int = 32) -> dict:
    """Concurrency 1 against ``concurrency`` on one fake server.

    Returns
    -------
    dict
        ``serial`` / ``parallel`` (see :func:`run`), ``ratio`` (rows/s parallel / serial),
        ``identical`` (same rows, same order), ``expected`` (rows equal the server's answer for
        each input, in input order), ``max_in_flight_serial`` / ``max_in_flight_parallel``
        (server-side peaks), ``n_requests`` (server total) and ``bodies`` (the parsed requests).
    """
    from aiplib.inference.prompts import prompt_for  # noqa: PLC0415

    _, text = prompt_for("asr")
    audios = stimuli(n)
    prompts = [text if i % 2 == 0 else None for i in range(n)]  # with and without task text
    with fake_server(latency_s, max_requests=2 * n + 10) as (url, state):
        serial = run(url, audios, prompts, concurrency=1, batch_size=batch_size)
        peak_serial = state["max_in_flight"]
        state["max_in_flight"] = 0
        parallel = run(url, audios, prompts, concurrency=concurrency, batch_size=batch_size)
        peak_parallel = state["max_in_flight"]
        n_requests, bodies = state["n_requests"], list(state["bodies"])
    from aiplib.inference.models.adapters import wav_bytes  # noqa: PLC0415 - what the backend sends

    expected = [answer_for(wav_bytes(a), p) for a, p in zip(audios, prompts)]
    return {"n": n, "latency_s": latency_s, "concurrency": concurrency, "batch_size": batch_size,
            "serial": serial, "parallel": parallel, "ratio": parallel["rows_per_s"] / serial["rows_per_s"],
            "identical": serial["rows"] == parallel["rows"], "expected": parallel["rows"] == expected,
            "max_in_flight_serial": peak_serial, "max_in_flight_parallel": peak_parallel,
            "n_requests": n_requests, "bodies": bodies}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=64, help="rows (stimuli)")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="server latency per request, ms")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32, help="rows per generate() call (stage 7's batch)")
    args = ap.parse_args(argv)
    r = compare(args.n, args.latency_ms / 1000, args.concurrency, args.batch_size)
    print(f"loopback fake server, {r['n']} rows, {args.latency_ms:g} ms per request, batches of {r['batch_size']}")
    print(f"{'concurrency':>11s} {'seconds':>8s} {'rows/s':>8s} {'server peak in flight':>22s}")
    print(f"{1:11d} {r['serial']['seconds']:8.2f} {r['serial']['rows_per_s']:8.2f} {r['max_in_flight_serial']:22d}")
    print(f"{r['concurrency']:11d} {r['parallel']['seconds']:8.2f} {r['parallel']['rows_per_s']:8.2f} "
          f"{r['max_in_flight_parallel']:22d}")
    ok_ratio = r["ratio"] >= GOAL
    print(f"ratio (rows/s at {r['concurrency']} / at 1): {r['ratio']:.2f}x  (goal >= {GOAL:g}x: "
          f"{'met' if ok_ratio else 'MISSED'})")
    print(f"rows identical and in input order: {r['identical'] and r['expected']}  "
          f"(server requests: {r['n_requests']}, expected {2 * r['n']})")
    return 0 if (ok_ratio and r["identical"] and r["expected"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
