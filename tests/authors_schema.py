"""Test helper: write fixture manifests and inference files in the authors' schema.

Fixtures describe stimuli with the short keys ``item_id, bg_id, snr_db, reference, is_target,
accent_group`` ("clean" / "" or None for clean rows); these helpers write them the way stage 5 and
stage 7 do (ids ``<item>_clean`` / ``<item>_<bg>_snr<N>``, seeds counting rows from 0 for ASR and
10000 for KWS, ``raw`` for the response).
"""
from __future__ import annotations

import json

import pandas as pd

from aiplib.stimuli.manifests import SEED_START, manifest_columns, stimulus_id


def _snr(v):
    return None if v is None or v == "" or (isinstance(v, float) and v != v) else int(v)


def authors_rows(family: str, rows) -> list[dict]:
    """Short-key fixture rows → manifest rows in the authors' schema (same order)."""
    out = []
    for k, r in enumerate(rows):
        clean = r["bg_id"] == "clean"
        snr = _snr(r.get("snr_db"))
        row = dict(id=stimulus_id(r["item_id"], "clean" if clean else r["bg_id"], None if clean else snr),
                   speech_id=r["item_id"], background_id="clean" if clean else r["bg_id"],
                   snr_db=99 if clean else snr, condition="clean" if clean else "noisy",
                   seed=SEED_START[family] + k, speech_path="", bg_path="")
        if family == "asr":
            row.update(accent=r.get("accent_group") or "", gender="", transcript=r["reference"])
        else:
            row.update(keyword=r["reference"], is_target=bool(r.get("is_target")))
        row.update(family=family, accent_group=r.get("accent_group") or "")
        out.append(row)
    return out


def write_manifest(ws, family: str, rows) -> pd.DataFrame:
    """Write ``manifests/<family>.csv`` from short-key rows; returns the authors'-schema frame."""
    df = pd.DataFrame(authors_rows(family, rows))
    cols = [c for c in manifest_columns(family) if c in df.columns]
    df = df[cols + [c for c in df.columns if c not in cols]]
    df.to_csv(ws.manifests / f"{family}.csv", index=False)
    return df


def inference_line(man_row: dict, *, model: str, task: str, response: str, error=None, **extra) -> dict:
    """One stage-7 row: the manifest columns, then ``raw, model, task`` (``__ERROR__`` rows as theirs)."""
    if response == "__ERROR__":
        return dict(id=man_row["id"], raw="__ERROR__", error=error or "failed", model=model, task=task,
                    **extra)
    return {**man_row, "raw": response, "model": model, "task": task, **extra}


def write_jsonl(path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
