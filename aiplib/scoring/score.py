"""Stage 8: word error rate, the keyword-spotting rule and score files.

The headline WER uses the paper's normalisation (:func:`aiplib.core.textnorm.normalize_text`); a
Whisper-style WER (``wer_whisper``) beside it uses OpenAI's ``EnglishTextNormalizer``
(:func:`aiplib.core.textnorm.normalize_whisper`). Alignment and error counts come from jiwer [1]_.
Raw and normalised text are both kept in ``results/scores/<task>.csv``.

References
----------
.. [1] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``cer``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core import textnorm as tn
from aiplib.core.errors import AiplibError, AiplibParameterError
from aiplib.core.progress import track
from aiplib.core.tasks import (
    KEYWORDS,
    TASK_FAMILIES,
    family_spec,
    normalize_keywords,
    task_family,
)
from aiplib.core.workspace import workspace
from aiplib.inference.shards import is_shard_file
from aiplib.io.formats import (
    NULL_ANSWER_RULES,
    manifest_view,
    read_item_bank_keywords,
    read_manifest_csv,
    read_results,
    write_scores,
)
from aiplib.scoring.family_columns import FAMILY_SCORE_COLUMNS, add_family_scores, family_sidecar

log = logging.getLogger(__name__)

_FAMILY_FOLDERS = (
    "background",
    "competing_speech",
    "channel",
)  # inference/<family>/: not model folders

# The null-answer rule of each profile (:data:`aiplib.io.formats.NULL_ANSWER_RULES`): the paper
# profile scores a JSON null answer as the text "None", as the authors' stage 6 did; a profile not
# listed counts it as failed.
PROFILE_NULL_ANSWER = {"paper": "text_none", "demo": "failed", "custom": "failed"}


def scoring_rules(profile: str, *, response_cleanup: str = "", null_answer: str = "") -> dict:
    """The answer rules of stage 8: ``{"response_cleanup", "null_answer"}``, each the value given
    or, when empty, the default (``none``; :data:`PROFILE_NULL_ANSWER` of ``profile``).

    Raises
    ------
    AiplibParameterError
        If a value is not one of :data:`aiplib.core.textnorm.RESPONSE_CLEANUPS` /
        :data:`aiplib.io.formats.NULL_ANSWER_RULES`.
    """
    cleanup = response_cleanup or "none"
    null_rule = null_answer or PROFILE_NULL_ANSWER.get(profile, "failed")
    if cleanup not in tn.RESPONSE_CLEANUPS:
        raise AiplibParameterError(
            f"response_cleanup must be one of {list(tn.RESPONSE_CLEANUPS)}, got {cleanup!r}"
        )
    if null_rule not in NULL_ANSWER_RULES:
        raise AiplibParameterError(
            f"null_answer must be one of {list(NULL_ANSWER_RULES)}, got {null_rule!r}"
        )
    return {"response_cleanup": cleanup, "null_answer": null_rule}


_NORMALIZERS = {
    "paper": tn.normalize_text,
    "whisper": tn.normalize_whisper,
    "none": lambda s: " ".join(str(s or "").split()),
}


def answer_rules(rules: dict) -> dict:
    """The answer rules of :func:`scoring_rules` with what each means, for sidecars and provenance:
    ``{"response_cleanup": {"name", "rule"}, "null_answer": {"name", "rule"}}``."""
    null_text = {
        "failed": "a JSON null answer counts as a failed generation (left out)",
        "text_none": 'a JSON null answer is scored as the text "None" (the authors\' str(raw))',
    }
    cleanup = rules["response_cleanup"]
    null_rule = rules["null_answer"]
    return {
        "response_cleanup": {"name": cleanup, "rule": tn.RESPONSE_CLEANUPS[cleanup]},
        "null_answer": {"name": null_rule, "rule": null_text[null_rule]},
    }


def normalizer_provenance() -> dict:
    """``{"normalizer": {"name", "version", "rule"}, "normalizer_whisper": {"name", "version"},
    "jiwer_version"}``, for sidecars and provenance.
    """
    return {
        "normalizer": {
            "name": tn.NORMALIZER_NAME,
            "version": tn.NORMALIZER_VERSION,
            "rule": tn.NORMALIZER_RULE,
        },
        "normalizer_whisper": {
            "name": tn.WHISPER_NORMALIZER_NAME,
            "version": tn.WHISPER_NORMALIZER_VERSION,
        },
        "jiwer_version": tn.JIWER_VERSION,
    }


def wer(ref: str, hyp: str, *, normalizer: str = "paper") -> float:
    """Word error rate of one utterance, on normalised text: ``(S + D + I) / N``, ``N`` the
    reference words.

    ``ref, hyp``: raw reference and recogniser output (an empty ``hyp`` gives 1.0); ``normalizer``:
    ``"paper"`` (:func:`normalize_text`), ``"whisper"`` (:func:`normalize_whisper`) or ``"none"``
    (white space only). The WER can exceed 1 (insertions); NaN when the normalised reference is
    empty.

    Examples
    --------
    >>> wer("the cat sat", "the cat sat down")
    0.3333333333333333
    """
    return wer_details([ref], [hyp], normalizer=normalizer)["per_utterance"][0]


def wer_details(refs, hyps, *, normalizer: str = "paper") -> dict:
    """Corpus-level WER, mean per-utterance WER, S/D/I/hit counts and CER.

    ``refs, hyps``: sequences of str, shape (n_utterances,); ``normalizer`` as :func:`wer`. Returns
    ``wer`` = Σ(S+D+I) / Σ N (pooled; NaN if Σ N = 0), ``mean_wer`` (of the defined per-utterance
    WERs), ``substitutions, deletions, insertions, hits, errors, ref_words`` (int; ``ref_words`` = H
    + S + D), ``cer`` (``jiwer.cer`` over utterances with a reference), ``per_utterance`` (NaN for
    an empty reference), ``n_utterances``, ``n_ref_empty`` (their insertions count in ``wer``).

    Raises
    ------
    ValueError
        If the sequences differ in length (both quoted), are empty, or ``normalizer`` is unknown.
    """
    import jiwer

    refs, hyps = list(refs), list(hyps)
    if len(refs) != len(hyps):
        raise ValueError(f"got {len(refs)} references but {len(hyps)} hypotheses")
    if not refs:
        raise ValueError("no utterances to score")
    if normalizer not in _NORMALIZERS:
        raise ValueError(f"unknown normalizer {normalizer!r}; choose from {list(_NORMALIZERS)}")
    norm = _NORMALIZERS[normalizer]
    r_n, h_n = [norm(r) for r in refs], [norm(h) for h in hyps]
    counts = [tn.align(rn, hn) for rn, hn in zip(r_n, h_n)]  # (S, D, I, H) per utterance
    per = [
        (so + do + io) / (ho + so + do) if ho + so + do else float("nan")
        for so, do, io, ho in counts
    ]
    s, d, ins, h = (sum(c) for c in zip(*counts))
    n_ref = h + s + d
    with_ref = [(r, hh) for r, hh in zip(r_n, h_n) if r]
    defined = [v for v in per if not math.isnan(v)]
    return {
        "wer": (s + d + ins) / n_ref if n_ref else float("nan"),
        "mean_wer": float(np.mean(defined)) if defined else float("nan"),
        "substitutions": int(s),
        "deletions": int(d),
        "insertions": int(ins),
        "hits": int(h),
        "errors": int(s + d + ins),
        "ref_words": int(n_ref),
        "cer": (
            float(jiwer.cer([r for r, _ in with_ref], [hh for _, hh in with_ref]))
            if with_ref
            else float("nan")
        ),
        "per_utterance": per,
        "n_utterances": len(refs),
        "n_ref_empty": sum(1 for r in r_n if not r),
    }


def _read_manifest(ws, family: str, manifests_dir=None) -> pd.DataFrame | None:
    """The scoring view of ``<manifests_dir or ws.manifests>/<family>.csv``, None when absent."""
    p = (
        Path(manifests_dir) / f"{family}.csv"
        if manifests_dir is not None
        else ws.manifest_csv(family)
    )
    if not p.exists():
        return None
    try:
        m = read_manifest_csv(p)
    except AiplibParameterError as exc:
        raise AiplibError(str(exc)) from None
    return _with_family_columns(manifest_view(m, family), m)


def _with_family_columns(view: pd.DataFrame, m: pd.DataFrame) -> pd.DataFrame:
    """``view`` plus the condition-family columns of ``m`` (:data:`FAMILY_SCORE_COLUMNS`) when a
    row's ``condition_family`` is not ``background`` (background score files stay unchanged).
    """
    fams = sorted(
        {str(v) for v in m.get("condition_family", [])} - {"", "background", "clean", "nan"}
    )
    if not fams:
        return view
    extra = m.assign(id=m["id"].astype(str)).drop_duplicates("id", keep="last").set_index("id")
    view = view.copy()
    for c in [c for c in FAMILY_SCORE_COLUMNS if c in extra.columns]:
        view[c] = extra[c].reindex(view.index.astype(str)).to_numpy()
    if len(fams) == 1:  # the items' clean rows belong to the family of their manifest
        view["condition_family"] = fams[0]
    return view


def _as_bool(v, label, keywords=KEYWORDS) -> bool:
    t = str(v).strip().lower()
    if t in ("true", "1", "yes", "t"):
        return True
    if t in ("false", "0", "no", "f"):
        return False
    return tn.normalize_kws_label(label) in keywords


_ASR_ROW_COLUMNS = list(tn.score_asr_row("a", "a"))  # the columns each scorer adds, in order
_KWS_ROW_COLUMNS = list(tn.score_kws_row("yes", "yes", True))


def _score_task(
    ws,
    task: str,
    models,
    manifest: pd.DataFrame | None,
    *,
    inference_dir=None,
    keywords=KEYWORDS,
    rules=None,
) -> tuple[pd.DataFrame, dict]:
    fam = task_family(task)
    frames = []
    meta = {
        "n_errors": {},
        "n_rows_per_model": {},
        "n_malformed_lines": {},
        "n_duplicates": {},
        "n_not_in_manifest": {},
        "n_empty_reference": {},
        "prompt_ids": {},
        "sources": [],
        "manifest_source": "manifests" if manifest is not None else "inference rows",
        "n_null_as_text": {},
        "n_cleaned": {},
    }
    rules = rules or {"response_cleanup": "none", "null_answer": "failed"}
    inf = Path(inference_dir if inference_dir is not None else ws.inference)
    for model in models:
        path = (
            inf / model / f"{task}.jsonl"
            if inference_dir is not None
            else ws.inference_jsonl(model, task)
        )
        if not path.exists():
            continue
        ok = read_results(
            path, keep_errors=False, null_answer=rules["null_answer"]
        )  # per id the last answer
        meta["sources"].append(ws.rel(path) if hasattr(ws, "rel") else str(path))
        meta["n_malformed_lines"][model] = ok.attrs["n_skipped"]
        meta["n_errors"][model] = ok.attrs["n_failed"]
        meta["n_null_as_text"][model] = ok.attrs["n_null_as_text"]
        meta["n_duplicates"][model] = ok.attrs["n_rows"] - len(ok) - ok.attrs["n_failed"]
        ok["stimulus_id"] = ok["id"]
        ok["response"] = ok[
            "raw"
        ]  # the authors' row format: id, raw (the response), error on failures
        unknown = (
            ~ok["stimulus_id"].isin(manifest.index)
            if manifest is not None
            else ok["speech_id"].isna()
            if "speech_id" in ok.columns
            else pd.Series(True, index=ok.index)
        )
        meta["n_not_in_manifest"][model] = int(unknown.sum())
        if unknown.any():
            warnings.warn(
                f"{path}: {int(unknown.sum())} stimulus ids are not in "
                f"manifests/{fam}.csv (or carry no manifest columns); dropped",
                stacklevel=3,
            )
        ok = ok[~unknown]
        # no manifests folder: the rows carry the manifest columns
        man_src = (
            manifest
            if manifest is not None
            else _with_family_columns(manifest_view(ok.drop(columns=["stimulus_id"]), fam), ok)
        )
        ok["prompt_id"] = ok["prompt_id"].map(lambda v: "" if v is None or v != v else str(v))
        pids = ok["prompt_id"].value_counts().sort_index()
        meta["prompt_ids"][model] = {k: int(v) for k, v in pids.items()}
        # the prompt set named by each row (rows written elsewhere, e.g. the authors', name none)
        ok["prompt_set"] = ok["prompt_set"].map(
            lambda v: "unrecorded" if v is None or v != v or v == "" else str(v)
        )
        meta.setdefault("prompt_sets", {})[model] = {
            k: int(v) for k, v in ok["prompt_set"].value_counts().sort_index().items()
        }
        if len(pids) > 1:
            warnings.warn(
                f"{path}: rows come from {len(pids)} prompts {list(pids.index)}; "
                "the scores mix them",
                stacklevel=3,
            )
        man = man_src.loc[ok["stimulus_id"]]
        out = pd.DataFrame(
            {
                "model": model,
                "task": task,
                "stimulus_id": ok["stimulus_id"].to_numpy(),
                "item_id": man["item_id"].to_numpy(),
                "bg_id": man["bg_id"].to_numpy(),
                "snr_db": man["snr_db"].to_numpy(),
                "accent_group": man["accent_group"].replace("", np.nan).to_numpy(),
                "accent": man["accent"].replace("", np.nan).to_numpy(),
                "prompt_id": ok["prompt_id"].to_numpy(),
                "prompt_set": ok["prompt_set"].to_numpy(),
                "condition": man["condition"].to_numpy(),
                "bg_active": man["bg_active"].to_numpy(),
            }
        )
        generated = ok["response"].astype(str)
        # the answer as scored: cleaned under the rule here only (the inference rows stay as
        # written)
        cleaned = pd.Series(
            [tn.clean_response(text, rules["response_cleanup"]) for text in generated],
            index=generated.index,
        )
        meta["n_cleaned"][model] = int((cleaned != generated).sum())
        resp = cleaned.to_numpy()
        if fam == "asr":
            out["reference"] = man["reference"].to_numpy()
            per, cols = (
                [tn.score_asr_row(r, h) for r, h in zip(out["reference"], resp)],
                _ASR_ROW_COLUMNS,
            )
        else:
            out["label"] = man["reference"].to_numpy()
            out["is_target"] = [
                _as_bool(t, lab, keywords) for t, lab in zip(man["is_target"], man["reference"])
            ]
            per = [
                tn.score_kws_row(r, lab, t, keywords)
                for r, lab, t in zip(resp, out["label"], out["is_target"])
            ]
            cols = _KWS_ROW_COLUMNS
        out["response"] = generated.to_numpy()
        if rules["response_cleanup"] != "none":
            out["response_scored"] = resp
        out = pd.concat([out, pd.DataFrame(per, index=out.index, columns=cols)], axis=1)
        if fam == "asr":
            empty = out["ref_empty"].astype(bool)
            meta["n_empty_reference"][model] = int(empty.sum())
            meta.setdefault("n_loops", {})[model] = int(out["is_loop"].sum())
            if empty.any():
                warnings.warn(
                    f"{task}/{model}: {int(empty.sum())} references are empty after "
                    "normalisation; their per-utterance WER is NaN (ref_empty) and "
                    "their insertions count in corpus WER",
                    stacklevel=3,
                )
        else:
            meta["n_empty_reference"][model] = 0
            meta.setdefault("n_non_answers", {})[model] = int(out["non_answer"].sum())
        out = _add_delta(
            out,
            family_spec(fam)["measure"],
            TASK_FAMILIES[fam].degradation_column,
            noisy_minus_clean=TASK_FAMILIES[fam].higher_is_worse,
        )
        meta["n_rows_per_model"][model] = int(len(out))
        tail = ["condition", "bg_active"]
        out = out[[c for c in out.columns if c not in tail] + tail]
        if (
            "condition_family" in man.columns
        ):  # a condition family other than the background battery
            out = add_family_scores(out, man, fam)
        frames.append(out)
    if not frames:
        return pd.DataFrame(), meta
    res = pd.concat(frames, ignore_index=True)
    meta["n_unpaired"] = int(
        (res["bg_id"] != "clean").sum()
        - res.loc[res["bg_id"] != "clean", TASK_FAMILIES[fam].degradation_column].notna().sum()
    )
    return res, meta


def _add_delta(
    df: pd.DataFrame, col: str, out_col: str, *, noisy_minus_clean: bool
) -> pd.DataFrame:
    clean = (
        df[df["bg_id"] == "clean"]
        .drop_duplicates(["model", "task", "item_id"], keep="last")
        .set_index(["model", "task", "item_id"])[col]
    )
    c = clean.reindex(pd.MultiIndex.from_frame(df[["model", "task", "item_id"]])).to_numpy(
        dtype=float
    )
    v = df[col].to_numpy(dtype=float)
    d = v - c if noisy_minus_clean else c - v
    d[(df["bg_id"] == "clean").to_numpy()] = np.nan
    df[out_col] = d
    return df


def score_inference(
    ws,
    *,
    models=None,
    tasks=None,
    inference_dir=None,
    manifests_dir=None,
    keywords=None,
    response_cleanup: str = "",
    null_answer: str = "",
) -> dict[str, pd.DataFrame]:
    """Score every inference file and write ``results/scores/<task>.csv`` + ``.json``.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
        Reads ``inference/<model>/<task>.jsonl`` and ``manifests/<family>.csv`` of its condition
        family's view.
    models, tasks : sequence of str, optional
        Default: every model folder under ``inference/``, every ``<task>.jsonl`` (non-ASR/KWS
        skipped, warned).
    inference_dir, manifests_dir : str or Path, optional
        Read ``<model>/<task>.jsonl`` (e.g. the authors' ``inference/``) / ``<family>.csv`` here
        instead; with no manifest at all the inference rows supply the columns.
    keywords : str or sequence of str, optional
        Closed keyword set of the KWS rule; default the one stored with the KWS item bank.
    response_cleanup, null_answer : str, optional
        The answer rules (:func:`scoring_rules`; empty: ``none`` and the profile's null-answer
        rule): an answer is cleaned (:func:`aiplib.core.textnorm.clean_response`) before it is
        scored, the inference rows and the ``response`` column keep it as generated
        (``response_scored`` beside it when a clean-up is applied); a JSON null answer is failed or
        the text "None".

    Returns
    -------
    dict of str -> pandas.DataFrame
        Per task, one row per (model, stimulus): ``model, task, stimulus_id, item_id, bg_id, snr_db
        (dB; NaN for clean), accent_group, accent, prompt_id, prompt_set ("unrecorded" when a row
        names none), response`` (as generated; ``response_scored`` after a clean-up); ASR adds
        ``reference``, :func:`aiplib.core.textnorm.score_asr_row`'s columns and ``delta_wer =
        WER(noisy) − WER(clean)``; KWS adds ``label, is_target``,
        :func:`aiplib.core.textnorm.score_kws_row`'s columns and ``delta_acc = correct(clean) −
        correct(noisy)`` (NaN on clean rows or without the clean row); last ``condition,
        bg_active``. A condition family's scores add its columns
        (:func:`aiplib.scoring.family_columns.add_family_scores`).

    The sidecar counts ``__ERROR__`` rows (dropped, ``n_errors``), repeated rows (the last
    successful one kept, ``n_duplicates``), unreadable lines (``n_malformed_lines``), empty
    references, loops and KWS non-answers, and records the normalisers, jiwer, the KWS rule and
    keywords, the prompt ids per model and the answer rules (``answer_rules``; ``n_cleaned``,
    ``n_null_as_text`` per model).

    Raises
    ------
    AiplibError
        If no inference file exists at all, or a needed manifest is missing.
    """

    kw = normalize_keywords(keywords) if keywords is not None else read_item_bank_keywords(ws)
    rules = scoring_rules(
        getattr(ws, "profile", ""), response_cleanup=response_cleanup, null_answer=null_answer
    )
    # the workspace's own inference folder, ``inference/`` or a family view's
    # ``inference/<family>/``
    inf = (
        Path(inference_dir)
        if inference_dir is not None
        else Path(ws.inference_jsonl("m", "t")).parents[1]
    )
    if inference_dir is not None and not inf.is_dir():
        raise AiplibError(f"{inf}: inference folder not found")
    if models is None:  # model folders; a condition family's folder (inference/<family>/) is none
        models = (
            sorted(p.name for p in inf.iterdir() if p.is_dir() and p.name not in _FAMILY_FOLDERS)
            if inf.exists()
            else []
        )
    if tasks is None:
        found = sorted(
            {
                p.stem
                for m in models
                for p in (inf / m).glob("*.jsonl")
                if p.stem != "run_log" and not is_shard_file(p)
            }
        )
        tasks = []
        for t in found:
            try:
                task_family(t)
                tasks.append(t)
            except AiplibParameterError:
                warnings.warn(f"{inf}: task {t!r} is neither ASR nor KWS; not scored", stacklevel=2)
    if not models or not tasks:
        raise AiplibError(f"no inference files under {inf}; run stage 7 (inference) first")
    manifests, result = {}, {}

    for task in track(
        list(tasks), "scoring", unit="task"
    ):  # tqdm bar, or [progress] lines under make
        fam = task_family(task)
        if not any((inf / m / f"{task}.jsonl").exists() for m in models):
            warnings.warn(
                f"no inference/<model>/{task}.jsonl for models {list(models)}; "
                f"task {task!r} skipped",
                stacklevel=2,
            )
            continue
        if fam not in manifests:
            manifests[fam] = _read_manifest(ws, fam, manifests_dir)
            if manifests[fam] is None:
                log.info("no %s manifest: the inference rows supply the manifest columns", fam)
        df, meta = _score_task(
            ws, task, models, manifests[fam], inference_dir=inf, keywords=kw, rules=rules
        )
        side = {
            "task": task,
            "family": fam,
            **normalizer_provenance(),
            "answer_rules": answer_rules(rules),
            "n_rows": int(len(df)),
            "inference_dir": ws.rel(inf),
            **meta,
        }
        if fam == "kws":
            side.update(kws_rule=tn.KWS_RULE, keywords=list(kw))
        if "condition_family" in df.columns:
            side.update(family_sidecar(df, fam))
        write_scores(ws, task, df, side)
        log.info(
            "scored %s: %d rows, %d __ERROR__ rows dropped",
            task,
            len(df),
            sum(meta["n_errors"].values()),
        )
        result[task] = df
    return result


def main(argv=None) -> int:
    """``python -m aiplib.scoring.score --profile paper --inference-dir DIR [--manifests-dir DIR]``.

    Scores a folder of inference files written elsewhere (exit 1 with one line when nothing could be
    scored).
    """
    ap = argparse.ArgumentParser(
        prog="python -m aiplib.scoring.score", description=main.__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--profile", default="demo", help="workspace profile whose results/ receive the scores"
    )
    ap.add_argument(
        "--data-root", default=None, help="data root (default $AIP_DATA_ROOT or <repo>/data)"
    )
    ap.add_argument(
        "--inference-dir",
        default=None,
        help="folder of <model>/<task>.jsonl (default: the workspace's)",
    )
    ap.add_argument(
        "--manifests-dir",
        default=None,
        help="folder of asr.csv / kws.csv (default: the workspace's; "
        "without manifests the rows' own columns are used)",
    )
    ap.add_argument("--models", default=None, help="comma-separated model folders (default: all)")
    ap.add_argument("--tasks", default=None, help="comma-separated tasks (default: all found)")
    ap.add_argument(
        "--response-cleanup",
        default="",
        choices=["", *tn.RESPONSE_CLEANUPS],
        help="clean-up of an answer before scoring (default none)",
    )
    ap.add_argument(
        "--null-answer",
        default="",
        choices=["", *NULL_ANSWER_RULES],
        help="a JSON null answer: failed or text_none (default: the profile's rule)",
    )
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ws = workspace(a.profile, data_root=a.data_root)
    ws.ensure()
    try:
        out = score_inference(
            ws,
            models=a.models.split(",") if a.models else None,
            tasks=a.tasks.split(",") if a.tasks else None,
            inference_dir=a.inference_dir,
            manifests_dir=a.manifests_dir,
            response_cleanup=a.response_cleanup,
            null_answer=a.null_answer,
        )
    except AiplibError as exc:
        print(f"scoring: {exc}", file=__import__("sys").stderr)
        return 1
    for task, df in out.items():
        side = json.loads(ws.scores_sidecar(task).read_text())
        print(
            f"{task}: {len(df)} rows scored, {sum(side['n_errors'].values())} __ERROR__ stimuli dropped, "
            f"{sum(side['n_malformed_lines'].values())} unreadable lines -> {ws.scores_csv(task)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
