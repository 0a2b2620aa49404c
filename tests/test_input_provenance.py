"""What a result depends on (issue 33, item 2): the numeric path of every model run and the Debian
packages the demo's inputs come from, recorded by stages 1 and 7 and shown by stage 9."""
from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

from aiplib.analysis import provenance
from aiplib.analysis.report_tables import provenance_lines
from aiplib.core.workspace import Workspace
from aiplib.inference.models import ct2_numerics
from aiplib.io.audio import SR, write_wav
from aiplib.sources.corpora import debian, demo
from aiplib.sources.corpora.asterisk_langs import table_packages

HAS_DPKG = shutil.which("dpkg-query") is not None
needs_dpkg = pytest.mark.skipif(not HAS_DPKG, reason="not a Debian system (no dpkg-query)")


def _dpkg_version(pkg: str) -> str:
    done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                          text=True, timeout=60, check=False)
    return done.stdout


def _apt_cache_sha256(pkg: str, version: str) -> str:
    done = subprocess.run(["apt-cache", "show", f"{pkg}={version}"], capture_output=True,
                          text=True, timeout=60, check=False)
    found = re.search(r"^SHA256: ([0-9a-f]{64})$", done.stdout, flags=re.M)
    if found is None:
        return ""
    return found.group(1)


# ------------------------------------------------------------------------- Debian packages
@pytest.mark.slow
@needs_dpkg
def test_package_record_is_dpkg_version_and_apt_cache_sha256():
    if not _dpkg_version("espeak-ng"):
        pytest.skip("espeak-ng is not installed")
    (rec,) = debian.package_records({"espeak-ng": "engine"})
    assert rec["status"] == "installed" and rec["role"] == "engine"
    assert rec["version"] == _dpkg_version("espeak-ng")
    assert re.fullmatch(r"[0-9a-f]{64}", rec["deb_sha256"])
    listed = _apt_cache_sha256("espeak-ng", rec["version"])
    if listed:
        assert rec["deb_sha256"] == listed and rec["sha256_source"] == "apt-cache show"
    else:
        assert rec["sha256_source"].startswith("/var/cache/apt/archives/")


@needs_dpkg
def test_same_source_closure_reaches_engine_libraries_only():
    if not (_dpkg_version("espeak-ng") and _dpkg_version("flite")):
        pytest.skip("espeak-ng or flite is not installed")
    found = debian.same_source_closure(["espeak-ng", "flite"])
    assert found["espeak-ng-data"] == "espeak-ng" and found["libespeak-ng1"] == "espeak-ng"
    assert found["libflite1"] == "flite"
    assert "libc6" not in found     # another source package


@needs_dpkg
def test_uninstalled_package_and_cached_deb(tmp_path, monkeypatch):
    (rec,) = debian.package_records({"no-such-package-aiplib-test": "x"})
    assert rec["status"] == "not installed" and rec["version"] == "" and rec["deb_sha256"] == ""
    deb = tmp_path / debian.deb_file_name("tool", "7:1.0-1", "amd64")
    assert deb.name == "tool_7%3a1.0-1_amd64.deb"
    deb.write_bytes(b"not really a deb")
    monkeypatch.setattr(debian, "APT_ARCHIVES", tmp_path)
    digest, where = debian.deb_sha256("tool", "7:1.0-1", "amd64")
    assert where == str(deb) and len(digest) == 64
    digest, where = debian.deb_sha256("tool", "2.0", "amd64", problem="no apt-cache")
    assert digest == "" and where.startswith("unknown (no apt-cache; no tool_2.0_amd64.deb")


def test_without_dpkg_every_package_is_unknown_not_an_error(monkeypatch, tmp_path):
    real_which = shutil.which

    def no_debian_tools(name, *args, **kwargs):
        if name in ("dpkg-query", "apt-cache"):
            return None
        return real_which(name, *args, **kwargs)

    monkeypatch.setattr(debian.shutil, "which", no_debian_tools)
    rows = debian.package_records({"espeak-ng": "engine", "flite": "engine"})
    assert [r["version"] for r in rows] == ["unknown (no dpkg)"] * 2
    assert {r["sha256_source"] for r in rows} == {"unknown (no dpkg)"}
    assert debian.same_source_closure(["espeak-ng"]) == {}
    ws = Workspace(profile="demo", root=tmp_path / "demo").ensure()
    table = demo.record_debian_packages(ws)
    assert list(table["package"]) == demo.DEBIAN_PACKAGES
    assert set(table["status"]) == {"unknown (no dpkg)"}


def test_distractor_table_packages_and_demo_roles(tmp_path, monkeypatch):
    table = pd.DataFrame({"language": ["fr", "fr", "es", "xx"],
                          "source": ["asterisk-core-sounds-fr-g722"] * 2
                          + ["asterisk-core-sounds-es-wav", "custom/distractors"]})
    assert table_packages(table) == ["asterisk-core-sounds-fr", "asterisk-core-sounds-fr-g722",
                                     "asterisk-core-sounds-es", "asterisk-core-sounds-es-wav"]
    ws = Workspace(profile="demo", root=tmp_path / "demo").ensure()
    pd.DataFrame({"file": ["raw/minetest-data/a.ogg"], "package": ["minetest-data"]}).to_csv(
        ws.raw / "inventory.csv", index=False)
    monkeypatch.setattr(demo, "read_distractor_table", lambda path: table)
    ws.distractors_csv.parent.mkdir(parents=True, exist_ok=True)
    ws.distractors_csv.write_text("stands in\n")
    monkeypatch.setattr(debian, "same_source_closure", lambda pkgs: {"libflite1": "flite"})
    roles = demo.input_packages(ws)
    assert list(roles)[0] == "minetest-data" and "inventory" in roles["minetest-data"]
    assert "DEBIAN_PACKAGES" in roles["espeak-ng"]
    assert "distractors" in roles["asterisk-core-sounds-fr-g722"]
    assert roles["libflite1"] == "library or data of flite (same source package)"


# ------------------------------------------------------------------------- numeric paths
def test_cpu_record_and_torch_numerics():
    torch = pytest.importorskip("torch")
    from aiplib.inference.models.transformers_backend import torch_numerics

    cpu = ct2_numerics.cpu_record()
    assert set(cpu) == {"cpu_model", "cpu_vendor", "cpu_avx512", "environment"} and cpu["cpu_model"]
    assert set(cpu["environment"]) <= set(ct2_numerics.NUMERIC_VARIABLES)
    rec = torch_numerics(torch, "cpu")
    assert rec["cpu_model"] == cpu["cpu_model"]
    assert rec["torch"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert rec["torch"]["num_threads"] == torch.get_num_threads()
    assert rec["torch"]["device"] == "cpu"
    json.dumps(rec)


def test_command_and_openai_numerics_say_who_computes():
    from aiplib.inference.models.command_backend import command_numerics
    from aiplib.inference.models.openai_backend import server_numerics

    assert "external program" in command_numerics()["computed_by"]
    assert "server" in server_numerics()["computed_by"]
    assert command_numerics()["cpu_model"] == ct2_numerics.cpu_model()


def _run(n_done, numerics=None):
    info = {"path": "fast"}
    if numerics is not None:
        info["numerics"] = numerics
    return {"event": "run", "n_done": n_done, "info": info}


def test_numeric_paths_count_distinct_paths_of_runs_with_rows():
    a = {"cpu_model": "A", "ctranslate2": {"isa": "AVX2"}}
    b = {"cpu_model": "B", "ctranslate2": {"isa": "AVX512"}}
    paths = provenance.numeric_paths([_run(5, a), _run(0, b), _run(3, a), _run(2, b), _run(1)])
    assert [p["cpu_model"] for p in paths[:2]] == ["A", "B"]
    assert [p["runs"] for p in paths] == [2, 1, 1]
    assert [p["rows"] for p in paths] == [8, 2, 1]
    assert "not_recorded" in paths[2] and paths[2]["rows"] == 1


def test_provenance_json_and_report_hold_cpu_isa_backend_and_packages(tmp_path):
    ws = Workspace(profile="demo", root=tmp_path / "demo").ensure()
    numerics = {"cpu_model": "AMD EPYC", "cpu_vendor": "AuthenticAMD", "cpu_avx512": False,
                "pinned": True, "reason": "pinned", "variables": {"CT2_USE_MKL": "0"},
                "ctranslate2": {"isa": "AVX2", "use_mkl": "false", "sgemm_backend": "DNNL",
                                "gemm_s8_backend": "DNNL (packed: false, u8s8 preferred: true)"}}
    (ws.inference / "m").mkdir(parents=True)
    (ws.inference / "m" / "run_log.jsonl").write_text(json.dumps(_run(4, numerics)) + "\n")
    # provenance lists the models that produced rows: m's task file holds its 4 rows
    answers = [{"id": f"s{k}", "model": "m", "task": "asr", "raw": "yes"} for k in range(4)]
    (ws.inference / "m" / "asr.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    rows = [{"package": "espeak-ng", "role": "engine", "status": "installed",
             "version": "1.51+dfsg-10+deb12u2", "architecture": "amd64",
             "source_package": "espeak-ng", "deb_sha256": "a1" * 32,
             "sha256_source": "apt-cache show"}]
    pd.DataFrame(rows, columns=debian.PACKAGE_COLUMNS).to_csv(ws.debian_packages_csv, index=False)
    rec = provenance.collect_provenance(ws)
    path = rec["models"]["m"]["numerics"][0]
    assert path["ctranslate2"]["isa"] == "AVX2" and path["cpu_model"] == "AMD EPYC"
    assert path["rows"] == 4
    assert rec["debian_packages"]["packages"][0]["version"] == "1.51+dfsg-10+deb12u2"
    text = "\n".join(provenance_lines(rec))
    assert "m numeric path: CPU AMD EPYC (AuthenticAMD); CTranslate2 ISA AVX2, int8 GEMM DNNL" \
        in text
    assert "pinned (CT2_USE_MKL=0); 1 run(s), 4 rows" in text
    assert "espeak-ng 1.51+dfsg-10+deb12u2 (.deb sha256 a1a1a1a1a1a1…)" in text
    paper = Workspace(profile="paper", root=tmp_path / "paper").ensure()
    bare = provenance.collect_provenance(paper)
    assert bare["debian_packages"]["packages"] == []
    assert "Debian packages of the inputs: not recorded" in "\n".join(provenance_lines(bare))


@pytest.mark.slow
def test_real_whisper_run_log_records_its_numeric_path(tmp_path):
    """Stage 7 with the embedded Whisper: the run log holds CPU, ISA and GEMM backend, and on the
    pinned path CTranslate2 says AVX2 with oneDNN's int8 GEMM."""
    from aiplib.inference.runner import run_inference
    from aiplib.stimuli.manifests import manifest_columns, stimulus_id

    ws = Workspace(profile="demo", root=tmp_path / "demo").ensure()
    t = np.arange(SR) / SR
    tone = (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    write_wav(ws.root / "itembanks/audio/asr/it0.wav", tone)
    row = {"id": stimulus_id("it0", "clean", None), "speech_id": "it0", "background_id": "clean",
           "snr_db": 99, "condition": "clean", "seed": 0,
           "speech_path": "itembanks/audio/asr/it0.wav", "bg_path": "", "accent": "", "gender": "",
           "transcript": "tone", "family": "asr", "accent_group": "", "bg_offset": None,
           "bg_active": None, "duration_s": 1.0, "n_samples": SR}
    manifest = pd.DataFrame([row], columns=manifest_columns("asr"))
    manifest.to_csv(ws.manifests / "asr.csv", index=False)
    summary = run_inference(ws, tasks="asr", progress=False)
    assert list(summary["status"]) == ["done"]
    lines = (ws.inference / "whisper_tiny_en" / "run_log.jsonl").read_text().splitlines()
    numerics = json.loads(lines[-1])["info"]["numerics"]
    assert numerics["cpu_model"] == ct2_numerics.cpu_model()
    ct2 = numerics["ctranslate2"]
    assert "error" not in ct2, ct2
    if numerics["pinned"]:
        assert ct2["isa"] == "AVX2" and ct2["gemm_s8_backend"].startswith("DNNL")
        assert numerics["variables"]["CT2_USE_MKL"] == "0"
    rec = provenance.collect_provenance(ws)
    assert rec["models"]["whisper_tiny_en"]["numerics"][0]["ctranslate2"] == ct2
