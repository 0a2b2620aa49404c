"""``make all``'s check before stage 1 (aiplib/inference/preflight.py) on models files: a named model
whose program is missing is refused with its absolute path, an unreadable models file is said once."""

from __future__ import annotations

from aiplib.core.workspace import MODELS_ENV
from aiplib.inference.preflight import problems


def _models_file(folder, command: str):
    path = folder / "my_models.yaml"
    path.write_text(
        "mine:\n  backend: command\n  model_type: external\n"
        f"  command: \"{command}\"\n  prompt_style: none\n"
    )
    return path


def test_a_named_model_whose_program_is_missing_is_refused_with_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(_models_file(tmp_path, "./scripts/whisper-asr {file}")))
    assert problems(model="mine") == [
        f"make: MODEL=mine: ModelUnavailableError: mine: program {tmp_path}/scripts/whisper-asr not found "
        "or not executable (a relative path in a models file is taken from the file's folder) "
        "(make models lists what is ready)"
    ]
    # the embedded model alone is ready; "all" is not checked further (it takes what can run here)
    assert problems(model="whisper_tiny_en") == []
    assert problems(model="all") == []


def test_a_named_model_whose_program_exists_passes(tmp_path, monkeypatch):
    program = tmp_path / "scripts" / "whisper-asr"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\necho hello\n")
    program.chmod(0o755)
    monkeypatch.setenv(MODELS_ENV, str(_models_file(tmp_path, "./scripts/whisper-asr {file}")))
    assert problems(model="mine,whisper_tiny_en") == []


def test_a_bare_program_name_is_looked_up_on_path(tmp_path, monkeypatch):
    monkeypatch.setenv(MODELS_ENV, str(_models_file(tmp_path, "no-such-asr-program-x {file}")))
    assert problems(model="mine") == [
        "make: MODEL=mine: ModelUnavailableError: mine: program 'no-such-asr-program-x' not found on "
        "PATH (or not executable) (make models lists what is ready)"
    ]


def test_an_unreadable_models_file_is_said_once(tmp_path, monkeypatch):
    missing = tmp_path / "nothing.yaml"
    monkeypatch.setenv(MODELS_ENV, str(missing))
    found = problems(model="mine")
    assert len(found) == 1 and found[0].startswith(f"make: MODELS={missing}: FileNotFoundError: {missing}")


def test_the_models_file_of_the_data_root_is_read_without_the_variable(tmp_path, monkeypatch):
    """`make preflight` passes DATA_ROOT, so DATA_ROOT/models.yaml names models as for the stages."""
    monkeypatch.delenv(MODELS_ENV, raising=False)
    monkeypatch.setenv("AIP_DATA_ROOT", str(tmp_path))
    _models_file(tmp_path, "/bin/cat {file}").rename(tmp_path / "models.yaml")
    assert problems(model="mine") == []
    assert problems(model="minex")[0].startswith("make: MODEL=minex: KeyError: unknown model 'minex'")
