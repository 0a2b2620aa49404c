"""Benchmark: seconds per stage of ``make all`` (goal: ≤ 15 min in total on 2 cores, demo sizes).

Reads the durations papermill records in each executed notebook
(``data/<profile>/executed/NN_*.ipynb``, ``metadata.papermill.duration``). With ``--run`` it first
runs ``make all`` into a fresh data root (``build/bench-data``), so ``data/`` is left alone.

Progress (issue 13): per stage, the number of ``[progress]`` lines (:mod:`aiplib.core.progress`) and,
for stage 7, the longest gap between two of them (goal ≤ 30 s). With ``--run`` the make output is
echoed and every line timed as it arrives (gaps measured on the wall clock, from the stage's
``=== stage …`` line to its end); without it the lines are read from ``executed/NN_*.log`` and the
gaps from the ``elapsed`` field of consecutive lines of one loop.

Stage 7 against its floor (issue 13): the floor is measured by ``benchmarks/bench_inference.py``
(:func:`bench_inference.floor_for_workspace`: encoder-only s per stimulus and decoder-only s per
decode of the demo model, loaded as stage 7 loads it, on the first ``--floor-limit`` rows per
family) right after ``make all`` in the same invocation, so both see the same machine; stage 7's
stimuli and decodes come from the ``run`` events of ``inference/<model>/run_log.jsonl``
(``throughput``). Printed: stage 7's seconds / floor (goal <= 1.3; the notebook's papermill
duration, and the decoding loop alone) and ``make all``'s seconds after setup (from the first
``=== stage`` line to the end; without ``--run`` the sum of the notebooks' durations) against the
600 s moonshot. ``--from-log`` computes the same from an existing run's records (no ``make``): the
floor is measured now, on this machine, unless ``--floor-json`` gives a saved one.

Usage: ``.venv/bin/python benchmarks/bench_make_all.py [--run | --from-log] [--profile demo]
[--data-root DIR] [--floor-limit 100] [--floor-json FILE] [--json OUT]``
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 15 * 60
MOONSHOT_S = 600.0
"""``make all`` after setup on 2 cores, s (issue 13's moonshot)."""
FLOOR_RATIO_GOAL = 1.3
"""Stage 7's seconds / its measured floor (issue 13)."""
MARKER = "[progress]"  # aiplib.core.progress.MARKER (not imported: this script runs before setup too)
GAP_GOAL_S = 30.0
INFERENCE_STAGE = "07_run_inference"
_STAGE_RE = re.compile(r"^=== stage (\S+) ")
_ELAPSED_RE = re.compile(r" · elapsed (?:(\d+)h)?(?:(\d+)m)?(\d+)s")


def parse_make_output(timed_lines) -> dict[str, dict]:
    """Progress lines per stage from ``make all`` output.

    Parameters
    ----------
    timed_lines : iterable of (float, str)
        (arrival time in s, line) in order; a stage starts at its ``=== stage NN_name (…) ===``
        line (printed by ``scripts/run_stage.sh``) and ends at the next one or the last line.

    Returns
    -------
    dict
        ``{stage: {"start": s, "end": s, "progress": [times of its [progress] lines]}}``.
    """
    stages: dict[str, dict] = {}
    cur, last_t = None, None
    for t, line in timed_lines:
        last_t = t
        m = _STAGE_RE.match(line)
        if m:
            if cur is not None:
                stages[cur]["end"] = t
            cur = m.group(1)
            stages[cur] = {"start": t, "end": t, "progress": []}
        elif cur is not None and MARKER in line:
            stages[cur]["progress"].append(t)
    if cur is not None and last_t is not None:
        stages[cur]["end"] = last_t
    return stages


def longest_gap(times, start=None, end=None) -> float | None:
    """Longest interval (s) between consecutive ``times``, also counting ``start`` → first and
    last → ``end`` when given; None without any progress line."""
    if not times:
        return None
    pts = ([start] if start is not None else []) + list(times) + ([end] if end is not None else [])
    return max((b - a for a, b in zip(pts, pts[1:])), default=0.0)


def _elapsed_s(line: str) -> float | None:
    m = _ELAPSED_RE.search(line)
    if not m:
        return None
    h, mi, s = (int(x) if x else 0 for x in m.groups())
    return 3600 * h + 60 * mi + s


def progress_from_logs(executed: Path) -> dict[str, dict]:
    """Per stage, from ``executed/NN_*.log``: ``{"n": lines, "max_gap_s": longest gap between
    consecutive lines of one loop (from their ``elapsed`` field, 1 s resolution) or None}``."""
    out = {}
    for log in sorted(executed.glob("[0-9][0-9]_*.log")):
        lines = [x for x in log.read_text(errors="replace").replace("\r", "\n").splitlines() if MARKER in x]
        gaps, prev_label, prev_el = [], None, None
        for x in lines:
            label = x.split(" · ")[0:2]
            el = 0.0 if x.endswith(" · start") else _elapsed_s(x)
            if el is not None and label == prev_label and prev_el is not None:
                gaps.append(el - prev_el)
            prev_label, prev_el = label, el
        out[log.stem] = {"n": len(lines), "max_gap_s": max(gaps) if gaps else None}
    return out


def run_make_timed(cmd, cwd, env) -> tuple[int, list[tuple[float, str]]]:
    """Run ``cmd`` with stdout and stderr merged, echo each line, return (status, timed lines)."""
    t0 = time.perf_counter()
    timed = []
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for raw in proc.stdout:
        t = time.perf_counter() - t0
        sys.stdout.buffer.write(raw)
        sys.stdout.flush()
        for part in raw.decode("utf-8", errors="replace").replace("\r", "\n").splitlines():
            if part.strip():
                timed.append((t, part))
    return proc.wait(), timed


def stage_seconds(executed: Path) -> dict[str, float]:
    """{stage: seconds} from papermill's metadata of the executed notebooks in ``executed``."""
    out = {}
    for nb in sorted(executed.glob("[0-9][0-9]_*.ipynb")):
        if "." in nb.stem:  # NN_stage.failed / .running copies
            continue
        meta = json.loads(nb.read_text()).get("metadata", {}).get("papermill", {})
        if meta.get("duration") is not None:
            out[nb.stem] = float(meta["duration"])
    return out


def stage7_work(inference_dir: Path) -> dict:
    """Stage 7's work and time from ``inference/<model>/run_log.jsonl`` (and shard logs), and from
    ``inference/<family>/<model>/run_log.jsonl`` of the condition families a ``SUITE=`` run decoded
    (stage 7's notebook time covers every family of the suite).

    Every ``run`` event is counted (a resumed stage has several; ``up_to_date`` and
    ``load_failed`` events decode nothing). Returns ``{"stimuli", "decodes", "loop_s",
    "models": {model: {...}}}``: stimuli encoded, (stimulus, prompt) decodes and the seconds of
    the decoding loops (``throughput.seconds``), summed.
    """
    models: dict[str, dict] = {}
    logs = list(Path(inference_dir).glob("*/run_log*.jsonl")) + list(Path(inference_dir).glob("*/*/run_log*.jsonl"))
    for log in sorted(logs):
        for line in log.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a half line left by a kill
            tp = ev.get("throughput") if ev.get("event") == "run" else None
            if not tp:
                continue
            m = models.setdefault(ev.get("model", log.parent.name), {"stimuli": 0, "decodes": 0, "loop_s": 0.0,
                                                                      "runs": 0})
            m["stimuli"] += int(tp.get("stimuli") or 0)
            m["decodes"] += int(tp.get("decodes") or 0)
            m["loop_s"] += float(tp.get("seconds") or 0.0)
            m["runs"] += 1
    tot = {k: sum(m[k] for m in models.values()) for k in ("stimuli", "decodes", "loop_s")}
    return {**tot, "models": models}


def floor_ratio(stage_s: float, loop_s: float, work: dict, floor: dict) -> dict:
    """Stage 7 against its floor: ``floor_s = stimuli * encode_s + decodes * decode_s``
    (``bench_inference.floor_seconds``), ``ratio = stage_s / floor_s``, ``loop_ratio = loop_s /
    floor_s``; ``met`` when ``ratio <= FLOOR_RATIO_GOAL``."""
    fs = work["stimuli"] * floor["encode_s"] + work["decodes"] * floor["decode_s"]
    ratio = stage_s / fs if fs > 0 else float("nan")
    return {"floor_s": round(fs, 3), "stage_s": round(stage_s, 3), "loop_s": round(loop_s, 3),
            "ratio": round(ratio, 3), "loop_ratio": round(loop_s / fs, 3) if fs > 0 else None,
            "goal": FLOOR_RATIO_GOAL, "met": bool(ratio <= FLOOR_RATIO_GOAL)}


def measure_floor(data_root: Path, profile: str, limit: int) -> dict:
    """``bench_inference.floor_for_workspace`` on the workspace ``data_root/profile``."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(ROOT))
    import bench_inference  # noqa: PLC0415
    from aiplib.core.workspace import workspace  # noqa: PLC0415

    return bench_inference.floor_for_workspace(workspace(profile, data_root=data_root, create=False), limit)


def report_floor(stage_s: float, work: dict, floor: dict, after_setup_s: float | None, how: str) -> dict:
    """Print stage 7's ratio to its floor and ``make all`` after setup vs the moonshot; the record."""
    r = floor_ratio(stage_s, work["loop_s"], work, floor)
    print()
    print(f"stage 7 floor ({floor.get('model', '?')}, measured on {floor['stimuli']} stimuli, {floor['workers']} "
          f"workers x {floor['cpu_threads']} threads): encode {floor['encode_s'] * 1000:.1f} ms/stimulus, "
          f"decode {floor['decode_s'] * 1000:.1f} ms/decode")
    print(f"stage 7: {work['stimuli']} stimuli, {work['decodes']} decodes -> floor {r['floor_s']:.1f} s")
    verdict = "met" if r["met"] else f"NOT met by {r['ratio'] - FLOOR_RATIO_GOAL:.2f}"
    fs = max(r["floor_s"], 1e-9)
    print(f"stage 7 / floor: {stage_s / fs:.2f} ({stage_s:.1f} s / {r['floor_s']:.1f} s; decoding loop alone "
          f"{work['loop_s'] / fs:.2f}); goal <= {FLOOR_RATIO_GOAL}: {verdict}")
    if after_setup_s is not None:
        v = "met" if after_setup_s <= MOONSHOT_S else f"NOT met by {after_setup_s - MOONSHOT_S:.0f} s"
        print(f"make all after setup: {after_setup_s:.1f} s ({how}); moonshot <= {MOONSHOT_S:.0f} s: {v} "
              f"(ratio {after_setup_s / MOONSHOT_S:.2f})")
    return {**r, "floor": floor, "work": work, "after_setup_s": after_setup_s, "after_setup_how": how,
            "moonshot_s": MOONSHOT_S,
            "moonshot_ratio": round(after_setup_s / MOONSHOT_S, 3) if after_setup_s is not None else None}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run `make all` first (fresh data root)")
    ap.add_argument("--profile", default="demo")
    ap.add_argument("--data-root", default=None, help="default: data/ (or build/bench-data with --run)")
    ap.add_argument("--from-log", action="store_true",
                    help="stage 7's ratio to its floor from an existing run's records (no make)")
    ap.add_argument("--floor-limit", type=int, default=100, help="floor: manifest rows per family")
    ap.add_argument("--floor-json", default=None, help="a saved floor (JSON of measure_floor) instead of measuring")
    ap.add_argument("--no-floor", action="store_true", help="skip the floor measurement")
    ap.add_argument("--json", default=None, help="write the numbers to this JSON file")
    args = ap.parse_args(argv)
    if args.run and args.from_log:
        ap.error("--run and --from-log exclude each other")
    data_root = Path(args.data_root or (ROOT / "build" / "bench-data" if args.run else ROOT / "data"))
    wall, timed = None, None
    executed = data_root / args.profile / "executed"
    if args.run:
        t0 = time.perf_counter()
        env = dict(os.environ, AIP_SMOKE="0")
        status, timed = run_make_timed(["make", "all", f"PROFILE={args.profile}", f"DATA_ROOT={data_root}"],
                                       ROOT, env)
        wall = time.perf_counter() - t0
        if status != 0:
            print(f"make all failed (status {status})")
            return status
    secs = stage_seconds(executed)
    if not secs and not args.from_log:
        print(f"no executed notebooks under {data_root / args.profile / 'executed'}; run with --run")
        return 1
    total = sum(secs.values())
    for stage, s in secs.items():
        print(f"{stage:28s} {s:8.1f} s")
    if secs:
        print(f"{'total (notebooks)':28s} {total:8.1f} s   = {total / 60:.1f} min; goal <= 15 min: "
              f"ratio {total / GOAL_S:.2f}")
    if wall is not None:
        print(f"{'make all (wall, incl. setup)':28s} {wall:8.1f} s")
    print()
    print(f"{'progress lines':28s} {'count':>8s} {'longest gap':>12s}")
    if timed is not None:
        stages = parse_make_output(timed)
        rows = {st: (len(v["progress"]), longest_gap(v["progress"], v["start"], v["end"]))
                for st, v in stages.items()}
        how = "wall clock, stage start and end included"
    else:
        rows = {st: (v["n"], v["max_gap_s"]) for st, v in progress_from_logs(executed).items()}
        how = "from the lines' elapsed field, within one loop"
    for st, (n, gap) in rows.items():
        print(f"{st:28s} {n:8d} {'' if gap is None else f'{gap:10.1f} s':>12s}")
    if INFERENCE_STAGE in rows:
        n, gap = rows[INFERENCE_STAGE]
        verdict = "no progress line" if gap is None else ("met" if gap <= GAP_GOAL_S else
                                                          f"NOT met by {gap - GAP_GOAL_S:.1f} s")
        gap_txt = "-" if gap is None else f"{gap:.1f} s"
        print(f"stage 7 longest gap between progress lines: {gap_txt} ({how}); "
              f"goal <= {GAP_GOAL_S:.0f} s: {verdict}")
    src = [line for _, line in timed] if timed is not None else (
        (executed / f"{INFERENCE_STAGE}.log").read_text(errors="replace").splitlines()
        if (executed / f"{INFERENCE_STAGE}.log").is_file() else [])
    for line in src:
        if MARKER in line and " · throughput · " in line:
            print(line[line.index(MARKER):])
    record = {"stages_s": secs, "make_all_wall_s": wall}
    if timed is not None:
        starts = [st["start"] for st in parse_make_output(timed).values()]
        after, after_how = ((timed[-1][0] - min(starts), "wall clock from the first stage") if starts
                            else (None, ""))
    else:
        after, after_how = (total, "sum of the notebooks") if secs else (None, "")
    work = stage7_work(data_root / args.profile / "inference")
    if not args.no_floor and work["stimuli"]:
        floor = (json.loads(Path(args.floor_json).read_text()) if args.floor_json
                 else measure_floor(data_root, args.profile, args.floor_limit))
        stage_s = secs.get(INFERENCE_STAGE, work["loop_s"])
        record.update(report_floor(stage_s, work, floor, after, after_how))
    elif after is not None:
        v = "met" if after <= MOONSHOT_S else f"NOT met by {after - MOONSHOT_S:.0f} s"
        print(f"make all after setup: {after:.1f} s ({after_how}); moonshot <= {MOONSHOT_S:.0f} s: {v} "
              f"(ratio {after / MOONSHOT_S:.2f})")
        record.update(after_setup_s=after, after_setup_how=after_how, moonshot_s=MOONSHOT_S,
                      moonshot_ratio=round(after / MOONSHOT_S, 3))
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
