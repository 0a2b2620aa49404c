"""Fast vs standard decoding path of the embedded recogniser: speed and transcript identity.

Usage::

    python benchmarks/bench_inference.py [--n 40] [--model whisper_tiny_en] [--windows 10,15,30]
                                         [--min-pad 5] [--batch-size 8]

Stimuli: the ``demo`` workspace manifests when they exist (``n`` clean ASR rows and the ``n`` 0 dB
rows of the same items, materialised on the fly, plus the KWS manifest if present); otherwise
fieldkit speech (``../shared/fieldkit``, read only) mixed with white noise and the fieldkit
backgrounds at 0 dB. Prints s/clip of each path with one prompt and with
two prompts per stimulus (baseline + p5, where the fast path reuses encoder outputs), the
fast/standard throughput ratios and the share of identical transcripts on clean and 0 dB stimuli.

``--floor`` instead measures stage 7's floor (issue 13) on the ``--limit`` manifest rows per
family of a workspace (default: the demo's) that ``run_inference(ws, limit=…)`` decodes:
the encoder-only throughput (s per stimulus: features precomputed, every stimulus encoded once in
sub-batches spread over the recogniser's workers, no barrier) and the decoder-only throughput (s
per decode: encoder outputs precomputed, every prompt of the family). The floor of a run that
encodes ``S`` stimuli and makes ``D`` decodes is ``S * encode_s + D * decode_s``
(:func:`floor_seconds`); ``benchmarks/bench_make_all.py`` divides stage 7's time by it.
``--floor --stage`` also runs the stage-7 loop on the same slice (into a scratch copy of the
workspace's inference folder), alternating with the floor ``--repeat`` times, and prints the ratio
of each pair: the machine may be shared, so only ratios measured back to back mean much.

``--arrangements`` compares the embedded Whisper's CPU arrangements
(:data:`aiplib.inference.models.whisper_window.ARRANGEMENTS`) in one process: stage 7's loop
(``run_inference(arrangement=…)``) on the first ``--limit`` rows per family of the workspace's
manifests whose background is one of ``--backgrounds`` (tune on one set, validate on others), into
scratch copies, ``sub_batches`` (today's) and ``per_clip`` alternating ``--repeat`` times. Per pair
it prints each loop's seconds, their ratio new/old, each loop over the floor
``stimuli × best single-clip 30 s encode + decodes × best batched decode`` (:func:`part_times`),
the count of identical transcripts (``raw``, byte for byte) and ``os.getloadavg()``.

``--encoder-sweep`` times the encoder alone (30 s windows, features precomputed) on the ``--limit``
rows per family, for each (workers, threads, clips per encoder call) of :data:`SWEEP`, every
arrangement ``--repeat`` times in alternation in one process; it prints ms per clip of each run and
the best of each arrangement, and its ratio to today's (2 workers x 1 thread, 4 clips per call).
"""
from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplib.io.audio import load_audio  # noqa: E402
from aiplib.inference.plan import DEFAULT_DECODING, stratified_sample  # noqa: E402
from aiplib.inference.models import load_model  # noqa: E402
from aiplib.inference.models.ct2_numerics import import_ctranslate2  # noqa: E402
from aiplib.inference.prompts import prompt_for  # noqa: E402

FIELDKIT = Path(__file__).resolve().parents[2] / "shared" / "fieldkit"


def slice_stimuli(ws, limit: int | None):
    """The stimuli ``run_inference(ws, limit=limit)`` decodes, materialised.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        With ``manifests/<family>.csv`` (stage 5).
    limit : int or None
        Stimuli per family manifest, the stratified sample of
        :func:`aiplib.inference.plan.stratified_sample` (None: every row).

    Returns
    -------
    list of (family, np.ndarray [shape=(n,)], float32, 16 kHz)
        Each stimulus once, cut to 30 s (``max_audio_s`` of the Whisper entries).
    """
    from aiplib.stimuli.families import materialize  # noqa: PLC0415

    out = []
    for fam, m in _manifests(ws):
        m = stratified_sample(m, limit or None)
        out += [(fam, np.asarray(materialize(r, ws)[0], dtype=np.float32)[: 30 * 16000])
                for r in m.to_dict("records")]
    return out


def measure_floor(rec, stims, prompts: dict) -> dict:
    """Encoder-only and decoder-only throughput of a faster-whisper recogniser (fast path).

    Parameters
    ----------
    rec : aiplib.inference.models.whisper.WhisperRecogniser
        Loaded as stage 7 loads it (its ``workers``, ``cpu_threads``, ``batch_size``).
    stims : list of (family, waveform)
        :func:`slice_stimuli`.
    prompts : dict
        family → list of prompt texts (every prompt decoded on each of its stimuli).

    Returns
    -------
    dict
        ``encode_s`` (wall s per stimulus encoded), ``decode_s`` (wall s per decode), ``stimuli``,
        ``decodes``, ``encode_wall_s``, ``decode_wall_s``, ``workers``, ``cpu_threads``,
        ``sub_batch``. Feature extraction is not timed (it is part of the overhead the ratio shows).

    Notes
    -----
    Work is cut into sub-batches of ``ceil(batch_size / workers)`` clips (the fast path's split)
    and handed to ``workers`` threads without any barrier, so both CTranslate2 workers stay busy.
    """
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    ctranslate2 = import_ctranslate2()
    sub = max(1, -(-rec.batch_size // rec.workers))
    chunks = []  # (family, features)
    wins = [(f, rec.window_s(len(y)) * 100) for f, y in stims]  # each clip on the window stage 7 gives it
    for fam, w in dict.fromkeys(wins):
        clips = [y for (f, y), fw in zip(stims, wins) if fw == (fam, w)]
        chunks += [(fam, rec.features(clips[k: k + sub], w)) for k in range(0, len(clips), sub)]

    def enc(ch):
        return ch[0], np.array(rec.model.model.encode(ctranslate2.StorageView.from_array(ch[1]), to_cpu=False))

    with ThreadPoolExecutor(rec.workers) as pool:
        list(pool.map(enc, chunks[: rec.workers]))  # warm-up
        t0 = time.perf_counter()
        encoded = list(pool.map(enc, chunks))
        t_enc = time.perf_counter() - t0
        jobs = [(e, *rec.decode_options(p)) for fam, e in encoded for p in prompts[fam]]

        def dec(job):
            e, tokens, kw = job
            return rec.model.model.generate(ctranslate2.StorageView.from_array(e), [tokens] * len(e), **kw)

        t0 = time.perf_counter()
        list(pool.map(dec, jobs))
        t_dec = time.perf_counter() - t0
    n_dec = sum(len(e) for e, _, _ in jobs)
    return {"encode_s": t_enc / len(stims), "decode_s": t_dec / n_dec, "stimuli": len(stims),
            "decodes": n_dec, "encode_wall_s": round(t_enc, 3), "decode_wall_s": round(t_dec, 3),
            "workers": rec.workers, "cpu_threads": rec.cpu_threads, "sub_batch": sub}


#: ``--encoder-sweep``'s arrangements: (CTranslate2 workers, threads per worker, clips per call).
SWEEP = ((2, 1, 1), (2, 1, 4), (2, 1, 8), (2, 1, 16), (1, 2, 1), (1, 2, 8))
#: Today's arrangement in :data:`SWEEP` (stage 7's ``sub_batches``: a batch of 8 over 2 workers).
TODAY = (2, 1, 4)


def encoder_ms_per_clip(clips: list, workers: int, threads: int, per_call: int,
                        model: str = "whisper_tiny_en") -> float:
    """Wall ms per clip of the encoder alone on 30 s windows: ``clips`` (16 kHz float32 arrays)
    cut into calls of ``per_call`` clips, handed to ``workers`` CTranslate2 workers of ``threads``
    threads each without a barrier (the first ``workers`` calls are a warm-up, not timed)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    ctranslate2 = import_ctranslate2()
    rec = load_model(model, path="fast", workers=workers, cpu_threads=threads)
    try:
        calls = [rec.features(clips[k: k + per_call], 3000) for k in range(0, len(clips), per_call)]

        def encode(features):
            return rec.model.model.encode(ctranslate2.StorageView.from_array(features), to_cpu=False)

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(encode, calls[:workers]))
            t0 = time.perf_counter()
            list(pool.map(encode, calls))
            seconds = time.perf_counter() - t0
    finally:
        rec.close()
    return 1000 * seconds / len(clips)


def encoder_sweep(ws, limit: int, repeat: int, model: str = "whisper_tiny_en") -> dict:
    """:func:`encoder_ms_per_clip` of every arrangement of :data:`SWEEP` on the stimuli of
    :func:`slice_stimuli`, ``repeat`` rounds in alternation; ``{arrangement: [ms per round]}``."""
    import os  # noqa: PLC0415

    clips = [y for _, y in slice_stimuli(ws, limit)]
    out = {arrangement: [] for arrangement in SWEEP}
    for round_index in range(repeat):
        for arrangement in SWEEP:
            ms = encoder_ms_per_clip(clips, *arrangement, model=model)
            out[arrangement].append(ms)
            workers, threads, per_call = arrangement
            print(f"round {round_index}: {workers} workers x {threads} threads, {per_call} clips per call: "
                  f"{ms:.1f} ms/clip ({len(clips)} clips; load {os.getloadavg()[0]:.2f})", flush=True)
    return out


def floor_seconds(floor: dict, stimuli: int, decodes: int) -> float:
    """Stage 7's floor, s: ``stimuli * floor["encode_s"] + decodes * floor["decode_s"]``."""
    return stimuli * floor["encode_s"] + decodes * floor["decode_s"]


def family_prompts(ws, tasks="all") -> dict:
    """family → prompt texts of ``tasks`` in the workspace's prompt set (as stage 7 uses them)."""
    from aiplib.inference.prompts import get_prompt_set  # noqa: PLC0415
    from aiplib.inference.prompts import TASKS, task_names  # noqa: PLC0415

    ps = get_prompt_set(getattr(ws, "profile", None), ws=ws)
    out: dict = {}
    for t in task_names(tasks):
        out.setdefault(TASKS[t][0], []).append(ps.prompt(t)[1])
    return out


def floor_for_workspace(ws, limit: int | None = 100, model: str = "whisper_tiny_en",
                        decoding: str | None = None) -> dict:
    """:func:`measure_floor` on the ``limit`` rows per family of ``ws`` stage 7's ``limit`` decodes, the model loaded
    as stage 7 loads it (``load_model(model, path=decoding)``, default stage 7's decoding), each
    clip encoded on the window that decoding gives it."""
    decoding = decoding or DEFAULT_DECODING
    rec = load_model(model, path=decoding)
    try:
        return {**measure_floor(rec, slice_stimuli(ws, limit), family_prompts(ws)), "model": model,
                "limit": limit, "decoding": decoding}
    finally:
        rec.close()


def stage_vs_floor(ws, limit: int, repeat: int = 2, model: str = "whisper_tiny_en") -> list[dict]:
    """Stage 7's loop (``run_inference(limit=limit)``, into a scratch copy of ``ws``) and the floor
    on the same stimuli, alternating ``repeat`` times; one dict per pair with their ``ratio``."""
    import json  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from aiplib.inference.runner import run_inference  # noqa: PLC0415
    from aiplib.core.workspace import STAGE_DIRS, Workspace  # noqa: PLC0415

    out = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="aip-bench-") as tmp:
            # a scratch workspace: the inputs linked, inference/ and checks/ its own
            view = Workspace(profile=ws.profile, root=Path(tmp) / ws.profile)
            view.root.mkdir()
            for d in STAGE_DIRS:
                if d not in ("inference", "checks") and (ws.root / d).exists():
                    (view.root / d).symlink_to((ws.root / d).resolve(), target_is_directory=True)
            view.ensure()
            t0 = time.perf_counter()
            run_inference(view, models=model, limit=limit, progress=False)
            wall = time.perf_counter() - t0
            log = [json.loads(x) for x in view.run_log(model).open()][-1]
        tp = log["throughput"]
        fl = floor_for_workspace(ws, limit, model)
        fs = floor_seconds(fl, tp["stimuli"], tp["decodes"])
        out.append({"loop_s": tp["seconds"], "run_s": round(wall, 3), "stimuli": tp["stimuli"],
                    "decodes": tp["decodes"], "floor_s": round(fs, 3), "ratio": round(tp["seconds"] / fs, 3),
                    "encode_s": round(fl["encode_s"], 4), "decode_s": round(fl["decode_s"], 4)})
    return out


def part_times(ws, limit: int | None, model: str = "whisper_tiny_en", tries: int = 3) -> dict:
    """The parts of stage 7's work on one clip, best of ``tries`` (s): ``features_s`` (log-mel of
    one clip), ``encode_s`` (one clip's 30 s window through the encoder, features precomputed, the
    ``per_clip`` recogniser: one worker, intra-op threads on every core) and ``decode_s`` (one
    decode of a batch of ``batch_size`` encoder outputs, divided by the batch), on the first clips
    of :func:`slice_stimuli`."""
    ctranslate2 = import_ctranslate2()
    rec = load_model(model, path=DEFAULT_DECODING, arrangement="per_clip")
    try:
        stims = [y for _, y in slice_stimuli(ws, limit)][: rec.batch_size]
        prompt = next(iter(family_prompts(ws).values()))[0]
        best = {"features_s": np.inf, "encode_s": np.inf, "decode_s": np.inf}
        enc = []
        for y in stims[:tries]:
            t0 = time.perf_counter()
            one = rec.features([y])
            best["features_s"] = min(best["features_s"], time.perf_counter() - t0)
            t0 = time.perf_counter()
            rec.model.model.encode(ctranslate2.StorageView.from_array(one), to_cpu=True)
            best["encode_s"] = min(best["encode_s"], time.perf_counter() - t0)
        for y in stims:
            one = ctranslate2.StorageView.from_array(rec.features([y]))
            enc.append(np.array(rec.model.model.encode(one, to_cpu=True))[0])
        tokens, kw = rec.decode_options(prompt)
        batch = ctranslate2.StorageView.from_array(np.ascontiguousarray(np.stack(enc)))
        for _ in range(tries):
            t0 = time.perf_counter()
            rec.model.model.generate(batch, [tokens] * len(enc), **kw)
            best["decode_s"] = min(best["decode_s"], (time.perf_counter() - t0) / len(enc))
        return {**best, "cpu_threads": rec.cpu_threads}
    finally:
        rec.close()


def _scratch_view(ws, tmp: Path, backgrounds, limit: int | None):
    """A scratch workspace in ``tmp``: ``ws``'s inputs linked, its manifests cut to the rows whose
    ``background_id`` is in ``backgrounds`` (all when None), the first ``limit`` per family."""
    from aiplib.core.workspace import STAGE_DIRS, Workspace  # noqa: PLC0415

    view = Workspace(profile=ws.profile, root=tmp / ws.profile)
    view.root.mkdir(parents=True)
    for d in STAGE_DIRS:
        if d not in ("inference", "checks", "manifests") and (ws.root / d).exists():
            (view.root / d).symlink_to((ws.root / d).resolve(), target_is_directory=True)
    view.ensure()
    for fam, m in _manifests(ws):
        if backgrounds:
            m = m[m["background_id"].isin(backgrounds)]
        m.head(limit).to_csv(view.manifests / f"{fam}.csv", index=False)
    return view


def _stage_loop(ws, arrangement: str, backgrounds, limit, model: str) -> dict:
    """Stage 7 (``run_inference``) with ``arrangement`` into a scratch view: the loop's seconds,
    stimuli, decodes and ``{(task, id): raw}``."""
    import json  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from aiplib.inference.runner import run_inference  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="aip-bench-") as tmp:
        view = _scratch_view(ws, Path(tmp), backgrounds, limit)
        run_inference(view, models=model, arrangement=arrangement, progress=False)
        log = [json.loads(x) for x in view.run_log(model).open()][-1]
        raw = {}
        for f in sorted((view.inference / model).glob("*.jsonl")):
            if f.name != "run_log.jsonl":
                rows = [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines()]
                raw.update({(r["task"], r["id"]): r["raw"] for r in rows})
    tp = log["throughput"]
    return {"seconds": tp["seconds"], "stimuli": tp["stimuli"], "decodes": tp["decodes"], "raw": raw}


def arrangements_paired(ws, backgrounds=None, limit: int | None = 24, repeat: int = 3,
                        model: str = "whisper_tiny_en") -> list[dict]:
    """``sub_batches`` and ``per_clip`` stage-7 loops alternating ``repeat`` times on the same
    stimuli (:func:`_scratch_view`), each pair preceded by :func:`part_times`; one dict per pair."""
    import os  # noqa: PLC0415

    out = []
    for k in range(repeat):
        parts = part_times(ws, limit, model)
        order = ("sub_batches", "per_clip") if k % 2 == 0 else ("per_clip", "sub_batches")
        runs = {a: _stage_loop(ws, a, backgrounds, limit, model) for a in order}
        old, new = runs["sub_batches"], runs["per_clip"]
        floor = old["stimuli"] * parts["encode_s"] + old["decodes"] * parts["decode_s"]
        same = sum(new["raw"].get(key) == v for key, v in old["raw"].items())
        out.append({"old_s": old["seconds"], "new_s": new["seconds"],
                    "ratio": new["seconds"] / old["seconds"], "old_floor": old["seconds"] / floor,
                    "new_floor": new["seconds"] / floor, "floor_s": floor, "identical": same,
                    "rows": len(old["raw"]), "stimuli": old["stimuli"], "decodes": old["decodes"],
                    "load": os.getloadavg(), **parts})
    return out


def _manifests(ws):
    """(task family, manifest) of each family whose ``manifests/<family>.csv`` exists."""
    from aiplib.io.formats import read_manifest  # noqa: PLC0415
    from aiplib.core.tasks import TASK_FAMILIES  # noqa: PLC0415

    for fam in TASK_FAMILIES:
        try:
            yield fam, read_manifest(ws, fam)
        except FileNotFoundError:
            continue


def demo_stimuli(n: int):
    """(family, condition, waveform) from the demo workspace, or None if it has no manifests."""
    from aiplib.stimuli.families import materialize  # noqa: PLC0415
    from aiplib.core.workspace import workspace  # noqa: PLC0415

    ws = workspace("demo", create=False)
    out = []
    for fam, m in _manifests(ws):
        # the manifest's own columns (background_id, speech_id), not the score tables' (bg_id, item_id)
        clean = m[m["background_id"] == "clean"].head(n)
        snr = pd.to_numeric(m["snr_db"], errors="coerce")
        zero = m[(m["background_id"] != "clean") & (snr == 0) & m["speech_id"].isin(clean["speech_id"])]
        bgs = sorted(zero["background_id"].unique())
        # one 0 dB stimulus per item, the backgrounds taken in turn so all kinds appear
        pick = {it: bgs[k % len(bgs)] for k, it in enumerate(clean["speech_id"])} if bgs else {}
        zero = zero[[pick.get(it) == bg for it, bg in zip(zero["speech_id"], zero["background_id"])]]
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
    ap.add_argument("--windows", default=None, help="fast path: encoder windows, s, comma-separated (default 30)")
    ap.add_argument("--min-pad", type=float, default=None, help="fast path: padding after the clip, s")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--source", choices=["auto", "demo", "fieldkit"], default="auto")
    ap.add_argument("--floor", action="store_true", help="measure stage 7's floor (module notes)")
    ap.add_argument("--stage", action="store_true", help="with --floor: also run stage 7 on the slice")
    ap.add_argument("--limit", type=int, default=100, help="--floor: manifest rows per family")
    ap.add_argument("--repeat", type=int, default=2, help="--floor --stage: stage/floor pairs")
    ap.add_argument("--profile", default="demo", help="--floor: workspace profile")
    ap.add_argument("--arrangements", action="store_true",
                    help="stage 7 with the per_clip vs the sub_batches arrangement (module notes)")
    ap.add_argument("--backgrounds", default=None,
                    help="--arrangements: background ids, comma-separated (default all)")
    ap.add_argument("--encoder-sweep", action="store_true",
                    help="the encoder alone per workers x threads x clips per call (module notes)")
    a = ap.parse_args(argv)
    if a.encoder_sweep:
        from aiplib.core.workspace import workspace  # noqa: PLC0415

        sweep = encoder_sweep(workspace(a.profile, create=False), a.limit, a.repeat, a.model)
        today = min(sweep[TODAY])
        for (workers, threads, per_call), runs in sweep.items():
            print(f"best: {workers} workers x {threads} threads, {per_call} clips per call: "
                  f"{min(runs):.1f} ms/clip, {min(runs) / today:.3f} of today's")
        return 0
    if a.arrangements:
        from aiplib.core.workspace import workspace  # noqa: PLC0415

        ws = workspace(a.profile, create=False)
        bgs = a.backgrounds.split(",") if a.backgrounds else None
        for r in arrangements_paired(ws, bgs, a.limit, a.repeat, a.model):
            print(f"stage-7 loop per_clip {r['new_s']:.1f} s / sub_batches {r['old_s']:.1f} s = "
                  f"{r['ratio']:.3f}; over the floor {r['floor_s']:.1f} s: per_clip {r['new_floor']:.2f}, "
                  f"sub_batches {r['old_floor']:.2f}; identical {r['identical']}/{r['rows']}; "
                  f"{r['stimuli']} stimuli, {r['decodes']} decodes; best single clip: log-mel "
                  f"{r['features_s'] * 1000:.0f} ms, 30 s encode {r['encode_s'] * 1000:.0f} ms "
                  f"({r['cpu_threads']} threads), decode {r['decode_s'] * 1000:.0f} ms/decode "
                  f"(batched); load {' '.join(f'{x:.2f}' for x in r['load'])}", flush=True)
        return 0
    if a.floor:
        from aiplib.core.workspace import workspace  # noqa: PLC0415

        ws = workspace(a.profile, create=False)
        if a.stage:
            for r in stage_vs_floor(ws, a.limit, a.repeat, a.model):
                print(f"stage-7 loop {r['loop_s']:.1f} s / floor {r['floor_s']:.1f} s = {r['ratio']:.3f}  "
                      f"({r['stimuli']} stimuli, {r['decodes']} decodes; encode {r['encode_s'] * 1000:.0f} ms/stim, "
                      f"decode {r['decode_s'] * 1000:.0f} ms/decode)")
        else:
            fl = floor_for_workspace(ws, a.limit, a.model)
            print(f"{a.model} floor on {fl['stimuli']} stimuli ({fl['workers']} workers x {fl['cpu_threads']} "
                  f"threads, sub-batch {fl['sub_batch']}): encode {fl['encode_s'] * 1000:.1f} ms/stimulus, "
                  f"decode {fl['decode_s'] * 1000:.1f} ms/decode")
        return 0
    stims = None if a.source == "fieldkit" else demo_stimuli(a.n)
    src = "demo workspace"
    if stims is None:
        if a.source == "demo":
            sys.exit("no demo manifests: run the demo stages 1-5 first")
        stims, src = fieldkit_stimuli(a.n), "fieldkit"
    fast_opts = {"batch_size": a.batch_size}
    if a.windows is not None:
        fast_opts["windows_s"] = [int(w) for w in a.windows.split(",")]
    if a.min_pad is not None:
        fast_opts["min_pad_s"] = a.min_pad
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
