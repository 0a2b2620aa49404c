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
# (file, package, licence, attribution).

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

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/params.py)

# %%
ws = aiplib.workspace(profile, create=profile != "custom")  # custom: nothing is written before validation
print(ws.root)

# %%
from aiplib import pipeline

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
