"""Benchmark: stimuli materialised per second per core (3 s utterances, 30 s backgrounds).

Prints the throughput of :func:`aiplib.stimuli.families.materialize` on one thread and its ratio to copying
the same number of bytes (``np.copyto`` of the 3 s float32 waveform): the goal is ≥ 2,000
stimuli/s/core. Run: ``.venv/bin/python benchmarks/bench_mixing.py``.
"""
from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from aiplib.io.audio import write_wav  # noqa: E402
from aiplib.stimuli.manifests import build_manifest  # noqa: E402
from aiplib.io.formats import read_manifest  # noqa: E402
from aiplib.stimuli.families import materialize  # noqa: E402
from aiplib.core.workspace import workspace  # noqa: E402


def _workspace(root):
    import json

    ws = workspace("demo", data_root=root)
    rng = np.random.default_rng(0)
    with open(ws.itembanks / "asr.jsonl", "w") as f:
        for i in range(10):
            y = (0.1 * rng.standard_normal(48000) * np.hanning(48000)).astype(np.float32)
            p = write_wav(ws.itembanks / "audio" / "asr" / f"u{i}.wav", y)
            f.write(json.dumps(dict(item_id=f"u{i}", path=ws.rel(p), text="x", duration_s=3.0)) + "\n")
    rows = []
    for j in range(20):
        p = write_wav(ws.bg / f"b{j}.wav", (0.05 * rng.standard_normal(16000 * 30)).astype(np.float32))
        rows.append(dict(bg_id=f"b{j}", path=ws.rel(p)))
    pd.DataFrame(rows).to_csv(ws.descriptors / "battery.csv", index=False)
    build_manifest(ws, "asr")
    return ws


def main(n_rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = _workspace(tmp)
        rows = read_manifest(ws, "asr").to_dict("records")
        for r in rows:  # warm the file caches, as a long run does
            materialize(r, ws)
        t0 = time.perf_counter()
        for _ in range(n_rounds):
            for r in rows:
                materialize(r, ws)
        dt = time.perf_counter() - t0
        n = n_rounds * len(rows)
        src = np.zeros(48000, dtype=np.float32)
        dst = np.empty_like(src)
        t0 = time.perf_counter()
        for _ in range(n):
            np.copyto(dst, src)
        dt_copy = time.perf_counter() - t0
        rate = n / dt
        print(f"stimuli materialised: {n} (3 s each) in {dt:.3f} s on 1 core")
        print(f"materialize: {rate:,.0f} stimuli/s/core   (goal >= 2,000)")
        print(f"copy of the same bytes: {n / dt_copy:,.0f} copies/s")
        print(f"ratio materialize / copy time: {dt / dt_copy:.1f}x")


if __name__ == "__main__":
    main()
