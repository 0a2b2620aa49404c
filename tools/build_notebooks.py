"""Write notebooks/NN_*.ipynb from the cell texts below (clean: no outputs).

The notebooks are the compendium's story; this script keeps them consistent and reviewable.
Run ``.venv/bin/python tools/build_notebooks.py`` after editing a cell here.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]

COMMON = '''import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI'''

SETUP = '''ws = aiplib.workspace(profile)
print(ws.root)'''

NB = {}


def md(text):
    return ("md", text)


def code(text):
    return ("code", text)


def params(text):
    return ("params", text)


NB["01_download_data"] = [
    md('''# 1 · Raw data

**Reads** the profile's sources — for `demo` the Debian packages of the embedded default
(Asterisk English prompts, background sounds from game and sample packages, espeak-ng and flite
voices); for `paper` the public corpora (ESC-50, MS-SNSD, NOISEX-92, MUSAN, LibriSpeech, Speech
Commands); for `custom` the user's folders, validated before any work.
**Writes** `data/<profile>/raw/` and `raw/inventory.csv` (file, package, licence, attribution).'''),
    params(COMMON + '''
install: bool = True  # demo: apt-get missing Debian packages (root or sudo), else a clear message
base_urls: dict = {}  # paper: mirrors per corpus, e.g. {"esc50": "http://mirror/esc50"}
speech_dir: str = ""  # custom: folder of utterances
texts: str = ""  # custom: CSV/TSV with file,text[,accent_group,speaker]
kws_dir: str = ""  # custom: folder of keyword clips
kws_labels: str = ""  # custom: CSV/TSV with file,label
keywords: str = "yes,no,up,down,left,right,on,off,stop,go"  # custom: the closed keyword set
backgrounds_dir: str = ""  # custom: folder of background recordings (+ optional licences.csv)'''),
    code('''ws = aiplib.workspace(profile, create=profile != "custom")  # custom: nothing is written before validation
print(ws.root)'''),
    code('''from aiplib import pipeline

params = dict(install=install) if profile == "demo" else {}
if profile == "paper":
    params = dict(base_urls=base_urls or None)
if profile == "custom":
    params = dict(speech_dir=speech_dir, texts=texts, kws_dir=kws_dir, kws_labels=kws_labels,
                  keywords=keywords, backgrounds_dir=backgrounds_dir)
inventory = pipeline.gather_raw(ws, **params)
inventory.groupby(inventory.columns[1]).size() if len(inventory) else inventory'''),
]

NB["02_build_item_banks"] = [
    md('''# 2 · Item banks

**Reads** `raw/`. **Writes** `itembanks/asr.jsonl` (utterances with reference transcripts and accent
groups) and `itembanks/kws.jsonl` (keyword clips: `label`, `is_target`), each item's audio as a
16 kHz mono WAV under `itembanks/audio/`, and the source, licence and attribution of every item.
In `demo`, the accent groups are **synthetic voices** (espeak-ng and flite) standing in for accents;
the real speech is one Asterisk speaker.'''),
    params(COMMON + '''
seed: int = 20240917  # item selection seed
overwrite: bool = False  # rebuild existing item banks'''),
    code(SETUP),
    code('''from aiplib import pipeline

sizes = pipeline.stage_sizes(profile, smoke)
banks = pipeline.build_item_banks(ws, seed=seed, overwrite=overwrite, **sizes)
{family: len(df) for family, df in banks.items()}'''),
    code('''banks["asr"].groupby("accent_group").agg(items=("item_id", "size"), mean_s=("duration_s", "mean"))'''),
]

NB["03_curate_backgrounds"] = [
    md('''# 3 · The background battery

**Reads** the profile's background sources. **Writes** `bg/<bg_id>.wav` (mono 16 kHz, looped or cut
to 30 s, loudness-normalised to −23 LUFS (the authors’ value) with pyloudnorm, ITU-R BS.1770) and
`descriptors/battery.csv` (category, source, licence, attribution, source duration, gain, LUFS).'''),
    params(COMMON + '''
duration_s: float = 30.0  # length of every curated background, s
target_lufs: float = -23.0  # loudness of every background, LUFS
seed: int = 20240917  # seeds the synthetic controls
overwrite: bool = False'''),
    code(SETUP),
    code('''from aiplib import pipeline
from aiplib.backgrounds import curate_battery

specs = pipeline.battery_specs(ws)
battery = curate_battery(ws, specs, duration_s=duration_s, target_lufs=target_lufs, seed=seed,
                         overwrite=overwrite)
battery[["bg_id", "category", "source_package", "licence", "source_duration_s", "lufs_after"]]'''),
    code('''battery.groupby("category").size()'''),
]

NB["04_extract_descriptors"] = [
    md('''# 4 · Acoustic descriptors

**Reads** `bg/*.wav` and `descriptors/battery.csv`. **Writes** `descriptors/acoustic_descriptors.csv`:
per background the nine descriptors — zero crossing rate, spectral centroid, rolloff, bandwidth,
flux, flatness and contrast, RMS energy variance (librosa, summarised over frames) and the Silero
VAD speech fraction. Units and frame settings are in `aiplib.descriptors.DESCRIPTOR_INFO`.'''),
    params(COMMON + '''
vad_threshold: float = 0.5  # Silero VAD speech probability threshold
overwrite: bool = False'''),
    code(SETUP),
    code('''from aiplib.descriptors import DESCRIPTOR_INFO, descriptor_table

table = descriptor_table(ws, vad_threshold=vad_threshold, overwrite=overwrite)
table.round(3)'''),
    code('''import pandas as pd

pd.DataFrame(DESCRIPTOR_INFO, index=["unit", "meaning", "source"]).T'''),
]

NB["05_build_manifests"] = [
    md('''# 5 · Stimulus manifests

**Reads** the item banks and the battery. **Writes** `manifests/asr.csv` and `manifests/kws.csv` in
the authors' schema (IvLabs/AIP-Speech): 61 stimuli per item (clean + 20 backgrounds × 10, 5 and
0 dB SNR), ids `<item>_clean` / `<item>_<background>_snr<N>`, seeds counting rows from 0 (ASR) and
10000 (KWS). No audio is written: every stimulus is mixed on the fly by
`aiplib.mixing.materialize(row)` with the authors' formula. `bg_active` marks rows whose background
segment is digital silence. Existing manifests are kept.'''),
    params(COMMON + '''
snrs: list = [10, 5, 0]  # SNRs in dB (integers)
overwrite: bool = False'''),
    code(SETUP),
    code('''from aiplib.manifests import build_manifests

manifests = build_manifests(ws, snrs=snrs, overwrite=overwrite)
{family: (len(df), df.groupby("speech_id").size().unique().tolist(),
          int((df["bg_active"] == False).sum())) for family, df in manifests.items()}  # noqa: E712'''),
    code('''manifests["asr"].head()'''),
]

NB["06_manipulation_checks"] = [
    md('''# 6 · Manipulation checks

Does the mixing do what it says? **Reads** the manifests. **Writes** `checks/inspection/` (mixed
clips to listen to), `checks/bg_presence.csv` (achieved SNR and background activity per background
and SNR), `checks/wer_constancy.csv` (does the recogniser's clean WER depend on the speech level? If
not, the SNR is what the noisy conditions change; the spread per item is shown below — items near
the recogniser's limits, such as some synthetic voices, can vary) and `checks/determinism.json`
(the same rows give the same bytes).'''),
    params(COMMON + '''
model: str = "whisper_tiny_en"  # recogniser for the WER check (registry id)
n_inspection: int = 6 if smoke else 60  # clips written for listening
n_wer_items: int = 2 if smoke else 8  # clean items in the WER constancy check
seed: int = 20240917'''),
    code(SETUP),
    code('''from aiplib import checks

presence = checks.background_presence(ws)
presence.groupby("snr_db")[["target_snr_db", "achieved_snr_db", "bg_active_fraction"]].mean().round(3)'''),
    code('''constancy = checks.wer_constancy(ws, model=model, n_items=n_wer_items, seed=seed)
table = constancy.pivot_table(index="item_id", columns="level_lufs", values="wer")
table["spread"] = table.max(axis=1) - table.min(axis=1)
print(f"items whose WER changes with speech level: {(table['spread'] > 0).sum()} of {len(table)}; "
      f"largest spread {table['spread'].max():.3f}")
table'''),
    code('''determinism = checks.determinism(ws, n_rows=20, seed=seed)
determinism'''),
    code('''# Backgrounds whose segment is digital silence (e.g. ESC-50 zero padding): those stimuli are
# effectively clean (the authors' mixer); the report offers the analysis without them.
inactive = checks.inactive_backgrounds(ws)
inactive[inactive["n_inactive"] > 0]'''),
    code('''written = checks.write_inspection_clips(ws, n=n_inspection, seed=seed)
len(written)'''),
]

NB["07_run_inference"] = [
    md('''# 7 · Inference

**Reads** the manifests and the model registry (`aiplib/models/registry.yaml`). **Writes**
`inference/<model>/<task>.jsonl`, one row per stimulus, appended as it goes: a re-run continues
where the last one stopped and retries failed generations. Each stimulus is mixed on the fly.

For Whisper-family recognisers the task prompt is passed as the decoder's *initial prompt*: it is
text the decoder conditions on, not an instruction it follows. A steering prompt can therefore only
act as a lexical/stylistic prior, so a Whisper RER near 1 says the prompt changed little, not that
the model "ignored" an instruction.'''),
    params(COMMON + '''
model: str = "whisper_tiny_en"  # registry id, comma list, or "all"
task: str = "all"  # asr | kws | asr_steer_p5 | kws_steer_p5 | comma list | all
path: str = "fast"  # embedded Whisper decoding path: fast | standard
limit: int = 0  # >0: only the first N stimuli per task (0 means all)
prompt_set: str = ""  # prompt set name, empty for the profile default (paper: the PROMPTS dict of the authors)
prompts_file: str = ""  # paper: local copy of the inference script of the authors, empty to fetch it by commit'''),
    code(SETUP),
    md('''The prompts: the set's name, where its texts come from (for `paper`, the authors' script, read
with `ast` and never run) and its SHA-256 are recorded in every inference row and in `run_log.jsonl`.'''),
    code('''import pandas as pd
from aiplib.prompt_sets import get_prompt_set, prompt_set_record

ps = get_prompt_set(prompt_set or profile, ws=ws, prompts_file=prompts_file or None)
ps_rec = prompt_set_record(ps)
print(f"prompt set {ps_rec['prompt_set']} · KWS {ps_rec['kws_answer']} · sha256 {ps_rec['sha256']}")
print("source:", ps_rec["source"])
pd.DataFrame([{"task": t, "prompt_id": v["prompt_id"], "text": v["text"]} for t, v in ps_rec["tasks"].items()])'''),
    code('''from aiplib.inference import run_inference

if smoke and not limit:
    limit = 40
summary = run_inference(ws, models=model, tasks=task, path=path, limit=limit or None, prompt_set=ps)
summary'''),
    code('''%xmode Minimal
from aiplib.inference import raise_if_not_run

raise_if_not_run(summary)  # a model that could not run (no GPU, gated weights …) fails the stage here'''),
]

NB["08_score_outputs"] = [
    md('''# 8 · Scoring

**Reads** `inference/*/*.jsonl` and the manifests. **Writes** `results/scores/<task>.csv`: per
stimulus the WER on normalised text (Whisper's English normaliser) and ΔWER = WER(noisy) −
WER(clean) of the same item, or, for keyword spotting, correctness under the closed-set first-word
rule and Δacc = acc(clean) − acc(noisy). Failed generations are left out and counted.
`inference_dir` scores a folder of inference files written elsewhere (e.g. the authors' published
`inference/`; `make score INFERENCE_DIR=…`), `manifests_dir` its manifests (optional: their rows
carry the manifest columns).'''),
    params(COMMON + '''
inference_dir: str = ""  # empty: this workspace's inference/
manifests_dir: str = ""  # empty: this workspace's manifests/'''),
    code(SETUP),
    code('''from aiplib.scoring import score_inference

scores = score_inference(ws, inference_dir=inference_dir or None, manifests_dir=manifests_dir or None)
{task: len(df) for task, df in scores.items()}'''),
    code('''for task, df in scores.items():
    col = "wer" if "wer" in df else "correct"
    display(df.assign(snr=df["snr_db"].fillna(99)).groupby(["model", "snr"])[col].mean().unstack().round(3))'''),
]

NB["09_make_figures"] = [
    md('''# 9 · Figures, tables and the report

**Reads** `results/scores/`, `descriptors/`, `manifests/`, `inference/*/run_log.jsonl`. **Writes** the
paper's Figures 2–7 (PNG and PDF under `results/figures/`), Tables 2–5 (CSV under
`results/tables/`), per-condition tables with intervals and verdicts
(`results/tables/conditions_<task>.csv`), `results/report.md` and `report.html`, and a JSON
provenance sidecar next to every results file. Degradation is averaged per background over the
SNRs (and over the models for pooled values) and rank-correlated (Spearman) with each descriptor
across the backgrounds; every number comes with a bootstrap 95 % interval.'''),
    params(COMMON + '''
n_resamples: int = 200 if smoke else 2000  # bootstrap resamples of every interval
seed: int = 0  # bootstrap seed (recorded in every table and sidecar)
min_diff_pp: float = 2.0  # smallest change (percentage points) called worse / better
criteria: str = ""  # optional criteria JSON (format: aiplib/report.py); empty for none
previous: str = ""  # optional previous run (workspace root or results folder) to compare with'''),
    code(SETUP),
    code('''from aiplib.figures import make_all_figures

written = make_all_figures(ws, n_resamples=n_resamples, seed=seed)
sorted(written)'''),
    code('''import pandas as pd

pd.read_csv(ws.results / "tables" / "table2_descriptor_correlations.csv").round(3).head(20)'''),
    code('''from IPython.display import Image

Image(filename=str(ws.results / "figures" / "figure4_background_ranking.png"))'''),
    code('''from aiplib.report import build_report

out = build_report(ws, n_resamples=n_resamples, seed=seed, min_diff_pp=min_diff_pp,
                   criteria=criteria or None, previous=previous or None)
print(out["report_md"])
out["failures"][:20]'''),
    code('''t = pd.read_csv(out["conditions"]["asr"])
t.loc[t["scope"].isin(["clean", "overall", "snr"]),
      ["model", "condition", "n_items", "wer_pp", "mean_wer_pp", "cer_pp", "sub_pp", "del_pp",
       "ins_pp", "delta_pp", "ci_low_pp", "ci_high_pp", "p_value", "verdict"]].round(2)'''),
    md('''**Silent background segments.** A background that is partly digital silence (ESC-50 clips are
zero-padded to 5 s) can leave a stimulus effectively clean. Such rows (`bg_active` false, measured
at stage 5) stay in every number above, as the authors' mixer made them; the table below counts
them per background, and `results/tables/conditions_<task>_bg_active.csv` repeats the
per-condition analysis without them.'''),
    code('''from aiplib.conditions import inactive_background_rows, write_active_only_tables
from aiplib.figures import load_scores

inactive = inactive_background_rows(load_scores(ws, tasks=list(out["conditions"])))
active_only = write_active_only_tables(ws, n_resamples=n_resamples, seed=seed)
print(f"{int(inactive['n_inactive'].sum())} noisy rows with a silent background segment; "
      f"analysis without them: {[str(p) for p in active_only.values()] or 'not needed'}")
inactive'''),
]

NB["10_listen_and_explore"] = [
    md('''# 10 · Listen and explore

Choose a task, item, background, SNR and model; hear the clean utterance, the background segment
and the mixture the model heard (mixed on the fly from the manifest row), and see the model's
response, its WER or correctness, and ΔWER against clean.
**Reads** the manifests, `bg/`, `descriptors/`, `inference/` and `results/scores/` (whatever exists). **Writes** nothing.'''),
    params(COMMON),
    code(SETUP),
    code('''from aiplib.widgets import explorer

ui = explorer(ws)
ui'''),
]


def build() -> None:
    out = ROOT / "notebooks"
    out.mkdir(exist_ok=True)
    for name, cells in NB.items():
        nb = new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.metadata["language_info"] = {"name": "python"}
        for kind, text in cells:
            if kind == "md":
                nb.cells.append(new_markdown_cell(text))
            elif kind == "params":
                nb.cells.append(new_code_cell(text, metadata={"tags": ["parameters"]}))
            else:
                nb.cells.append(new_code_cell(text))
        for i, c in enumerate(nb.cells):
            c["id"] = f"{name[:2]}-{i:02d}"
        nbformat.write(nb, out / f"{name}.ipynb")
    print(f"wrote {len(NB)} notebooks to {out}")


if __name__ == "__main__":
    build()
