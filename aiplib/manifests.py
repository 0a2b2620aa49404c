"""Stimulus manifests in the authors' schema: one row per (item, background, SNR) plus the clean
version of each item.

The rows, ids, seeds and columns are those of ``build_manifests`` in the authors'
``scripts/05_inference.py`` (IvLabs/AIP-Speech), so their ``inference/<model>/<task>.jsonl`` files
match ours row for row; the same scheme serves every profile (demo, paper, custom).

Row order: items in item-bank order; per item the clean row, then every background in battery
order, each at 10, 5 and 0 dB. ``1 + n_backgrounds × n_snrs`` rows per item (61 for 20 × 3).

Ids: ``<item_id>_clean`` and ``<item_id>_<bg_id>_snr<N>`` (N the integer SNR in dB).

Seeds: a counter over the rows in order, starting at :data:`SEED_START` (0 for ASR, 10000 for
KWS). The background offset follows from the seed (:func:`aiplib.mixing.bg_offset`).

Columns (:func:`manifest_columns`), the authors' first, in their order:
``id, speech_id, background_id, snr_db, condition, seed, speech_path, bg_path``, then ASR
``accent, gender, transcript`` or KWS ``keyword, is_target``; then ours: :data:`EXTRA_COLUMNS`.

Reading and writing the file: :mod:`aiplib.formats` (``read_manifest``, ``write_manifest_csv``).

Clean rows, as the authors wrote them: ``background_id = "clean"``, ``snr_db = 99``,
``condition = "clean"``, ``bg_path`` empty; ours: ``bg_offset`` empty, ``bg_active`` empty.
"""
from __future__ import annotations

import hashlib
import json
import logging
import warnings

import numpy as np
import pandas as pd

from .errors import AiplibParameterError
# read_manifest and FAMILIES are also imported from here by aiplib/inference.py and aiplib/checks.py
from .formats import read_battery_csv, read_item_bank, read_manifest, write_manifest_csv
from .stamps import differences, make_stamp, read_stamp, stamp_path, write_stamp
from .tasks import FAMILIES

log = logging.getLogger(__name__)

__all__ = ["SNRS_DB", "CLEAN_SNR_DB", "SEED_START", "AUTHOR_COLUMNS", "EXTRA_COLUMNS", "manifest_columns",
           "stimulus_id", "build_manifest", "build_manifests", "manifest_hash"]
__all__ += ["family_manifest_columns", "build_family_manifest", "build_family_manifests", "channel_skipped_csv"]

SNRS_DB = (10, 5, 0)
"""The paper's SNRs in dB (integers: they are part of the ids)."""
CLEAN_SNR_DB = 99
"""``snr_db`` written on clean rows (the authors' value)."""
SEED_START = {"asr": 0, "kws": 10000}
"""First seed of each manifest's row counter (the authors' values)."""
AUTHOR_COLUMNS = {
    "asr": ["id", "speech_id", "background_id", "snr_db", "condition", "seed", "speech_path", "bg_path",
            "accent", "gender", "transcript"],
    "kws": ["id", "speech_id", "background_id", "snr_db", "condition", "seed", "speech_path", "bg_path",
            "keyword", "is_target"],
}
"""The authors' manifest columns, in their order."""
EXTRA_COLUMNS = ["family", "accent_group", "bg_offset", "bg_active", "duration_s", "n_samples",
                 "condition_family"]
"""Our columns after the authors': ``family`` (the task family, asr or kws); ``accent_group`` (the
item bank's group, empty when none); ``bg_offset`` (start sample of the background segment,
informational: the mixer derives it from ``seed``); ``bg_active`` (False when that segment is
digital silence, see :data:`aiplib.mixing.BG_SILENCE_POWER`; empty on clean rows); ``duration_s``
(s) and ``n_samples`` of the speech; ``condition_family`` (:data:`aiplib.families.
CONDITION_FAMILIES`: ``background`` in these manifests; a family manifest's own columns follow,
:data:`aiplib.families.FAMILY_COLUMNS`). A manifest without ``condition_family`` (the authors',
older versions) is all ``background``."""


def manifest_columns(family: str) -> list[str]:
    """All columns of ``manifests/<family>.csv``, in order."""
    if family not in FAMILIES:
        raise AiplibParameterError(f"unknown family {family!r}; choose one of {FAMILIES}")
    return AUTHOR_COLUMNS[family] + EXTRA_COLUMNS


def _snr_int(snr) -> int:
    v = float(snr)
    if not v.is_integer():
        raise AiplibParameterError(f"SNR {snr!r} dB is not an integer; stimulus ids need integer SNRs")
    return int(v)


def stimulus_id(item_id: str, bg_id: str, snr_db=None) -> str:
    """The authors' stimulus id: ``<item_id>_clean`` or ``<item_id>_<bg_id>_snr<N>``.

    Examples
    --------
    >>> stimulus_id("1089-134686-0000", "esc_rain", 5), stimulus_id("a01", "clean")
    ('1089-134686-0000_esc_rain_snr5', 'a01_clean')
    >>> stimulus_id("a01", "talker_fr", -5)  # competing speech goes below 0 dB
    'a01_talker_fr_snr-5'

    """
    if bg_id == "clean":
        return f"{item_id}_clean"
    return f"{item_id}_{bg_id}_snr{_snr_int(snr_db)}"


def _battery(ws) -> pd.DataFrame:
    battery = read_battery_csv(ws.battery_csv)
    if battery is None:
        raise FileNotFoundError(f"{ws.battery_csv}: background battery not found; run stage 03_curate_backgrounds first")
    return battery


def _text(v) -> str:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    return str(v)


def _n_samples(ws, rel) -> int:
    import soundfile as sf

    p = ws.path(rel)
    info = sf.info(str(p))
    if info.samplerate == 16000:
        return int(info.frames)
    from .audio import load_audio_cached

    return int(load_audio_cached(p).shape[0])


def _item_spec(it: dict, family: str, n: int, condition_family: str) -> tuple[dict, dict]:
    """The task columns and our extra columns of an item's rows (every condition family alike)."""
    if family == "asr":
        accent = _text(it.get("accent")) or _text(it.get("accent_group"))
        spec = dict(accent=accent, gender=_text(it.get("gender")), transcript=_text(it.get("text")))
    else:
        spec = dict(keyword=_text(it.get("label")), is_target=bool(it.get("is_target")))
    extra = dict(family=family, accent_group=_text(it.get("accent_group")), duration_s=round(n / 16000, 4),
                 n_samples=n, condition_family=condition_family)
    return spec, extra


def build_manifest(ws, family: str, *, snrs=SNRS_DB, seed_start: int | None = None,
                   overwrite: bool = False) -> pd.DataFrame:
    """Build (or read back) ``manifests/<family>.csv`` in the authors' schema.

    Parameters
    ----------
    ws : Workspace
    family : {"asr", "kws"}
    snrs : sequence of int, dB
        In this order per background (the authors': 10, 5, 0).
    seed_start : int, optional
        First seed of the row counter; default :data:`SEED_START` of the family.
    overwrite : bool
        Rebuild even if the manifest is up to date. Without it an existing manifest is kept only
        when its stamp (``manifests/<family>.stamp.json``, :mod:`aiplib.stamps`) records the same
        ``snrs``, ``seed_start`` and the same SHA-256 of the item bank, ``battery.csv`` and every
        speech and background WAV; otherwise it is rebuilt and a warning names what changed (a
        manifest without a stamp, from an older version, is rebuilt: same inputs give the same
        rows).

    Returns
    -------
    pandas.DataFrame
        :func:`manifest_columns` (as :func:`read_manifest` returns them),
        ``n_items × (1 + n_bg × len(snrs))`` rows.

    Notes
    -----
    ``bg_active`` is measured here: every background is loaded once and each row's segment
    (offset from its seed) is tested with :func:`aiplib.mixing.segment_active`.

    Raises
    ------
    FileNotFoundError
        If the item bank or battery is missing.
    AiplibParameterError
        If an SNR is not an integer or ids repeat.
    """
    from .audio import load_audio_cached
    from .mixing import BG_SILENCE_POWER, background_segment, segment_active

    if family not in FAMILIES:
        raise AiplibParameterError(f"unknown family {family!r}; choose one of {FAMILIES}")
    out = ws.manifest_csv(family)
    snrs = [_snr_int(s) for s in snrs]
    seed0 = SEED_START[family] if seed_start is None else int(seed_start)
    items = read_item_bank(ws, family)
    battery = _battery(ws)
    stamp, stamp_file = _manifest_stamp(ws, family, items, battery, snrs, seed0)
    if out.is_file() and not overwrite:
        changed = differences(read_stamp(stamp_file), stamp, ws=ws)
        if not changed:
            return read_manifest(ws, family)
        log.warning("manifests/%s.csv is rebuilt: %s", family, "; ".join(changed[:5])
                    + (f" (+{len(changed) - 5} more)" if len(changed) > 5 else ""))
    bgs = [(str(b.bg_id), str(b.path), load_audio_cached(ws.path(b.path))) for b in battery.itertuples()]
    rows = []
    seed = seed0
    for it in items.to_dict("records"):
        item_id = it["item_id"]
        n = _n_samples(ws, it["path"])
        spec, extra = _item_spec(it, family, n, "background")
        rows.append(dict(id=stimulus_id(item_id, "clean"), speech_id=item_id, background_id="clean",
                         snr_db=CLEAN_SNR_DB, condition="clean", seed=seed, speech_path=it["path"], bg_path="",
                         **spec, bg_offset=None, bg_active=None, **extra))
        seed += 1
        for bg_id, bg_path, bg in bgs:
            for snr in snrs:
                seg, off = background_segment(bg, seed, n)
                active, _ = segment_active(seg)
                rows.append(dict(id=stimulus_id(item_id, bg_id, snr), speech_id=item_id, background_id=bg_id,
                                 snr_db=snr, condition="noisy", seed=seed, speech_path=it["path"],
                                 bg_path=bg_path, **spec, bg_offset=off, bg_active=active, **extra))
                seed += 1
    df = pd.DataFrame(rows, columns=manifest_columns(family))
    if df["id"].duplicated().any():
        dup = df["id"][df["id"].duplicated()].unique()[:5].tolist()
        raise AiplibParameterError(f"{out}: stimulus ids repeat ({dup}); check item and background ids "
                                   "(an id must not be another id followed by _<background>)")
    df["bg_offset"] = df["bg_offset"].astype("Int64")
    df["bg_active"] = df["bg_active"].astype("boolean")
    write_manifest_csv(df, out)
    noisy = df[df["condition"] == "noisy"]
    inactive = (~noisy["bg_active"].astype(bool)).groupby(noisy["background_id"]).mean()
    meta = dict(family=family, seed_start=seed0, snrs_db=snrs, n_items=len(items),
                n_backgrounds=len(battery), rows_per_item=1 + len(battery) * len(snrs), n_rows=len(df),
                n_inactive_bg_rows=int((~noisy["bg_active"].astype(bool)).sum()),
                inactive_share_per_background={k: round(float(v), 4) for k, v in inactive.items() if v > 0},
                bg_silence_power=BG_SILENCE_POWER,
                schema="authors (IvLabs/AIP-Speech scripts/05_inference.py build_manifests) + extras",
                manifest_sha256=manifest_hash(ws, family))
    (ws.manifests / f"{family}.json").write_text(json.dumps(meta, indent=2))
    write_stamp(stamp_file, stamp, outputs=[out], ws=ws)
    return read_manifest(ws, family)


MANIFEST_DEFINITION_VERSION = 2
"""Bumped when the rows :func:`build_manifest` writes for the same inputs change (2: the
``condition_family`` column; the rows' resume keys are unchanged, so stage 7 re-runs nothing)."""


def _manifest_stamp(ws, family, items, battery, snrs, seed0):
    """Stamp of ``manifests/<family>.csv`` (:mod:`aiplib.stamps`): the SNRs and first seed, and the
    SHA-256 of the item bank, the battery table and every speech and background WAV they list."""
    inputs = [ws.item_bank(family), ws.battery_csv]
    inputs += [ws.path(p) for p in items["path"]] + [ws.path(p) for p in battery["path"]]
    params = dict(family=family, snrs_db=list(snrs), seed_start=int(seed0),
                  definition_version=MANIFEST_DEFINITION_VERSION)
    stamp = make_stamp(f"05_build_manifests:{family}", params=params, inputs=inputs, ws=ws,
                       module=__name__)
    return stamp, stamp_path(ws.manifests, family)


def build_manifests(ws, *, families=FAMILIES, **kwargs) -> dict:
    """:func:`build_manifest` for each family whose item bank exists; returns {family: DataFrame}."""
    out = {}
    for fam in families:
        if not ws.item_bank(fam).is_file():
            warnings.warn(f"no item bank for {fam!r}; its manifest is skipped")
            continue
        out[fam] = build_manifest(ws, fam, **kwargs)
    return out


def manifest_hash(ws, family: str) -> str:
    """sha256 of ``manifests/<family>.csv`` (hex): identifies the stimuli a run used."""
    return hashlib.sha256(ws.manifest_csv(family).read_bytes()).hexdigest()


# ============================================================================ condition families
# Manifests of the families other than ``background`` (issue 14): manifests/<cf>/<task>.csv.
def family_manifest_columns(condition_family: str, family: str) -> list[str]:
    """All columns of ``manifests/<cf>/<family>.csv``: :func:`manifest_columns` then
    :data:`aiplib.families.FAMILY_COLUMNS` of the condition family."""
    from .families import FAMILY_COLUMNS, check_family

    return manifest_columns(family) + FAMILY_COLUMNS[check_family(condition_family)]


def channel_skipped_csv(ws) -> "Path":
    """``manifests/channel/skipped.csv``: the channel conditions that cannot run here, with the reason."""
    return ws.with_family("channel").manifests / "skipped.csv"


def _compact(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _distractor_table(ws):
    from .corpora.asterisk_langs import read_distractor_table

    if not ws.distractors_csv.is_file():
        raise AiplibParameterError(
            f"the suite asks for competing_speech but {ws.rel(ws.distractors_csv)} does not exist: run stage "
            "01_download_data (demo: Debian asterisk-core-sounds-fr/it/ru/es/en; paper/custom: set the parameters "
            "distractors_dir and distractor_texts)")
    return read_distractor_table(ws.distractors_csv, root=ws.root)


def _languages(table, languages) -> list[str]:
    from .corpora.asterisk_langs import DEMO_LANGUAGES as LANGUAGES

    have = list(dict.fromkeys(table["language"]))
    if languages:
        missing = [x for x in languages if x not in have]
        if missing:
            raise AiplibParameterError(f"distractor languages {missing} are not in the distractor table "
                                       f"(it holds {have})")
        return list(languages)
    return [x for x in LANGUAGES if x in have] + [x for x in have if x not in LANGUAGES]


def _competing_rows(ws, table, item, spec, extra, n, grid, seed, gap_s):
    """The competing-speech rows of one item (after its clean row), seeds from ``seed``."""
    import os

    from . import competing

    from .corpora.asterisk_langs import SAME_VOICE_TARGET_SPEAKERS

    target = os.path.realpath(ws.path(item["path"]))
    # never the target itself: same id, same file, or (Asterisk) the same prompt of the same voice folder
    tail = lambda p: "/".join(str(p).replace("\\", "/").split("/")[-2:])  # noqa: E731
    src = tail(item.get("source_file") or "")
    origin = table["source_path"] if "source_path" in table else table["path"]
    exclude = sorted(d for d, p, o in zip(table["distractor_id"], table["path"], origin)
                     if d == item["item_id"] or os.path.realpath(p) == target or ("/" in src and tail(o) == src))
    # the Asterisk table flags the voice of the demo's Allison items; a user's table flags its own
    voice_known = (not table["source"].str.startswith("asterisk-core-sounds").all()
                   or _text(item.get("speaker")) in SAME_VOICE_TARGET_SPEAKERS)
    rows = []
    for g in grid:
        _, _, parts = competing.build_distractor(table, n, languages=g["languages"], seed=seed, gap_s=gap_s,
                                                 exclude_ids=exclude)
        params = dict(languages=list(g["languages"]), gap_s=gap_s, seed=seed, exclude_ids=exclude,
                      offsets_s=[p["offset_s"] for p in parts])
        rows.append(dict(
            id=stimulus_id(item["item_id"], g["condition_id"], g["snr_db"]), speech_id=item["item_id"],
            background_id=g["condition_id"], snr_db=g["snr_db"], condition="noisy", seed=seed,
            speech_path=item["path"], bg_path="", **spec, bg_offset=None, bg_active=None, **extra,
            setting=g["setting"], distractor_languages="+".join(g["languages"]),
            same_voice_as_target=voice_known and any(p["same_voice_as_target"] for p in parts),
            distractor_ids="|".join(i for p in parts for i in p["ids"]),
            distractor_text=" ".join(t for p in parts for t in p["texts"]),
            looped=any(p["looped"] for p in parts), condition_params=_compact(params)))
        seed += 1
    return rows


def _channel_rows(item, spec, extra, conditions, seed, skipped=()):
    """The channel rows of one item (after its clean row), seeds from ``seed``: one seed per
    condition of ``conditions``, those in ``skipped`` too (they give no row), so a codec the local
    ffmpeg lacks does not move the seeds of the other conditions from one machine to another."""
    from .channel import _resolve

    rows = []
    for name in conditions:
        if name in skipped:
            seed += 1
            continue
        rows.append(dict(
            id=f"{item['item_id']}_ch_{name}", speech_id=item["item_id"], background_id=name,
            snr_db=CLEAN_SNR_DB, condition=f"channel_{name}", seed=seed, speech_path=item["path"], bg_path="",
            **spec, bg_offset=None, bg_active=None, **extra, channel_condition=name, applied_to="speech",
            condition_params=_compact(_resolve(name, {}))))
        seed += 1
    return rows


def build_family_manifest(ws, condition_family: str, family: str, *, seed_start: int | None = None,
                          languages=None, snrs=None, conditions=None, overwrite: bool = False) -> pd.DataFrame:
    """Build (or read back) ``manifests/<cf>/<family>.csv`` of a condition family (stage 5).

    Rows per item, in item-bank order: the clean row (id ``<item>_clean``, the same row as the
    background manifest's but for ``seed`` and ``condition_family``, so ΔWER pairs inside the
    family), then one row per condition. ``seed`` counts the rows from ``seed_start`` (default
    :data:`aiplib.families.FAMILY_SEED_START`) and decides the condition's random draws.

    ``competing_speech`` (:mod:`aiplib.competing`): every :func:`aiplib.competing.condition_grid`
    condition of ``languages`` (default: those of the distractor table, fr it ru es for the
    demo; one distractor each, then the cocktail of the first three) at ``snrs`` (default −10 … 10
    dB): id ``<item>_<condition_id>_snr<N>``, ``background_id`` the condition id (``talker_fr``,
    ``cocktail_fr_it_ru``), ``condition = "noisy"``, ``bg_path`` empty; then ``setting``
    (single|cocktail), ``distractor_languages`` (``fr`` or ``fr+it+ru``), ``same_voice_as_target``
    (a distractor read by the target's own voice: demo ``es`` is Allison Smith, the voice of the
    12 real ASR items, a same-voice / other-language control; False for the synthetic targets),
    ``distractor_ids`` (``|``-joined, in the order heard, stream by stream), ``distractor_text``
    (their transcripts as in the table, space-joined), ``looped`` and ``condition_params``
    (compact sorted JSON: ``languages``, ``gap_s``, ``seed``, ``exclude_ids``: the table rows that
    are the target recording itself, ``offsets_s`` per stream). The plan is
    :func:`aiplib.competing.build_distractor` on the item's ``n_samples``; materialising
    recomputes it and refuses a row whose ids differ.

    ``channel`` (:mod:`aiplib.channel`): every condition of ``conditions`` (default
    :data:`aiplib.channel.CHANNEL_CONDITIONS`) the local tools can run, applied to the clean
    speech: id ``<item>_ch_<name>``, ``background_id = <name>``, ``snr_db = 99`` (no added
    noise), ``condition = channel_<name>``; then ``channel_condition``, ``applied_to``
    (``speech``: here every transform, the room and the mixture ones alike, acts on the speech
    alone; combined with a background the telephone band, codecs, packet loss, clipping, level,
    echo and cuts would act on the mixture, see :mod:`aiplib.channel`) and ``condition_params``
    (the resolved parameters). A condition that cannot run here (a codec the local ffmpeg cannot
    encode, AMR-NB on Debian) is not a row: it is listed with the reason in
    :func:`channel_skipped_csv`, never replaced; it keeps its seed (each item's channel seeds
    count every condition of ``conditions``), so the other rows' seeds, and the packet-loss
    frames, do not depend on the local ffmpeg.

    Kept while the stamp ``manifests/<cf>/<family>.stamp.json`` matches (parameters, item bank,
    speech WAVs, distractor table), else rebuilt, as :func:`build_manifest`.

    Raises
    ------
    AiplibParameterError
        Unknown family, competing speech without a distractor table (one line naming the
        parameters), a language not in the table, repeated ids.
    """
    from .families import FAMILY_SEED_START, check_family

    cf = check_family(condition_family)
    ws = ws.with_family("background")
    if cf == "background":
        return build_manifest(ws, family, seed_start=seed_start, overwrite=overwrite)
    if family not in FAMILIES:
        raise AiplibParameterError(f"unknown family {family!r}; choose one of {FAMILIES}")
    fws = ws.with_family(cf)
    out = fws.manifest_csv(family)
    seed0 = FAMILY_SEED_START[(cf, family)] if seed_start is None else int(seed_start)
    items = read_item_bank(ws, family)
    inputs = [ws.item_bank(family)] + [ws.path(p) for p in items["path"]]
    params = dict(condition_family=cf, family=family, seed_start=seed0, definition_version=MANIFEST_DEFINITION_VERSION)
    if cf == "competing_speech":
        from . import competing

        table = _distractor_table(ws)
        langs = _languages(table, languages)
        snr_list = [_snr_int(x) for x in (competing.SNRS_DB if snrs is None else snrs)]
        grid = competing.condition_grid(langs, snrs_db=snr_list,
                                        cocktail=langs[:competing.COCKTAIL_SIZE] if len(langs) > 1 else ())
        params.update(languages=langs, snrs_db=snr_list, gap_s=competing.GAP_S)
        inputs.append(ws.distractors_csv)
    else:
        from .channel import CHANNEL_CONDITIONS, _resolve, skip_reason

        names = list(CHANNEL_CONDITIONS) if conditions is None else list(conditions)
        reasons = {c: skip_reason(c) for c in names}
        runnable = [c for c in names if reasons[c] is None]
        skipped = pd.DataFrame([(c, r) for c, r in reasons.items() if r], columns=["condition", "reason"])
        params.update(conditions={c: _resolve(c, {}) for c in runnable}, skipped=skipped.values.tolist(),
                      seeds="one per condition, skipped ones too")
    stamp = make_stamp(f"05_build_manifests:{cf}:{family}", params=params, inputs=inputs, ws=ws, module=__name__)
    stamp_file = stamp_path(fws.manifests, family)
    if cf == "channel":
        write_manifest_csv(skipped, channel_skipped_csv(ws))
    if out.is_file() and not overwrite:
        changed = differences(read_stamp(stamp_file), stamp, ws=ws)
        if not changed:
            return read_manifest(fws, family)
        log.warning("manifests/%s/%s.csv is rebuilt: %s", cf, family, "; ".join(changed[:5]))
    rows, seed = [], seed0
    for it in items.to_dict("records"):
        n = _n_samples(ws, it["path"])
        spec, extra = _item_spec(it, family, n, cf)
        rows.append(dict(id=stimulus_id(it["item_id"], "clean"), speech_id=it["item_id"], background_id="clean",
                         snr_db=CLEAN_SNR_DB, condition="clean", seed=seed, speech_path=it["path"], bg_path="",
                         **spec, bg_offset=None, bg_active=None, **extra))
        seed += 1
        if cf == "competing_speech":
            new = _competing_rows(ws, table, it, spec, extra, n, grid, seed, competing.GAP_S)
        else:
            new = _channel_rows(it, spec, extra, names, seed, skipped=set(names) - set(runnable))
        rows += new
        seed += len(new) if cf == "competing_speech" else len(names)
    df = pd.DataFrame(rows, columns=family_manifest_columns(cf, family))
    if df["id"].duplicated().any():
        raise AiplibParameterError(f"{out}: stimulus ids repeat ({df['id'][df['id'].duplicated()].unique()[:5].tolist()})")
    df["bg_offset"] = df["bg_offset"].astype("Int64")
    df["bg_active"] = df["bg_active"].astype("boolean")
    write_manifest_csv(df, out)
    meta = dict(condition_family=cf, family=family, seed_start=seed0, n_items=len(items), n_rows=len(df),
                conditions=sorted(set(df.loc[df["condition"] != "clean", "background_id"])),
                params=params, manifest_sha256=manifest_hash(fws, family))
    (fws.manifests / f"{family}.json").write_text(json.dumps(meta, indent=2, default=str))
    write_stamp(stamp_file, stamp, outputs=[out], ws=ws)
    return read_manifest(fws, family)


def build_family_manifests(ws, suite, *, seed_offset: int = 0, snrs=SNRS_DB, overwrite: bool = False) -> dict:
    """Stage 5 for a suite: every (condition family, task) manifest whose item bank exists.

    ``background`` is :func:`build_manifest` with ``snrs`` (the paper's SNRs) and the authors'
    first seeds; the others :func:`build_family_manifest` with their own grids. ``seed_offset`` is
    added to every first seed.

    Returns
    -------
    dict
        ``{(condition_family, family): DataFrame}``.
    """
    from .families import FAMILY_SEED_START, parse_suite

    ws, out = ws.with_family("background"), {}
    for cf in parse_suite(suite):
        for fam in FAMILIES:
            if not ws.item_bank(fam).is_file():
                warnings.warn(f"no item bank for {fam!r}; its manifest is skipped")
                continue
            if cf == "background":
                out[(cf, fam)] = build_manifest(ws, fam, snrs=snrs, seed_start=SEED_START[fam] + seed_offset,
                                                overwrite=overwrite)
            else:
                out[(cf, fam)] = build_family_manifest(ws, cf, fam, seed_start=FAMILY_SEED_START[(cf, fam)] + seed_offset,
                                                       overwrite=overwrite)
    return out

