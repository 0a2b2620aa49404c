"""The user models file (``MODELS=`` / ``$AIP_MODELS``, else ``<data root>/models.yaml``): merged over
the packaged registry, validated with one-line errors naming the file, the entry and the field."""
import pytest

from aiplib.inference.models import get_entry, load_registry, resolve
from aiplib.inference.models.registry import user_models_path

MINE = "mine:\n  backend: command\n  model_type: external\n  command: \"my-asr --lang en {file}\"\n"


@pytest.fixture
def models_file(tmp_path, monkeypatch):
    """Write a user models file and point ``$AIP_MODELS`` at it."""
    def write(text, name="my_models.yaml"):
        p = tmp_path / name
        p.write_text(text)
        monkeypatch.setenv("AIP_MODELS", str(p))
        return p
    monkeypatch.delenv("AIP_MODELS", raising=False)
    monkeypatch.setenv("AIP_DATA_ROOT", str(tmp_path / "data"))
    return write


def test_user_entry_is_added_after_the_registry(models_file):
    packaged = list(load_registry())
    p = models_file(MINE)
    assert user_models_path() == p
    reg = load_registry()
    assert list(reg) == packaged + ["mine"]
    e = get_entry("mine")
    assert (e.backend, e.model_type, e.weights, e.extra["command"]) == ("command", "external", None,
                                                                        "my-asr --lang en {file}")
    assert [x.id for x in resolve("whisper_tiny_en,mine")] == ["whisper_tiny_en", "mine"]


def test_user_id_equal_to_a_registry_id_replaces_that_entry(models_file):
    models_file("whisper_tiny_en:\n  backend: command\n  model_type: external\n  command: \"asr {file}\"\n")
    reg = load_registry()
    assert reg["whisper_tiny_en"].backend == "command"
    assert list(reg).index("whisper_tiny_en") == 0  # keeps its place


def test_models_yaml_in_the_data_root_is_read_without_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("AIP_MODELS", raising=False)
    monkeypatch.setenv("AIP_DATA_ROOT", str(tmp_path))
    assert user_models_path() is None
    assert "mine" not in load_registry()
    (tmp_path / "models.yaml").write_text(MINE)
    assert user_models_path() == tmp_path / "models.yaml"
    assert get_entry("mine").backend == "command"


@pytest.mark.parametrize("text, message", [
    ("mine:\n  backend: comand\n  model_type: external\n",
     "registry entry 'mine': field 'backend': unknown backend 'comand'; valid backends: "),
    ("mine:\n  backend: command\n  model_type: external\n",
     "registry entry 'mine': backend 'command' needs field 'command'"),
    ("mine:\n  backend: command\n  model_type: external\n  command: \"a {file}\"\n  timeout: 5\n",
     "registry entry 'mine': unknown field(s) timeout"),
    ("mine:\n  backend: command\n  command: \"a {file}\"\n", "registry entry 'mine': field 'model_type' is required"),
    ("mine:\n  backend: openai\n  model_type: api\n  base_url: http://x/v1\n",
     "registry entry 'mine': backend 'openai' needs field 'model'"),
    ("mine:\n  backend: command\n  model_type: external\n  command: \"a {file}\"\n  batch_size: 0\n",
     "registry entry 'mine': batch_size must be a positive number, got 0"),
    ("mine:\n  backend: command\n  model_type: external\n  command: \"a {file}\"\n  device: gpu\n",
     "registry entry 'mine': device must be one of cpu, cuda, auto, got 'gpu'"),
    (MINE + MINE, "duplicate key 'mine' in model registry (line 5)"),
    ("a/b:\n  backend: command\n  model_type: external\n  command: \"a {file}\"\n",
     "registry entry 'a/b': the id names the folder inference/<id>/"),
    ("mine: [1, 2]\n", "registry entry 'mine': expected a mapping of fields, got list"),
    ("- mine\n", "the file must be a mapping of model id → fields"),
    ("mine:\n  backend: command\n model_type: x\n", "not valid YAML (line 3): "),
])
def test_errors_are_one_line_naming_file_entry_and_field(models_file, text, message):
    p = models_file(text)
    with pytest.raises(ValueError) as ei:
        load_registry()
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}: ") and message in msg, msg


def test_a_missing_models_file_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("AIP_MODELS", str(tmp_path / "nope.yaml"))
    with pytest.raises(FileNotFoundError, match=r"nope\.yaml: user models file not found \(MODELS= / \$AIP_MODELS\)$"):
        load_registry()


def test_an_edited_models_file_is_read_again(models_file):
    import os

    p = models_file(MINE)
    assert get_entry("mine").extra["command"] == "my-asr --lang en {file}"
    p.write_text(MINE.replace("--lang en ", ""))
    os.utime(p, (p.stat().st_atime, p.stat().st_mtime + 5))
    assert get_entry("mine").extra["command"] == "my-asr {file}"
