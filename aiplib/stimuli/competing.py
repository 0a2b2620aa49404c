"""Stage 5 and the mixer of the ``competing_speech`` condition family: a target mixed with other
talkers.

A *distractor stream* of one language covers the target: the language's utterances (sorted by
``distractor_id``) in a seeded random order, each at −23 LUFS, end to end with :data:`GAP_S` s of
silence between them, the first starting ``offset`` samples before the target (uniform in
``[0, len(first))``); a used-up pool starts again (``looped``). A ``cocktail`` scales each stream to
unit mean power over the target's ``n`` samples (float64) and sums them. The authors' mixer
(:func:`aiplib.stimuli.mixing.mix`) adds the distractor, so the SNR is target over *total*
distractor power in dB. One ``numpy.random.default_rng(seed)`` draws, per stream in the order of
``languages``, the utterance order then the offset.

The family's other stages: the distractor table (stage 1) in :mod:`aiplib.sources.distractors`,
leakage scoring (stage 8) in :mod:`aiplib.scoring.leakage`, its list of conditions and its table
(notebook 09) in :mod:`aiplib.analysis.family_conditions` and
:mod:`aiplib.analysis.family_results`.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.hashing import file_sha256
from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.io.audio import SR, load_audio_cached
from aiplib.io.formats import parse_bool
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.sources.distractors import prepare_distractors  # noqa: F401 - notebook 01 imports it
from aiplib.stimuli.manifests import (
    FamilyOptions,
    ManifestPlan,
    cell_text,
    compact_json,
    item_row,
    snr_int,
    stimulus_id,
)
from aiplib.stimuli.mixing import (
    BG_SILENCE_POWER,
    SPEECH_LUFS,
    MixInfo,
    achieved_snr_db,
    loudness_normalize,
    mix_normalized,
    normalized_speech,
)

#: The family's facts (``tasks.yaml``: name, manifest columns, seeds, table).
FAMILY = CONDITION_FAMILIES["competing_speech"]

#: Target-over-distractor SNRs of the grid, dB (MUSA's range).
SNRS_DB = (-10, -5, 0, 5, 10)

#: One distractor language, or a cocktail of several.
SETTINGS = ("single", "cocktail")

#: Languages in a cocktail.
COCKTAIL_SIZE = 3

#: Silence between consecutive distractor utterances of a stream, s.
GAP_S = 0.2


def _condition_id(setting: str, languages) -> str:
    """``talker_<lang>`` for one language, ``cocktail_<lang>_<lang>…`` for several."""
    prefix = "talker_" if setting == "single" else "cocktail_"
    return prefix + "_".join(languages)


def condition_grid(languages, *, snrs_db=SNRS_DB, cocktail=None) -> list[dict]:
    """The competing-speech conditions: every single language, then the cocktail (default the first
    :data:`COCKTAIL_SIZE` languages; ``()`` for none), × every SNR in ``snrs_db`` (dB).

    Returns
    -------
    list of dict
        ``condition_id`` (the ``background_id``-like name: ``talker_fr``, ``cocktail_fr_it_ru``; SNR
        apart, as :func:`aiplib.stimuli.manifests.stimulus_id` appends it), ``setting``,
        ``languages`` (tuple), ``snr_db``.
    """
    langs = list(languages)
    if cocktail is None:
        mix_langs = tuple(langs[:COCKTAIL_SIZE])
    else:
        mix_langs = tuple(cocktail)
    groups = [("single", (lang,)) for lang in langs]
    if mix_langs:
        groups.append(("cocktail", mix_langs))
    grid = []
    for setting, group in groups:
        for snr in snrs_db:
            grid.append(
                dict(
                    condition_id=_condition_id(setting, group),
                    setting=setting,
                    languages=group,
                    snr_db=int(snr),
                )
            )
    return grid


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
    ids = []
    texts = []
    starts = []
    offset = None  # drawn with the first utterance
    pos = 0  # start of the next utterance relative to the target, samples
    i = 0  # utterances placed
    while pos < n:
        r = pool.iloc[order[i % len(pool)]]
        u, _ = normalized_speech(r["path"])
        if offset is None:
            offset = int(rng.integers(0, u.size))
            pos = -offset
        start = max(pos, 0)
        stop = min(pos + u.size, n)
        out[start:stop] = u[start - pos : stop - pos]
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
    parts = [p for _, p in raw]
    streams = [x.astype(np.float64) for x, _ in raw]
    if len(langs) == 1:
        return raw[0][0], streams, parts
    streams = [_unit_power(x) for x in streams]
    return np.sum(streams, axis=0).astype(np.float32), streams, parts


def _unit_power(x: np.ndarray) -> np.ndarray:
    """A stream scaled to mean power 1 (float64); digital silence unchanged."""
    power = float(np.mean(x * x))
    if power > 0:
        return x / math.sqrt(power)
    return x


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
    gain = m.gain
    scale = m.scale
    sp = sn.astype(np.float64) * scale
    dp = d.astype(np.float64) * gain * scale
    stream_parts = [x * gain * scale for x in streams]
    info = dict(
        condition_family=FAMILY.name,
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
    return dict(mixture=m.y, speech=sp, distractor=dp, streams=stream_parts, info=info)


# ------------------------------------------------------------------------- stage 5: manifest rows
def _languages(table, languages) -> list[str]:
    """The distractor languages of the grid: ``languages`` (each checked to be in the table), else
    the table's, the demo's languages first in their order."""
    have = list(dict.fromkeys(table["language"]))
    if languages:
        missing = [x for x in languages if x not in have]
        if missing:
            raise AiplibParameterError(
                f"distractor languages {missing} are not in the distractor table (it holds {have})"
            )
        return list(languages)
    demo_first = [x for x in al.DEMO_LANGUAGES if x in have]
    return demo_first + [x for x in have if x not in al.DEMO_LANGUAGES]


def _tail(path) -> str:
    """The last two parts of a path (``voice/prompt.ext``), with ``/`` separators."""
    return "/".join(str(path).replace("\\", "/").split("/")[-2:])


def _excluded(ws, table, item) -> list[str]:
    """Distractor ids that are the target itself: same id, same file, or (Asterisk) the same prompt
    of the same voice folder."""
    target = os.path.realpath(ws.path(item["path"]))
    src = _tail(item.get("source_file") or "")
    origin = table["source_path"] if "source_path" in table else table["path"]
    same = []
    for did, path, own in zip(table["distractor_id"], table["path"], origin):
        if did == item["item_id"] or os.path.realpath(path) == target:
            same.append(did)
        elif "/" in src and _tail(own) == src:
            same.append(did)
    return sorted(same)


def _joined_ids(parts: list[dict]) -> str:
    """The distractor utterance ids of the streams, ``|``-joined in the order heard."""
    ids = []
    for part in parts:
        ids += part["ids"]
    return "|".join(ids)


def _joined_texts(parts: list[dict]) -> str:
    """The distractor transcripts of the streams, space-joined in the order heard."""
    texts = []
    for part in parts:
        texts += part["texts"]
    return " ".join(texts)


def _distractor_columns(parts: list[dict], voice_known: bool) -> dict:
    """The family's own columns of one row from the distractor streams drawn (``parts`` of
    :func:`build_distractor`): ``same_voice_as_target, distractor_ids, distractor_text, looped``."""
    return dict(
        same_voice_as_target=voice_known and any(p["same_voice_as_target"] for p in parts),
        distractor_ids=_joined_ids(parts),
        distractor_text=_joined_texts(parts),
        looped=any(p["looped"] for p in parts),
    )


def _grid_rows(ws, table, grid, asterisk: bool):
    """The ``item_rows`` of :class:`aiplib.stimuli.manifests.ManifestPlan`: one item's row per
    condition of ``grid``, seeds counted from ``seed``."""

    def item_rows(item, spec, extra, n, seed):
        exclude = _excluded(ws, table, item)
        # the Asterisk table flags the voice of the demo's Allison items; a user's table flags its
        # own
        speaker = cell_text(item.get("speaker"))
        voice_known = not asterisk or speaker in al.SAME_VOICE_TARGET_SPEAKERS
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
            condition = dict(
                id=stimulus_id(item["item_id"], g["condition_id"], g["snr_db"]),
                background_id=g["condition_id"],
                snr_db=g["snr_db"],
                condition="noisy",
                setting=g["setting"],
                distractor_languages="+".join(g["languages"]),
                **_distractor_columns(parts, voice_known),
                condition_params=compact_json(params),
            )
            rows.append(item_row(item, spec, extra, seed, condition))
            seed += 1
        return rows, len(rows)

    return item_rows


def manifest_plan(ws, task, options: FamilyOptions) -> ManifestPlan:
    """Stage 5's competing-speech rows: every :func:`condition_grid` condition of
    ``options.languages`` (default: the distractor table's) at ``options.snrs`` (default
    :data:`SNRS_DB`, dB).

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
            f"the suite asks for competing_speech but {ws.rel(ws.distractors_csv)} does not "
            "exist: run stage 01_download_data (demo: Debian asterisk-core-sounds-fr/it/ru/es/en; "
            "paper/custom: set the parameters distractors_dir and distractor_texts)"
        )
    table = al.read_distractor_table(ws.distractors_csv, root=ws.root)
    langs = _languages(table, options.languages)
    snrs = SNRS_DB if options.snrs is None else options.snrs
    snr_list = [snr_int(x) for x in snrs]
    cocktail = langs[:COCKTAIL_SIZE] if len(langs) > 1 else ()
    grid = condition_grid(langs, snrs_db=snr_list, cocktail=cocktail)
    asterisk = table["source"].str.startswith("asterisk-core-sounds").all()
    return ManifestPlan(
        params=dict(languages=langs, snrs_db=snr_list, gap_s=GAP_S),
        inputs=[ws.distractors_csv],
        item_rows=_grid_rows(ws, table, grid, asterisk),
    )


def row_components(row, ws) -> dict:
    """Materialise a competing-speech manifest row (its ``row_components``,
    :data:`aiplib.stimuli.families.MIXERS`): :func:`competing_components` of ``speech_path`` with
    the distractor of ``condition_params`` drawn with the row's ``seed`` from
    ``raw/distractors/distractors.csv``, at ``snr_db``.

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
        seed = int(row["seed"])
        snr = float(row["snr_db"])
        langs = params["languages"]
        speech_rel = str(row["speech_path"])
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
    ids = _joined_ids(c["info"]["streams"])
    if "distractor_ids" in row and ids != str(row["distractor_ids"]):
        raise AiplibParameterError(
            f"competing-speech row {rid!r}: the distractor utterances drawn now ({ids[:80]}) "
            f"differ from the manifest's ({str(row['distractor_ids'])[:80]}): the distractor "
            "table changed since stage 5; rebuild the manifests (stage 05)"
        )
    y = c["mixture"]
    inf = c["info"]
    scale = inf["clip_scale"]
    gain = 10 ** (inf["gain_db"] / 20)
    p_d = 0.0  # the distractor's power before the mixer's gain
    if gain > 0:
        p_d = float(np.mean(c["distractor"] ** 2)) / (gain * scale) ** 2
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
    cache = {} if hashes is None else hashes
    audio = []
    for did in str(row.get("distractor_ids") or "").split("|"):
        p = paths.get(did)
        if p is not None and p not in cache:
            cache[p] = file_sha256(ws.path(p)) if ws.path(p).is_file() else "missing"
        audio.append("missing" if p is None else cache[p])
    return dict(distractor_table_sha256=file_sha256(tab), distractor_audio_sha256=audio)
