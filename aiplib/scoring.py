"""Stage 8: text normalisation, word error rate, the keyword-spotting rule and score files.

Normalisation and scoring are kept apart (style anchor 5): :func:`normalize_text` is Whisper's
English text normaliser [1]_ from the maintained ``whisper_normalizer`` package, versioned in
:data:`NORMALIZER_NAME` / :data:`NORMALIZER_VERSION`; word alignment and error counts come from
jiwer [2]_. Raw and normalised text are both kept in ``results/scores/<task>.csv``; WER is reported
both pooled over the corpus (Σ errors / Σ reference words) and as a per-utterance mean, with the
substitution / deletion / insertion counts.

References
----------
.. [1] A. Radford, J. W. Kim, T. Xu, G. Brockman, C. McLeavey, I. Sutskever, "Robust speech
       recognition via large-scale weak supervision", arXiv:2212.04356, 2022 (the
       ``EnglishTextNormalizer`` of openai/whisper, as packaged by ``whisper-normalizer``).
.. [2] jiwer, https://github.com/jitsi/jiwer (``process_words``, ``cer``; Levenshtein alignment
       via RapidFuzz).
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import AiplibError, AiplibParameterError

__all__ = [
    "KEYWORDS",
    "ERROR_RESPONSE",
    "NORMALIZER_NAME",
    "NORMALIZER_VERSION",
    "JIWER_VERSION",
    "APOSTROPHES",
    "normalize_text",
    "wer",
    "wer_details",
    "kws_first_word",
    "kws_correct",
    "task_family",
    "read_jsonl",
    "score_inference",
]

log = logging.getLogger(__name__)

KEYWORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
"""The ten closed-set keywords of the KWS task (Speech Commands)."""

ERROR_RESPONSE = "__ERROR__"
"""The ``response`` of a failed generation in ``inference/<model>/<task>.jsonl``."""

NORMALIZER_NAME = "whisper_normalizer.english.EnglishTextNormalizer"
"""Which normaliser :func:`normalize_text` applies (after :data:`APOSTROPHES` mapping)."""

NORMALIZER_VERSION = importlib.metadata.version("whisper-normalizer")
"""Installed version of the ``whisper-normalizer`` package."""

JIWER_VERSION = importlib.metadata.version("jiwer")
"""Installed version of jiwer."""

APOSTROPHES = {"\u2018": "'", "\u2019": "'", "\u02bc": "'"}
"""Typographic apostrophes mapped to ``'`` before normalising (left / right single quotation
mark, modifier letter apostrophe). Without it Whisper's normaliser turns ``don’t`` into
``don t`` but ``don't`` into ``do not``."""

_TRANSLATE = str.maketrans(APOSTROPHES)

# Characters stripped around the first word of a KWS response: ASCII punctuation (markdown
# ``**``/``*``/``_``/backticks, quotes, brackets, "-" bullets, ".,!?:;") and typographic quotes.
_KWS_STRIP = "".join(sorted(set(
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u00ab\u00bb"
    "\u2039\u203a\u02bc\u2013\u2014\u2022\u00b7\u2026"
)))


@functools.lru_cache(maxsize=1)
def _normalizer():
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def normalize_text(s) -> str:
    """Normalise a transcript the way Whisper's English evaluation does.

    Typographic apostrophes (U+2018, U+2019, U+02BC) are first mapped to ``'``; then
    ``whisper_normalizer.english.EnglishTextNormalizer`` [1]_ lower-cases, removes bracketed
    text and fillers (``uh``, ``um``), spells out titles (``Mr.`` → ``mister``), standardises
    numbers to digits (``two`` → ``2``), expands contractions, applies British → American
    spelling and collapses white space.

    Parameters
    ----------
    s : str or None
        Raw text. ``None`` and NaN count as empty.

    Returns
    -------
    str
        Normalised text, words separated by single spaces (may be empty).

    Notes
    -----
    Quirks of the normaliser are kept on purpose, so that numbers are comparable to published
    Whisper results: ``'s`` becomes ``is`` (``"smith's"`` → ``"smith is"``), and a lone
    ``"..."`` becomes ``"."``.

    Examples
    --------
    >>> normalize_text("Mr. Smith's 2 cats")
    'mister smith is 2 cats'
    >>> normalize_text("don\u2019t") == normalize_text("don't") == 'do not'
    True
    """
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return ""
    return _normalizer()(str(s).translate(_TRANSLATE)).strip()


def _check_ref(ref_norm: str, raw, where: str = "") -> None:
    if not ref_norm:
        raise ValueError(
            f"reference{where} is empty after normalisation (raw reference {raw!r}); WER is "
            "undefined for an empty reference"
        )


def wer(ref: str, hyp: str) -> float:
    """Word error rate of one utterance, on normalised text.

    ``WER = (S + D + I) / N`` with ``N`` the number of reference words (jiwer [2]_).

    Parameters
    ----------
    ref : str
        Reference transcript (raw; normalised here with :func:`normalize_text`).
    hyp : str
        Recogniser output (raw). An empty hypothesis gives WER 1.0 (all deletions).

    Returns
    -------
    float >= 0
        Can exceed 1 when the hypothesis has many insertions (hallucinations).

    Raises
    ------
    ValueError
        If the reference is empty after normalisation.

    Examples
    --------
    >>> wer("the cat sat", "the cat sat down")
    0.3333333333333333
    """
    return wer_details([ref], [hyp])["wer"]


def wer_details(refs, hyps, *, normalize: bool = True) -> dict:
    """Corpus-level WER, mean per-utterance WER, S/D/I/hit counts and CER.

    Parameters
    ----------
    refs, hyps : sequence of str [shape=(n_utterances,)]
        References and hypotheses, in the same order.
    normalize : bool
        Apply :func:`normalize_text` to both sides first (default). With ``False`` the strings
        are only whitespace-split.

    Returns
    -------
    dict
        ``wer`` — corpus WER = Σ(S+D+I) / Σ N (pooled over utterances; style anchor 5);
        ``mean_wer`` — unweighted mean of the per-utterance WERs;
        ``substitutions, deletions, insertions, hits`` — int counts (jiwer ``process_words``);
        ``errors`` = S + D + I; ``ref_words`` = Σ N = H + S + D;
        ``cer`` — corpus character error rate (``jiwer.cer`` on the normalised strings);
        ``per_utterance`` — list of per-utterance WERs; ``n_utterances``.

    Raises
    ------
    ValueError
        If the two sequences differ in length (both lengths quoted), are empty, or any
        reference is empty after normalisation (its index and raw text quoted).
    """
    import jiwer

    refs, hyps = list(refs), list(hyps)
    if len(refs) != len(hyps):
        raise ValueError(f"got {len(refs)} references but {len(hyps)} hypotheses")
    if not refs:
        raise ValueError("no utterances to score")
    norm = normalize_text if normalize else (lambda s: " ".join(str(s or "").split()))
    r_n = [norm(r) for r in refs]
    h_n = [norm(h) for h in hyps]
    for i, (rn, raw) in enumerate(zip(r_n, refs)):
        _check_ref(rn, raw, f" #{i}")
    per = []
    s = d = ins = h = 0
    for rn, hn in zip(r_n, h_n):
        o = jiwer.process_words(rn, hn)
        s, d, ins, h = s + o.substitutions, d + o.deletions, ins + o.insertions, h + o.hits
        per.append((o.substitutions + o.deletions + o.insertions)
                   / (o.hits + o.substitutions + o.deletions))
    n_ref = h + s + d
    return {
        "wer": (s + d + ins) / n_ref,
        "mean_wer": float(np.mean(per)),
        "substitutions": int(s),
        "deletions": int(d),
        "insertions": int(ins),
        "hits": int(h),
        "errors": int(s + d + ins),
        "ref_words": int(n_ref),
        "cer": float(jiwer.cer(r_n, h_n)),
        "per_utterance": per,
        "n_utterances": len(refs),
    }


def kws_first_word(response) -> str:
    """The first word of a KWS answer, stripped of punctuation and markup, lower-cased.

    Leading white space, markdown emphasis (``**``, ``*``, ``_``), backticks, quotes, brackets
    and ``-`` bullets are removed; the first white-space-delimited token is taken and stripped
    of the same characters at both ends.

    Parameters
    ----------
    response : str or None

    Returns
    -------
    str
        Possibly empty.

    Examples
    --------
    >>> [kws_first_word(r) for r in ["Yes.", "**yes**", "Yes, it is.", "Yesterday", "- `Go`"]]
    ['yes', 'yes', 'yes', 'yesterday', 'go']
    """
    if response is None or (isinstance(response, float) and math.isnan(response)):
        return ""
    text = str(response).strip().lstrip(_KWS_STRIP + " \t\r\n")
    if not text:
        return ""
    return text.split()[0].strip(_KWS_STRIP).lower()


def kws_correct(response, label, is_target, *, keywords=KEYWORDS) -> bool:
    """The closed-set KWS scoring rule.

    Parameters
    ----------
    response : str
        Model answer.
    label : str
        The word spoken in the clip.
    is_target : bool
        Whether ``label`` is one of ``keywords``.
    keywords : sequence of str
        The closed set (default :data:`KEYWORDS`).

    Returns
    -------
    bool
        Target clip: ``kws_first_word(response) == label`` (case-insensitive).
        Non-target clip: the first word is none of ``keywords`` (any other answer, e.g.
        ``unknown``, counts as a correct rejection).
    """
    first = kws_first_word(response)
    if bool(is_target):
        return first == str(label).strip().lower()
    return first not in {k.lower() for k in keywords}


def task_family(task: str) -> str:
    """``"asr"`` or ``"kws"`` for a task name (``asr``, ``kws``, ``asr_steer_p5`` …).

    Raises
    ------
    AiplibParameterError
        If the name starts with neither.
    """
    for fam in ("asr", "kws"):
        if task == fam or task.startswith(fam + "_"):
            return fam
    raise AiplibParameterError(f"task {task!r} belongs to neither the asr nor the kws family")


def read_jsonl(path) -> tuple[list[dict], int]:
    """Read a JSON-lines file, tolerating a half-written trailing line.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    rows : list of dict
    n_malformed : int
        Lines that could not be parsed and were skipped. A bad *last* line (a run interrupted
        while writing) is skipped with an info message; a bad line elsewhere with a warning.
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    rows, bad = [], 0
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, ln in enumerate(lines):
        if not ln.strip():
            continue
        try:
            obj = json.loads(ln)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
        except ValueError:
            bad += 1
            if i == last:
                log.info("%s: skipped a half-written last line", path)
            else:
                warnings.warn(f"{path}: line {i + 1} is not valid JSON; skipped", stacklevel=2)
            continue
        rows.append(obj)
    return rows, bad


def _read_manifest(ws, family: str) -> pd.DataFrame:
    p = Path(ws.manifests) / f"{family}.csv"
    if not p.exists():
        raise AiplibError(f"{p} is missing; run stage 5 (manifests) first")
    m = pd.read_csv(p, dtype=str, keep_default_na=False)
    need = {"stimulus_id", "item_id", "bg_id", "snr_db", "reference"}
    if need - set(m.columns):
        raise AiplibError(f"{p} lacks columns {sorted(need - set(m.columns))}")
    m["snr_db"] = pd.to_numeric(m["snr_db"].where(m["bg_id"] != "clean", ""), errors="coerce")
    if "accent_group" not in m.columns:
        m["accent_group"] = ""
    if "is_target" not in m.columns:
        m["is_target"] = ""
    return m.drop_duplicates("stimulus_id", keep="last").set_index("stimulus_id", drop=False)


def _as_bool(v, label) -> bool:
    t = str(v).strip().lower()
    if t in ("true", "1", "yes", "t"):
        return True
    if t in ("false", "0", "no", "f"):
        return False
    return str(label).strip().lower() in KEYWORDS


def _score_task(ws, task: str, models, manifest: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    fam = task_family(task)
    frames = []
    meta = {"n_errors": {}, "n_rows_per_model": {}, "n_malformed_lines": {}, "n_duplicates": {},
            "n_not_in_manifest": {}, "n_empty_reference": {}, "prompt_ids": {}, "sources": []}
    for model in models:
        path = Path(ws.inference) / model / f"{task}.jsonl"
        if not path.exists():
            continue
        rows, bad = read_jsonl(path)
        meta["sources"].append(ws.rel(path) if hasattr(ws, "rel") else str(path))
        meta["n_malformed_lines"][model] = bad
        cols = sorted({k for r in rows for k in r} | {"stimulus_id", "response", "error",
                                                       "prompt_id"})
        df = pd.DataFrame(rows, columns=cols)
        df["stimulus_id"] = df["stimulus_id"].astype(str)
        # same rule as aiplib.inference: "__ERROR__" response or a non-null error
        is_err = ((df["response"].astype(str) == ERROR_RESPONSE) | df["response"].isna()
                  | df["error"].notna())
        df["_err"] = is_err
        # A resumed run may hold several rows per stimulus: keep the last successful one.
        n_before = len(df)
        df = df.sort_values("_err", kind="stable")  # successes first, original order kept
        ok = df[~df["_err"]].drop_duplicates("stimulus_id", keep="last")
        failed = df[df["_err"] & ~df["stimulus_id"].isin(ok["stimulus_id"])]
        failed = failed.drop_duplicates("stimulus_id", keep="last")
        meta["n_duplicates"][model] = int(n_before - len(ok) - len(failed))
        meta["n_errors"][model] = int(len(failed))
        unknown = ~ok["stimulus_id"].isin(manifest.index)
        meta["n_not_in_manifest"][model] = int(unknown.sum())
        if unknown.any():
            warnings.warn(f"{path}: {int(unknown.sum())} stimulus ids are not in "
                          f"manifests/{fam}.csv; dropped", stacklevel=3)
        ok = ok[~unknown]
        pids = ok["prompt_id"].fillna("").astype(str).value_counts().sort_index()
        meta["prompt_ids"][model] = {k: int(v) for k, v in pids.items()}
        if len(pids) > 1:
            warnings.warn(f"{path}: rows come from {len(pids)} prompts {list(pids.index)}; "
                          "the scores mix them", stacklevel=3)
        man = manifest.loc[ok["stimulus_id"]]
        out = pd.DataFrame({
            "model": model,
            "task": task,
            "stimulus_id": ok["stimulus_id"].to_numpy(),
            "item_id": man["item_id"].to_numpy(),
            "bg_id": man["bg_id"].to_numpy(),
            "snr_db": man["snr_db"].to_numpy(),
            "accent_group": man["accent_group"].replace("", np.nan).to_numpy(),
            "prompt_id": ok["prompt_id"].to_numpy(),
        })
        resp = ok["response"].astype(str).to_numpy()
        if fam == "asr":
            out["reference"] = man["reference"].to_numpy()
            out["response"] = resp
            out["ref_norm"] = [normalize_text(r) for r in out["reference"]]
            out["hyp_norm"] = [normalize_text(h) for h in resp]
            empty = out["ref_norm"] == ""
            meta["n_empty_reference"][model] = int(empty.sum())
            if empty.any():
                warnings.warn(f"{task}/{model}: {int(empty.sum())} references are empty after "
                              "normalisation; those rows are dropped (WER undefined)", stacklevel=3)
            out = out[~empty].reset_index(drop=True)
            det = [_align(r, h) for r, h in zip(out["ref_norm"], out["hyp_norm"])]
            sdih = ["substitutions", "deletions", "insertions", "hits"]
            out[sdih] = pd.DataFrame(det, columns=sdih, index=out.index, dtype="int64")
            out["errors"] = out["substitutions"] + out["deletions"] + out["insertions"]
            out["ref_words"] = out["hits"] + out["substitutions"] + out["deletions"]
            out["wer"] = out["errors"] / out["ref_words"]
            out = _add_delta(out, "wer", "delta_wer", noisy_minus_clean=True)
        else:
            out["label"] = man["reference"].to_numpy()
            out["is_target"] = [_as_bool(t, lab)
                                for t, lab in zip(man["is_target"], man["reference"])]
            out["response"] = resp
            out["first_word"] = [kws_first_word(r) for r in resp]
            out["correct"] = [int(kws_correct(r, lab, t))
                              for r, lab, t in zip(resp, out["label"], out["is_target"])]
            meta["n_empty_reference"][model] = 0
            out = _add_delta(out, "correct", "delta_acc", noisy_minus_clean=False)
        meta["n_rows_per_model"][model] = int(len(out))
        frames.append(out)
    if not frames:
        return pd.DataFrame(), meta
    res = pd.concat(frames, ignore_index=True)
    meta["n_unpaired"] = int((res["bg_id"] != "clean").sum()
                             - res.loc[res["bg_id"] != "clean",
                                       "delta_wer" if fam == "asr" else "delta_acc"].notna().sum())
    return res, meta


def _align(ref_norm: str, hyp_norm: str):
    import jiwer

    o = jiwer.process_words(ref_norm, hyp_norm)
    return o.substitutions, o.deletions, o.insertions, o.hits


def _add_delta(df: pd.DataFrame, col: str, out_col: str, *,
               noisy_minus_clean: bool) -> pd.DataFrame:
    clean = (df[df["bg_id"] == "clean"].drop_duplicates(["model", "task", "item_id"], keep="last")
             .set_index(["model", "task", "item_id"])[col])
    key = pd.MultiIndex.from_frame(df[["model", "task", "item_id"]])
    c = clean.reindex(key).to_numpy(dtype=float)
    v = df[col].to_numpy(dtype=float)
    d = v - c if noisy_minus_clean else c - v
    d[(df["bg_id"] == "clean").to_numpy()] = np.nan
    df[out_col] = d
    return df


def score_inference(ws, *, models=None, tasks=None) -> dict[str, pd.DataFrame]:
    """Score every inference file and write ``results/scores/<task>.csv`` + ``.json``.

    Parameters
    ----------
    ws : aiplib.workspace.Workspace
        Reads ``inference/<model>/<task>.jsonl`` and ``manifests/<family>.csv``.
    models : sequence of str, optional
        Model folders to score (default: every folder under ``inference/``).
    tasks : sequence of str, optional
        Tasks to score (default: every ``<task>.jsonl`` found, ``run_log.jsonl`` excluded).
        A requested task with no file for any model is skipped with a warning.

    Returns
    -------
    dict of str -> pandas.DataFrame
        Per task, one row per (model, stimulus). Common columns: ``model, task, stimulus_id,
        item_id, bg_id, snr_db (dB; NaN for clean), accent_group, prompt_id, response``.
        ASR family adds ``reference, ref_norm, hyp_norm, substitutions, deletions, insertions,
        hits, errors (S+D+I), ref_words (N), wer, delta_wer`` with
        ``delta_wer = WER(noisy) − WER(clean)`` for the same (model, task, item) (NaN on clean
        rows and when the clean row is missing). KWS family adds ``label, is_target,
        first_word, correct (0/1), delta_acc = correct(clean) − correct(noisy)`` (so a
        positive value is a degradation, as for ``delta_wer``).

    Notes
    -----
    * Rows whose ``response`` is ``"__ERROR__"`` (or whose ``error`` is not null, the rule of
      :mod:`aiplib.inference`) are dropped; stimuli with no successful row are counted
      (``n_errors`` per model in the JSON sidecar). When a resumed run holds several rows for
      one stimulus the last successful one is kept (``n_duplicates``).
    * ``prompt_ids`` in the sidecar counts the scored rows per prompt id and model; a warning is
      raised when one file mixes prompts.
    * A half-written trailing JSONL line is skipped (``n_malformed_lines``).
    * The reference text / KWS label comes from the manifest (source of truth), not the JSONL.
    * ASR rows whose reference is empty after normalisation are dropped and counted
      (``n_empty_reference``), as the Open ASR Leaderboard does.
    * The sidecar records the normaliser name and version, the jiwer version, the KWS rule and
      the keywords.

    Raises
    ------
    AiplibError
        If no inference file exists at all, or a needed manifest is missing.
    """
    inf = Path(ws.inference)
    if models is None:
        models = sorted(p.name for p in inf.iterdir() if p.is_dir()) if inf.exists() else []
    if tasks is None:
        tasks = sorted({p.stem for m in models for p in (inf / m).glob("*.jsonl")
                        if p.stem != "run_log"})
    if not models or not tasks:
        raise AiplibError(f"no inference files under {inf}; run stage 7 (inference) first")
    out_dir = Path(ws.results) / "scores"
    out_dir.mkdir(parents=True, exist_ok=True)
    manifests, result = {}, {}
    for task in tasks:
        fam = task_family(task)
        if not any((inf / m / f"{task}.jsonl").exists() for m in models):
            warnings.warn(f"no inference/<model>/{task}.jsonl for models {list(models)}; "
                          f"task {task!r} skipped", stacklevel=2)
            continue
        if fam not in manifests:
            manifests[fam] = _read_manifest(ws, fam)
        df, meta = _score_task(ws, task, models, manifests[fam])
        df.to_csv(out_dir / f"{task}.csv", index=False)
        side = {
            "task": task,
            "family": fam,
            "normalizer": {"name": NORMALIZER_NAME, "version": NORMALIZER_VERSION,
                           "apostrophes_mapped": sorted(APOSTROPHES)},
            "jiwer_version": JIWER_VERSION,
            "n_rows": int(len(df)),
            **meta,
        }
        if fam == "kws":
            side["kws_rule"] = ("first word of the response, stripped of punctuation/markup and "
                                "lower-cased; target clip: equals label; non-target clip: is not "
                                "one of the keywords")
            side["keywords"] = list(KEYWORDS)
        (out_dir / f"{task}.json").write_text(json.dumps(side, indent=2) + "\n", encoding="utf-8")
        total_err = sum(meta["n_errors"].values())
        log.info("scored %s: %d rows, %d __ERROR__ rows dropped", task, len(df), total_err)
        result[task] = df
    return result
