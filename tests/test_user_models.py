"""The user models file (``MODELS=`` / ``$AIP_MODELS``, else ``<data root>/models.yaml``): merged over
the packaged registry, validated with one-line errors naming the file, the entry and the field."""
import pytest

from aiplib.inference.models import get_entry, load_registry, resolve
from aiplib.inference.models.registry import user_models_path
from aiplib.inference.plan import stratified_sample

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


# ----------------------------------------------------------------------------------- end to end
RECOGNISER = """import os, sys
print("yes the cat" if os.path.getsize(sys.argv[1]) % 2 == 0 else "no")
"""


def _git_status(repo):
    import subprocess

    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout


def _text_outputs(nb_path) -> str:
    import nbformat

    nb = nbformat.read(str(nb_path), as_version=4)
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", "") if o.get("output_type") == "stream" else
                       "".join(o.get("data", {}).get(k, "") for k in ("text/plain", "text/markdown")))
    return "\n".join(out)


@pytest.mark.slow
def test_a_trial_of_my_own_recogniser_is_marked_partial(smoke_demo_root, tmp_path):
    """A command recogniser registered through a user models file (no tracked file changed), stage 7
    with ``limit`` 5, then stages 8 and 9: both print the partial-run lines, coverage.csv counts what was
    covered, and the report marks the coverage and lists what the figures and tables lack."""
    import shutil
    import sys
    from pathlib import Path

    import pandas as pd
    from notebook_run import run_notebook

    from aiplib.analysis.report import render_report
    from aiplib.core.workspace import workspace
    from aiplib.inference import remove
    from aiplib.io.formats import read_manifest

    repo = Path(__file__).resolve().parents[1]
    before = _git_status(repo)
    root = tmp_path / "data"
    shutil.copytree(smoke_demo_root, root, ignore=shutil.ignore_patterns("inference", "results", "executed"))
    (tmp_path / "asr.py").write_text(RECOGNISER)
    models = tmp_path / "my_models.yaml"
    models.write_text(f"mine:\n  backend: command\n  model_type: external\n"
                      f"  command: \"{sys.executable} {tmp_path / 'asr.py'} {{file}}\"\n  timeout_s: 60\n")
    env = {"AIP_DATA_ROOT": str(root), "AIP_PROFILE": "demo", "AIP_SMOKE": "1", "AIP_MODELS": str(models)}
    ex = tmp_path / "executed"
    run = {s: run_notebook(s, ex / f"{s}.ipynb", parameters={"profile": "demo", **p}, env=env, kernel_name="python3")
           for s, p in [("07_run_inference", {"model": "mine", "limit": 5}), ("08_score_outputs", {}),
                        ("09_make_figures", {})]}
    ws = workspace("demo", data_root=root)
    man = {t: read_manifest(ws, t) for t in ("asr", "kws")}

    cov = pd.read_csv(ws.tables_dir / "coverage.csv")
    assert set(cov["task"]) == {"asr", "kws", "asr_steer_p5", "kws_steer_p5"} and set(cov["model"]) == {"mine"}
    lines = []
    for r in cov.itertuples():
        m = man[r.task.split("_")[0]]
        first = stratified_sample(m, 5)  # the stimuli `limit` 5 decodes
        noisy = m[m["condition"] == "noisy"]
        first_noisy = first[first["condition"] == "noisy"]
        assert (r.family, r.n_stimuli, r.n_scored, r.complete) == ("background", len(m), 5, False)
        assert (r.n_items_covered, r.n_items) == (first["speech_id"].nunique(), m["speech_id"].nunique())
        assert (r.n_backgrounds_covered, r.n_backgrounds) == (
            first_noisy["background_id"].nunique(), noisy["background_id"].nunique())
        assert (r.n_snrs_covered, r.n_snrs) == (first_noisy["snr_db"].nunique(), noisy["snr_db"].nunique())
        lines.append(f"partial run: mine × {r.task} covers 5 of {len(m)} stimuli ({r.n_items_covered} of "
                     f"{r.n_items} items, {r.n_backgrounds_covered} of {r.n_backgrounds} backgrounds) — figures "
                     f"and tables of stage 9 mark it")
    assert lines[0].startswith("partial run: mine × asr covers 5 of ")
    for stage in ("08_score_outputs", "09_make_figures"):
        text = _text_outputs(run[stage])
        assert all(line in text for line in lines), (stage, lines[0])

    report = render_report(run["09_make_figures"], ws.results)
    md = Path(report["report_md"]).read_text()
    assert "## Coverage" in md and all(f"- {line}" in md for line in lines)
    assert md.index("## Coverage") < md.index("## How the numbers are made") < md.index("**Figure 7 ·")
    lacking = sorted(set(man["asr"].loc[man["asr"]["condition"] == "noisy", "background_id"])
                     - set(stratified_sample(man["asr"], 5)["background_id"]))  # what `limit` 5 ran
    n_bg = cov.loc[cov["task"] == "asr", "n_backgrounds"].iloc[0]
    mark = f"**Partial run:** mine × asr lacks {len(lacking)} of {n_bg} backgrounds ({lacking[0]}, "
    # every figure and table that needs every background (or item) says what it lacks under its caption
    captions = ["**Figure 7 ·", "**Figure 4 ·", "**Table 3 ·", "**Table 2 ·", "**Figure 3 ·", "**Figure 2 ·"]
    for cap, nxt in zip(captions, captions[1:] + ["## Accent groups"]):
        part = md[md.index(cap):md.index(nxt)]
        assert mark in part, cap
    t4 = md[md.index("**Table 4, ours beside ·"):md.index("**Figure 5 ·")]
    assert "**Partial run:** mine × asr lacks " in t4 and " items (" in t4
    t5 = md[md.index("**Table 5 ·"):md.index("**Figure 6 ·")]
    c = cov.set_index("task")
    assert "**Partial run:** mine × asr lacks " in t5 and all(
        f"mine × {t} lacks {r.n_items - r.n_items_covered} of {r.n_items} items" in t5 for t, r in c.iterrows())

    # removing the trial: its inference folder goes; a second removal names what is left
    assert remove.main(["--profile", "demo", "--data-root", str(root), "--model", "mine"]) == 0
    assert not (ws.inference / "mine").exists()
    assert not ws.results.exists()  # no model left: no report of the removed one
    assert remove.main(["--profile", "demo", "--data-root", str(root), "--model", "mine"]) == 1
    assert _git_status(repo) == before  # no tracked (or untracked) file of the project changed


@pytest.mark.slow
def test_pooled_views_leave_out_a_partial_model_and_say_so(tmp_path):
    """Two models, the second stopped after 7 stimuli per task: the paper's views are drawn from the
    complete model only (Table 2's pooled rows over every background), and the report says which
    model was left out and why."""
    from pathlib import Path

    import pandas as pd
    from notebook_run import run_notebook
    from test_report import make_run

    from aiplib.analysis.report import render_report
    from aiplib.scoring.coverage import partial_lines, write_coverage
    from aiplib.scoring.score import score_inference

    ws = make_run(tmp_path / "data", n_asr=12, n_kws=12, n_bg=5, snrs=(10, 0), models=("m_a", "m_b"))
    for p in (ws.inference / "m_b").glob("*.jsonl"):
        if p.name != "run_log.jsonl":
            p.write_text("".join(p.read_text().splitlines(keepends=True)[:7]))
    cov = write_coverage(ws, {"background": score_inference(ws)})
    assert set(cov.loc[~cov["complete"], "model"]) == {"m_b"} and cov.loc[cov["model"] == "m_a", "complete"].all()
    assert len(partial_lines(cov)) == 4
    nb = run_notebook("09_make_figures", tmp_path / "09.ipynb", parameters={"profile": "demo", "n_resamples": 50},
                      env={"AIP_DATA_ROOT": str(ws.root.parent), "AIP_PROFILE": "demo"})
    md = Path(render_report(nb, ws.results)["report_md"]).read_text()
    assert "Left out of Figures 2–7 and Tables 2–5: m_b; another model covers the whole manifest" in md
    fig4 = md[md.index("**Figure 4 ·"):md.index("**Table 3 ·")]
    assert "**Partial run:** m_b left out (partial run; Coverage)." in fig4
    t2 = pd.read_csv(ws.tables_dir / "table2_descriptor_correlations.csv")
    assert set(t2["model"]) == {"m_a", "pooled"} and (t2["n"] == 5).all()
