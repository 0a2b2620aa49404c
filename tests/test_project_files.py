"""The compendium's own files: notebooks, environment, Makefile contracts."""
import json
from pathlib import Path

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
    # the only allowed difference: binder/ installs the package from its parent folder
    assert json.dumps(root).replace("-e .[", "-e ..[") == json.dumps(binder)
    assert "python=3.11" in root["dependencies"]


def test_torch_pinned_exactly():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"torch==2.13.0"' in text


def test_apt_txt_lists_the_embedded_default_packages():
    apt = (ROOT / "binder" / "apt.txt").read_text().split()
    for pkg in ("ffmpeg", "espeak-ng", "flite", "asterisk-core-sounds-en-g722", "chromium"):
        assert pkg in apt


def test_papermill_parses_every_parameter():
    import re

    import papermill as pm

    for name in STAGES:
        path = ROOT / "notebooks" / f"{name}.ipynb"
        nb = json.loads(path.read_text())
        src = "".join(nb["cells"][1]["source"])
        declared = re.findall(r"^([a-z_]+): [A-Za-z_\[\], ]+ = ", src, flags=re.M)  # list[int], Optional[int]
        assert list(pm.inspect_notebook(str(path))) == declared, name
