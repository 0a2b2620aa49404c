"""Stage 6's check that needs a recogniser: its WER on clean speech at several speech levels. If it
does not move, the SNR (not the absolute level) is what the noisy conditions change."""

from __future__ import annotations

import numpy as np
import pandas as pd

from aiplib.core.progress import track
from aiplib.inference import models
from aiplib.inference.plan import DEFAULT_DECODING
from aiplib.inference.prompts import prompt_for
from aiplib.io.formats import read_manifest
from aiplib.scoring.score import wer
from aiplib.stimuli.checks import materialize_named
from aiplib.stimuli.mixing import SPEECH_LUFS


def wer_constancy(
    ws,
    *,
    model: str = "whisper_tiny_en",
    n_items: int = 8,
    seed: int = 0,
    levels_lufs=(-33.0, -23.0, -13.0),
    decoding: str = DEFAULT_DECODING,
) -> pd.DataFrame:
    """WER of the recogniser on clean items at several speech levels (written to
    ``checks/wer_constancy.csv``).

    ``model``: registry id of the recogniser (loaded once); ``n_items``: clean ASR items chosen with
    ``seed``; ``levels_lufs``: speech levels in LUFS (the pipeline's own is ``SPEECH_LUFS``, −23
    LUFS); ``decoding``: stage 7's by default (:data:`aiplib.inference.plan.DEFAULT_DECODING`).

    Returns
    -------
    DataFrame
        ``item_id, level_lufs, reference, response, wer, error``; the spread of WER across levels
        per item should be ~0. A level whose decode fails (after a retry one by one) has
        ``response`` None, ``wer`` NaN and ``error`` ``"<Type>: <message>"``;
        ``df.attrs["n_failed"]`` counts and ``df.attrs["failed"]`` names them (``item_id@level``).
    """

    man = read_manifest(ws, "asr")
    clean = man[man["condition"] == "clean"]
    picked = clean.sample(n=min(n_items, len(clean)), random_state=seed).sort_values("speech_id")
    _, prompt = prompt_for("asr")
    rows = []
    rec = models.load_model(model, path=decoding)
    try:
        for r in track(picked.to_dict("records"), f"WER constancy · {model}", unit="item"):
            y, _ = materialize_named(r, ws)
            audios = [
                np.clip(y * np.float32(10 ** ((lv - SPEECH_LUFS) / 20)), -1, 1).astype(np.float32)
                for lv in levels_lufs
            ]
            for lv, (out, err) in zip(levels_lufs, _generate_each(rec, audios, prompt)):
                rows.append(
                    dict(
                        item_id=r["speech_id"],
                        level_lufs=lv,
                        reference=r["transcript"],
                        response=out,
                        wer=wer(r["transcript"], out) if err is None else np.nan,
                        error=err,
                    )
                )
    finally:
        rec.close()
    df = pd.DataFrame(
        rows, columns=["item_id", "level_lufs", "reference", "response", "wer", "error"]
    )
    df.to_csv(ws.checks / "wer_constancy.csv", index=False)
    bad = df[df["error"].notna()]
    df.attrs.update(
        n_failed=len(bad),
        failed=[f"{i}@{lv:g} LUFS" for i, lv in zip(bad["item_id"], bad["level_lufs"])],
    )
    return df


def _generate_each(rec, audios, prompt) -> list[tuple]:
    """``(response, None)`` or ``(None, "Type: message")`` per audio: one call for all, and where
    that fails one call per audio (so one refused request does not fail its neighbours)."""
    try:
        out = rec.generate(audios, [prompt] * len(audios))
        if len(out) == len(audios):
            return [(str(o), None) for o in out]
    except Exception:  # noqa: BLE001 - retried one by one below
        pass
    res = []
    for a in audios:
        try:
            res.append((str(rec.generate([a], [prompt])[0]), None))
        # a recogniser failure is a result, counted and named
        except Exception as exc:  # noqa: BLE001
            res.append((None, f"{type(exc).__name__}: {str(exc)[:300]}"))
    return res


def paired_spread(df: pd.DataFrame) -> dict:
    """Stage 6's WER-constancy measure on paired items only.

    ``df``: :func:`wer_constancy`'s table. An item enters the comparison only when it was decoded
    at every speech level (a failed decode removes the item from every level, so each level
    averages over the same items).

    Returns
    -------
    dict
        ``by_level``: mean WER (0–1) per level (LUFS) over the paired items (a Series, empty when
        none); ``spread``: its max − min (NaN without a paired item); ``n_items``: items checked;
        ``n_paired``: items decoded at every level; ``left_out``: item ids left out (a failed
        decode at some level); ``n_failed``: failed decodes; ``failed``: them as ``item@level
        LUFS``.
    """
    levels = df["level_lufs"].unique()
    decoded = df[df["wer"].notna()]
    n_levels = decoded.groupby("item_id")["level_lufs"].nunique()
    paired = sorted(n_levels.index[n_levels == len(levels)])
    items = list(dict.fromkeys(df["item_id"]))
    by_level = decoded[decoded["item_id"].isin(paired)].groupby("level_lufs")["wer"].mean()
    spread = float(by_level.max() - by_level.min()) if len(by_level) else float("nan")
    bad = df[df["error"].notna()]
    return {
        "by_level": by_level,
        "spread": spread,
        "n_items": len(items),
        "n_paired": len(paired),
        "left_out": [i for i in items if i not in paired],
        "n_failed": len(bad),
        "failed": [f"{i}@{lv:g} LUFS" for i, lv in zip(bad["item_id"], bad["level_lufs"])],
    }
