# %% [markdown]
# # 1 · Raw data
#
# **What the authors did.** They drew speech from public corpora (LibriSpeech test-clean, Common
# Voice English, Google Speech Commands v0.02) and backgrounds from public sound collections
# (ESC-50, MS-SNSD, NOISEX-92, MUSAN, FMA), downloaded by hand (IvLabs/AIP-Speech `README.md`).
# **What we do.** One call per profile: `paper` downloads the same corpora with resumable, verified
# downloads (a mirror per corpus can be given); `demo` uses small Debian packages instead (Asterisk
# English prompts, espeak-ng and flite voices, background sounds from game and sample packages), so
# the whole pipeline runs offline on a laptop; `custom` validates the user's folders first and
# lists every problem at once. Every file is recorded with its package or corpus, licence and
# attribution.
#
# **Reads** the profile's sources. **Writes** `data/<profile>/raw/` and `raw/inventory.csv`
# (file, package, licence, attribution), `raw/debian_packages.csv` (demo: version and `.deb`
# SHA-256 of each Debian package the inputs come from), and the distractor table of the
# competing-speech family, `raw/distractors/distractors.csv` (demo: the Debian Asterisk prompts in
# French, Italian, Russian and Spanish; paper/custom: `distractors_dir` with `distractor_texts`,
# validated like the custom speech).

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
install: bool = True  # demo: apt-get missing Debian packages (root or sudo), else a clear message
base_urls: dict[str, str] = {}  # paper: mirrors per corpus, e.g. {"esc50": "http://mirror/esc50"}
speech_dir: str = ""  # custom: folder of utterances
texts: str = ""  # custom: CSV/TSV with file,text[,accent_group,speaker]
kws_dir: str = ""  # custom: folder of keyword clips
kws_labels: str = ""  # custom: CSV/TSV with file,label
keywords: str = "yes,no,up,down,left,right,on,off,stop,go"  # custom: the closed keyword set
backgrounds_dir: str = ""  # custom: folder of background recordings (+ optional licences.csv)
distractors_dir: str = ""  # paper and custom: folder of other-language speech for the competing_speech family
distractor_texts: str = ""  # paper and custom: CSV/TSV with file,text,language[,speaker,same_voice_as_target]
suite: str = "background"  # condition families: background | competing_speech | channel | comma list | all

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile, create=profile != "custom")  # custom: nothing is written before validation
print(ws.root)

# %%
from aiplib.sources import pipeline

params = dict(install=install) if profile == "demo" else {}
if profile == "paper":
    params = dict(base_urls=base_urls or None)
if profile == "custom":
    params = dict(speech_dir=speech_dir, texts=texts, kws_dir=kws_dir, kws_labels=kws_labels,
                  keywords=keywords, backgrounds_dir=backgrounds_dir)
inventory = pipeline.gather_raw(ws, **params)
inventory.groupby(inventory.columns[1]).size() if len(inventory) else inventory

# %% [markdown]
# The first rows of the inventory: every file with where it came from and under which licence.

# %%
inventory.head(10)

# %% [markdown]
# Distractor talkers for the `competing_speech` condition family, made only when the suite holds it
# (`make all SUITE=all`): one row per utterance with its language, voice and transcript. The Spanish
# voice (`es_MX_f_Allison`) is the voice of the English demo items: a same-voice control.

# %%
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.stimuli.competing import prepare_distractors
from aiplib.core.tasks import parse_suite

distractors = None
if "competing_speech" in parse_suite(suite):
    distractors = prepare_distractors(ws, distractors_dir=distractors_dir, distractor_texts=distractor_texts)
    if distractors is None:
        raise AiplibParameterError(
            "the suite holds competing_speech: set the parameters distractors_dir and distractor_texts")
if distractors is None:
    print("no distractor table: the suite does not hold competing_speech")
else:
    print(ws.rel(ws.distractors_csv))
    display(distractors.groupby(["language", "voice", "same_voice_as_target"]).agg(
        utterances=("distractor_id", "size"), minutes=("duration_s", lambda d: round(d.sum() / 60, 1))))

# %% [markdown]
# What the demo's inputs depend on: the version and the `.deb` SHA-256 of every Debian package they
# come from (the packages above, the espeak-ng and flite voices, ffmpeg's G.722 decoder, the
# distractors' language packs and the libraries built with them), as installed now:
# `raw/debian_packages.csv`, read into `results/provenance.json` and the report by stage 9.

# %%
if ws.debian_packages_csv.is_file():
    display(pd.read_csv(ws.debian_packages_csv, dtype=str, keep_default_na=False)[
        ["package", "version", "deb_sha256", "sha256_source", "role"]])
else:
    print("no raw/debian_packages.csv: this profile's inputs do not come from Debian packages")

# %% [markdown]
# ## Checks
# Every file of the inventory is there with its size in bytes, and (demo, paper: packages we fetch)
# names a licence and an attribution; a custom folder's licences are optional and only counted.

# %%
listed = pd.read_csv(ws.raw / "inventory.csv", dtype=str, keep_default_na=False) if (ws.raw / "inventory.csv").is_file() else None
if listed is None:
    print("no raw/inventory.csv written by this profile: nothing to check")
else:
    for r in listed.to_dict("records"):
        p = ws.path(r["file"])
        assert p.is_file(), f"raw/inventory.csv: {r['file']} is listed but not there"
        assert not r.get("bytes") or p.stat().st_size == int(r["bytes"]), \
            f"raw/inventory.csv: {r['file']} has {p.stat().st_size} bytes, the inventory says {r['bytes']}"
        assert profile == "custom" or (r.get("licence", "").strip() and r.get("attribution", "").strip()), \
            f"raw/inventory.csv: {r['file']} names no licence or attribution"
    n_free = int((listed.get("licence", pd.Series("", index=listed.index)).str.strip() == "").sum())
    print(f"{len(listed)} files listed in raw/inventory.csv, each there with its size; {n_free} without a licence")
