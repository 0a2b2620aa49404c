"""Benchmark: seconds per stage of ``make all`` (goal: ≤ 15 min in total on 2 cores, demo sizes).

Reads the durations papermill records in each executed notebook
(``data/<profile>/executed/NN_*.ipynb``, ``metadata.papermill.duration``). With ``--run`` it first
runs ``make all`` into a fresh data root (``build/bench-data``), so ``data/`` is left alone.

Usage: ``.venv/bin/python benchmarks/bench_make_all.py [--run] [--profile demo]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 15 * 60


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
    wall = None
    if args.run:
        t0 = time.perf_counter()
        env = dict(os.environ, AIP_SMOKE="0")
        subprocess.run(["make", "all", f"PROFILE={args.profile}", f"DATA_ROOT={data_root}"], cwd=ROOT,
                       env=env, check=True)
        wall = time.perf_counter() - t0
    secs = stage_seconds(data_root / args.profile / "executed")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
