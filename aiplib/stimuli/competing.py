"""Competing speech (issue 14, items 2–3): a target mixed with other talkers, and the leakage of
their words into the answer.

Mixing
------
A *distractor stream* of one language covers the target: the language's utterances (a table of
:mod:`aiplib.sources.corpora.asterisk_langs`, sorted by ``distractor_id``) are taken in a seeded random
order, each loudness-normalised to −23 LUFS as the target speech (:func:`aiplib.stimuli.mixing.
normalized_speech`), placed end to end with :data:`GAP_S` of silence between them, and the first
one starts ``offset`` samples before the target (``offset`` uniform in ``[0, len(first))``, so the
target does not always begin with a distractor onset). Utterances are added until the target is
covered; when the language's pool is used up the same order starts again (``looped`` is True).

Settings: ``single`` (one language) or ``cocktail`` (several languages, :data:`COCKTAIL_SIZE` by
default, each a stream as above). In a cocktail every stream is first scaled to the same mean
power over the target's ``n`` samples (``d_k / sqrt(mean(d_k²))``, float64), so each language
contributes equally; the sum (cast to float32) is then *one* distractor signal.

The distractor (single stream or cocktail sum) is mixed with :func:`aiplib.stimuli.mixing.mix` itself —
the authors' mixer, ``mixing/mix.py``: target loudness-normalised to −23 LUFS,
``gain = sqrt(ps / (pd · 10^(snr/10)))`` with ``ps = mean(s²) + 1e-9``, ``pd = mean(d²) + 1e-9``,
peak division when ``max|s + g·d| > 1`` — so the SNR is *target over total distractor power*, the
same definition as the backgrounds. The distractor has exactly the target's length, so the
mixer's own offset is 0 whatever its seed. Each stream of a cocktail then sits about
``10·log10(K)`` dB below the total (4.8 dB for 3); its own achieved SNR is recorded.

Randomness: one ``numpy.random.default_rng(seed)`` draws, per stream in the order of
``languages``, the utterance order then the offset. Same inputs and seed → bit-identical mixture.

Leakage (MUSA's "interference" error class, measurable)
-------------------------------------------------------
ASR: with the paper's normalisation (:func:`aiplib.core.textnorm.normalize_text`), the *leak words* of
a hypothesis are its words that occur in the distractor's transcript and not in the target's;
``leak_share = n_leak_words / n_hyp_words``; ``n_leak_insertions`` counts the leak words the
jiwer alignment of target → hypothesis marks as insertions. KWS: a response leaks when its first
word (the authors' rule, :func:`aiplib.core.textnorm.kws_first_word`) is a word of the distractor's
transcript and not the clip's label. Words shared by chance (``a``, ``no``, ``de``) count too: the
clean row's hypothesis scored against the same distractor text gives that floor.
:func:`aiplib.analysis.family_results.leakage_summary` gives, per condition, the pooled share (Σ leak / Σ words) and the mean
insertions per item with percentile bootstrap intervals over items (:func:`aiplib.analysis.stats.
bootstrap_ci`), reporting ``n_resamples`` and ``seed``.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.textnorm import kws_first_word, normalize_kws_label, normalize_text
from aiplib.io.audio import SR, load_audio_cached
from aiplib.io.formats import parse_bool
from aiplib.sources.corpora.asterisk_langs import read_distractor_table
from aiplib.stimuli.mixing import (
    BG_SILENCE_POWER,
    POWER_FLOOR,
    SPEECH_LUFS,
    MixInfo,
    achieved_snr_db,
    loudness_normalize,
    mix,
    normalized_speech,
)

__all__ = ["FAMILY", "SNRS_DB", "SETTINGS", "COCKTAIL_SIZE", "GAP_S", "condition_id",
           "condition_grid", "distractor_stream", "build_distractor", "competing_components",
           "mix_competing", "row_components", "leakage_asr", "leakage_kws"]

FAMILY = "competing_speech"
"""Value of ``condition_family`` for these rows."""

SNRS_DB = (-10, -5, 0, 5, 10)
"""Target-over-distractor SNRs of the grid, dB (MUSA's range)."""

SETTINGS = ("single", "cocktail")
"""One distractor language, or a cocktail of several."""

COCKTAIL_SIZE = 3
"""Languages in a cocktail."""

GAP_S = 0.2
"""Silence between consecutive distractor utterances of a stream, s."""

def condition_id(languages, *, setting: str | None = None) -> str:
    """The ``background_id``-like name of a distractor condition: ``talker_fr``,
    ``cocktail_fr_it_ru`` (SNR apart, as :func:`aiplib.stimuli.manifests.stimulus_id` appends it)."""
    langs = [languages] if isinstance(languages, str) else list(languages)
    setting = setting or ("single" if len(langs) == 1 else "cocktail")
    return ("talker_" if setting == "single" else "cocktail_") + "_".join(langs)


def condition_grid(languages, *, snrs_db=SNRS_DB, cocktail=None) -> list[dict]:
    """The competing-speech conditions: every single language, then the cocktail, × every SNR.

    Parameters
    ----------
    languages : sequence of str
        Single-distractor languages (e.g. ``("fr", "it", "ru", "es")``).
    snrs_db : sequence of int, dB
    cocktail : sequence of str or None
        Languages of the cocktail; default the first :data:`COCKTAIL_SIZE` of ``languages``;
        ``()`` for none.

    Returns
    -------
    list of dict
        ``condition_id``, ``setting``, ``languages`` (tuple), ``snr_db``.
    """
    langs = list(languages)
    mix_langs = tuple(langs[:COCKTAIL_SIZE] if cocktail is None else cocktail)
    groups = [("single", (lang,)) for lang in langs] + ([("cocktail", mix_langs)] if mix_langs else [])
    return [dict(condition_id=condition_id(g, setting=s), setting=s, languages=g, snr_db=int(snr))
            for s, g in groups for snr in snrs_db]


def _pool(table: pd.DataFrame, language: str, exclude_ids) -> pd.DataFrame:
    pool = table[(table["language"] == language) & ~table["distractor_id"].isin(list(exclude_ids))]
    if pool.empty:
        raise AiplibParameterError(f"no distractor utterance of language {language!r} "
                                   f"(languages in the table: {sorted(set(table['language']))})")
    return pool.sort_values("distractor_id", kind="stable").reset_index(drop=True)


def distractor_stream(table: pd.DataFrame, language: str, n: int, rng, *, gap_s: float = GAP_S,
                      exclude_ids=()) -> tuple[np.ndarray, dict]:
    """One language's utterances end to end, covering ``n`` samples (see the module notes).

    Parameters
    ----------
    table : pandas.DataFrame
        Distractor table (:data:`aiplib.sources.corpora.asterisk_langs.DISTRACTOR_COLUMNS`).
    language : str
    n : int > 0, samples at 16 kHz
    rng : numpy.random.Generator
        Draws the utterance order (a permutation), then the offset.
    gap_s : float ≥ 0, s
    exclude_ids : iterable of str
        ``distractor_id`` values never used (e.g. the target item itself).

    Returns
    -------
    d : np.ndarray [shape=(n,)], float32
        Utterances at −23 LUFS each, zeros in the gaps.
    part : dict
        ``language``, ``voice``, ``same_voice_as_target``, ``ids`` (utterances heard, in order),
        ``texts``, ``starts_s`` (start of each utterance relative to the target, s; the first is
        ``-offset_s``), ``offset_s``, ``offset_samples``, ``looped``.

    Raises
    ------
    AiplibParameterError
        If the table has no utterance of ``language`` or ``n < 1``.
    """
    n = int(n)
    if n < 1:
        raise AiplibParameterError(f"the target must hold samples, got n={n}")
    pool = _pool(table, language, exclude_ids)
    order = rng.permutation(len(pool))
    gap = int(round(gap_s * SR))
    out = np.zeros(n, dtype=np.float32)
    ids, texts, starts = [], [], []
    offset, pos, i = None, 0, 0
    while pos < n:
        r = pool.iloc[order[i % len(pool)]]
        u, _ = normalized_speech(r["path"])
        if offset is None:
            offset = int(rng.integers(0, u.size))
            pos = -offset
        a, b = max(pos, 0), min(pos + u.size, n)
        out[a:b] = u[a - pos: b - pos]
        ids.append(str(r["distractor_id"]))
        texts.append(str(r["text"]))
        starts.append(round(pos / SR, 6))
        pos += u.size + gap
        i += 1
    part = dict(language=language, voice=str(pool["voice"].iloc[0]),
                same_voice_as_target=any(parse_bool(v) is True for v in pool["same_voice_as_target"]), ids=ids,
                texts=texts, starts_s=starts, offset_s=round(offset / SR, 6), offset_samples=offset,
                looped=bool(i > len(pool)))
    return out, part


def build_distractor(table: pd.DataFrame, n: int, *, languages, seed: int, gap_s: float = GAP_S,
                     exclude_ids=()) -> tuple[np.ndarray, list[np.ndarray], list[dict]]:
    """The distractor signal of one condition: one stream, or the equal-power sum of several.

    Parameters
    ----------
    table : pandas.DataFrame
    n : int, samples
    languages : str or sequence of str
        Distinct languages; one → ``single``, several → ``cocktail``.
    seed : int
    gap_s : float, s
    exclude_ids : iterable of str

    Returns
    -------
    d : np.ndarray [shape=(n,)], float32
        The stream (single), or ``Σ_k d_k / sqrt(mean(d_k²))`` cast to float32 (cocktail).
    streams : list of np.ndarray [shape=(n,)], float64
        Each stream as it enters ``d`` (after the equal-power scaling of a cocktail).
    parts : list of dict
        :func:`distractor_stream`'s ``part`` per language.

    Raises
    ------
    AiplibParameterError
        If a language repeats or has no utterance.
    """
    langs = [languages] if isinstance(languages, str) else list(languages)
    if not langs or len(set(langs)) != len(langs):
        raise AiplibParameterError(f"distractor languages must be distinct and not empty, got {langs}")
    rng = np.random.default_rng(int(seed))
    raw = [distractor_stream(table, lang, n, rng, gap_s=gap_s, exclude_ids=exclude_ids) for lang in langs]
    parts = [p for _, p in raw]
    if len(langs) == 1:
        d = raw[0][0]
        return d, [d.astype(np.float64)], parts
    streams = []
    for x, _ in raw:
        x = x.astype(np.float64)
        p = float(np.mean(x * x))
        streams.append(x / math.sqrt(p) if p > 0 else x)
    return np.sum(streams, axis=0).astype(np.float32), streams, parts


def competing_components(speech, table: pd.DataFrame, snr_db: float, seed: int, *, languages,
                         gap_s: float = GAP_S, exclude_ids=(), speech_lufs: float = SPEECH_LUFS) -> dict:
    """Mix a target with a distractor condition and return every part as it is in the mixture.

    Parameters
    ----------
    speech : np.ndarray [shape=(n,)], float32, 16 kHz
        The target at any level (loudness-normalised here, as by the background mixer).
    table : pandas.DataFrame
        Distractor table.
    snr_db : float, dB
        Target over total distractor power.
    seed : int
    languages : str or sequence of str
    gap_s : float, s
    exclude_ids : iterable of str
    speech_lufs : float, LUFS

    Returns
    -------
    dict
        ``mixture`` (float32 (n,), exactly :func:`aiplib.stimuli.mixing.mix` of the target and the
        distractor), ``speech`` and ``distractor`` (float64 (n,), the scaled parts, summing to the
        mixture up to float32 rounding), ``streams`` (list of float64 (n,), each language's part),
        ``info`` (dict): ``condition_family``,
        ``setting``, ``languages``, ``streams`` (the parts of :func:`distractor_stream`),
        ``seed``, ``gap_s``, ``target_snr_db``, ``achieved_snr_db``, ``stream_snr_db`` (per
        language), ``gain_db``, ``clip_scale``, ``speech_lufs``.

    Raises
    ------
    AudioFileError
        If the target is shorter than 0.4 s (loudness cannot be measured).
    AiplibParameterError
        See :func:`build_distractor`.
    """
    s = np.asarray(speech, dtype=np.float32)
    d, streams, parts = build_distractor(table, s.size, languages=languages, seed=seed, gap_s=gap_s,
                                         exclude_ids=exclude_ids)
    y, mi = mix(s, d, float(snr_db), int(seed), speech_lufs=speech_lufs)
    sn, _ = loudness_normalize(s, speech_lufs)  # the mixer's target, for the parts
    ps = float(np.mean(sn ** 2)) + POWER_FLOOR
    pd_ = float(np.mean(d ** 2)) + POWER_FLOOR
    gain = math.sqrt(ps / (pd_ * 10 ** (float(snr_db) / 10)))  # the mixer's gain (mixing._mix_normalized)
    scale = mi.clip_scale
    sp = sn.astype(np.float64) * scale
    dp = d.astype(np.float64) * gain * scale
    stream_parts = [x * gain * scale for x in streams]
    info = dict(condition_family=FAMILY, setting="single" if len(parts) == 1 else "cocktail",
                languages=[p["language"] for p in parts], streams=parts, seed=int(seed), gap_s=float(gap_s),
                target_snr_db=float(snr_db), achieved_snr_db=achieved_snr_db(sp, dp),
                stream_snr_db=[achieved_snr_db(sp, x) for x in stream_parts],
                gain_db=20 * math.log10(gain) if gain > 0 else float("-inf"), clip_scale=float(scale),
                speech_lufs=mi.speech_lufs)
    return dict(mixture=y, speech=sp, distractor=dp, streams=stream_parts, info=info)


def mix_competing(speech, table: pd.DataFrame, snr_db: float, seed: int, *, languages, gap_s: float = GAP_S,
                  exclude_ids=(), speech_lufs: float = SPEECH_LUFS) -> tuple[np.ndarray, dict]:
    """The mixture of :func:`competing_components` and its ``info``.

    Returns
    -------
    y : np.ndarray [shape=(n,)], float32, 16 kHz
    info : dict
    """
    c = competing_components(speech, table, snr_db, seed, languages=languages, gap_s=gap_s,
                             exclude_ids=exclude_ids, speech_lufs=speech_lufs)
    return c["mixture"], c["info"]


def row_components(row, ws) -> dict:
    """Materialise a ``competing_speech`` manifest row (:func:`aiplib.stimuli.families.mix_components` calls it).

    The target (``speech_path``, loudness-normalised by the mixer exactly as a background row's)
    is mixed by :func:`competing_components` with the distractor of ``condition_params``
    (``languages``, ``gap_s``, ``exclude_ids``) drawn with the row's ``seed`` from the
    workspace's distractor table (``raw/distractors/distractors.csv``, read once per file
    version), at ``snr_db``.

    Returns
    -------
    dict
        ``mixture`` (float32 (n,)), ``speech`` and ``background`` (float32 (n,): the target and
        the scaled distractor as they are in the mixture), ``info`` (:class:`aiplib.stimuli.mixing.MixInfo`:
        achieved SNR, distractor gain, peak, clip scale; ``bg_offset`` None), ``detail``
        (:func:`competing_components`'s ``info``).

    Raises
    ------
    AiplibParameterError
        The row lacks ``condition_params`` / ``seed`` / ``snr_db``, the table is missing, or the
        utterances drawn now differ from the row's ``distractor_ids`` (the distractor table
        changed since stage 5: rebuild the manifests).
    """

    rid = row.get("id")
    try:
        params = json.loads(str(row["condition_params"]))
        seed, snr = int(row["seed"]), float(row["snr_db"])
        langs, speech_rel = params["languages"], str(row["speech_path"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AiplibParameterError(f"competing-speech row {rid!r}: bad condition_params/seed/snr_db/speech_path ({exc})") from None
    if not ws.distractors_csv.is_file():
        raise AiplibParameterError(f"competing-speech row {rid!r}: {ws.distractors_csv} not found (run stage 01)")
    table = read_distractor_table(ws.distractors_csv, root=ws.root)
    speech = load_audio_cached(ws.path(speech_rel))
    c = competing_components(speech, table, snr, seed, languages=langs, gap_s=float(params.get("gap_s", GAP_S)),
                             exclude_ids=params.get("exclude_ids", ()))
    ids = "|".join(i for p in c["info"]["streams"] for i in p["ids"])
    if "distractor_ids" in row and ids != str(row["distractor_ids"]):
        raise AiplibParameterError(f"competing-speech row {rid!r}: the distractor utterances drawn now ({ids[:80]}) "
                                   f"differ from the manifest's ({str(row['distractor_ids'])[:80]}): the distractor "
                                   "table changed since stage 5; rebuild the manifests (stage 05)")
    y, inf = c["mixture"], c["info"]
    scale, gain = inf["clip_scale"], 10 ** (inf["gain_db"] / 20)
    p_d = float(np.mean(c["distractor"] ** 2)) / (gain * scale) ** 2 if gain > 0 else 0.0
    info = MixInfo(achieved_snr_db=inf["achieved_snr_db"], target_snr_db=snr, speech_lufs=inf["speech_lufs"],
                   bg_gain_db=inf["gain_db"], peak=float(np.max(np.abs(y))), clip_scale=scale, bg_offset=None,
                   bg_power=p_d, bg_active=p_d >= BG_SILENCE_POWER,
                   speech_peak=float(np.max(np.abs(c["speech"]))) / scale)
    return dict(mixture=y, speech=c["speech"].astype(np.float32), background=c["distractor"].astype(np.float32),
                info=info, detail=inf)


# ------------------------------------------------------------------------------------ leakage
def _words(text) -> list[str]:
    if isinstance(text, (list, tuple)):
        text = " ".join(str(t) for t in text)
    return normalize_text(text).split()


def leakage_asr(hypothesis, target_text, distractor_text) -> dict:
    """Distractor words in an ASR hypothesis (paper normalisation, jiwer alignment).

    Parameters
    ----------
    hypothesis : str or None
    target_text : str
        The target's reference transcript.
    distractor_text : str or sequence of str
        The transcripts of the distractor utterances heard (the manifest column ``distractor_text``).

    Returns
    -------
    dict
        ``n_hyp_words``; ``n_leak_words`` (hypothesis words in the distractor's vocabulary and not
        in the target's); ``leak_share`` (their share, NaN for an empty hypothesis);
        ``n_insertions`` (jiwer, target → hypothesis); ``n_leak_insertions`` (inserted words
        that are leak words); ``leak_words`` (space-separated, in hypothesis order).
    """
    import jiwer

    hyp, ref = _words(hypothesis), _words(target_text)
    leak_vocab = set(_words(distractor_text)) - set(ref)
    is_leak = [w in leak_vocab for w in hyp]
    inserted = [False] * len(hyp)
    if hyp and not ref:
        inserted = [True] * len(hyp)
    elif hyp:
        for chunk in jiwer.process_words(" ".join(ref), " ".join(hyp)).alignments[0]:
            if chunk.type == "insert":
                for j in range(chunk.hyp_start_idx, chunk.hyp_end_idx):
                    inserted[j] = True
    n_leak = sum(is_leak)
    return dict(n_hyp_words=len(hyp), n_leak_words=n_leak,
                leak_share=n_leak / len(hyp) if hyp else float("nan"), n_insertions=sum(inserted),
                n_leak_insertions=sum(a and b for a, b in zip(is_leak, inserted)),
                leak_words=" ".join(w for w, x in zip(hyp, is_leak) if x))


def leakage_kws(response, distractor_text, *, label) -> dict:
    """Whether a KWS response is a distractor word (first-word rule of the paper).

    Parameters
    ----------
    response : str or None
    distractor_text : str or sequence of str
    label : str
        The clip's spoken word (never a leak, even if the distractor says it too).

    Returns
    -------
    dict
        ``first_word`` (:func:`aiplib.core.textnorm.kws_first_word`), ``kws_leak`` (bool): the first
        word is one of the distractor transcript's words read by the same rule (lower case,
        punctuation stripped at the ends), not the label; an empty answer never leaks.
    """
    first = kws_first_word(response)
    if isinstance(distractor_text, (list, tuple)):
        distractor_text = " ".join(str(t) for t in distractor_text)
    # the distractor's words read as the answer is (kws_first_word: lower case, ASCII punctuation
    # stripped at the ends, apostrophes kept), not with the ASR normalisation (which splits "l'appel")
    vocab = {kws_first_word(t) for t in str(distractor_text or "").split()} - {normalize_kws_label(label), ""}
    answered = not (response is None or (isinstance(response, float) and math.isnan(response))
                    or not str(response).strip())  # an empty answer reads "silence": no leak
    return dict(first_word=first, kws_leak=bool(answered and first and first in vocab))
