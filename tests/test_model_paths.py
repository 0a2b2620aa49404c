"""Paths in a models file resolve from that file's folder, not from ``notebooks/`` where the kernels
run (issue 38, item 3); a local folder and a hub id are told apart by an explicit rule
(:mod:`aiplib.inference.models.paths`, docs/AUDIT_YOUR_MODEL.md), and a local-looking path that does
not exist is an error naming the absolute path, never a hub id."""
from __future__ import annotations

import shlex

import numpy as np
import pytest
import yaml
from tiny_models import build_wav2vec2_ctc, hf_asr_entry

from aiplib.core.errors import ModelUnavailableError
from aiplib.inference.models import get_entry, load_model
from aiplib.inference.models.registry import user_models_path


def _models_file(folder, entries):
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "my_models.yaml"
    p.write_text(yaml.safe_dump(entries, sort_keys=False))
    return p


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """The kernel's folder (as notebooks/ is): not the models file's."""
    d = tmp_path / "notebooks"
    d.mkdir()
    monkeypatch.chdir(d)
    return d


def _audit_folder(tmp_path, ckpt_builder):
    audit = tmp_path / "audit"
    ckpt = ckpt_builder(audit / "ckpts" / "tiny_w2v")
    (audit / "facebook" / "w2v").mkdir(parents=True)          # a folder beside the file ...
    p = _models_file(audit, {
        "bare": hf_asr_entry("ckpts/tiny_w2v"),               # exists beside the file: local
        "dotted": hf_asr_entry("./ckpts/tiny_w2v"),
        "hub": hf_asr_entry("facebook/wav2vec2-base-960h"),   # no such folder: a hub id
        "forced_hub": hf_asr_entry("hub:facebook/w2v"),       # ... but hub: says hub id
        "gone": hf_asr_entry("./ckpts/missing"),
        "prog": {"backend": "command", "model_type": "external",
                 "command": "./bin/my asr --lang en {file}"},
        "prog_no_dot": {"backend": "command", "model_type": "external", "command": "bin/my {file}"},
        "prog_on_path": {"backend": "command", "model_type": "external", "command": "my-asr {file}"},
    })
    return audit, ckpt, p


def _config_only(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def test_a_relative_weights_folder_is_taken_from_the_models_file_folder(tmp_path, elsewhere,
                                                                       monkeypatch):
    audit, ckpt, p = _audit_folder(tmp_path, _config_only)
    monkeypatch.setenv("AIP_MODELS", "../audit/my_models.yaml")   # from notebooks/
    assert user_models_path() == p                            # shown absolute
    assert get_entry("bare").weights == str(ckpt) == get_entry("dotted").weights
    assert get_entry("hub").weights == "facebook/wav2vec2-base-960h"
    assert get_entry("forced_hub").weights == "facebook/w2v"
    assert shlex.split(get_entry("prog").extra["command"]) == [
        str(audit / "bin" / "my"), "asr", "--lang", "en", "{file}"]
    # a relative path without ./ is a path too (a shell would take it from where it runs); a bare
    # name is looked up on PATH
    assert shlex.split(get_entry("prog_no_dot").extra["command"]) == [str(audit / "bin" / "my"), "{file}"]
    assert get_entry("prog_on_path").extra["command"] == "my-asr {file}"
    assert get_entry("gone").weights == str(audit / "ckpts" / "missing")
    with pytest.raises(ModelUnavailableError) as err:
        load_model("gone")
    assert str(err.value) == f"gone: weights folder {audit / 'ckpts' / 'missing'} does not exist"


@pytest.mark.slow
def test_a_relative_checkpoint_loads_and_decodes_from_another_folder(tmp_path, elsewhere,
                                                                    monkeypatch):
    audit, ckpt, p = _audit_folder(tmp_path, build_wav2vec2_ctc)
    monkeypatch.setenv("AIP_MODELS", str(p))
    rec = load_model("bare")                                  # the folder, from notebooks/
    try:
        assert rec.info()["weights_path"] == str(ckpt)
        assert isinstance(rec.generate([np.zeros(16000, np.float32)], [""])[0], str)
    finally:
        rec.close()


def test_a_missing_models_file_is_named_by_its_absolute_path(tmp_path, elsewhere, monkeypatch):
    monkeypatch.setenv("AIP_MODELS", "no_such.yaml")
    with pytest.raises(FileNotFoundError, match=f"^{elsewhere / 'no_such.yaml'}: user models file"):
        user_models_path()
