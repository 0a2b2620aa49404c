"""Benchmark: seconds per stage of ``make all`` (goal: ≤ 15 min in total on 2 cores, demo sizes).

Reads the durations papermill records in each executed notebook
(``data/<profile>/executed/NN_*.ipynb``, ``metadata.papermill.duration``). With ``--run`` it first
runs ``make all`` into a fresh data root (``build/bench-data``), so ``data/`` is left alone.

Progress (issue 13): per stage, the number of ``[progress]`` lines (:mod:`aiplib.progress`) and,
for stage 7, the longest gap between two of them (goal ≤ 30 s). With ``--run`` the make output is
echoed and every line timed as it arrives (gaps measured on the wall clock, from the stage's
``=== stage …`` line to its end); without it the lines are read from ``executed/NN_*.log`` and the
gaps from the ``elapsed`` field of consecutive lines of one loop.

Usage: ``.venv/bin/python benchmarks/bench_make_all.py [--run] [--profile demo]``
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
MARKER = "[progress]"  # aiplib.progress.MARKER (not imported: this script runs before setup too)
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run `make all` first (fresh data root)")
    ap.add_argument("--profile", default="demo")
    ap.add_argument("--data-root", default=None, help="default: data/ (or build/bench-data with --run)")
    args = ap.parse_args(argv)
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
    if not secs:
        print(f"no executed notebooks under {data_root / args.profile / 'executed'}; run with --run")
        return 1
    total = sum(secs.values())
    for stage, s in secs.items():
        print(f"{stage:28s} {s:8.1f} s")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
