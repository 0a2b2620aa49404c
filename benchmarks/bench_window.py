"""Does the embedded Whisper measure the same thing on a 15 / 20 s encoder window as on 30 s?

Usage::

    .venv/bin/python benchmarks/bench_window.py --data-root /work/baseline-data [--profile demo]
        [--asr-per-cell 4] [--kws-per-cell 2] [--repeat 2] [--resamples 2000] [--seed 0] [--json OUT]

Reads a workspace built up to stage 5 (``manifests/<family>.csv`` and the files they point to;
read only). The slice: every item of every task family clean (the clean-WER comparison is over
items), plus, for every (background, SNR) cell of the manifest, ``--asr-per-cell`` ASR and
``--kws-per-cell`` KWS items drawn in turn from a seeded shuffle of the items (so every
background is heard at every SNR by several items, and every item at several cells).
Stimuli are materialised once by :func:`aiplib.stimuli.families.materialize`, exactly as stage 7 makes
them, then decoded back to back by two recognisers loaded as stage 7 loads them: ``fast``
(Whisper's 30 s window) and ``window`` (the shortest of 15 / 20 / 30 s leaving 5 s of padding),
each with every prompt of the family's tasks (``asr`` + ``asr_steer_p5``, ``kws`` +
``kws_steer_p5``, the profile's prompt set), in stage 7's batches (the entry's ``batch_size``)
and order (a batch decoded with each prompt in turn, so the second prompt reuses the encoder).
``--repeat`` alternates the pair that many times (30 s, window, 30 s, window …): the machine may be
shared, so the time ratio of each back-to-back pair is printed; the transcripts of every repeat
must be the same (greedy decoding), and the benchmark says so.

Scores are aiplib's own (:func:`aiplib.core.textnorm.score_asr_row`, :func:`aiplib.core.textnorm.score_kws_row`,
:func:`aiplib.analysis.stats.bootstrap_ci`, :func:`aiplib.analysis.stats.spearman`), on the base prompts (``asr``,
``kws``):

* corpus WER (Σ errors / Σ reference words) and capped WER (mean of min(WER, 1) per stimulus)
  per SNR, per window;
* clean capped-WER difference window − 30 s with a percentile bootstrap interval over *items*
  (``--resamples`` resamples, seed ``--seed``), and the corpus-WER difference likewise;
* ΔWER per background (mean over its noisy stimuli of capped WER(noisy) − capped WER(clean) of
  the same item, pp) for both windows, and their Spearman rank agreement (exact / permutation p);
* runaway outputs: the share of ASR responses :func:`aiplib.core.textnorm.loop_kind` marks as loops;
* KWS accuracy (the paper's rule) per SNR and the non-answers (empty, refusal, multi-word);
* seconds of each window's decoding, and their ratio per repeat.

The verdict (``window_passes``, printed with :data:`RULE`): the clean capped-WER interval includes 0,
the per-background ΔWER ranking agrees (r_s >= 0.9), and the window adds no runaway loop and no KWS
non-answer; otherwise each failed condition is printed. Stage 7's default stays the 30 s window
whatever the verdict: a pass says only that ``decoding window`` measures the same on that workspace.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiplib.io.formats import read_manifest  # noqa: E402
from aiplib.stimuli.families import materialize  # noqa: E402
from aiplib.inference.models import get_entry, load_model  # noqa: E402
from aiplib.inference.prompts import get_prompt_set  # noqa: E402
from aiplib.inference.prompts import TASKS  # noqa: E402
from aiplib.scoring.score import _as_bool  # noqa: E402
from aiplib.analysis.stats import bootstrap_ci, spearman  # noqa: E402
from aiplib.core.textnorm import score_asr_row, score_kws_row  # noqa: E402
from aiplib.core.workspace import workspace  # noqa: E402

WINDOWS = ("fast", "window")
"""The two decodings compared: Whisper's 30 s window, and the shortest window that fits."""
RS_GOAL = 0.9
"""Least Spearman agreement of the per-background ΔWER ranking for the window to pass."""
RULE = ("the window path passes on this workspace only if (1) the clean capped-WER difference "
        "window − 30 s has a bootstrap interval over items that includes 0, (2) the per-background "
        f"ΔWER ranking agrees to Spearman r_s >= {RS_GOAL}, (3) it makes no more runaway loops and "
        "(4) no more KWS non-answers than the 30 s window")
"""The rule the verdict applies (printed with it)."""


# ----------------------------------------------------------------------------------------- the slice
def select_slice(manifest: pd.DataFrame, per_cell: int, seed: int) -> pd.DataFrame:
    """Every clean row, plus ``per_cell`` noisy rows per (background, SNR) cell.

    Items are shuffled once (``numpy.random.default_rng(seed)``) and dealt round-robin over the
    cells in manifest order, so every item appears in about ``per_cell * n_cells / n_items`` cells.

    Parameters
    ----------
    manifest : DataFrame
        ``manifests/<family>.csv`` (``id, speech_id, background_id, snr_db, condition`` …).
    per_cell : int >= 0
    seed : int

    Returns
    -------
    DataFrame
        The chosen manifest rows (clean first), index reset.
    """
    clean = manifest[manifest["condition"] == "clean"]
    noisy = manifest[manifest["condition"] != "clean"]
    items = list(np.random.default_rng(seed).permutation(sorted(manifest["speech_id"].unique())))
    by_key = {(r.speech_id, r.background_id, r.snr_db): i for i, r in zip(noisy.index, noisy.itertuples())}
    cells = noisy[["background_id", "snr_db"]].drop_duplicates().itertuples(index=False)
    take, k = [], 0
    for bg, snr in cells:
        got, tries = 0, 0
        while got < per_cell and tries < len(items):
            idx = by_key.get((items[k % len(items)], bg, snr))
            k, tries = k + 1, tries + 1
            if idx is not None:
                take.append(idx)
                got += 1
    return pd.concat([clean, manifest.loc[take]]).reset_index(drop=True)


def materialise(ws, rows: pd.DataFrame, max_audio_s: float) -> list[np.ndarray]:
    """The stimuli of ``rows`` as stage 7 decodes them (:func:`aiplib.stimuli.families.materialize`, cut to
    ``max_audio_s``), float32 16 kHz."""
    n = int(round(max_audio_s * 16000))
    return [np.asarray(materialize(r, ws)[0], dtype=np.float32)[:n] for r in rows.to_dict("records")]


# ----------------------------------------------------------------------------------------- decoding
def decode(rec, audios: list[np.ndarray], prompts: list[str], batch_size: int) -> tuple[list[list[str]], float]:
    """Stage 7's loop: each batch decoded with every prompt in turn. (responses per prompt, s)."""
    out = [[""] * len(audios) for _ in prompts]
    t0 = time.perf_counter()
    for k in range(0, len(audios), batch_size):
        chunk = audios[k: k + batch_size]
        for j, p in enumerate(prompts):
            out[j][k: k + len(chunk)] = rec.generate(chunk, [p] * len(chunk))
    return out, time.perf_counter() - t0


# ----------------------------------------------------------------------------------------- scores
def asr_scores(rows: pd.DataFrame, responses: list[str]) -> pd.DataFrame:
    """:func:`score_asr_row` per stimulus, with ``wer_capped`` = min(WER, 1)."""
    s = pd.DataFrame([score_asr_row(ref, hyp) for ref, hyp in zip(rows["transcript"], responses)])
    s["wer_capped"] = np.minimum(s["errors"] / s["ref_words"].where(s["ref_words"] > 0), 1.0)
    return pd.concat([rows.reset_index(drop=True), s], axis=1)


def kws_scores(rows: pd.DataFrame, responses: list[str]) -> pd.DataFrame:
    """:func:`score_kws_row` per stimulus (the label's target flag read as stage 8 reads it)."""
    tgt = [_as_bool(t, lab) for t, lab in zip(rows["is_target"], rows["keyword"])]
    s = pd.DataFrame([score_kws_row(r, lab, t) for r, lab, t in zip(responses, rows["keyword"], tgt)])
    return pd.concat([rows.reset_index(drop=True), s], axis=1)


def snr_label(v) -> str:
    return "clean" if float(v) == 99 else f"{int(v)} dB"


def delta_by_background(a: pd.DataFrame) -> pd.Series:
    """Mean over each background's noisy stimuli of capped WER(noisy) − capped WER(clean, same item), pp."""
    clean = a[a["condition"] == "clean"].set_index("speech_id")["wer_capped"]
    noisy = a[a["condition"] != "clean"].copy()
    noisy["delta"] = noisy["wer_capped"] - noisy["speech_id"].map(clean)
    return 100 * noisy.groupby("background_id")["delta"].mean()


def compare(asr: dict, kws: dict, *, n_resamples: int, seed: int) -> dict:
    """The validity table of the two windows (module notes). ``asr`` / ``kws``: window → scores."""
    out = {"wer": {}, "wer_capped": {}, "loops": {}, "kws_acc": {}, "kws_non_answer": {}}
    for w in WINDOWS:
        a, k = asr[w], kws[w]
        g = a.groupby(a["snr_db"].map(snr_label), sort=False)
        out["wer"][w] = (100 * g["errors"].sum() / g["ref_words"].sum()).round(1).to_dict()
        out["wer_capped"][w] = (100 * g["wer_capped"].mean()).round(1).to_dict()
        out["loops"][w] = {"n": int(a["is_loop"].sum()), "of": len(a), "pct": round(100 * a["is_loop"].mean(), 1)}
        gk = k.groupby(k["snr_db"].map(snr_label), sort=False)
        out["kws_acc"][w] = (100 * gk["correct"].mean()).round(1).to_dict()
        out["kws_non_answer"][w] = {"n": int(k["non_answer"].sum()), "of": len(k),
                                    **k.loc[k["non_answer"], "non_answer_kind"].value_counts().to_dict()}
    # clean difference over items (one clean stimulus per item): capped WER and corpus WER
    c30 = asr["fast"][asr["fast"]["condition"] == "clean"].set_index("speech_id")
    cw = asr["window"][asr["window"]["condition"] == "clean"].set_index("speech_id").loc[c30.index]
    d = (cw["wer_capped"] - c30["wer_capped"]).to_numpy(float) * 100
    ci = bootstrap_ci(d, np.mean, n_resamples=n_resamples, seed=seed, vectorized=True)
    e30, ew, n = (c30["errors"].to_numpy(float), cw["errors"].to_numpy(float), c30["ref_words"].to_numpy(float))
    ci_corpus = bootstrap_ci((ew, e30, n), lambda a, b, w, axis=-1: 100 * (a.sum(axis) - b.sum(axis)) / w.sum(axis),
                             n_resamples=n_resamples, seed=seed, vectorized=True)
    kc30 = kws["fast"][kws["fast"]["condition"] == "clean"].set_index("speech_id")["correct"]
    kcw = kws["window"][kws["window"]["condition"] == "clean"].set_index("speech_id")["correct"].loc[kc30.index]
    ci_kws = bootstrap_ci((100 * (kcw - kc30)).to_numpy(float), np.mean, n_resamples=n_resamples, seed=seed,
                          vectorized=True)
    out["clean_delta"] = {name: {"estimate": round(r.estimate, 2), "lo": round(r.ci_low, 2), "hi": round(r.ci_high, 2),
                                 "n_items": r.n, "n_resamples": r.n_resamples, "note": r.note}
                          for name, r in (("capped_wer_pp", ci), ("corpus_wer_pp", ci_corpus),
                                          ("kws_acc_pp", ci_kws))}
    dw = pd.DataFrame({w: delta_by_background(asr[w]) for w in WINDOWS})
    rs = spearman(dw["fast"].to_numpy(float), dw["window"].to_numpy(float), seed=seed)
    out["delta_by_background"] = dw.round(1).to_dict()
    out["rank_agreement"] = {"rho": round(float(rs.rho), 3), "p": float(rs.p), "method": rs.method,
                             "n_backgrounds": int(len(dw))}
    changed = {f: round(100 * float(np.mean(asr["fast"]["hyp_norm"] != asr["window"]["hyp_norm"])), 1)
               for f in ("asr",)}
    changed["kws"] = round(100 * float(np.mean(kws["fast"]["first_word"] != kws["window"]["first_word"])), 1)
    out["changed_pct"] = changed
    lo_ok = ci.ci_low <= 0 <= ci.ci_high
    reasons = []
    if not np.isfinite(ci.ci_low):
        reasons.append(f"no clean capped-WER interval ({ci.note})")
    elif not lo_ok:
        reasons.append(f"the clean capped-WER interval [{ci.ci_low:+.2f}, {ci.ci_high:+.2f}] pp excludes 0")
    if not (rs.rho >= RS_GOAL):
        reasons.append(f"the per-background ΔWER ranking agrees only to r_s = {rs.rho:.3f} < {RS_GOAL}")
    loops_30 = out["loops"]["fast"]["n"]
    loops_window = out["loops"]["window"]["n"]
    if loops_window > loops_30:
        reasons.append(f"the window makes {loops_window} runaway loops against {loops_30}")
    non_answers_30 = out["kws_non_answer"]["fast"]["n"]
    non_answers_window = out["kws_non_answer"]["window"]["n"]
    if non_answers_window > non_answers_30:
        reasons.append(f"the window gives {non_answers_window} KWS non-answers against {non_answers_30}")
    out["verdict"] = {"window_passes": not reasons, "why_not": reasons}
    return out


# ----------------------------------------------------------------------------------------- printing
def print_table(res: dict) -> None:
    snrs = list(next(iter(res["wer"].values())))
    print("\nwindow | " + " / ".join(snrs) + " corpus WER % | capped WER % | runaway (loops) | KWS acc. % | "
          "KWS non-answers")
    print("---|---|---|---|---|---")
    for w in WINDOWS:
        name = "30 s" if w == "fast" else "15/20/30 s"
        print(f"{name} | " + " / ".join(f"{res['wer'][w][s]:.1f}" for s in snrs)
              + " | " + " / ".join(f"{res['wer_capped'][w][s]:.1f}" for s in snrs)
              + f" | {res['loops'][w]['pct']:.1f} % ({res['loops'][w]['n']}/{res['loops'][w]['of']})"
              + " | " + " / ".join(f"{res['kws_acc'][w].get(s, float('nan')):.0f}" for s in snrs)
              + f" | {res['kws_non_answer'][w]['n']}/{res['kws_non_answer'][w]['of']}")
    print("\nclean, window − 30 s (percentile bootstrap over items):")
    for name, d in res["clean_delta"].items():
        print(f"  {name}: {d['estimate']:+.2f} [{d['lo']:+.2f}, {d['hi']:+.2f}] "
              f"({d['n_items']} items, {d['n_resamples']} resamples){' — ' + d['note'] if d['note'] else ''}")
    ra = res["rank_agreement"]
    print(f"\nΔWER per background (capped, pp), 30 s vs window: Spearman r_s = {ra['rho']:.3f} "
          f"(p = {ra['p']:.2g}, {ra['method']}, {ra['n_backgrounds']} backgrounds)")
    dw = pd.DataFrame(res["delta_by_background"]).sort_values("fast", ascending=False)
    for bg, r in dw.iterrows():
        print(f"  {bg:22s} {r['fast']:+6.1f} {r['window']:+6.1f}")
    print(f"\ntranscripts changed by the window: ASR {res['changed_pct']['asr']} %, KWS first word "
          f"{res['changed_pct']['kws']} %")
    v = res["verdict"]
    print(f"\nrule: {RULE}")
    if v["window_passes"]:
        print("verdict: the window path measures the same as 30 s here; it may be used on this "
              "workspace (`decoding window`); the default stays 30 s")
    else:
        print("verdict: keep 30 s: " + "; ".join(v["why_not"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-root", required=True, help="parent of the profile folder (e.g. /work/baseline-data)")
    ap.add_argument("--profile", default="demo")
    ap.add_argument("--model", default="whisper_tiny_en")
    ap.add_argument("--asr-per-cell", type=int, default=4, help="ASR items per (background, SNR) cell")
    ap.add_argument("--kws-per-cell", type=int, default=2, help="KWS items per (background, SNR) cell")
    ap.add_argument("--repeat", type=int, default=2, help="back-to-back (30 s, window) pairs")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0, help="seed of the item deal and of the bootstrap")
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--max-items", type=int, default=None, help="smoke runs: items per family")
    ap.add_argument("--max-backgrounds", type=int, default=None, help="smoke runs (with --max-items): backgrounds")
    a = ap.parse_args(argv)

    ws = workspace(a.profile, data_root=a.data_root, create=False)
    entry = get_entry(a.model)
    ps = get_prompt_set(a.profile, ws=ws)
    fams = {}
    for task, (family, _) in TASKS.items():
        fams.setdefault(family, []).append(task)
    per_cell = {"asr": a.asr_per_cell, "kws": a.kws_per_cell}
    rows, audios = {}, {}
    t0 = time.perf_counter()
    for family in fams:
        path = Path(ws.manifests) / f"{family}.csv"
        if not path.is_file():
            print(f"{family}: no manifest at {path}, skipped")
            continue
        man = read_manifest(ws, family)
        if a.max_items:  # a smoke run: the first items of the seeded order, and the first cells
            keep = np.random.default_rng(a.seed).permutation(sorted(man["speech_id"].unique()))[: a.max_items]
            man = man[man["speech_id"].isin(keep)]
            if a.max_backgrounds:
                bgs = [b for b in dict.fromkeys(man["background_id"]) if b != "clean"][: a.max_backgrounds]
                man = man[man["background_id"].isin(["clean", *bgs])]
        rows[family] = select_slice(man, per_cell[family], a.seed)
        audios[family] = materialise(ws, rows[family], entry.max_audio_s)
    if not {"asr", "kws"} <= set(rows):
        print("bench_window needs manifests/asr.csv and manifests/kws.csv: run stages 1-5 first")
        return 1
    n_stim = sum(len(v) for v in audios.values())
    dur = np.concatenate([[len(y) / 16000 for y in v] for v in audios.values()])
    print(f"slice: {n_stim} stimuli ({', '.join(f'{f} {len(r)}' for f, r in rows.items())}), "
          f"{dur.min():.1f}–{dur.max():.1f} s, materialised in {time.perf_counter() - t0:.0f} s; seed {a.seed}")

    recs = {w: load_model(entry, path=w) for w in WINDOWS}
    for w, rec in recs.items():
        win = [rec.window_s(len(y)) for v in audios.values() for y in v]
        print(f"{w}: windows used {dict(zip(*np.unique(win, return_counts=True)))}")
    responses, seconds = {}, {w: [] for w in WINDOWS}
    identical = True
    try:
        for rep in range(a.repeat):
            for w in WINDOWS:
                s_total, got = 0.0, {}
                for family, tasks in fams.items():
                    if family not in audios:
                        continue
                    out, s = decode(recs[w], audios[family], [ps.prompt(t)[1] for t in tasks], entry.batch_size)
                    s_total += s
                    got.update(dict(zip(tasks, out)))
                seconds[w].append(s_total)
                if w in responses:
                    identical &= responses[w] == got
                else:
                    responses[w] = got
                print(f"repeat {rep + 1}: {w:6s} {s_total:7.1f} s", flush=True)
            print(f"repeat {rep + 1}: time window / 30 s = {seconds['window'][-1] / seconds['fast'][-1]:.3f}")
    finally:
        for rec in recs.values():
            rec.close()
    asr = {w: asr_scores(rows["asr"], responses[w]["asr"]) for w in WINDOWS}
    kws = {w: kws_scores(rows["kws"], responses[w]["kws"]) for w in WINDOWS}
    res = compare(asr, kws, n_resamples=a.resamples, seed=a.seed)
    res.update(n_stimuli=n_stim, seconds=seconds, seed=a.seed,
               ratios=[round(sw / sf, 3) for sw, sf in zip(seconds["window"], seconds["fast"])],
               repeats_identical=bool(identical), tasks={f: t for f, t in fams.items() if f in audios},
               per_cell=per_cell)
    print_table(res)
    print(f"\ntime window / 30 s per repeat: {res['ratios']} (goal <= 0.5); "
          f"transcripts identical across repeats: {identical}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
