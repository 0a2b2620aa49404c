"""Test helper: a run in the authors' format (IvLabs/AIP-Speech) for `make score PROFILE=paper`.

Two Speech LLMs × four tasks (``asr, kws, asr_steer_p5, kws_steer_p5``) × four paper backgrounds
× three SNRs, written as their ``05_inference.py`` writes rows (manifest columns, then ``raw,
model, task``), with what their published files hold:

- ``qwen2_audio_7b``: complete; one ASR stimulus failed once and was retried (an ``__ERROR__``
  line, then its answer); one ASR answer is JSON ``null``; a few ASR answers carry a preamble
  ("The transcription of the speech is: '…'").
- ``qwen25_omni_3b``: one ASR stimulus failed and was never retried (a partial model).

Errors are deterministic: a noisy ASR answer replaces the first ``k`` words of the reference,
``k`` from :data:`ERRORS` (background, SNR), one more for the second model; steering answers one
fewer. No manifests are written unless asked: the rows carry the manifest columns.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from aiplib.io.formats import DESCRIPTORS

BACKGROUNDS = ["esc_wind", "esc_dog", "noisex_babble", "musan_hubbub"]
SNRS = (10, 5, 0)
MODELS = ("qwen2_audio_7b", "qwen25_omni_3b")
TASKS = ("asr", "kws", "asr_steer_p5", "kws_steer_p5")
ASR_ITEMS = {"1089-134686-0000": ("he hoped there would be stew for dinner turnips and carrots", "american_english"),
             "1089-134686-0001": ("stuff it into you his belly counselled him", "american_english"),
             "cv_0a1b2c3d_0": ("the library opens at nine every morning", "England English"),
             "cv_0a1b2c3d_1": ("she walked along the quiet river bank", "")}
KWS_ITEMS = {"kws_yes_0a": ("yes", True), "kws_no_0b": ("no", True), "kws_nt_bed_0c": ("bed", False)}
# words replaced in a noisy ASR answer per background and SNR (10, 5, 0 dB)
ERRORS = {"esc_wind": (0, 0, 1), "esc_dog": (0, 1, 1), "noisex_babble": (1, 2, 4), "musan_hubbub": (1, 2, 3)}
# the one unretried failure, the retried one, the null answer and the preambles (ASR, qwen2_audio_7b)
FAILED = ("qwen25_omni_3b", "asr", "1089-134686-0000_noisex_babble_snr0")
RETRIED = ("qwen2_audio_7b", "asr", "1089-134686-0001_esc_dog_snr5")
NULL_ANSWER = ("qwen2_audio_7b", "asr", "cv_0a1b2c3d_0_esc_wind_snr10")
PREAMBLE_ITEM = "cv_0a1b2c3d_1"
PREAMBLE = "The transcription of the speech is: '{}'"


def manifest(family: str) -> pd.DataFrame:
    """The authors' manifest of ``family`` (their ``build_manifests`` columns and ids, seeds from 0
    for ASR and 10000 for KWS)."""
    items = ASR_ITEMS if family == "asr" else KWS_ITEMS
    seed = 0 if family == "asr" else 10000
    rows = []
    for item, (text, extra) in items.items():
        if family == "asr":
            spec = {"accent": extra, "gender": "female", "transcript": text}
        else:
            spec = {"keyword": text, "is_target": extra}
        conditions = [("clean", 99)] + [(bg, snr) for bg in BACKGROUNDS for snr in SNRS]
        for bg, snr in conditions:
            clean = bg == "clean"
            sid = f"{item}_clean" if clean else f"{item}_{bg}_snr{snr}"
            rows.append({"id": sid, "speech_id": item, "background_id": bg, "snr_db": snr,
                         "condition": "clean" if clean else "noisy", "seed": seed,
                         "speech_path": f"data/speech/{item}.flac", "bg_path": "" if clean else f"data/bg/{bg}.wav",
                         **spec})
            seed += 1
    return pd.DataFrame(rows)


def n_errors(model: str, task: str, bg: str, snr: int) -> int:
    """Words replaced in a noisy ASR answer (0 for clean rows)."""
    if bg == "clean":
        return 0
    k = ERRORS[bg][SNRS.index(int(snr))] + MODELS.index(model)
    if "steer" in task:
        k = max(k - 1, 0)
    return k


def asr_answer(model: str, task: str, row: dict) -> str:
    """The answer of an ASR row: the reference with its first words replaced by "uh"."""
    words = row["transcript"].split()
    k = min(n_errors(model, task, row["background_id"], row["snr_db"]), len(words))
    text = " ".join(["uh"] * k + words[k:])
    if model == MODELS[0] and task == "asr" and row["speech_id"] == PREAMBLE_ITEM:
        return PREAMBLE.format(text.capitalize() + ".")
    return text.capitalize() + "."


def kws_answer(model: str, task: str, row: dict) -> str:
    """The answer of a KWS row: right, except at 0 dB on babble and hubbub (and 5 dB on babble)."""
    hard = row["background_id"] in ("noisex_babble", "musan_hubbub") and int(row["snr_db"]) == 0
    hard = hard or (row["background_id"] == "noisex_babble" and int(row["snr_db"]) == 5 and model == MODELS[1])
    if hard and "steer" not in task:
        return "left"
    return row["keyword"].capitalize() if row["is_target"] else "SILENCE"


def _line(row: dict, model: str, task: str, raw) -> str:
    values = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
    return json.dumps({**values, "raw": raw, "model": model, "task": task}, ensure_ascii=False)


def _error_line(row: dict, model: str, task: str) -> str:
    return json.dumps({"id": row["id"], "raw": "__ERROR__", "error": "CUDA out of memory", "model": model,
                       "task": task})


def inference_lines(model: str, task: str) -> list[str]:
    """One model's ``<task>.jsonl`` lines in the authors' format."""
    family = task.split("_")[0]
    lines = []
    for row in manifest(family).to_dict("records"):
        key = (model, task, row["id"])
        if key == FAILED:
            lines.append(_error_line(row, model, task))
            continue
        if key == RETRIED:
            lines.append(_error_line(row, model, task))
        if key == NULL_ANSWER:
            lines.append(_line(row, model, task, None))
            continue
        answer = asr_answer(model, task, row) if family == "asr" else kws_answer(model, task, row)
        lines.append(_line(row, model, task, answer))
    return lines


def write_authors_run(root, *, with_manifests: bool = False):
    """Write ``<root>/inference/<model>/<task>.jsonl`` (and ``<root>/manifests/`` when asked);
    returns ``(inference_dir, manifests_dir or None)``."""
    inference_dir = root / "inference"
    for model in MODELS:
        (inference_dir / model).mkdir(parents=True, exist_ok=True)
        for task in TASKS:
            text = "\n".join(inference_lines(model, task)) + "\n"
            (inference_dir / model / f"{task}.jsonl").write_text(text, encoding="utf-8")
    if not with_manifests:
        return inference_dir, None
    manifests_dir = root / "manifests"
    manifests_dir.mkdir(parents=True, exist_ok=True)
    for family in ("asr", "kws"):
        manifest(family).to_csv(manifests_dir / f"{family}.csv", index=False)
    return inference_dir, manifests_dir


def write_descriptors(ws) -> pd.DataFrame:
    """Stage 4's descriptor table of the four backgrounds (what `make score` finds in the data
    folder): values chosen so that the authors' rounding matters (two VAD fractions tie at 4
    decimals, RMS variance of order 1e-4)."""
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"bg_id": BACKGROUNDS})
    for name in DESCRIPTORS:
        table[name] = rng.uniform(0.1, 0.9, len(BACKGROUNDS))
    table["zcr"] = [0.0412, 0.0833, 0.1204, 0.1391]
    table["rms_variance"] = [0.000123, 0.000456, 0.000981, 0.000512]
    table["vad_speech_fraction"] = [0.01234, 0.212341, 0.212338, 0.9]
    table["silent_frame_share"] = 0.0
    ws.descriptors.mkdir(parents=True, exist_ok=True)
    table.to_csv(ws.descriptor_csv, index=False)
    return table
