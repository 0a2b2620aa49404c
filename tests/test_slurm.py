"""Stage 7 on a real one-node Slurm cluster: ``scripts/slurm/stage7.sbatch`` as a job array.

The test installs ``slurm-wlm`` and ``munge`` from Debian when they are missing (they are listed in
scripts/apt-test.txt, so ``make setup`` installs them too), starts ``munged``, ``slurmctld`` and
``slurmd`` for one node on localhost with a generated, cgroup-free configuration in a temporary
folder, and stops them at the end, also on failure. It needs root on a Debian machine (CI) and
skips with one line elsewhere.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
PACKAGES = {"slurm-wlm": ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol"), "munge": ("munged",)}
LIMIT = 24   # stimuli per task (smoke workspace): 24 × 4 tasks = 96 rows
SHARDS = 3
MODEL = "whisper_tiny_en"
TASKS = ("asr", "asr_steer_p5", "kws", "kws_steer_p5")


def _which(prog):
    return shutil.which(prog) or shutil.which(prog, path="/usr/sbin:/usr/bin:/sbin:/bin")


def _skip_reason():
    if sys.platform != "linux" or not hasattr(os, "geteuid"):
        return "the Slurm test needs Linux"
    if os.geteuid() != 0:
        return "the Slurm test needs root (it installs slurm-wlm and munge and starts their daemons)"
    if not Path("/etc/debian_version").is_file() or not _which("apt-get"):
        return "the Slurm test needs a Debian machine with apt-get (slurm-wlm, munge)"
    return None


def _install():
    """apt-get install the missing packages (apt-get update first); prints the time it took."""
    missing = [p for p, progs in PACKAGES.items() if not all(_which(x) for x in progs)]
    if not missing:
        return
    t0 = time.perf_counter()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True, timeout=600)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], check=True, env=env,
                   capture_output=True, timeout=1200)
    print(f"\n[slurm test] installed {' '.join(missing)} in {time.perf_counter() - t0:.1f} s")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mem_mb():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 1024


SLURM_CONF = """\
ClusterName=aiptest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge/munge.socket
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=5
NodeName=aipnode NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=aiptest Nodes=aipnode Default=YES MaxTime=INFINITE State=UP
"""


class Cluster:
    """munged + slurmctld + slurmd of one node, in a temporary folder; ``run`` calls a Slurm command."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="aip-slurm-"))  # short: a Unix socket path has ≤ 107 bytes
        self.procs: list[subprocess.Popen] = []
        d = self.dir
        for sub in ("munge", "state", "spool", "log"):
            (d / sub).mkdir(mode=0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf = d / "slurm.conf"
        self.conf.write_text(SLURM_CONF.format(host=socket.gethostname().split(".")[0], d=d, cpus=os.cpu_count(),
                                               mem=int(_mem_mb() * 0.8), ctld_port=_free_port(), d_port=_free_port()))
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
        self.env["SLURM_CONF"] = str(self.conf)

    def start(self):
        d = self.dir
        self._spawn([_which("munged"), "-F", "-f", "-S", f"{d}/munge/munge.socket", f"--key-file={d}/munge/munge.key",
                     f"--log-file={d}/log/munged.log", f"--pid-file={d}/munge/munged.pid",
                     f"--seed-file={d}/munge/munged.seed"], "munged")
        self._wait(lambda: (d / "munge" / "munge.socket").exists(), "munged socket", 20)
        self._spawn([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)], "slurmctld")
        self._spawn([_which("slurmd"), "-D", "-f", str(self.conf), "-N", "aipnode"], "slurmd")
        self._wait(lambda: self.run("sinfo", "-h", "-o", "%T", check=False).stdout.strip() == "idle",
                   "the node to be idle", 90)

    def _spawn(self, args, name):
        out = open(self.dir / "log" / f"{name}.out", "w")
        self.procs.append(subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                           start_new_session=True))

    def _wait(self, ok, what, timeout):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if ok():
                return
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{dead} exited while waiting for {what}:\n{self.logs()}")
            time.sleep(0.3)
        raise TimeoutError(f"no {what} after {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text()[-1500:] for p in sorted((self.dir / "log").iterdir()))

    def run(self, *args, check=True, **kw):
        return subprocess.run([_which(args[0]), *args[1:]], env={**self.env, **kw.pop("env", {})}, text=True,
                              capture_output=True, check=check, timeout=60, **kw)

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` of every task of ``job_id``: ``{array task id: JobState}``."""
        out = self.run("scontrol", "-o", "show", "job", job_id).stdout
        states = {}
        for line in out.splitlines():
            f = dict(x.split("=", 1) for x in line.split() if "=" in x)
            states[f.get("ArrayTaskId", "")] = f["JobState"]
        return states

    def wait_job(self, job_id: str, timeout=900) -> dict[str, str]:
        self._wait(lambda: not self.run("squeue", "-h", "-j", job_id, check=False).stdout.strip(),
                   f"end of job {job_id}", timeout)
        return self.job(job_id)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def cluster():
    why = _skip_reason()
    if why:
        pytest.skip(why)
    _install()
    c = Cluster()
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _workspace(smoke_demo_root, root):
    """A copy of the smoke workspace's stages 1–6 (no stage-7 rows)."""
    shutil.copytree(smoke_demo_root, root, ignore=shutil.ignore_patterns("inference", "results"))
    return root / "demo" / "inference" / MODEL


def _rows(model_dir) -> dict:
    """{task: sorted [(id, raw, stim_key)]} of the main files; every line counted (duplicates too)."""
    out = {}
    for t in TASKS:
        lines = (model_dir / f"{t}.jsonl").read_text().splitlines()
        out[t] = sorted((r["id"], r["raw"], r["stim_key"]) for r in map(json.loads, lines))
    return out


def _lines(path) -> int:
    return len([x for x in path.read_text().splitlines() if x.endswith("}")]) if path.is_file() else 0


def _make(args, root):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(AIP_SMOKE="1")
    env.pop("MAKEFLAGS", None)
    out = subprocess.run(["make", "--no-print-directory", *args, f"DATA_ROOT={root}"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    return out


def test_stage7_job_array_on_slurm_merges_to_the_unsharded_rows_and_a_cancelled_task_resumes(
        cluster, smoke_demo_root, tmp_path):
    t_start = time.perf_counter()
    params = f"PARAMS=-p limit {LIMIT}"
    jobs: list[str] = []
    try:
        _run_the_arrays(cluster, smoke_demo_root, tmp_path, params, jobs)
    finally:  # the job logs this test wrote into the clone's logs/ folder
        for j in jobs:
            for p in (REPO / "logs").glob(f"aip-stage7-{j}_*.out"):
                p.unlink()
    print(f"\n[slurm test] {time.perf_counter() - t_start:.1f} s (array of {SHARDS} tasks, {LIMIT} stimuli per task, "
          f"cancel + resume)")


def _run_the_arrays(cluster, smoke_demo_root, tmp_path, params, jobs):
    # the reference: stage 7 unsharded, with make
    ref_dir = _workspace(smoke_demo_root, tmp_path / "ref")
    _make(["07", f"MODEL={MODEL}", params], tmp_path / "ref")
    expected = _rows(ref_dir)
    assert {t: len(v) for t, v in expected.items()} == {t: LIMIT for t in TASKS}

    def submit(root, array, *more):
        # submitted from another folder with --chdir=<clone>; the sbatch file's GPU and memory requests
        # are overridden for this CPU node, as on any CPU-only cluster
        job_id = cluster.run("sbatch", "--parsable", f"--array={array}", "--gres=none", "--cpus-per-task=1",
                           "--mem=1G", f"--chdir={REPO}",
                           f"--export=ALL,PROFILE=demo,MODEL={MODEL},DATA_ROOT={root},AIP_SMOKE=1,{params}" + "".join(
                               f",{m}" for m in more),
                           str(REPO / "scripts" / "slurm" / "stage7.sbatch"), cwd=tmp_path).stdout.strip().split(";")[0]
        jobs.append(job_id)
        return job_id

    # 1. an array of 3 tasks, then make merge: exactly the unsharded rows
    arr_dir = _workspace(smoke_demo_root, tmp_path / "arr")
    job = submit(tmp_path / "arr", f"0-{SHARDS - 1}")
    states = cluster.wait_job(job)
    logs = {p.name: p.read_text() for p in (REPO / "logs").glob(f"aip-stage7-{job}_*.out")}
    assert states == {str(i): "COMPLETED" for i in range(SHARDS)}, (states, logs, cluster.logs())
    assert sorted(logs) == [f"aip-stage7-{job}_{i}.out" for i in range(SHARDS)]
    for i in range(SHARDS):  # SLURM_ARRAY_TASK_ID / _COUNT arrived: task i ran shard i of 3
        assert f"shard {i}/{SHARDS} of stage 7 · profile demo · model {MODEL}" in logs[f"aip-stage7-{job}_{i}.out"]
    n_shard = {i: sum(_lines(arr_dir / f"{t}.shard-{i}-of-{SHARDS}.jsonl") for t in TASKS) for i in range(SHARDS)}
    assert sum(n_shard.values()) == LIMIT * len(TASKS) and all(n_shard.values())
    _make(["merge"], tmp_path / "arr")
    assert _rows(arr_dir) == expected

    # 2. task 1 is cancelled mid-run (scancel, once its first rows are written), then resubmitted alone
    can_dir = _workspace(smoke_demo_root, tmp_path / "can")
    job = submit(tmp_path / "can", f"0-{SHARDS - 1}")
    first = can_dir / f"asr.shard-1-of-{SHARDS}.jsonl"
    cluster._wait(lambda: _lines(first) > 0 or not cluster.run("squeue", "-h", "-j", f"{job}_1", check=False).stdout.strip(),
                  "the first rows of task 1", 600)
    cluster.run("scancel", f"{job}_1")
    states = cluster.wait_job(job)
    assert states["1"] == "CANCELLED" and states["0"] == states["2"] == "COMPLETED", states
    kept = sum(_lines(can_dir / f"{t}.shard-1-of-{SHARDS}.jsonl") for t in TASKS)
    assert 0 < kept < n_shard[1], (kept, n_shard[1])  # cancelled mid-run: some rows, not all
    again = submit(tmp_path / "can", "1", f"SHARDS={SHARDS}")
    assert cluster.wait_job(again) == {"1": "COMPLETED"}, cluster.logs()
    # resumed: the shard's files hold each of its rows once (nothing re-decoded, nothing lost)
    assert sum(_lines(can_dir / f"{t}.shard-1-of-{SHARDS}.jsonl") for t in TASKS) == n_shard[1]
    run = [json.loads(x) for x in (can_dir / f"run_log.shard-1-of-{SHARDS}.jsonl").read_text().splitlines()][-1]
    assert run["event"] == "run" and run["shard"] == f"1/{SHARDS}"
    assert sum(s["n_run"] for s in run["tasks"].values()) == n_shard[1] - kept
    _make(["merge"], tmp_path / "can")
    assert _rows(can_dir) == expected
    # a lone index without SHARDS is refused with one line (it would otherwise run shard 0 of 1)
    bad = submit(tmp_path / "can", "2")
    assert cluster.wait_job(bad) == {"2": "FAILED"}
    assert "give the shard count: --export=ALL,SHARDS=<n>" in (REPO / "logs" / f"aip-stage7-{bad}_2.out").read_text()
