"""Benchmark: throughput of batch N against batch 1 for the transformers Speech LLMs.

For each model, the same stimuli are decoded one at a time and then in batches of N
(:func:`aiplib.inference.models.transformers_backend.check_batch_invariance`); the script prints stimuli/s
for both, the batch-N / batch-1 throughput ratio, RTFx, whether every response was identical
and, on CUDA, the peak GPU memory.

**Real numbers need a CUDA GPU**: pass registry ids there (e.g. ``--model qwen2_audio_7b``;
default batch = the entry's ``batch_size``). Without ``--model`` (or without a GPU) it builds the
tiny random-weight fixtures of ``tests/tiny_models.py`` (all five families, CPU, float32) in a
temporary folder and prints their ratios, saying so: a plumbing and batch-invariance check, not
a speed claim for the real models (CPU, 300k-parameter models, random tokens).

Run: ``.venv/bin/python benchmarks/bench_batching.py [--model ID[,ID…]] [--batch-size 4]
[--n 8] [--seconds 3]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def stimuli(n: int, seconds: float, seed: int = 0) -> list[np.ndarray]:
    """``n`` clips of ``seconds`` s (equal length, so every family can batch them): a
    speech-like tone with noise, 16 kHz float32."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    out = []
    for i in range(n):
        y = 0.2 * np.sin(2 * np.pi * (150 + 20 * i) * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
        out.append((y + 0.02 * rng.standard_normal(len(t))).astype(np.float32))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="registry id(s), comma-separated; default: the tiny fixtures")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="N; default the registry entry's batch_size (4 for the fixtures)")
    ap.add_argument("--n", type=int, default=8, help="stimuli")
    ap.add_argument("--seconds", type=float, default=3.0, help="clip length, s")
    args = ap.parse_args(argv)

    from aiplib.inference.models import cuda_available, get_entry, load_model, load_registry
    from aiplib.inference.models.transformers_backend import check_batch_invariance
    from aiplib.inference.prompts import prompt_for

    _, prompt = prompt_for("asr")
    audios = stimuli(args.n, args.seconds)
    tmp = None
    gpu = cuda_available()
    if args.model and not gpu:
        print(f"--model {args.model}: the Speech LLMs need a CUDA GPU for real numbers and none is "
              "available here; measuring the tiny CPU fixtures instead.")
    if args.model and gpu:
        entries = [get_entry(m.strip()) for m in args.model.split(",") if m.strip()]
        print("CUDA GPU: real models.")
    else:
        print("NOTE: real batching numbers need a CUDA GPU (run there with --model <registry id>). "
              "Below: tiny random-weight fixtures on CPU, float32 — the ratios check the plumbing "
              "and batch invariance, they are not a speed claim for the real models.")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import tiny_models as tm

        tmp = tempfile.TemporaryDirectory(prefix="aip_bench_")
        folders = tm.build_all(tmp.name)
        reg = tm.registry_yaml(Path(tmp.name) / "registry.yaml", {
            f"tiny_{f}": tm.registry_entry(f, d, max_new_tokens=16, batch_size=args.batch_size or 4,
                                           thinker_max_new_tokens=16 if f == "qwen25_omni" else None)
            for f, d in folders.items()})
        entries = list(load_registry(reg).values())

    print(f"{args.n} stimuli of {args.seconds:g} s, batch N vs 1")
    print(f"{'model':24s} {'N':>3s} {'stim/s b1':>10s} {'stim/s bN':>10s} {'ratio':>7s} {'RTFx bN':>8s} "
          f"{'identical':>9s} {'peak GPU MB':>11s}")
    for e in entries:
        rec = load_model(e)
        try:
            rec.generate(audios[:1], [prompt])  # warm-up
            r = check_batch_invariance(rec, audios, [prompt] * len(audios),
                                       batch_size=args.batch_size or e.batch_size)
            st = rec.stats()
        finally:
            rec.close()
        s1, sn = args.n / r["seconds_batch1"], args.n / r["seconds_batchN"]
        rtfx = args.n * args.seconds / r["seconds_batchN"]
        peak = st.get("peak_gpu_mem_mb")
        print(f"{e.id:24s} {r['batch_size']:3d} {s1:10.2f} {sn:10.2f} {sn / s1:7.2f} {rtfx:8.1f} {str(r['equal']):>9s} "
              f"{'-' if peak is None else f'{peak:.0f}':>11s}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
