# %% [markdown]
# # 2 · Item banks
#
# **What the authors did.** `scripts/02_build_banks.py` (IvLabs/AIP-Speech) picks the ASR items
# (LibriSpeech shuffled with `Random(42)`, the first labelled Common Voice validation clips per
# accent) and the KWS items (Speech Commands clips of the ten keywords *yes no up down left right on
# off stop go* plus non-keyword probes), each with its reference.
# **What we do.** The `paper` profile follows those rules item for item (`selection_rule` names the
# rule of each item); `demo` and `custom` build banks of the same shape from their sources. In
# `demo` the accent groups are **synthetic voices** (espeak-ng and flite) standing in for accents;
# the real speech is one Asterisk speaker. Every item is written as a 16 kHz mono WAV.
#
# **Reads** `raw/`. **Writes** `itembanks/asr.jsonl` (utterances with reference transcripts and
# accent groups), `itembanks/kws.jsonl` (keyword clips: `label`, `is_target`), each item's audio
# under `itembanks/audio/`, and the source, licence and attribution of every item.

# %% tags=["parameters"]
import os
import aiplib

profile: str = os.environ.get("AIP_PROFILE", "demo")  # demo | paper | custom
smoke: bool = aiplib.smoke()  # true when AIP_SMOKE is 1: tiny sizes for tests and CI
seed: int = aiplib.DEFAULT_SEED  # item selection seed
overwrite: bool = False  # rebuild existing item banks

# %%
aiplib.check_parameters(globals())  # each parameter has its declared type (aiplib/core/params.py)

# %%
ws = aiplib.workspace(profile)
print(ws.root)

# %%
from aiplib.sources import pipeline

sizes = pipeline.stage_sizes(profile, smoke)
banks = pipeline.build_item_banks(ws, seed=seed, overwrite=overwrite, **sizes)
{family: len(df) for family, df in banks.items()}

# %%
banks["asr"].groupby("accent_group").agg(items=("item_id", "size"), mean_s=("duration_s", "mean"))

# %% [markdown]
# The head of the ASR item bank: item, reference transcript, accent group, speaker and source.

# %%
cols = [c for c in ("item_id", "text", "accent_group", "speaker", "duration_s", "source", "licence")
        if c in banks["asr"].columns]
banks["asr"][cols].head(8)

# %% [markdown]
# The KWS item bank by label: the ten keywords (`is_target`) and the non-keyword probes.

# %%
banks["kws"].groupby(["is_target", "label"]).size().rename("clips").reset_index()

# %% [markdown]
# ## Checks
# Item ids are unique within each bank, every item's audio file is there and readable, and every
# ASR reference keeps at least one word after the paper's normalisation (an empty one has no WER;
# the paper profile keeps the authors' items as they are, so there they are only counted).

# %%
import soundfile as sf
from aiplib.core.textnorm import normalize_text

for family, df in banks.items():
    dup = df["item_id"][df["item_id"].duplicated()]
    assert dup.empty, f"itembanks/{family}.jsonl: item id {dup.iloc[0]!r} repeats ({len(dup)} repeats)"
    for r in df.itertuples():
        audio = ws.path(r.path)
        assert audio.is_file() and sf.info(str(audio)).frames > 0, \
            f"itembanks/{family}.jsonl {r.item_id}: no audio at {r.path}"
empty = banks["asr"][banks["asr"]["text"].map(lambda t: not normalize_text(t))] if "asr" in banks else []
assert len(empty) == 0 or profile == "paper", \
    f"itembanks/asr.jsonl {empty.iloc[0]['item_id']}: the reference {empty.iloc[0]['text']!r} is empty after normalisation"
print(", ".join(f"{family}: {len(df)} items, unique ids, audio readable" for family, df in banks.items())
      + f"; {len(empty)} ASR references empty after normalisation")
