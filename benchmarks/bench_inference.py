"""Fast vs standard decoding path of the embedded recogniser: speed and transcript identity.

Usage::

    python benchmarks/bench_inference.py [--n 40] [--model whisper_tiny_en] [--min-window 1000]
                                         [--margin 500] [--batch-size 8]

Stimuli: the ``demo`` workspace manifests when they exist (``n`` clean ASR rows and the ``n`` 0 dB
rows of the same items, materialised on the fly, plus the KWS manifest if present); otherwise
fieldkit speech (``../shared/fieldkit``, read only) mixed with white noise and the fieldkit
backgrounds at 0 dB. Prints s/clip of each path with one prompt and with
two prompts per stimulus (baseline + p5, where the fast path reuses encoder outputs), the
fast/standard throughput ratios and the share of identical transcripts on clean and 0 dB stimuli.
"""
from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplib.audio import load_audio  # noqa: E402
from aiplib.models import load_model  # noqa: E402
from aiplib.prompts import prompt_for  # noqa: E402

FIELDKIT = Path(__file__).resolve().parents[2] / "shared" / "fieldkit"


def demo_stimuli(n: int):
    """(family, condition, waveform) from the demo workspace, or None if it has no manifests."""
    from aiplib.formats import read_manifest  # noqa: PLC0415
    from aiplib.mixing import materialize  # noqa: PLC0415
    from aiplib.workspace import workspace  # noqa: PLC0415

    ws = workspace("demo", create=False)
    out = []
    for fam in ("asr", "kws"):
        try:
            m = read_manifest(ws, fam)
        except FileNotFoundError:
            continue
        clean = m[m["bg_id"] == "clean"].head(n)
        zero = m[(m["bg_id"] != "clean") & (m["snr_db"] == 0) & m["item_id"].isin(clean["item_id"])]
        bgs = sorted(zero["bg_id"].unique())
        # one 0 dB stimulus per item, the backgrounds taken in turn so all kinds appear
        pick = {it: bgs[k % len(bgs)] for k, it in enumerate(clean["item_id"])} if bgs else {}
        zero = zero[[pick.get(it) == bg for it, bg in zip(zero["item_id"], zero["bg_id"])]]
        for cond, rows in (("clean", clean), ("0dB", zero)):
            for r in rows.to_dict("records"):
                out.append((fam, cond, materialize(r, ws)[0]))
    return out or None


def fieldkit_stimuli(n: int):
    files = sorted(glob.glob(str(FIELDKIT / "speech_asr" / "*"))) + sorted(glob.glob(str(FIELDKIT / "kws" / "*.wav")))
    bgs = [None] + [load_audio(f) for f in sorted(glob.glob(str(FIELDKIT / "backgrounds" / "*.wav")))]
    rng = np.random.default_rng(0)
    out = []
    for k, f in enumerate(files[:n]):
        fam = "asr" if "/speech_asr/" in f else "kws"
        y = load_audio(f)[: 30 * 16000]
        y = y / np.sqrt(np.mean(y ** 2)) * 0.05
        out.append((fam, "clean", y.astype(np.float32)))
        bg = bgs[k % len(bgs)]
        b = rng.standard_normal(len(y)) if bg is None else np.resize(np.roll(bg, -rng.integers(len(bg))), len(y))
        b = b / np.sqrt(np.mean(b ** 2)) * np.sqrt(np.mean(y ** 2))
        m = y + b
        out.append((fam, "0dB", (m / max(1.0, np.abs(m).max() / 0.99)).astype(np.float32)))
    return out


def decode(rec, stims, batch: int, variants=("baseline",)):
    """Decode every stimulus with each prompt variant, a family's prompts interleaved per batch
    (as the stage-7 runner does). Returns {variant: transcripts} and seconds per decode."""
    tasks = {"baseline": {"asr": "asr", "kws": "kws"}, "p5": {"asr": "asr_steer_p5", "kws": "kws_steer_p5"}}
    outs = {v: {} for v in variants}
    t0 = time.perf_counter()
    for fam in ("asr", "kws"):
        idx = [i for i, s in enumerate(stims) if s[0] == fam]
        for s in range(0, len(idx), batch):
            ch = idx[s: s + batch]
            for v in variants:
                p = prompt_for(tasks[v][fam])[1]
                outs[v].update(zip(ch, rec.generate([stims[i][2] for i in ch], [p] * len(ch))))
    dt = time.perf_counter() - t0
    return {v: [o[i] for i in sorted(o)] for v, o in outs.items()}, dt / (len(stims) * len(variants))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=40, help="items (each gives a clean and a 0 dB stimulus)")
    ap.add_argument("--model", default="whisper_tiny_en")
    ap.add_argument("--min-window", type=int, default=None, help="fast path: smallest window, frames")
    ap.add_argument("--margin", type=int, default=None, help="fast path: padding after the clip, frames")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--source", choices=["auto", "demo", "fieldkit"], default="auto")
    a = ap.parse_args(argv)
    stims = None if a.source == "fieldkit" else demo_stimuli(a.n)
    src = "demo workspace"
    if stims is None:
        if a.source == "demo":
            sys.exit("no demo manifests: run the demo stages 1-5 first")
        stims, src = fieldkit_stimuli(a.n), "fieldkit"
    fast_opts = {"batch_size": a.batch_size}
    if a.min_window is not None:
        fast_opts["min_window_frames"] = a.min_window
    if a.margin is not None:
        fast_opts["margin_frames"] = a.margin
    variants = ("baseline", "p5")
    std = load_model(a.model, path="standard")
    decode(std, stims[:2], 1)  # warm-up
    ref1, t_std1 = decode(std, stims, 1)
    ref2, t_std2 = decode(std, stims, 1, variants)
    std.close()
    fast = load_model(a.model, path="fast", **fast_opts)
    decode(fast, stims[:2], a.batch_size)
    fast._enc_cache.clear()
    out1, t_fast1 = decode(fast, stims, a.batch_size)
    fast._enc_cache.clear()
    out2, t_fast2 = decode(fast, stims, a.batch_size, variants)
    window = fast.info()["window"]
    fast.close()
    ref, out = ref1["baseline"], out1["baseline"]
    same = np.array([r == o for r, o in zip(ref, out)])
    same_p5 = np.array([r == o for r, o in zip(ref2["p5"], out2["p5"])])
    cond = np.array([s[1] for s in stims])
    secs = np.array([len(s[2]) / 16000 for s in stims])
    print(f"{a.model} on {len(stims)} stimuli from {src} ({secs.min():.1f}-{secs.max():.1f} s, mean {secs.mean():.1f} s)")
    print(f"fast window policy: {window}, batch {a.batch_size}")
    print(f"one prompt : standard {t_std1:.4f} s/clip   fast {t_fast1:.4f} s/clip   "
          f"throughput fast/standard {t_std1 / t_fast1:.2f}x")
    print(f"two prompts (baseline + p5 per stimulus, as in --tasks all): standard {t_std2:.4f} s/decode   "
          f"fast {t_fast2:.4f} s/decode   throughput fast/standard {t_std2 / t_fast2:.2f}x")
    for c in ("clean", "0dB"):
        sel = cond == c
        print(f"identical transcripts {c:>5}: baseline {same[sel].mean():.3f} ({same[sel].sum()}/{sel.sum()})"
              f"   p5 {same_p5[sel].mean():.3f} ({same_p5[sel].sum()}/{sel.sum()})")
    for i in np.flatnonzero(~same):
        print(f"  differs [{stims[i][1]}]: standard={ref[i]!r}  fast={out[i]!r}")
    for i in np.flatnonzero(~same_p5):
        print(f"  differs p5 [{stims[i][1]}]: standard={ref2['p5'][i]!r}  fast={out2['p5'][i]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
