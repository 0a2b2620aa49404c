"""aiplib.core.progress: tqdm's meter as plain lines (at most one per interval, final N/N), a tqdm bar otherwise."""
import io
import os
import re
import subprocess
import sys
import time

import pytest
from tqdm.std import tqdm

from aiplib.core import progress
from aiplib.core.progress import MARKER, Progress, note, track

METER = re.compile(r"^\[progress\] (?P<label>.+?): +(?P<pct>\d+)%\|[# 0-9]{10}\| (?P<n>\d+)/(?P<total>\d+) "
                   r"\[(?P<elapsed>\d\d:\d\d)<(?P<eta>\?|\d\d:\d\d), +(?P<rate>\?|[0-9.]+)(?P<unit>\w+)/s\]$")


class TimedStream(io.StringIO):
    def __init__(self):
        super().__init__()
        self.times = []

    def write(self, s):
        self.times.append(time.monotonic())
        return super().write(s)


def test_plain_lines_at_most_every_interval_and_final_line_is_n_of_n():
    out = TimedStream()
    p = Progress(120, "whisper_tiny_en · asr+asr_steer_p5", unit="stim", plain=True, interval=0.1, stream=out)
    for _ in range(120):  # one stimulus every 7 ms: 0.84 s in all
        time.sleep(0.007)
        p.update(1)
    p.close()
    lines = out.getvalue().splitlines()
    assert lines == p.lines and all(x.startswith(MARKER + " ") for x in lines)
    assert lines[0] == "[progress] whisper_tiny_en · asr+asr_steer_p5:   0%|          | 0/120 [00:00<?, ?stim/s]"
    gaps = [b - a for a, b in zip(out.times[:-1], out.times[1:-1])]  # the final line comes at close
    assert len(gaps) >= 3 and all(g >= 0.1 - 0.01 for g in gaps)
    meters = [METER.match(x) for x in lines]
    assert all(meters) and {m["label"] for m in meters} == {"whisper_tiny_en · asr+asr_steer_p5"}
    assert {m["unit"] for m in meters} == {"stim"} and {m["total"] for m in meters} == {"120"}
    middle = meters[1]  # count, share, ETA and rate of a running loop
    assert 0 < int(middle["n"]) < 120 and middle["eta"] != "?" and middle["rate"] != "?"
    assert int(middle["pct"]) == round(100 * int(middle["n"]) / 120)
    assert (meters[-1]["n"], meters[-1]["pct"]) == ("120", "100")
    p.close()  # idempotent
    assert len(p.lines) == len(lines)


def test_interrupted_loop_shows_where_it_stopped_and_track_counts_items():
    out = io.StringIO()
    seen = []
    for x in track(range(5), "descriptors", unit="bg", plain=True, stream=out):
        seen.append(x)
        if x == 2:
            break
    lines = out.getvalue().splitlines()
    assert seen == [0, 1, 2]
    # 2 items counted (the third was being worked on when the loop was left)
    assert lines[0] == "[progress] descriptors:   0%|          | 0/5 [00:00<?, ?bg/s]"
    assert METER.match(lines[-1])["n"] == "2" and " 2/5 [" in lines[-1]


def test_disabled_and_env_selection(monkeypatch):
    out = io.StringIO()
    p = Progress(3, "x", enabled=False, plain=True, stream=out)
    p.update(3)
    p.close()
    assert out.getvalue() == "" and p.done == 3
    monkeypatch.setenv("AIP_PLAIN_PROGRESS", "1")
    assert progress.plain_mode() and Progress(1, "x", stream=out).plain
    monkeypatch.setenv("AIP_PLAIN_PROGRESS", "0")
    assert not progress.plain_mode()
    # tqdm reads TQDM_MININTERVAL when it is imported (scripts/run_stage.sh sets it for make)
    code = "from aiplib.core.progress import Progress; p = Progress(1, 'x', plain=True); print(p.bar.mininterval)"
    got = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, TQDM_MININTERVAL="2.5"),
                         capture_output=True, text=True, check=True).stdout
    assert got == "2.5\n"


def test_bar_mode_uses_tqdm_and_writes_no_plain_line(capsys):
    p = Progress(4, "bar test", unit="stim", plain=False)
    p.update(4)
    p.close()
    err = capsys.readouterr().err
    assert MARKER not in err and "4/4" in err and p.lines == []


def test_note_and_duration_format(capsys):
    assert note("m · throughput", plain=True) == "[progress] m · throughput"
    assert capsys.readouterr().err == "[progress] m · throughput\n"
    note("m · throughput", plain=False)
    assert capsys.readouterr().out == "[progress] m · throughput\n"
    assert [tqdm.format_interval(x) for x in (9.6, 125, 3723.4)] == ["00:09", "02:05", "1:02:03"]


@pytest.mark.parametrize("total", [0])
def test_empty_loop_final_line(total):
    out = io.StringIO()
    with Progress(total, "nothing", plain=True, stream=out):
        pass
    assert out.getvalue().splitlines()[-1] == "[progress] nothing: 0it [00:00, ?it/s]"


def _bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_make_all.py"
    spec = importlib.util.spec_from_file_location("bench_make_all", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_counts_progress_lines_per_stage_and_longest_gap(tmp_path):
    b = _bench()
    timed = [(0.0, "=== stage 06_manipulation_checks (profile demo) ==="),
             (1.0, "[progress] background presence · asr · 0/5 stim · start"),
             (2.0, "[progress] background presence · asr · 5/5 stim (100.0%) · 2.5 stim/s · elapsed 1s · done"),
             (3.0, "=== stage 07_run_inference (profile demo) ==="),
             (9.0, "[progress] whisper_tiny_en · asr+asr_steer_p5 · 0/9 stim · start"),
             (19.5, "[progress] whisper_tiny_en · asr+asr_steer_p5 · 4/9 stim (44.4%) · 0.381 stim/s · elapsed 11s · ETA 13s"),
             (45.0, "[progress] whisper_tiny_en · asr+asr_steer_p5 · 9/9 stim (100.0%) · 0.25 stim/s · elapsed 36s · done"),
             (47.0, "some other line")]
    st = b.parse_make_output(timed)
    assert {k: len(v["progress"]) for k, v in st.items()} == {"06_manipulation_checks": 2, "07_run_inference": 3}
    v = st["07_run_inference"]
    assert (v["start"], v["end"]) == (3.0, 47.0)
    assert b.longest_gap(v["progress"]) == pytest.approx(25.5)
    assert b.longest_gap(v["progress"], v["start"], v["end"]) == pytest.approx(25.5)
    assert b.longest_gap([], 0, 1) is None
    ex = tmp_path / "executed"
    ex.mkdir()
    (ex / "07_run_inference.log").write_text("\n".join(line for _, line in timed[4:7]) + "\n")
    assert b.progress_from_logs(ex) == {"07_run_inference": {"n": 3, "max_gap_s": 25.0}}


def test_heartbeat_writes_lines_while_a_slow_step_runs():
    out = io.StringIO()
    with Progress(2, "slow", unit="stim", plain=True, interval=0.2, stream=out) as p:
        time.sleep(0.75)  # one slow step, no update: the heartbeat shows the loop is alive
        n_beats = len(p.lines) - 1
        p.update(2)
    lines = out.getvalue().splitlines()
    assert 2 <= n_beats <= 4 and all(" 0/2 [" in x and "stim/s]" in x for x in lines[1:1 + n_beats])
    assert lines[-1].startswith("[progress] slow: 100%|##########| 2/2 [")
    assert not p._thread.is_alive()


def test_bench_stage7_ratio_to_its_floor_from_run_logs(tmp_path, capsys):
    """--from-log: run events summed (a resumed stage has two), other events and a half line
    ignored; ratio = stage seconds / (stimuli × encode_s + decodes × decode_s)."""
    import json

    b = _bench()
    d = tmp_path / "inference" / "whisper_tiny_en"
    d.mkdir(parents=True)
    ev = [{"event": "run", "model": "whisper_tiny_en", "throughput": {"stimuli": 3000, "decodes": 6000, "seconds": 900.0}},
          {"event": "up_to_date", "model": "whisper_tiny_en"},
          {"event": "run", "model": "whisper_tiny_en", "throughput": {"stimuli": 538, "decodes": 1076, "seconds": 160.0}}]
    (d / "run_log.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev) + '{"event": "ru')
    work = b.stage7_work(tmp_path / "inference")
    assert (work["stimuli"], work["decodes"], work["loop_s"]) == (3538, 7076, 1060.0)
    assert work["models"]["whisper_tiny_en"]["runs"] == 2
    floor = {"encode_s": 0.2, "decode_s": 0.02, "stimuli": 200, "workers": 2, "cpu_threads": 1}
    r = b.report_floor(1100.0, work, floor, 1400.0, "sum of the notebooks")
    fs = 3538 * 0.2 + 7076 * 0.02  # 849.12 s
    assert r["floor_s"] == pytest.approx(fs, abs=1e-3)
    assert r["ratio"] == pytest.approx(1100.0 / fs, abs=1e-3) and r["loop_ratio"] == pytest.approx(1060.0 / fs, abs=1e-3)
    assert r["met"] is True  # 1.295 <= 1.3
    out = capsys.readouterr().out
    assert "stage 7 / floor: 1.30 (1100.0 s / 849.1 s" in out and "goal <= 1.3: met" in out
    assert "make all after setup: 1400.0 s (sum of the notebooks); moonshot <= 600 s: NOT met by 800 s" in out


def test_bench_stage7_work_counts_the_condition_families(tmp_path):
    """A SUITE= run: the families' run logs (inference/<family>/<model>/) add to stage 7's work."""
    import json

    b = _bench()
    for sub, n in (("whisper_tiny_en", 3538), ("channel/whisper_tiny_en", 1160)):
        d = tmp_path / "inference" / sub
        d.mkdir(parents=True)
        (d / "run_log.jsonl").write_text(json.dumps(
            {"event": "run", "model": "whisper_tiny_en", "throughput": {"stimuli": n, "decodes": 2 * n,
                                                                       "seconds": n / 2}}) + "\n")
    work = b.stage7_work(tmp_path / "inference")
    assert (work["stimuli"], work["decodes"], work["loop_s"]) == (4698, 9396, 2349.0)
    assert work["models"]["whisper_tiny_en"]["runs"] == 2
