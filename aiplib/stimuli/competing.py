"""The ``competing_speech`` condition family: a target mixed with other talkers, and the leakage
of their words into the answer.

A *distractor stream* of one language covers the target: the language's utterances (sorted by
``distractor_id``) in a seeded random order, each at −23 LUFS, end to end with :data:`GAP_S` s of
silence between them, the first starting ``offset`` samples before the target (uniform in
``[0, len(first))``); a used-up pool starts again (``looped``). A ``cocktail`` scales each stream to
unit mean power over the target's ``n`` samples (float64) and sums them. The authors' mixer
(:func:`aiplib.stimuli.mixing.mix`) adds the distractor, so the SNR is target over *total*
distractor power in dB. One ``numpy.random.default_rng(seed)`` draws, per stream in the order of
``languages``, the utterance order then the offset.

Leakage (MUSA's "interference" errors): ASR *leak words* are hypothesis words (paper
normalisation) in the distractor's transcript and not in the target's, ``leak_share =
n_leak_words / n_hyp_words``; KWS: the answer's first word is a distractor word other than the
label. Chance overlap is measured by the *floor* (the item's clean hypothesis against this row's
distractor text) and the *mismatch* share (this row's hypothesis against the distractor text of
the next item in the same condition and SNR).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.textnorm import kws_first_word, normalize_kws_label, normalize_text
from aiplib.io.audio import SR, load_audio, load_audio_cached
from aiplib.io.formats import parse_bool, write_csv_atomic, write_json_atomic
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.sources.corpora import demo
from aiplib.stimuli.manifests import ManifestPlan, _row, _snr_int, _text, compact_json, stimulus_id
from aiplib.stimuli.mixing import (
    BG_SILENCE_POWER,
    SPEECH_LUFS,
    MixInfo,
    mix_normalized,
    achieved_snr_db,
    loudness_normalize,
    normalized_speech,
)

NAME = FAMILY = "competing_speech"
"""Value of ``condition_family`` for these rows."""

COLUMNS = [
    "setting",
    "distractor_languages",
    "same_voice_as_target",
    "distractor_ids",
    "distractor_text",
    "looped",
    "condition_params",
]
"""Manifest columns after :data:`aiplib.stimuli.manifests.EXTRA_COLUMNS` (meanings:
:func:`manifest_plan`)."""

SEED_START = {"asr": 20000, "kws": 30000}
"""First seed of each task's manifest row counter."""

SNRS_DB = (-10, -5, 0, 5, 10)
"""Target-over-distractor SNRs of the grid, dB (MUSA's range)."""

SETTINGS = ("single", "cocktail")
"""One distractor language, or a cocktail of several."""

COCKTAIL_SIZE = 3
"""Languages in a cocktail."""

GAP_S = 0.2
"""Silence between consecutive distractor utterances of a stream, s."""

LEAK_ASR_COLUMNS = [
    "n_hyp_words",
    "n_leak_words",
    "leak_share",
    "n_leak_insertions",
    "leak_words",
    "floor_n_hyp_words",
    "floor_n_leak_words",
    "floor_leak_share",
    "mismatch_n_leak_words",
    "mismatch_leak_share",
]
"""ASR leakage score columns (NaN on clean rows; ``floor_*`` NaN without a clean row of the
item)."""

LEAK_KWS_COLUMNS = ["kws_leak", "kws_leak_floor", "kws_leak_mismatch"]
"""KWS leakage score columns (empty on clean rows)."""

SCORE_TYPES = {
    **{c: "float" for c in LEAK_ASR_COLUMNS if c != "leak_words"},
    **{c: "bool" for c in (*LEAK_KWS_COLUMNS, "same_voice_as_target")},
}
"""Types of the family's score columns when read back
(:func:`aiplib.scoring.families.read_family_scores`)."""

LEAKAGE_RULE = (
    "leak words: hypothesis words (paper normalisation) in the distractor transcript and not in "
    "the target's; leak_share = n_leak_words / n_hyp_words; KWS: first word of the answer is a "
    "distractor word other than the label; floor_*: the item's clean hypothesis against this "
    "row's distractor text; mismatch_*: this row's hypothesis against the distractor text of the "
    "next item in the same condition and SNR (same languages, not heard)"
)

TABLE = dict(
    name="competing_speech",
    scope="condition",
    key=["model", "condition_id", "snr_db"],
    setting_order=SETTINGS,
)
"""What notebook 09 shows (:func:`aiplib.analysis.family_results.family_table`): the table's file
name,
its :func:`aiplib.analysis.conditions.condition_table` scope and key, the order of the settings."""


def condition_grid(languages, *, snrs_db=SNRS_DB, cocktail=None) -> list[dict]:
    """The competing-speech conditions: every single language, then the cocktail (default the first
    :data:`COCKTAIL_SIZE` languages; ``()`` for none), × every SNR in ``snrs_db`` (dB).

    Returns
    -------
    list of dict
        ``condition_id`` (the ``background_id``-like name: ``talker_fr``, ``cocktail_fr_it_ru``; SNR
        apart,
        as :func:`aiplib.stimuli.manifests.stimulus_id` appends it), ``setting``, ``languages``
          (tuple), ``snr_db``.
    """
    langs = list(languages)
    mix_langs = tuple(langs[:COCKTAIL_SIZE] if cocktail is None else cocktail)
    groups = [("single", (lang,)) for lang in langs] + (
        [("cocktail", mix_langs)] if mix_langs else []
    )
    return [
        dict(
            condition_id=("talker_" if s == "single" else "cocktail_") + "_".join(g),
            setting=s,
            languages=g,
            snr_db=int(snr),
        )
        for s, g in groups
        for snr in snrs_db
    ]


def distractor_stream(
    table: pd.DataFrame, language: str, n: int, rng, *, gap_s: float = GAP_S, exclude_ids=()
) -> tuple[np.ndarray, dict]:
    """One language's utterances end to end, covering ``n`` samples (module notes).

    Parameters
    ----------
    table : pandas.DataFrame
        Distractor table (:data:`aiplib.sources.corpora.asterisk_langs.DISTRACTOR_COLUMNS`).
    language : str
    n : int > 0, samples at 16 kHz
    rng : numpy.random.Generator
        Draws the utterance order, then the offset.
    gap_s : float ≥ 0, s
    exclude_ids : iterable of str
        ``distractor_id`` values never used (the target itself).

    Returns
    -------
    d : np.ndarray [shape=(n,)], float32
        Utterances at −23 LUFS each, zeros in the gaps.
    part : dict
        ``language, voice, same_voice_as_target``, ``ids`` and ``texts`` (in the order heard),
        ``starts_s`` (relative to the target, s), ``offset_s, offset_samples, looped``.

    Raises
    ------
    AiplibParameterError
        If the table has no utterance of ``language`` or ``n < 1``.
    """
    n = int(n)
    if n < 1:
        raise AiplibParameterError(f"the target must hold samples, got n={n}")
    pool = table[(table["language"] == language) & ~table["distractor_id"].isin(list(exclude_ids))]
    if pool.empty:
        raise AiplibParameterError(
            f"no distractor utterance of language {language!r} "
            f"(languages in the table: {sorted(set(table['language']))})"
        )
    pool = pool.sort_values("distractor_id", kind="stable").reset_index(drop=True)
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
        out[a:b] = u[a - pos : b - pos]
        ids.append(str(r["distractor_id"]))
        texts.append(str(r["text"]))
        starts.append(round(pos / SR, 6))
        pos += u.size + gap
        i += 1
    part = dict(
        language=language,
        voice=str(pool["voice"].iloc[0]),
        same_voice_as_target=any(parse_bool(v) is True for v in pool["same_voice_as_target"]),
        ids=ids,
        texts=texts,
        starts_s=starts,
        offset_s=round(offset / SR, 6),
        offset_samples=offset,
        looped=bool(i > len(pool)),
    )
    return out, part


def build_distractor(
    table: pd.DataFrame, n: int, *, languages, seed: int, gap_s: float = GAP_S, exclude_ids=()
) -> tuple[np.ndarray, list[np.ndarray], list[dict]]:
    """The distractor of one condition: one stream, or the equal-power sum of several.

    Parameters
    ----------
    table, n, gap_s, exclude_ids
        As :func:`distractor_stream`.
    languages : str or sequence of str
        Distinct; one → ``single``, several → ``cocktail``.
    seed : int

    Returns
    -------
    d : np.ndarray [shape=(n,)], float32
        The stream, or ``Σ_k d_k / sqrt(mean(d_k²))`` (cocktail).
    streams : list of np.ndarray [shape=(n,)], float64
        Each stream as it enters ``d``.
    parts : list of dict
        :func:`distractor_stream`'s ``part`` per language.

    Raises
    ------
    AiplibParameterError
        If a language repeats or has no utterance.
    """
    langs = [languages] if isinstance(languages, str) else list(languages)
    if not langs or len(set(langs)) != len(langs):
        raise AiplibParameterError(
            f"distractor languages must be distinct and not empty, got {langs}"
        )
    rng = np.random.default_rng(int(seed))
    raw = [
        distractor_stream(table, lang, n, rng, gap_s=gap_s, exclude_ids=exclude_ids)
        for lang in langs
    ]
    parts, streams = [p for _, p in raw], [x.astype(np.float64) for x, _ in raw]
    if len(langs) == 1:
        return raw[0][0], streams, parts
    streams = [x / math.sqrt(p) if (p := float(np.mean(x * x))) > 0 else x for x in streams]
    return np.sum(streams, axis=0).astype(np.float32), streams, parts


def competing_components(
    speech,
    table: pd.DataFrame,
    snr_db: float,
    seed: int,
    *,
    languages,
    gap_s: float = GAP_S,
    exclude_ids=(),
    speech_lufs: float = SPEECH_LUFS,
) -> dict:
    """Mix a target with a distractor condition; every part as it is in the mixture.

    Parameters
    ----------
    speech : np.ndarray [shape=(n,)], float32, 16 kHz
        The target at any level (loudness-normalised to ``speech_lufs`` LUFS here).
    snr_db : float, dB
        Target over total distractor power.
    table, seed, languages, gap_s, exclude_ids
        As :func:`build_distractor`.

    Returns
    -------
    dict
        ``mixture`` (float32 (n,), :func:`aiplib.stimuli.mixing.mix` of target and distractor);
        ``speech``, ``distractor`` and ``streams`` (per language), float64 (n,) as scaled in it;
        ``info``: ``condition_family, setting, languages, streams, seed, gap_s, target_snr_db,
        achieved_snr_db, stream_snr_db, gain_db, clip_scale, speech_lufs``.

    Raises
    ------
    AudioFileError
        If the target is shorter than 0.4 s.
    AiplibParameterError
        See :func:`build_distractor`.
    """
    s = np.asarray(speech, dtype=np.float32)
    d, streams, parts = build_distractor(
        table, s.size, languages=languages, seed=seed, gap_s=gap_s, exclude_ids=exclude_ids
    )
    sn, measured = loudness_normalize(s, speech_lufs)
    m = mix_normalized(sn, d, float(snr_db), int(seed))  # the mixer itself (d is n long: offset 0)
    y, gain, scale = m.y, m.gain, m.scale
    sp, dp = sn.astype(np.float64) * scale, d.astype(np.float64) * gain * scale
    stream_parts = [x * gain * scale for x in streams]
    info = dict(
        condition_family=FAMILY,
        setting="single" if len(parts) == 1 else "cocktail",
        languages=[p["language"] for p in parts],
        streams=parts,
        seed=int(seed),
        gap_s=float(gap_s),
        target_snr_db=float(snr_db),
        achieved_snr_db=achieved_snr_db(sp, dp),
        stream_snr_db=[achieved_snr_db(sp, x) for x in stream_parts],
        gain_db=20 * math.log10(gain) if gain > 0 else float("-inf"),
        clip_scale=float(scale),
        speech_lufs=float(speech_lufs) if np.isfinite(measured) else measured,
    )
    return dict(mixture=y, speech=sp, distractor=dp, streams=stream_parts, info=info)


# ------------------------------------------------------------------------- stage 1: distractors
def prepare_distractors(
    ws, *, distractors_dir: str = "", distractor_texts: str = "", languages=None
):
    """Stage 1: write the distractor table ``raw/distractors/distractors.csv``.

    ``demo``: the installed Debian Asterisk prompts of ``languages`` (default
    :data:`aiplib.sources.corpora.asterisk_langs.DEMO_LANGUAGES`), decoded once to FLAC under
    ``raw/distractors/audio/``; otherwise the folder ``distractors_dir`` with its texts table
    ``distractor_texts`` (validated as custom speech), or nothing when neither is given. The demo
    then rewrites ``raw/debian_packages.csv`` with the language packs
    (:func:`aiplib.sources.corpora.demo.record_debian_packages`).

    Returns
    -------
    pandas.DataFrame or None
        The table (:data:`~aiplib.sources.corpora.asterisk_langs.DISTRACTOR_COLUMNS`), or None.

    Raises
    ------
    AiplibParameterError
        Only one of ``distractors_dir`` / ``distractor_texts`` given.
    MissingPackageError
        Demo: a language's packages are not installed.
    ValidationError
        The folder or its table fails the custom speech validation.
    """
    if bool(distractors_dir) != bool(distractor_texts):
        raise AiplibParameterError(
            "competing speech needs both distractors_dir and distractor_texts "
            f"(got distractors_dir={distractors_dir!r}, distractor_texts={distractor_texts!r})"
        )
    if distractors_dir:
        table = al.folder_distractors(distractors_dir, distractor_texts)
    elif ws.profile == "demo":
        table = _decoded(ws, al.asterisk_distractors(tuple(languages or al.DEMO_LANGUAGES)))
    else:
        return None
    write_csv_atomic(table, ws.distractors_csv)  # creates the folder
    if ws.profile == "demo":  # the language packs join the record of the demo's Debian inputs
        demo.record_debian_packages(ws)
    return table


def _decoded(ws, table):
    """The G.722 prompts decoded once to 16-bit FLAC under ``raw/distractors/audio/``, each checked
    to hold exactly :func:`aiplib.io.audio.load_audio`'s samples (else it keeps its G.722 path);
    kept while its source's SHA-256 is the one in ``sources.json``.
    """
    import soundfile as sf

    out = ws.raw / "distractors" / "audio"
    index_path = out / "sources.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    paths, n_decoded = [], 0
    for did, lang, src in zip(table["distractor_id"], table["language"], table["path"]):
        dest = out / lang / f"{did}.flac"
        rel = ws.rel(dest)
        digest = file_sha256(src)
        if not (dest.is_file() and index.get(rel) == digest):
            y = load_audio(src)
            if not np.array_equal(np.round(y.astype(np.float64) * 32768.0) / 32768.0, y):
                index.pop(rel, None)
                paths.append(src)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            sf.write(str(tmp), y, SR, subtype="PCM_16", format="FLAC")
            tmp.replace(dest)
            index[rel] = digest
            n_decoded += 1
            if n_decoded % 200 == 0:  # a stop part-way keeps what is done
                write_json_atomic(index, index_path)
        paths.append(rel)
    if n_decoded or not index_path.is_file():
        write_json_atomic(index, index_path)  # creates the folder
    return table.assign(source_path=table["path"], path=paths)


# ------------------------------------------------------------------------- stage 5: manifest rows
def _languages(table, languages) -> list[str]:
    have = list(dict.fromkeys(table["language"]))
    if languages:
        if missing := [x for x in languages if x not in have]:
            raise AiplibParameterError(
                f"distractor languages {missing} are not in the distractor table (it holds {have})"
            )
        return list(languages)
    return [x for x in al.DEMO_LANGUAGES if x in have] + [
        x for x in have if x not in al.DEMO_LANGUAGES
    ]


def _excluded(ws, table, item) -> list[str]:
    """Distractor ids that are the target itself: same id, same file, or (Asterisk) the same prompt
    of the same voice folder."""
    target = os.path.realpath(ws.path(item["path"]))
    tail = lambda p: "/".join(str(p).replace("\\", "/").split("/")[-2:])  # noqa: E731
    src = tail(item.get("source_file") or "")
    origin = table["source_path"] if "source_path" in table else table["path"]
    return sorted(
        d
        for d, p, o in zip(table["distractor_id"], table["path"], origin)
        if d == item["item_id"] or os.path.realpath(p) == target or ("/" in src and tail(o) == src)
    )


def manifest_plan(ws, task, *, languages=None, snrs=None, **_) -> ManifestPlan:
    """Stage 5's competing-speech rows: every :func:`condition_grid` condition of ``languages``
    (default: the distractor table's) at ``snrs`` (default :data:`SNRS_DB`, dB).

    A row: id ``<item>_<condition_id>_snr<N>``, ``background_id`` the condition id, ``condition =
    "noisy"``, ``bg_path`` empty; ``setting``, ``distractor_languages`` (``fr`` or ``fr+it+ru``),
    ``same_voice_as_target`` (a distractor in the target's own voice), ``distractor_ids``
    (``|``-joined, in the order heard), ``distractor_text`` (space-joined), ``looped`` and
    ``condition_params`` (compact JSON: ``languages, gap_s, seed, exclude_ids, offsets_s``).

    Raises
    ------
    AiplibParameterError
        No distractor table (one line naming the parameters), or a language not in it.
    """
    if not ws.distractors_csv.is_file():
        raise AiplibParameterError(
            f"the suite asks for competing_speech but {ws.rel(ws.distractors_csv)} does not exist: run stage "
            "01_download_data (demo: Debian asterisk-core-sounds-fr/it/ru/es/en; paper/custom: set the parameters "
            "distractors_dir and distractor_texts)"
        )
    table = al.read_distractor_table(ws.distractors_csv, root=ws.root)
    langs = _languages(table, languages)
    snr_list = [_snr_int(x) for x in (SNRS_DB if snrs is None else snrs)]
    grid = condition_grid(
        langs, snrs_db=snr_list, cocktail=langs[:COCKTAIL_SIZE] if len(langs) > 1 else ()
    )
    asterisk = table["source"].str.startswith("asterisk-core-sounds").all()

    def item_rows(item, spec, extra, n, seed):
        exclude = _excluded(ws, table, item)
        # the Asterisk table flags the voice of the demo's Allison items; a user's table flags its
        # own
        voice_known = not asterisk or _text(item.get("speaker")) in al.SAME_VOICE_TARGET_SPEAKERS
        rows = []
        for g in grid:
            _, _, parts = build_distractor(
                table, n, languages=g["languages"], seed=seed, gap_s=GAP_S, exclude_ids=exclude
            )
            params = dict(
                languages=list(g["languages"]),
                gap_s=GAP_S,
                seed=seed,
                exclude_ids=exclude,
                offsets_s=[p["offset_s"] for p in parts],
            )
            rows.append(
                _row(
                    item,
                    spec,
                    extra,
                    seed,
                    id=stimulus_id(item["item_id"], g["condition_id"], g["snr_db"]),
                    background_id=g["condition_id"],
                    snr_db=g["snr_db"],
                    condition="noisy",
                    setting=g["setting"],
                    distractor_languages="+".join(g["languages"]),
                    same_voice_as_target=voice_known
                    and any(p["same_voice_as_target"] for p in parts),
                    distractor_ids="|".join(i for p in parts for i in p["ids"]),
                    distractor_text=" ".join(t for p in parts for t in p["texts"]),
                    looped=any(p["looped"] for p in parts),
                    condition_params=compact_json(params),
                )
            )
            seed += 1
        return rows, len(rows)

    return ManifestPlan(
        params=dict(languages=langs, snrs_db=snr_list, gap_s=GAP_S),
        inputs=[ws.distractors_csv],
        item_rows=item_rows,
    )


def row_components(row, ws) -> dict:
    """Materialise a competing-speech manifest row (the family's ``row_components`` hook):
    :func:`competing_components` of ``speech_path`` with the distractor of ``condition_params``
    drawn with the row's ``seed`` from ``raw/distractors/distractors.csv``, at ``snr_db``.

    Returns
    -------
    dict
        ``mixture``, ``speech``, ``background`` (the scaled distractor; float32 (n,)), ``info``
        (:class:`aiplib.stimuli.mixing.MixInfo`, ``bg_offset`` None), ``detail`` (the components'
        ``info``).

    Raises
    ------
    AiplibParameterError
        The row lacks ``condition_params`` / ``seed`` / ``snr_db``, the table is missing, or the
        utterances drawn now differ from the row's ``distractor_ids`` (rebuild the manifests).
    """
    rid = row.get("id")
    try:
        params = json.loads(str(row["condition_params"]))
        seed, snr = int(row["seed"]), float(row["snr_db"])
        langs, speech_rel = params["languages"], str(row["speech_path"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AiplibParameterError(
            f"competing-speech row {rid!r}: bad condition_params/seed/snr_db/speech_path ({exc})"
        ) from None
    if not ws.distractors_csv.is_file():
        raise AiplibParameterError(
            f"competing-speech row {rid!r}: {ws.distractors_csv} not found (run stage 01)"
        )
    table = al.read_distractor_table(ws.distractors_csv, root=ws.root)
    speech = load_audio_cached(ws.path(speech_rel))
    c = competing_components(
        speech,
        table,
        snr,
        seed,
        languages=langs,
        gap_s=float(params.get("gap_s", GAP_S)),
        exclude_ids=params.get("exclude_ids", ()),
    )
    ids = "|".join(i for p in c["info"]["streams"] for i in p["ids"])
    if "distractor_ids" in row and ids != str(row["distractor_ids"]):
        raise AiplibParameterError(
            f"competing-speech row {rid!r}: the distractor utterances drawn now ({ids[:80]}) "
            f"differ from the manifest's ({str(row['distractor_ids'])[:80]}): the distractor "
            "table changed since stage 5; rebuild the manifests (stage 05)"
        )
    y, inf = c["mixture"], c["info"]
    scale, gain = inf["clip_scale"], 10 ** (inf["gain_db"] / 20)
    p_d = float(np.mean(c["distractor"] ** 2)) / (gain * scale) ** 2 if gain > 0 else 0.0
    info = MixInfo(
        achieved_snr_db=inf["achieved_snr_db"],
        target_snr_db=snr,
        speech_lufs=inf["speech_lufs"],
        bg_gain_db=inf["gain_db"],
        peak=float(np.max(np.abs(y))),
        clip_scale=scale,
        bg_offset=None,
        bg_power=p_d,
        bg_active=p_d >= BG_SILENCE_POWER,
        speech_peak=float(np.max(np.abs(c["speech"]))) / scale,
    )
    return dict(
        mixture=y,
        speech=c["speech"].astype(np.float32),
        background=c["distractor"].astype(np.float32),
        info=info,
        detail=inf,
    )


# ------------------------------------------------------------------------------------ leakage
def _joined(text):
    """A text, or a sequence of texts joined by spaces."""
    return " ".join(str(t) for t in text) if isinstance(text, (list, tuple)) else text


def _words(text) -> list[str]:
    return normalize_text(_joined(text)).split()


def leakage_asr(hypothesis, target_text, distractor_text) -> dict:
    """Distractor words in an ASR hypothesis (paper normalisation, jiwer alignment).

    Parameters
    ----------
    hypothesis : str or None
    target_text : str
    distractor_text : str or sequence of str
        The transcripts of the distractor utterances heard.

    Returns
    -------
    dict
        ``n_hyp_words``, ``n_leak_words`` (in the distractor's vocabulary, not the target's),
        ``leak_share`` (NaN for an empty hypothesis), ``n_insertions`` (target → hypothesis),
        ``n_leak_insertions``, ``leak_words`` (space-separated, in hypothesis order).
    """
    import jiwer

    hyp, ref = _words(hypothesis), _words(target_text)
    leak_vocab = set(_words(distractor_text)) - set(ref)
    is_leak = [w in leak_vocab for w in hyp]
    inserted = [not ref] * len(hyp)
    for chunk in (
        jiwer.process_words(" ".join(ref), " ".join(hyp)).alignments[0] if hyp and ref else ()
    ):
        if chunk.type == "insert":
            inserted[chunk.hyp_start_idx : chunk.hyp_end_idx] = [True] * (
                chunk.hyp_end_idx - chunk.hyp_start_idx
            )
    n_leak = sum(is_leak)
    return dict(
        n_hyp_words=len(hyp),
        n_leak_words=n_leak,
        leak_share=n_leak / len(hyp) if hyp else float("nan"),
        n_insertions=sum(inserted),
        n_leak_insertions=sum(a and b for a, b in zip(is_leak, inserted)),
        leak_words=" ".join(w for w, x in zip(hyp, is_leak) if x),
    )


def leakage_kws(response, distractor_text, *, label) -> dict:
    """Whether a KWS response is a distractor word (the paper's first-word rule).

    Returns
    -------
    dict
        ``first_word`` (:func:`aiplib.core.textnorm.kws_first_word`) and ``kws_leak``: the first
        word is a word of ``distractor_text`` (str or sequence of str, read by the same rule) other
        than ``label``; an empty answer never leaks.
    """
    first = kws_first_word(response)
    # the distractor's words read as the answer is (kws_first_word: lower case, ASCII punctuation
    # stripped at the ends, apostrophes kept), not with the ASR normalisation (which splits
    # "l'appel")
    vocab = {kws_first_word(t) for t in str(_joined(distractor_text) or "").split()} - {
        normalize_kws_label(label),
        "",
    }
    answered = not (
        response is None
        or (isinstance(response, float) and math.isnan(response))
        or not str(response).strip()
    )  # an empty answer reads "silence": no leak
    return dict(first_word=first, kws_leak=bool(answered and first and first in vocab))


# ------------------------------------------------------------------------- notebook 09: the list
def _voice(lang: str, table: pd.DataFrame | None) -> dict:
    """Voice, credit, licence, source and same-voice flag of a distractor language: from the run's
    distractor table when given, else the demo's list."""
    if table is None or "language" not in table or not (table["language"] == lang).any():
        return al.VOICES.get(lang, {})
    r = table[table["language"] == lang].iloc[0]
    get = lambda c: str(r[c]) if c in r.index and str(r[c]) not in ("", "nan") else None  # noqa: E731
    return dict(
        voice=get("voice") or "?",
        credit=get("attribution") or "?",
        licence=get("licence") or "?",
        source=get("source"),
        same_voice_as_target=any(
            parse_bool(v) is True
            for v in table.loc[table["language"] == lang, "same_voice_as_target"]
        ),
    )


def conditions(
    rows: pd.DataFrame | None = None, *, distractors: pd.DataFrame | None = None
) -> list[dict]:
    """The family's conditions for the report's list (``family, condition, parameters, applied_to,
    source, status``): those of ``rows`` (score or manifest rows, ``run``), else the demo's grid
    (``available``); voices and sources from ``distractors`` (default the demo's Asterisk
    voices)."""
    if rows is not None and len(rows):
        c = rows.rename(columns={"background_id": "bg_id"})
        c = c[c["bg_id"] != "clean"]
        snr = pd.to_numeric(c["snr_db"], errors="coerce")
        groups = [
            (
                cid,
                str(g["setting"].iloc[0]),
                str(g["distractor_languages"].iloc[0]).split("+"),
                sorted(snr[g.index].dropna().astype(int).unique()),
                "run",
            )
            for cid, g in c.groupby("bg_id", sort=False)
        ]
    else:
        grid = condition_grid(al.DEMO_LANGUAGES, cocktail=al.DEMO_LANGUAGES[:COCKTAIL_SIZE])
        groups = [
            (
                cid,
                s,
                list(ls),
                sorted({g["snr_db"] for g in grid if g["condition_id"] == cid}),
                "available",
            )
            for cid, s, ls in dict.fromkeys(
                (g["condition_id"], g["setting"], g["languages"]) for g in grid
            )
        ]
    out = []
    for cid, setting, langs, snrs, status in groups:
        voices = [_voice(lang, distractors) for lang in langs]
        same = any(v.get("same_voice_as_target") for v in voices)
        par = (
            f"languages={'+'.join(langs)}, voices={'+'.join(v.get('voice', '?') for v in voices)}, "
            f"SNR={','.join(f'{s:g}' for s in snrs)} dB (target over total distractor power), "
            f"gap={GAP_S:g} s, each utterance at -23 LUFS"
            + (f", {len(langs)} streams at equal power" if setting == "cocktail" else "")
            + (", same voice as the target (control)" if same else "")
        )
        src = "; ".join(
            f"{v.get('source') or f'Debian asterisk-core-sounds-{lang}(-g722)'}: "
            f"{v.get('credit', '?')}, {v.get('licence', '?')}"
            for lang, v in zip(langs, voices)
        )
        out.append(
            dict(
                family=FAMILY,
                condition=cid,
                parameters=par,
                applied_to="target speech (mixed)",
                source=src,
                status=status,
            )
        )
    return out


# ------------------------------------------------------------------------- stage 7: resume key
def key_fields(row, rec, ws, hashes) -> dict:
    """The resume key's competing-speech part: the SHA-256 of the distractor table
    (``distractor_table_sha256``) and of each distractor recording the row mixes in
    (``distractor_audio_sha256``, in ``distractor_ids`` order; ``"missing"`` for an id the table
    lacks or a file not found): the table names files, not their samples."""
    tab = ws.distractors_csv
    if not tab.is_file():
        return dict(distractor_table_sha256="missing", distractor_audio_sha256=["missing"])
    table = al.read_distractor_table(tab, root=ws.root)
    paths = dict(zip(table["distractor_id"].astype(str), table["path"].astype(str)))
    cache, audio = {} if hashes is None else hashes, []
    for did in str(row.get("distractor_ids") or "").split("|"):
        p = paths.get(did)
        if p is not None and p not in cache:
            cache[p] = file_sha256(ws.path(p)) if ws.path(p).is_file() else "missing"
        audio.append("missing" if p is None else cache[p])
    return dict(distractor_table_sha256=file_sha256(tab), distractor_audio_sha256=audio)


# ------------------------------------------------------------------------- stage 8: score columns
def _mismatched_texts(out: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Per row, the distractor text of the *next* item (item ids sorted, cyclic) in the same
    condition and SNR (None when the condition holds one item, or on other rows)."""
    res = np.full(len(out), None, dtype=object)
    sub = (
        out[rows]
        .assign(_pos=np.flatnonzero(rows))
        .sort_values(["bg_id", "snr_db", "item_id"], kind="stable")
    )
    for _, g in sub.groupby(["bg_id", "snr_db"], sort=False):
        if len(g) > 1:
            res[g["_pos"].to_numpy()] = np.roll(g["distractor_text"].to_numpy(dtype=object), -1)
    return res


def _asr_leak_row(resp, ref, dtext, fresp, otext) -> dict:
    nan = dict.fromkeys(("n_hyp_words", "n_leak_words", "leak_share"), math.nan)
    a = leakage_asr(resp, ref, dtext)
    f = leakage_asr(fresp, ref, dtext) if isinstance(fresp, str) else nan
    m = leakage_asr(resp, ref, otext) if isinstance(otext, str) else nan
    return (
        {k: a[k] for k in LEAK_ASR_COLUMNS[:5]}
        | {f"floor_{k}": f[k] for k in nan}
        | {f"mismatch_{k}": m[k] for k in ("n_leak_words", "leak_share")}
    )


def _kws_leak_row(resp, label, dtext, fresp, otext) -> list:
    leak = lambda r, t: leakage_kws(r, t, label=label)["kws_leak"]  # noqa: E731
    return [
        leak(resp, dtext),
        leak(fresp, dtext) if isinstance(fresp, str) else pd.NA,
        leak(resp, otext) if isinstance(otext, str) else pd.NA,
    ]


def score_columns(out: pd.DataFrame, task_family: str) -> pd.DataFrame:
    """Stage 8's leakage columns, its floor and its mismatch baseline (:data:`LEAK_ASR_COLUMNS` or
    :data:`LEAK_KWS_COLUMNS`) appended to the score rows ``out`` (``item_id, bg_id, snr_db,
    response``, ``reference`` or ``label``, the manifest's ``condition_family`` and
    ``distractor_text``); ``out`` unchanged when no noisy row is a competing-speech row."""
    comp_rows = ((out["condition_family"] == FAMILY) & (out["bg_id"] != "clean")).to_numpy()
    if "distractor_text" not in out.columns or not comp_rows.any():
        return out
    clean = (
        out[out["bg_id"] == "clean"]
        .drop_duplicates("item_id", keep="last")
        .set_index("item_id")["response"]
    )
    floor_resp = clean.reindex(out["item_id"]).to_numpy()
    other = _mismatched_texts(out, comp_rows)
    asr = task_family == "asr"
    blank = dict.fromkeys(LEAK_ASR_COLUMNS, math.nan) | {"leak_words": ""} if asr else [pd.NA] * 3
    rows = [
        (_asr_leak_row if asr else _kws_leak_row)(*r[1:]) if r[0] else blank
        for r in zip(
            comp_rows,
            out["response"],
            out["reference" if asr else "label"],
            out["distractor_text"],
            floor_resp,
            other,
        )
    ]
    leak = pd.DataFrame(
        rows, index=out.index, columns=LEAK_ASR_COLUMNS if asr else LEAK_KWS_COLUMNS
    )
    return pd.concat([out, leak if asr else leak.astype("boolean")], axis=1)


def sidecar(df: pd.DataFrame, task_family: str) -> dict:
    """Score sidecar fields: with leakage columns, ``leakage_rule`` and the count of leak rows
    without a clean partner (``n_leak_rows_without_floor``)."""
    if "leak_share" not in df.columns and "kws_leak" not in df.columns:
        return {}
    floor = "floor_leak_share" if task_family == "asr" else "kws_leak_floor"
    noisy = (df["condition_family"] == FAMILY) & (df["bg_id"] != "clean")
    return dict(
        leakage_rule=LEAKAGE_RULE, n_leak_rows_without_floor=int(df.loc[noisy, floor].isna().sum())
    )
