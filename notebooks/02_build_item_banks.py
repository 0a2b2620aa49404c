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
# ## The rule on one item
# How the real-speech ASR items are chosen, redone here from this run's inputs. The candidates come
# in a fixed sorted order; a random generator seeded by the rule's seed picks N of them; the bank
# holds those N, in that order, first. `demo`: the Asterisk prompts sorted by key, kept when 2–10 s
# long with ≥ 5 words and a plain transcript; the generator is the first of three children of
# `SeedSequence(seed)`; it draws N candidate positions without replacement, and the bank keeps them
# in sorted (candidate) order. `custom`: the speech files stage 1 validated as usable, in inventory
# order; the first of two children of `SeedSequence(seed)` draws `max_items` of them the same way
# (all of them without `max_items`). `paper`: every utterance of LibriSpeech test-clean then
# test-other (sorted `*.trans.txt`, file order), shuffled by the authors' `random.Random(42)`; the
# first N after the shuffle. Below, the first item chosen, followed step by step; the assert holds
# the whole chosen list against `itembanks/asr.jsonl`.

# %%
import random

import numpy as np
import pandas as pd


def _real_asr_candidates() -> tuple[pd.DataFrame, int, int | None, str]:
    """(candidates in their sorted order with ``item_id``, the seed, N, the generator's name)."""
    if profile == "demo":
        from aiplib.sources.corpora.demo import asterisk_prompts

        p = asterisk_prompts(ws)  # sorted by key
        long_enough = (p["duration_s"] >= 2.0) & (p["duration_s"] <= 10.0)
        cand = p[long_enough & (p["n_words"] >= 5) & p["clean_text"]].reset_index(drop=True)
        cand["item_id"] = "ast-" + cand["key"].str.replace("/", "-")
        return cand, seed, sizes["n_asr_real"], "SeedSequence(seed).spawn(3)[0]"
    if profile == "paper":
        from aiplib.sources.corpora.librispeech import prepare_librispeech
        from aiplib.sources.corpora.paper import AUTHORS_SEED, N_LIBRISPEECH, corpus_dir

        cand = prepare_librispeech(corpus_dir(ws, "librispeech"), with_duration=False)
        cand = cand.rename(columns={"utt_id": "item_id"})
        return cand, AUTHORS_SEED, sizes.get("n_librispeech", N_LIBRISPEECH), "random.Random(42)"
    inv = pd.read_csv(ws.raw / "inventory.csv", dtype=str, keep_default_na=False)
    usable = (inv["package"] == "custom/speech") & (inv["used"].str.lower() == "true")
    cand = inv[usable].reset_index(drop=True)
    return cand, seed, sizes.get("max_items"), "SeedSequence(seed).spawn(2)[0]"


def _draw(n_candidates: int, rule_seed: int, n: int | None) -> tuple[list[int], list[int]]:
    """(candidate positions in the order the generator gives them, the positions the bank keeps)."""
    if profile == "paper":
        order = list(range(n_candidates))
        random.Random(rule_seed).shuffle(order)  # the authors shuffle the records; same permutation
        return order[:n], order[:n]
    children = np.random.SeedSequence(rule_seed).spawn(3 if profile == "demo" else 2)
    rng = np.random.default_rng(children[0])
    if n is None or (profile == "custom" and n >= n_candidates):
        return list(range(n_candidates)), list(range(n_candidates))
    drawn = rng.choice(np.arange(n_candidates), size=n, replace=False)
    return [int(i) for i in drawn], [int(i) for i in np.sort(drawn)]


cand, rule_seed, n_real, generator = _real_asr_candidates()
drawn, kept = _draw(len(cand), rule_seed, n_real)
chosen = cand["item_id"].iloc[kept].astype(str).tolist()
in_bank = banks["asr"]["item_id"].astype(str).tolist()[: len(chosen)]
first = cand.iloc[kept[0]] if chosen else None
bank_row = banks["asr"].iloc[0] if chosen else None
display(pd.Series({
    "profile · generator": f"{profile} · {generator}",
    "seed": rule_seed,
    "candidates (in sorted order)": len(cand),
    "N": len(chosen),
    "positions as drawn (first 6)": drawn[:6],
    "positions kept, in order (first 6)": kept[:6],
    "first item: candidate position → id": f"{kept[0]} → {chosen[0]}" if chosen else "none",
    "itembanks/asr.jsonl row 0: item_id": None if bank_row is None else bank_row["item_id"],
    "itembanks/asr.jsonl row 0: text": None if bank_row is None else bank_row["text"],
}).to_frame("value"))
assert chosen == in_bank, (f"itembanks/asr.jsonl: the rule chooses {chosen[:3]}… "
                           f"({len(chosen)} items), the bank starts with {in_bank[:3]}…")
assert first is None or str(first["text"]) == str(bank_row["text"]), \
    f"itembanks/asr.jsonl {chosen[0]}: text {bank_row['text']!r}, the candidate's {first['text']!r}"
print(f"the rule gives the first {len(chosen)} items of itembanks/asr.jsonl, in order"
      + (f" (first: {chosen[0]})" if chosen else ""))

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
