"""Tests of aiplib.analysis.report and aiplib.analysis.provenance on synthetic run workspaces (issue 7)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from authors_schema import inference_line, write_manifest
from notebook_run import run_notebook
from paper_tables import write_tables

from aiplib.analysis import comparison, criteria, provenance, report, report_tables, stats
from aiplib.analysis import conditions as cond
from aiplib.core.errors import AiplibError, ValidationError
from aiplib.core.hashing import file_sha256
from aiplib.core.tasks import KEYWORDS
from aiplib.core.textnorm import NORMALIZER_NAME, NORMALIZER_VERSION
from aiplib.core.workspace import workspace
from aiplib.io import formats
from aiplib.scoring.score import score_inference

WORDS = ("the quick brown fox jumps over lazy dog please call stella ask her bring these things "
         "from store six spoons fresh snow peas five thick slabs blue cheese maybe snack").split()


def _sid(fam, item, bg, snr):
    return f"{fam}__{item}__{bg}__" + ("clean" if snr is None else f"snr{snr:+03d}")


def make_run(root, *, profile="demo", n_asr=6, n_kws=6, n_bg=20, snrs=(10, 5, 0),
             models=("m_a",), tasks=("asr", "kws", "asr_steer_p5", "kws_steer_p5"), seed=0,
             effect=1.0, insert=0.0):
    """Manifests, descriptors, battery, run logs and inference files of a synthetic run.

    Errors grow with the background's severity and falling SNR, scaled by ``effect`` (and by
    1.5 for the second model); steering tasks halve them. The manifests depend only on
    ``n_asr, n_kws, n_bg, snrs``, so two runs with other ``seed`` / ``effect`` share them.
    ``insert``: probability that a noisy ASR response gains two inserted words.
    """
    ws = workspace(profile, data_root=root)
    rng = np.random.default_rng(seed)
    wrng = np.random.default_rng(1234)        # item texts do not depend on seed
    bgs = [f"bg{i:02d}" for i in range(n_bg)]
    severity = dict(zip(bgs, np.linspace(0.05, 0.6, n_bg)))
    pd.DataFrame({"bg_id": bgs, "category": ["stationary"] * n_bg,
                  "description": bgs}).to_csv(ws.descriptors / "battery.csv", index=False)
    desc = {"bg_id": bgs, **{d: wrng.normal(size=n_bg) for d in formats.DESCRIPTORS}}
    desc["zcr"] = np.array([severity[b] for b in bgs])
    pd.DataFrame(desc).to_csv(ws.descriptors / "acoustic_descriptors.csv", index=False)
    conds = [("clean", None)] + [(b, s) for b in bgs for s in snrs]
    asr_m, kws_m = [], []
    for i in range(n_asr):
        ref = " ".join(wrng.choice(WORDS, size=int(wrng.integers(4, 12))))
        for bg, snr in conds:
            asr_m.append({"item_id": f"a{i:02d}", "bg_id": bg, "snr_db": "" if snr is None else snr,
                          "reference": ref, "is_target": "", "accent_group": f"g{i % 3}"})
    labels = list(KEYWORDS) + ["bed", "tree", "cat"]
    for i in range(n_kws):
        lab = labels[i % len(labels)]
        for bg, snr in conds:
            kws_m.append({"item_id": f"k{i:02d}", "bg_id": bg, "snr_db": "" if snr is None else snr,
                          "reference": lab, "is_target": lab in KEYWORDS, "accent_group": ""})
    asr_m = write_manifest(ws, "asr", asr_m).to_dict("records")
    kws_m = write_manifest(ws, "kws", kws_m).to_dict("records")
    for mi, model in enumerate(models):
        d = ws.inference / model
        d.mkdir(parents=True, exist_ok=True)
        for task in tasks:
            fam = task.split("_")[0]
            damp = 0.5 if "steer" in task else 1.0
            lines = []
            for row in (asr_m if fam == "asr" else kws_m):
                bg, snr = row["background_id"], row["snr_db"]
                p = 0.0 if bg == "clean" else \
                    effect * damp * severity[bg] * (1 + (10 - snr) / 10) / 2
                p = min(p * (1 + 0.5 * mi), 0.95)
                if fam == "asr":
                    words = row["transcript"].split()
                    keep = [w if rng.random() >= p else ("" if rng.random() < 0.7 else "zebra")
                            for w in words]
                    if bg != "clean" and rng.random() < insert:
                        keep += ["music", "playing"]
                    resp = " ".join(w for w in keep if w).capitalize() + "."
                else:
                    lab = row["keyword"]
                    ok = rng.random() >= p
                    resp = (f"**{lab.capitalize()}**" if lab in KEYWORDS else "unknown") if ok \
                        else ("no" if lab != "no" else "yes")
                lines.append(inference_line(row, model=model, task=task, response=resp, prompt_id="p",
                                            decode_s=0.1, audio_s=2.0))
            (d / f"{task}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        (d / "run_log.jsonl").write_text(json.dumps(
            {"event": "run", "model": model, "revision": "rev1", "weights": f"pkg:{model}",
             "weights_sha256": "ab" * 32, "path": "fast", "versions": {"aiplib": "0.1.0"}}) + "\n")
    return ws


SMALL = dict(n_asr=12, n_kws=12, n_bg=5, snrs=(10, 0), models=("m_a", "m_b"))
"""12 items per task: above MIN_N_FOR_INTERVAL (10), so the rows have intervals and verdicts."""


def _scored(root, **kw):
    ws = make_run(root, **{**SMALL, **kw})
    score_inference(ws)
    return ws


ROOT = Path(__file__).resolve().parents[1]
NB09 = ROOT / "notebooks" / "09_make_figures.ipynb"


def _analyse(ws, tmp_path, *, n_resamples=200, seed=1):
    """What notebook 09 computes (figures, Tables 2-5, condition tables, provenance): the notebook
    itself, executed; the condition tables' paths."""
    _execute_09(ws, tmp_path, n_resamples=n_resamples, seed=seed)
    return {t: ws.tables_dir / f"conditions_{t}.csv" for t in formats.load_scores(ws)
            if (ws.tables_dir / f"conditions_{t}.csv").is_file()}


@pytest.fixture(scope="module")
def run_a(tmp_path_factory):
    """Two models (m_a, m_b), 12 items per task, 5 backgrounds, notebook 09 executed (its copy in
    ``out["executed"]``)."""
    ws = _scored(tmp_path_factory.mktemp("run_a"), insert=0.3)
    nb_dir = tmp_path_factory.mktemp("run_a_nb")
    return ws, {"conditions": _analyse(ws, nb_dir), "executed": nb_dir / "09_make_figures.ipynb"}


@pytest.fixture(scope="module")
def run_worse(tmp_path_factory):
    """Same manifests as run_a, twice the error probability."""
    ws = _scored(tmp_path_factory.mktemp("run_worse"), seed=5, effect=2.0, insert=0.3)
    cond.write_condition_tables(ws, n_resamples=200, seed=1)
    provenance.annotate_results(ws, seed=1, n_resamples=200, level=0.95)
    return ws


def _execute_09(ws, tmp_path, **params):
    """Run notebook 09 on ``ws`` with papermill, as `make 09` does; the executed copy's path."""
    return run_notebook("09_make_figures", tmp_path / "09_make_figures.ipynb",
                        parameters={"profile": ws.profile, **params},
                        env={"AIP_DATA_ROOT": str(ws.root.parent), "AIP_PROFILE": ws.profile})


# ------------------------------------------------------------------------ rendering (fast)
def _fake_executed(results, fig_names):
    """An executed notebook shaped like 09: title, parameters, a printed path, a table, figures."""
    import base64

    import nbformat

    from aiplib.analysis.report_tables import Table

    v4 = nbformat.v4
    t = Table(pd.DataFrame({"condition": ["all @ 0 dB"], "verdict": ["worse"]}))
    cells = [v4.new_markdown_cell("# 9 · Results\n\nIntro."),
             v4.new_code_cell("profile = 'demo'", metadata={"tags": ["parameters"]}),
             v4.new_code_cell("print(ws.root)", outputs=[v4.new_output("stream", name="stdout",
                                                                         text="/secret/path\n")]),
             v4.new_markdown_cell("## Summary\n\n**Table R1 · caption.**"),
             v4.new_code_cell("t", outputs=[v4.new_output(
                 "execute_result", execution_count=1,
                 data={"text/html": t._repr_html_(), "text/markdown": t._repr_markdown_(),
                       "text/plain": repr(t)})])]
    for name in fig_names:
        png = base64.b64encode((results / "figures" / f"{name}.png").read_bytes()).decode()
        cells += [v4.new_markdown_cell(f"## {name}\n\n**Figure · {name}.**"),
                  v4.new_code_cell("show", outputs=[v4.new_output(
                      "display_data", data={"image/png": png, "text/plain": "<Image>"},
                      metadata={"aip_file": f"figures/{name}.png"})])]
    p = results.parent / "executed" / "09_make_figures.ipynb"
    p.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(v4.new_notebook(cells=cells), p)
    return p


@pytest.mark.slow
def test_render_report_self_contained_with_toc_and_links(run_a, tmp_path):
    import base64

    ws, _ = run_a
    names = sorted(p.stem for p in (ws.results / "figures").glob("*.png"))
    assert len(names) == 6                               # Figures 2-7 of the synthetic run
    out = report.render_report(_fake_executed(ws.results, names), ws.results)
    page = out["report_html"].read_text()
    # every figure is embedded as a data: URI, byte for byte
    for name in names:
        b64 = base64.b64encode((ws.results / "figures" / f"{name}.png").read_bytes()).decode()
        assert f'src="data:image/png;base64,{b64}"' in page
    imgs = re.findall(r'<img[^>]*>', page)
    assert out["figures"] == len(imgs) == 6
    assert [re.search(r'alt="([^"]*)"', i).group(1) for i in imgs] == names
    # table of contents: Summary, six figure sections, Files = 8 anchors, each to a heading
    toc = page[page.index('<nav class="aip-toc">'):page.index("</nav>")]
    anchors = re.findall(r'href="#([^"]+)"', toc)
    assert len(anchors) == len(out["toc"]) == 1 + 6 + 1
    for a in anchors:
        assert f'id="{a}"' in page
    assert page.index("aip-toc") < page.index('id="Summary"')   # TOC before the first section
    # every CSV and PDF under results/ is linked from the Files section
    files = sorted(p.relative_to(ws.results).as_posix() for p in ws.results.rglob("*")
                   if p.suffix in (".csv", ".pdf"))
    assert out["files"] == files and len(files) > 10
    for f in files:
        assert f'href="{f}"' in page
    # no code, no printed set-up text, no parameters, no remote scripts
    assert "/secret/path" not in page and "print(ws.root)" not in page
    assert "profile = " not in page
    assert not re.search(r'<script[^>]*src="https?://', page)
    assert '<td class="worse">worse</td>' in page
    # a copy in another folder has no relative image link left
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(out["report_html"], other / "report.html")
    srcs = re.findall(r'<img[^>]*\ssrc="([^"]*)"', (other / "report.html").read_text())
    assert len(srcs) == 6 and all(src.startswith("data:image/png;base64,") for src in srcs)
    # Markdown: the pipe table, figures linked to their PNG files, the TOC
    md = out["report_md"].read_text()
    assert "| condition | verdict |\n|---|---|\n| all @ 0 dB | worse |" in md
    for name in names:
        assert f"![{name}](figures/{name}.png)" in md
    assert "- [Summary](#summary)" in md and "/secret/path" not in md
    rep = json.loads(out["sidecar"].read_text())["provenance"]
    assert {f["file"] for f in rep["files"]} == {"report.md", "report.html"}


def test_render_keeps_printed_notes_wraps_no_number_and_names_paths_shareably(tmp_path):
    """Printed text of a section is kept (stdout; its data-root paths as ``<data root>/…``), stderr and
    the set-up cells' printed text are not; cells holding a number get ``class="num"`` (no wrap) and
    every table sits in a box that scrolls sideways."""
    import nbformat

    from aiplib.analysis.report_tables import Table

    v4 = nbformat.v4
    results = tmp_path / "data" / "demo" / "results"
    t = Table(pd.DataFrame({"condition": ["bg01 @ 0 dB"], "ΔWER pp [95% CI]": ["+222.2 [180.1, 260.4]"],
                            "verdict": ["worse"], "note": ["a long note without numbers that may wrap"]}))
    nb = v4.new_notebook(cells=[
        v4.new_markdown_cell("# 9 · Results"),
        v4.new_code_cell("print(ws.root)", outputs=[v4.new_output("stream", name="stdout", text="/secret/path\n")]),
        v4.new_markdown_cell("## Beyond additive background\n\n**Table R9 · caption.**"),
        v4.new_code_cell("print(fr.NOT_RUN)", outputs=[
            v4.new_output("stream", name="stdout", text=f"not run: make all SUITE=all ({results}/tables)\n"),
            v4.new_output("stream", name="stderr", text="UserWarning: noisy log\n")]),
        v4.new_code_cell("print(fr.NOT_RUN)", outputs=[   # one print the kernel sent in three pieces
            v4.new_output("stream", name="stdout", text=f"figure skipped ({str(results)[:9]}"),
            v4.new_output("stream", name="stdout", text=f"{str(results)[9:]}/figures)"),
            v4.new_output("stream", name="stdout", text="\n")]),
        v4.new_code_cell("t", outputs=[v4.new_output("execute_result", execution_count=1, data={
            "text/html": t._repr_html_(), "text/markdown": t._repr_markdown_(), "text/plain": repr(t)})])])
    path = tmp_path / "09.ipynb"
    nbformat.write(nb, path)
    out = report.render_report(path, results)
    page, md = out["report_html"].read_text(), out["report_md"].read_text()
    for text in (page, md):
        assert "not run: make all SUITE=all (&lt;data root&gt;/demo/results/tables)" in text or \
            "not run: make all SUITE=all (<data root>/demo/results/tables)" in text
        assert "noisy log" not in text and "/secret/path" not in text and str(tmp_path) not in text
    assert "```\nfigure skipped (<data root>/demo/results/figures)\n```" in md
    assert all(block.strip() for block in md.split("```")[1::2])   # no empty block from a print's last piece
    assert '<td class="num">bg01 @ 0 dB</td>' in page and '<td class="num">+222.2 [180.1, 260.4]</td>' in page
    assert '<td class="worse">worse</td>' in page and "<td>a long note without numbers that may wrap</td>" in page
    assert re.search(r'<div class="aip-scroll"><table[^>]*class="dataframe tbl"', page)
    assert "td.num{white-space:nowrap}" in page and "nav.aip-toc" in page.split("</head>")[0]


def test_make_report_renders_the_newest_notebook_with_outputs(tmp_path):
    import nbformat

    v4 = nbformat.v4
    executed, lab, blank = tmp_path / "executed.ipynb", tmp_path / "lab.ipynb", tmp_path / "blank.ipynb"
    for p, text in ((executed, "make 09"), (lab, "JupyterLab")):
        nbformat.write(v4.new_notebook(cells=[v4.new_markdown_cell(f"# {text}"), v4.new_code_cell(
            "x", outputs=[v4.new_output("display_data", data={"text/markdown": text})])]), p)
    nbformat.write(v4.new_notebook(cells=[v4.new_code_cell("x")]), blank)
    os.utime(executed, ns=(1_000_000_000_000, 1_000_000_000_000))
    os.utime(lab, ns=(2_000_000_000_000, 2_000_000_000_000))
    assert report.newest_executed([executed, lab, blank, tmp_path / "absent.ipynb"]) == lab
    os.utime(executed, ns=(3_000_000_000_000, 3_000_000_000_000))
    assert report.newest_executed([executed, lab]) == executed
    with pytest.raises(AiplibError, match="holds executed output: run stage 9 first"):
        report.newest_executed([blank, tmp_path / "absent.ipynb"])
    root = tmp_path / "data"
    assert report.main(["--profile", "demo", "--data-root", str(root), "--render", str(executed), str(lab)]) == 0
    md = (root / "demo" / "results" / "report.md").read_text()
    assert "\nmake 09\n" in md and "JupyterLab" not in md      # the newest notebook's output
    assert md.startswith("# Results · demo profile · no model scored · 1970-01-01\n")  # its run title


def test_provenance_says_absent_values_in_words_without_local_paths(tmp_path):
    from aiplib.analysis.report_tables import provenance_lines
    from aiplib.core.workspace import repo_root

    data_root = tmp_path / "data"
    rec = provenance.shareable({"models": {"m": {"revision": None, "weights": f"{repo_root()}/.venv/w/model.bin"},
                                           "n": {"revision": "abc", "weights": f"{data_root}/demo/raw/n.bin",
                                                 "weights_sha256": "cd" * 32}},
                                "versions": {"numpy": "2.0", "jiwer": None}, "analysis": {"seed": 1},
                                "manifests": {"asr": {"sha256": "ef", "seed_start": None, "n_rows": 4}},
                                "home": [str(Path.home() / "x")], "other": "/opt/x"}, data_root)
    assert rec["models"]["m"]["weights"] == "<project>/.venv/w/model.bin"
    assert rec["models"]["n"]["weights"] == "<data root>/demo/raw/n.bin"
    assert rec["home"] == ["~/x"] and rec["other"] == "/opt/x"
    text = "\n".join(provenance_lines(rec))
    assert "m: revision not pinned, weights <project>/.venv/w/model.bin" in text
    assert "n: revision abc, weights <data root>/demo/raw/n.bin (sha256 cdcdcdcdcdcd…)" in text
    assert "jiwer not installed" in text and "(seeds not recorded, 4 rows)" in text
    assert "None" not in text and str(tmp_path) not in text


def test_render_report_refuses_unexecuted_notebook(tmp_path):
    with pytest.raises(AiplibError, match="no outputs"):
        report.render_report(NB09, tmp_path / "results")   # the tracked notebook has no outputs
    with pytest.raises(AiplibError, match="does not exist"):
        report.render_report(tmp_path / "absent.ipynb", tmp_path / "results")


def test_cap_words_and_worst_table_caps_looping_response():
    from aiplib.analysis.report_tables import cap_words, worst_display

    assert cap_words("a b c d", 2) == "a b … +2 words"
    assert cap_words("a b c", 2) == "a b … +1 word" and cap_words("a b", 2) == "a b"
    assert cap_words(None) == "" and cap_words(float("nan")) == ""
    loop = "go to the left and " * 40                    # 200 words
    s = pd.DataFrame({
        "model": ["m"] * 2, "task": ["asr"] * 2, "item_id": ["i1"] * 2,
        "stimulus_id": ["i1_clean", "i1_bg1_snr0"], "bg_id": ["clean", "bg1"],
        "snr_db": [np.nan, 0.0], "reference": ["go to the left"] * 2,
        "response": ["go to the left", loop], "wer": [0.0, 49.0], "delta_wer": [np.nan, 49.0]})
    t = worst_display(s, "asr").df
    assert t.loc[0, "noisy response"] == " ".join(loop.split()[:30]) + " … +170 words"
    assert t.loc[0, "background @ SNR"] == "bg1 @ 0 dB" and t.loc[0, "ΔWER pp"] == "4900.0"
    assert "model" not in t.columns                      # one model: no model column


# ------------------------------------------------------------- notebook 09 end to end (slow)
@pytest.mark.slow
def test_notebook_09_is_the_report(run_a, run_worse, tmp_path):
    """Notebook 09 executed by papermill on a run worse than run_a (with criteria), then
    rendered: every section, caption, figure and table of the Results is in the report."""
    ws_a, _ = run_a
    crit = tmp_path / "criteria.json"
    crit.write_text(json.dumps([{"task": "asr", "measure": "wer_pp", "max": 1000}]))
    nb = _execute_09(run_worse, tmp_path, n_resamples=200, seed=1, criteria=str(crit),
                     previous=str(ws_a.root))
    out = report.render_report(nb, run_worse.results)
    md, page = out["report_md"].read_text(), out["report_html"].read_text()
    assert out["figures"] == len(re.findall(r'<img[^>]*src="data:image/png;base64,', page)) == 6
    heads = [t for _, _, t in out["toc"]]
    assert heads[:5] == ["Findings", "Coverage", "How the numbers are made", "Summary",
                         "Performance against SNR (Figure 7)"]
    assert heads[-4:] == ["Checks", "Glossary", "How this was run", "Files"] and len(heads) == 21
    assert "Stimuli left out" in heads
    # the Findings open the report, each sentence linking the table or figure it comes from; every link resolves
    found = md[md.index("## Findings"):md.index("\n## ", md.index("## Findings"))]
    links = re.findall(r"\]\(#([^)]+)\)", found)
    assert {"table-r1", "table-r2", "figure-7", "figure-4", "table-2", "table-4-ours", "figure-5", "table-5"} <= set(links)
    assert all(f'id="{a}"' in page for a in links) and page.count('href="#table-r1"') == 1
    assert "200 resamples" in found and "`m_a`" in found and "**What is [coarse](#glossary-coarse).**" in found
    assert "significant" not in found and "One model" not in found          # two models here
    assert "where a group has ≥ 10 items" in md                              # Figure 5's caption
    # each figure sits in its own section, right under its caption
    for cap, name in [("Figure 7 · Mean per-utterance WER", "figure7_snr_performance"),
                      ("Figure 4 · Backgrounds ranked", "figure4_background_ranking")]:
        i, j = md.index(cap), md.index(f"](figures/{name}.png)")
        assert i < j < md.index("\n## ", i)
    for caption in ("Table R1 · Each task and model", "Table 2 · Spearman r_s",
                    "Table 4 · Mean ΔWER per model and accent label** (the authors')",
                    "Table 4, ours beside · Mean of the items' ΔWER per model and accent group",
                    "RER = Δ(steering) / (Δ(baseline) +", "Table R5 · The ASR stimuli that got worst",
                    "Table R13 · Change from the previous run"):
        assert caption in md
    assert "ΔWER pp [95% CI]" in md and "ΔAcc pp [95% CI]" in md and "mcnemar_exact" in md
    assert "coarse conditions" in md and "robust (noisy)" in md
    assert '<td class="worse">worse</td>' in page and "<details>" in page
    # the worst ASR stimulus of the report is the top row of stats.worst_stimuli, with its reference
    w = stats.worst_stimuli(formats.load_scores(run_worse)["asr"], "asr")
    assert 0 < len(w) <= 10 and w["delta"].is_monotonic_decreasing and w["item_id"].is_unique
    assert w["reference"].iloc[0] in md and w["stimulus_id"].iloc[0] in md
    # settings of this run and the comparison with run_a: worse, so the regression check fails
    assert "200 bootstrap resamples, seed 1" in md
    assert "**FAILED:" in md and "worse than the previous run" in md
    assert (run_worse.results / "tables" / "comparison.csv").is_file()
    t = pd.read_csv(run_worse.results / "tables" / "conditions_asr.csv")
    assert (t.seed == 1).all() and (t.n_resamples == 200).all()
    rec = json.loads((run_worse.results / "provenance.json").read_text())
    assert rec["analysis"] == {"seed": 1, "n_resamples": 200, "level": 0.95}
    assert "print(ws.root)" not in page and str(run_worse.root) not in md


# ------------------------------------------------------------------------- condition tables
@pytest.mark.slow
def test_condition_table_file_has_intervals(run_a):
    ws, out = run_a
    t = pd.read_csv(out["conditions"]["asr"])
    noisy = t[t.scope != "clean"]
    assert noisy[["ci_low_pp", "ci_high_pp", "p_value"]].notna().all().all()
    assert (noisy.ci_low_pp <= noisy.delta_pp + 1e-9).all()
    assert (noisy.delta_pp <= noisy.ci_high_pp + 1e-9).all()
    assert set(noisy.verdict) <= set(cond.VERDICTS)
    np.testing.assert_allclose(noisy.sub_pp + noisy.del_pp + noisy.ins_pp, noisy.wer_pp)
    assert (noisy.ins_pp > 0).any()                         # the fake run inserts words
    assert (t.seed == 1).all() and (t.n_resamples == 200).all()
    n_cond = t[(t.scope == "condition") & (t.model == "m_a")]
    assert len(n_cond) == 5 * 2


@pytest.mark.slow
def test_provenance_and_sidecars(run_a):
    ws, out = run_a
    from aiplib.inference.prompts import PROMPTS, TASKS
    from aiplib.stimuli.manifests import manifest_hash

    rec = json.loads((ws.results / "provenance.json").read_text())
    assert rec["normalizer"]["name"] == NORMALIZER_NAME
    assert rec["normalizer"]["version"] == NORMALIZER_VERSION
    assert rec["manifests"]["asr"]["sha256"] == manifest_hash(ws, "asr")
    assert rec["manifests"]["kws"]["sha256"] == manifest_hash(ws, "kws")
    assert rec["models"]["m_a"]["revision"] == "rev1"
    assert rec["models"]["m_b"]["weights"] == "pkg:m_b"
    for task, (fam, var) in TASKS.items():
        assert rec["tasks"][task]["text"] == PROMPTS[(fam, var)]["text"]
    assert rec["prompt_ids_scored"]["asr"]["m_a"] == {"p": 12 * 11}
    assert rec["analysis"] == {"seed": 1, "n_resamples": 200, "level": 0.95}
    import aiplib

    assert rec["aiplib_version"] == aiplib.__version__
    files = [p for p in ws.results.rglob("*") if p.is_file() and p.suffix != ".json"]
    assert any(p.suffix == ".csv" for p in files) and any(p.suffix == ".png" for p in files)
    for p in files:
        side = p.with_suffix(".json")
        assert side.is_file(), p
        prov = json.loads(side.read_text())["provenance"]
        entry = [f for f in prov["files"] if f["file"] == p.relative_to(ws.results).as_posix()]
        assert entry and entry[0]["sha256"] == file_sha256(p)
        assert prov["normalizer"]["version"] == NORMALIZER_VERSION and prov["analysis"]["seed"] == 1
    scores_side = json.loads((ws.results / "scores" / "asr.json").read_text())
    assert "n_errors" in scores_side and "normalizer" in scores_side   # scoring keys kept


def test_write_sidecar_merges_and_rejects(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a\n1\n")
    (tmp_path / "x.json").write_text(json.dumps({"keep": 1}))
    side = provenance.write_sidecar(p, extra={"seed": 7, "model": "m"})
    obj = json.loads(side.read_text())
    assert obj["keep"] == 1 and obj["provenance"]["seed"] == 7
    assert obj["provenance"]["files"][0]["sha256"] == file_sha256(p)
    with pytest.raises(AiplibError):
        provenance.write_sidecar(tmp_path / "missing.csv")
    with pytest.raises(AiplibError):
        provenance.write_sidecar(tmp_path / "x.json")


# -------------------------------------------------------------------------------- comparison
@pytest.mark.slow
def test_compare_same_run_is_all_same(run_a):
    ws, _ = run_a
    c = comparison.compare_runs(ws, ws, n_resamples=100)
    assert set(c["verdict"]) <= {"same", "n/a"}
    assert np.allclose(c["change_pp"].fillna(0), 0)
    assert set(c["scope"]) == set(cond.SCOPES)
    assert set(c["task"]) == {"asr", "kws", "asr_steer_p5", "kws_steer_p5"}


@pytest.mark.slow
def test_compare_detects_worse_run_and_reads_results_copy(run_a, run_worse, tmp_path):
    ws, _ = run_a
    prev = tmp_path / "last-green"
    shutil.copytree(ws.results, prev)                    # an archived results folder
    c = comparison.compare_runs(prev, run_worse, n_resamples=300, seed=2)
    o = c[(c.scope == "overall") & (c.task == "asr") & (c.model == "m_a")].iloc[0]
    assert o.b_pp > o.a_pp and o.change_pp == pytest.approx(o.b_pp - o.a_pp)
    assert o.ci_low_pp > 0 and o.verdict == "worse"
    k = c[(c.scope == "condition") & (c.task == "kws")]
    assert set(k["test"]) == {"mcnemar_exact"}
    assert (c[c.scope == "clean"]["verdict"] != "worse").all()   # clean output unchanged
    fails = criteria.check_criteria(run_worse, None, prev, n_resamples=100)
    assert any(f["kind"] == "regression" for f in fails)
    assert all(f["kind"] == "regression" for f in fails)


@pytest.mark.slow
def test_compare_refuses_different_manifest(run_a, tmp_path):
    ws, _ = run_a
    other = _scored(tmp_path, n_asr=5)                  # other items → other manifest hash
    with pytest.raises(comparison.RunMismatchError, match=r"manifests/asr\.csv differ"):
        comparison.compare_runs(ws, other)
    with pytest.raises(AiplibError):                    # RunMismatchError is an AiplibError
        comparison.compare_runs(other, ws)


@pytest.mark.slow
def test_compare_refuses_different_normaliser(run_a, tmp_path):
    ws, _ = run_a
    prev = tmp_path / "results"
    shutil.copytree(ws.results, prev)
    rec = json.loads((prev / "provenance.json").read_text())
    rec["normalizer"]["version"] = "0.0.1"
    (prev / "provenance.json").write_text(json.dumps(rec))
    with pytest.raises(comparison.RunMismatchError, match="normalisers differ"):
        comparison.compare_runs(prev, ws)
    (prev / "provenance.json").unlink()
    with pytest.raises(AiplibError, match="provenance.json"):
        comparison.compare_runs(prev, ws)


# ---------------------------------------------------------------------------------- criteria
def test_criteria_validation():
    spec = criteria.load_criteria(criteria.EXAMPLE_CRITERIA)
    assert len(spec["criteria"]) == 4 and spec["min_diff_pp"] == 2.0
    assert spec["criteria"][1]["model"] == "*"
    with pytest.raises(ValidationError) as e:
        criteria.load_criteria({"criteria": [{"measure": "wer"}, {"max": "x", "scope": "bad",
                                                                "colour": 1}],
                              "no_worse_than_previous": "yes", "extra": 1})
    assert len(e.value.problems) >= 6
    assert criteria.load_criteria([{"measure": "wer", "max": 1}])["criteria"][0]["max"] == 1


def test_criterion_without_a_bound_asks_for_min_or_max():
    """A criterion with neither bound names both (either one is enough), not 'max' alone."""
    with pytest.raises(ValidationError) as e:
        criteria.load_criteria({"criteria": [{"measure": "wer"}]})
    assert e.value.problems == ["criteria: $.criteria[0]: give 'min' and/or 'max'"]
    assert criteria.load_criteria([{"measure": "wer", "min": 0}])["criteria"][0]["min"] == 0


@pytest.mark.slow
def test_check_criteria_thresholds(run_a):
    ws, _ = run_a
    ok = [{"task": "asr", "measure": "wer", "max": 5.0},
          {"task": "asr", "bg_id": "all", "snr_db": 0, "measure": "wer_pp", "min": 0, "max": 500},
          {"task": "kws", "scope": "overall", "measure": "delta_acc", "max": 1.0}]
    assert criteria.check_criteria(ws, ok) == []
    fails = criteria.check_criteria(ws, [
        {"task": "asr", "model": "m_a", "bg_id": "all", "snr_db": 0, "measure": "wer_pp",
         "max": 0.0},
        {"task": "nope", "measure": "wer", "max": 1},
        {"task": "asr", "measure": "acc_pp", "min": 0}])
    kinds = [f["kind"] for f in fails]
    assert kinds.count("threshold") == 1 and "no_match" in kinds and "unknown_measure" in kinds
    th = next(f for f in fails if f["kind"] == "threshold")
    assert th["condition"] == "all @ 0 dB" and th["value"] > 0 and "criterion 0" in th["message"]
    # fraction alias vs percent column
    assert criteria.check_criteria(ws, [{"task": "asr", "scope": "clean", "measure": "wer",
                                       "max": 0.01}]) == []
    t = cond.read_condition_tables(ws.results)["asr"]
    sel = criteria._select(t, {"snr_db": "all", "bg_id": "*", "task": "*", "model": "*",
                             "scope": "*"})
    assert set(sel["scope"]) == {"overall", "background"}


def _write(path, obj):
    path.write_text(json.dumps(obj))
    return str(path)


@pytest.mark.slow
def test_cli_exit_codes(run_a, run_worse, tmp_path):
    ws, _ = run_a
    root = str(ws.root.parent)
    bad = _write(tmp_path / "bad.json", {"criteria": [{"task": "asr", "measure": "wer_pp",
                                                       "max": 0}]})
    good = _write(tmp_path / "good.json", {"criteria": [{"task": "asr", "measure": "wer_pp",
                                                         "max": 1000}]})
    args = ["--profile", "demo", "--data-root", root, "--n-resamples", "100", "--check-only"]
    assert report.main(args + ["--criteria", bad]) == report.EXIT_CRITERIA_FAILED == 3
    assert report.main(args + ["--criteria", good]) == 0
    assert report.main(args + ["--criteria", str(tmp_path / "absent.json")]) == 1
    # regression against the previous (better) run: exit 3 even with passing criteria
    worse_root = str(run_worse.root.parent)
    assert report.main(["--profile", "demo", "--data-root", worse_root, "--n-resamples", "100",
                        "--check-only", "--criteria", good, "--previous", str(ws.root)]) == 3
    # previous run read from the criteria file; the better run is not worse overall (with 6
    # items single conditions can flip by chance, so only the pooled scopes are checked)
    nw = _write(tmp_path / "nw.json", {"criteria": [], "no_worse_than_previous": True,
                                       "previous": os.path.relpath(run_worse.results, tmp_path),
                                       "regression_scopes": ["overall", "snr"]})
    assert report.main(args + ["--criteria", nw]) == 0


@pytest.mark.slow
def test_module_entry_point_exits_3(run_a, tmp_path):
    ws, _ = run_a
    bad = _write(tmp_path / "criteria.json", [{"task": "kws", "measure": "acc_pp", "min": 101}])
    r = subprocess.run([sys.executable, "-m", "aiplib.analysis.report", "--profile", "demo",
                        "--data-root", str(ws.root.parent), "--criteria", bad, "--check-only",
                        "--n-resamples", "50"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, r.stderr
    assert "criteria FAILED" in r.stderr and "acc_pp" in r.stderr


# --------------------------------------------------------------------------------- Table 2
@pytest.mark.slow
def test_table2_constant_descriptor_and_bh(tmp_path):
    ws = _scored(tmp_path, n_bg=8, models=("m_a",))
    d = pd.read_csv(ws.descriptors / "acoustic_descriptors.csv")
    d["rms_variance"] = 0.25                              # constant descriptor column
    d.to_csv(ws.descriptors / "acoustic_descriptors.csv", index=False)
    write_tables(ws, n_resamples=100)
    t2 = pd.read_csv(ws.results / "tables" / "table2_descriptor_correlations.csv")
    rv = t2[t2.descriptor == "rms_variance"]
    assert len(rv) == 2 * 2 and rv[["r_s", "p", "p_permutation", "ci_low", "p_bh"]].isna().all().all()
    assert rv["note"].str.contains("constant").all()
    z = t2[(t2.descriptor == "zcr") & (t2.task == "asr") & (t2.model == "pooled")].iloc[0]
    # 8 backgrounds: exact p (2 of 8! permutations reach |r_s| = 1), no bootstrap interval
    assert z.r_s == pytest.approx(1.0) and z.p_method == "exact" and z.n_permutations == 40320
    assert z.p_permutation == pytest.approx(2 / 40320)
    assert np.isnan(z.ci_low) and z.ci_usable == 0 and "< 10: no interval" in z.note
    # BH by hand: sort the m finite p-values, q_(j) = min_{k >= j} m p_(k) / k
    for (_, _), g in t2.groupby(["task", "model"]):
        p = g["p_permutation"].to_numpy(float)
        fin = np.isfinite(p)
        m = fin.sum()
        order = np.argsort(p[fin])
        ps = p[fin][order]
        q = np.minimum.accumulate((m * ps / np.arange(1, m + 1))[::-1])[::-1].clip(max=1)
        hand = np.full(p.shape, np.nan)
        hand[np.flatnonzero(fin)[order]] = q
        np.testing.assert_allclose(g["p_bh"].to_numpy(float), hand)
    from aiplib.analysis.report_tables import table2_display

    shown = table2_display(t2).df
    assert shown[shown.descriptor == "rms_variance"]["note"].str.contains("constant").all()
    assert (shown[shown.descriptor == "rms_variance"]["r_s [95% CI]"] == "–").all()


def test_constant_degradation_column_gives_nan_note():
    bgs = [f"bg{i}" for i in range(6)]
    deg = pd.DataFrame({"m": np.zeros(6), "pooled": np.arange(6.0)},
                       index=pd.Index(bgs, name="bg_id"))
    desc = pd.DataFrame({"bg_id": bgs, **{k: np.arange(6.0) + i
                                          for i, k in enumerate(formats.DESCRIPTORS)}})
    t = stats.descriptor_correlations(deg, desc, n_resamples=50)
    m = t[t.model == "m"]
    assert m["r_s"].isna().all() and m["note"].str.contains("constant").all()
    assert np.allclose(t[t.model == "pooled"]["r_s"], 1.0)


# ------------------------------------------------------------------------------------ timing
@pytest.mark.slow
def test_demo_sized_condition_tables_under_60_s(tmp_path):
    import time

    ws = make_run(tmp_path, n_asr=28, n_kws=30, models=("m_a",))
    score_inference(ws)
    t0 = time.perf_counter()
    cond.write_condition_tables(ws)                       # default 2000 resamples
    assert time.perf_counter() - t0 < 60


def test_window_warning_names_each_model_decoded_on_the_window():
    """A run on the opt-in 15/20/30 s window gets one warning line; 30 s runs get none."""
    from aiplib.analysis.report_tables import window_warnings

    models = {"whisper_tiny_en": {"decoding_path": "window"}, "mine": {"decoding_path": "fast"},
              "api": {"decoding_path": None}}
    lines = window_warnings(models)
    assert len(lines) == 1
    assert lines[0].startswith("**Decoding.** `whisper_tiny_en` was decoded on the 15/20/30 s")
    assert window_warnings({"whisper_tiny_en": {"decoding_path": "fast"}}) == []


# ------------------------------------------------------------- the report as a paper's Results
@pytest.mark.slow
def test_summary_json_and_csv_equal_table_r1_and_the_condition_tables(run_a):
    """``results/summary.json`` and ``.csv`` (written by notebook 09): one record per model × task,
    each number the one of its condition table's ``clean`` / ``overall`` rows and of stage 8's
    coverage table, read back from the CSVs; the levels and the change as Table R1 prints them."""
    from aiplib.analysis import report_tables as rt
    from aiplib.analysis.summary import SUMMARY_COLUMNS, SUMMARY_SCHEMA, summary_records

    ws, _ = run_a
    doc = json.loads((ws.results / "summary.json").read_text())
    csv = pd.read_csv(ws.results / "summary.csv")
    assert doc["schema"] == SUMMARY_SCHEMA and doc["profile"] == "demo"
    assert doc["columns"] == SUMMARY_COLUMNS == list(csv.columns)
    recs = doc["records"]
    tasks = sorted(p.stem.removeprefix("conditions_") for p in ws.tables_dir.glob("conditions_*.csv")
                   if not p.stem.endswith("_bg_active"))
    assert sorted((r["model"], r["task"]) for r in recs) == [(m, t) for m in ("m_a", "m_b") for t in tasks]
    assert len(csv) == len(recs) == 8
    assert not (ws.tables_dir / "coverage.csv").is_file()     # stage 8's notebook did not run here
    tables = {t: pd.read_csv(ws.tables_dir / f"conditions_{t}.csv") for t in tasks}
    r1 = rt.summary_table(tables).df.set_index(["task", "model"])
    for rec, (_, row) in zip(recs, csv.iterrows()):
        t = tables[rec["task"]]
        g = t[t["model"] == rec["model"]]
        o = g[g["scope"] == "overall"].iloc[0]
        c = g[g["scope"] == "clean"].iloc[0]
        level = "wer_pp" if rec["task"].startswith("asr") else "acc_pp"
        assert rec["condition_family"] == "background" and rec["source"] == f"tables/conditions_{rec['task']}.csv"
        assert rec["clean_pp"] == c[level] and rec["noisy_pp"] == o[level]
        for col in ("delta_pp", "ci_low_pp", "ci_high_pp", "p_value", "level"):
            assert rec[col] == o[col], col
        assert rec["n_items"] == o["n_items"] == 12 and rec["n_pairs"] == o["n_pairs"] == 12 * 5 * 2
        assert rec["n_resamples"] == o["n_resamples"] == 200 and rec["verdict"] == o["verdict"]
        assert rec["n_stimuli"] is None and rec["coverage"] is None and rec["complete"] is None
        # the CSV holds the same record; Table R1 prints the same numbers
        for col in ("clean_pp", "noisy_pp", "delta_pp", "ci_low_pp", "ci_high_pp", "n_items"):
            assert row[col] == pytest.approx(rec[col], rel=1e-12), col
        shown = r1.loc[(rec["task"], rec["model"])]
        assert shown["clean %"] == f"{rec['clean_pp']:.1f}" and shown["noisy (all) %"] == f"{rec['noisy_pp']:.1f}"
        assert shown["mean per-item Δ pp [95% CI] (+ = worse)"] == (
            f"{rec['delta_pp']:+.1f} [{rec['ci_low_pp']:.1f}, {rec['ci_high_pp']:.1f}]")
    # with stage 8's coverage table: the stimuli scored of the manifest's (12 items × 11 stimuli)
    cov = pd.DataFrame({"family": "background", "model": ["m_a", "m_b"], "task": "asr", "n_stimuli": 132,
                        "n_scored": [132, 120], "complete": [True, False]})
    got = {(r["model"], r["task"]): r for r in summary_records(tables, cov)}
    assert got[("m_a", "asr")]["coverage"] == 1.0 and got[("m_a", "asr")]["complete"] is True
    assert got[("m_b", "asr")]["coverage"] == pytest.approx(120 / 132) and got[("m_b", "asr")]["complete"] is False
    assert got[("m_b", "asr")]["n_stimuli_scored"] == 120 and got[("m_a", "kws")]["n_stimuli"] is None


def _min_text_px(png, shown_px=800):
    """The smallest text of a rendered figure in px when the PNG is shown ``shown_px`` wide: its
    smallest font (pt, the PNG's ``aip:min_font_pt``) × dpi / 72 × shown_px / width."""
    from PIL import Image

    from aiplib.analysis.paper import MIN_FONT_KEY

    with Image.open(png) as im:
        return float(im.info[MIN_FONT_KEY]) * im.info["dpi"][0] / 72 * shown_px / im.size[0]


@pytest.mark.slow
def test_figures_text_is_at_least_9_px_at_800_px(run_a):
    """Every figure notebook 09 drew: its smallest text, from the PNG's dpi, width and recorded
    font size, is at least 9 px when the figure is shown 800 px wide."""
    ws, _ = run_a
    pngs = sorted((ws.results / "figures").glob("*.png"))
    assert len(pngs) == 6
    sizes = {p.stem: _min_text_px(p) for p in pngs}
    assert all(v >= 9 for v in sizes.values()), sizes


def test_save_figure_records_the_smallest_font_of_the_figure(tmp_path):
    """save_figure writes the smallest font size of the figure's visible text into the PNG: the
    same as every matplotlib Text artist of the figure gives; 7 pt on a 10 in figure at 800 px is
    7 · 800 / 720 = 7.8 px, too small; the same figure 6 in wide gives 13 px."""
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    from aiplib.analysis.paper import save_figure

    for width, want_px in ((10.0, 7 * 800 / 720), (6.0, 7 * 800 / 432)):
        fig = Figure(figsize=(width, 3))
        ax = fig.subplots()
        ax.plot([0, 1], [0, 1])
        ax.set_xlabel("SNR (dB)", fontsize=12)
        ax.text(0.5, 0.5, "n=1", fontsize=7)
        ax.text(0.2, 0.2, "", fontsize=3)                 # empty: not drawn, not counted
        ax.tick_params(labelsize=9)
        shown = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert min(shown) == 7
        png = save_figure(fig, tmp_path / f"w{width:g}", "f", formats=("png",))[0]
        assert _min_text_px(png) == pytest.approx(want_px, rel=1e-3)


@pytest.mark.slow
def test_report_title_findings_tables_glossary_and_table3_units(run_a, tmp_path):
    """The rendered report of two models: its first heading and browser tab name the profile, both
    models and the date; the Overall and SNR findings are compact tables with the absolute levels
    (clean and noisy %) beside the change; the first use of each glossary term links to its entry;
    Table 3's headers are the paper's descriptor names with units; Figure 7's caption names the
    models of the run (no Qwen2-Audio); the plumbing comes after Findings."""
    ws, out = run_a
    results = tmp_path / "demo" / "results"
    shutil.copytree(ws.results, results)
    rendered = report.render_report(out["executed"], results)
    md, page = rendered["report_md"].read_text(), rendered["report_html"].read_text()
    first = md.splitlines()[0]
    assert re.fullmatch(r"# Results · demo profile · m_a, m_b · \d{4}-\d{2}-\d{2}", first), first
    assert f"<title>{first[2:]}</title>" in page
    found = md[md.index("## Findings"):md.index("\n## ", md.index("## Findings"))]
    assert "| model | measure | clean % | noisy % | mean per-item Δ " in found
    t = pd.read_csv(ws.tables_dir / "conditions_asr.csv")
    o = t[(t["scope"] == "overall") & (t["model"] == "m_b")].iloc[0]
    c = t[(t["scope"] == "clean") & (t["model"] == "m_b")].iloc[0]
    assert (f"| `m_b` | ASR WER | {c.wer_pp:.1f} | {o.wer_pp:.1f} | {o.delta_pp:+.1f} "
            f"[{o.ci_low_pp:+.1f}, {o.ci_high_pp:+.1f}] | 12 |") in found
    assert "10 dB: level % · Δ pp [95 % CI]" in found and "0 dB: level % · Δ pp [95 % CI]" in found
    assert md.index("## Findings") < md.index("Condition tables of this run only") \
        and md.index("## How this was run") < md.index("rule for partial models")
    for anchor in ("glossary-snr", "glossary-delta-wer", "glossary-pp", "glossary-r-s", "glossary-p-bh",
                   "glossary-rer", "glossary-coarse", "glossary-background-id"):
        assert md.count(f"](#{anchor})") == 1, anchor          # linked once, from its first use
        assert f'id="{anchor}"' in page and f'href="#{anchor}"' in page
    assert md.index("](#glossary-snr)") < md.index("## Coverage")  # first used in Findings
    heads = re.search(r"\| rank \| background id \|.*\|", md).group(0)
    for h in ("Zero crossing rate (crossings/sample)", "Spectral centroid (Hz)", "Spectral contrast (dB)",
              "RMS energy variance (FS²)", "ASR ΔWER (pp)"):
        assert f"| {h} |" in heads
    cap = md[md.index("**Figure 7 ·"):md.index("](figures/figure7_snr_performance.png)")]
    assert "`m_a`, `m_b`" in cap and "Qwen" not in cap
