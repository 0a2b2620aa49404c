"""Manifests of the condition families other than ``background`` (issue 14): ``manifests/<cf>/<task>.csv``.

``competing_speech`` and ``channel`` rows follow the background manifest's schema
(:mod:`aiplib.stimuli.manifests`: the authors' columns, then ours) with each family's own columns after
them (:data:`aiplib.stimuli.families.FAMILY_COLUMNS`, meanings in :func:`build_family_manifest`). Every
item keeps its clean row; seeds count the rows from :data:`aiplib.stimuli.families.FAMILY_SEED_START`.
:mod:`aiplib.stimuli.manifests` re-exports the four public names, so ``from aiplib.stimuli.manifests import
build_family_manifest`` works as before.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pandas as pd

from aiplib.core.errors import AiplibParameterError
from aiplib.core.stamps import make_stamp, stamp_path, write_stamp
from aiplib.core.tasks import FAMILIES, check_family, parse_suite
from aiplib.io.formats import read_item_bank, read_manifest, write_manifest_csv
from aiplib.sources.corpora.asterisk_langs import (
    DEMO_LANGUAGES as LANGUAGES,
)
from aiplib.sources.corpora.asterisk_langs import (
    SAME_VOICE_TARGET_SPEAKERS,
    read_distractor_table,
)
from aiplib.stimuli import channel, competing
from aiplib.stimuli.channel import CHANNEL_CONDITIONS, _resolve
from aiplib.stimuli.families import FAMILY_COLUMNS, FAMILY_SEED_START
from aiplib.stimuli.manifests import (
    MANIFEST_DEFINITION_VERSION,
    SEED_START,
    SNRS_DB,
    _item_spec,
    _n_samples,
    _row,
    _snr_int,
    _text,
    _up_to_date,
    _write_rows,
    build_manifest,
    foreground_items,
    manifest_columns,
    manifest_hash,
    stimulus_id,
)

__all__ = ["family_manifest_columns", "build_family_manifest", "build_family_manifests", "channel_skipped_csv",
           "family_manifest_summary"]


def family_manifest_columns(condition_family: str, family: str) -> list[str]:
    """All columns of ``manifests/<cf>/<family>.csv``: :func:`manifest_columns` then
    :data:`aiplib.stimuli.families.FAMILY_COLUMNS` of the condition family."""

    return manifest_columns(family) + FAMILY_COLUMNS[check_family(condition_family)]


def channel_skipped_csv(ws) -> Path:
    """``manifests/channel/skipped.csv``: the channel conditions that cannot run here, with the reason."""
    return ws.with_family("channel").manifests / "skipped.csv"


def _compact(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _distractor_table(ws):

    if not ws.distractors_csv.is_file():
        raise AiplibParameterError(
            f"the suite asks for competing_speech but {ws.rel(ws.distractors_csv)} does not exist: run stage "
            "01_download_data (demo: Debian asterisk-core-sounds-fr/it/ru/es/en; paper/custom: set the parameters "
            "distractors_dir and distractor_texts)")
    return read_distractor_table(ws.distractors_csv, root=ws.root)


def _languages(table, languages) -> list[str]:

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
        rows.append(_row(
            item, spec, extra, seed, id=stimulus_id(item["item_id"], g["condition_id"], g["snr_db"]),
            background_id=g["condition_id"], snr_db=g["snr_db"], condition="noisy", setting=g["setting"], distractor_languages="+".join(g["languages"]),
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

    rows = []
    for name in conditions:
        if name in skipped:
            seed += 1
            continue
        rows.append(_row(item, spec, extra, seed, id=f"{item['item_id']}_ch_{name}", background_id=name,
                         condition=f"channel_{name}", channel_condition=name, applied_to="speech",
                         condition_params=_compact(_resolve(name, {}))))  # snr_db: the clean rows' 99
        seed += 1
    return rows


def build_family_manifest(ws, condition_family: str, family: str, *, seed_start: int | None = None,
                          languages=None, snrs=None, conditions=None, overwrite: bool = False) -> pd.DataFrame:
    """Build (or read back) ``manifests/<cf>/<family>.csv`` of a condition family (stage 5).

    Rows per item, in item-bank order: the clean row (id ``<item>_clean``, the same row as the
    background manifest's but for ``seed`` and ``condition_family``, so ΔWER pairs inside the
    family), then one row per condition. ``seed`` counts the rows from ``seed_start`` (default
    :data:`aiplib.stimuli.families.FAMILY_SEED_START`) and decides the condition's random draws.

    ``competing_speech`` (:mod:`aiplib.stimuli.competing`): every :func:`aiplib.stimuli.competing.condition_grid`
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
    :func:`aiplib.stimuli.competing.build_distractor` on the item's ``n_samples``; materialising
    recomputes it and refuses a row whose ids differ.

    ``channel`` (:mod:`aiplib.stimuli.channel`): every condition of ``conditions`` (default
    :data:`aiplib.stimuli.channel.CHANNEL_CONDITIONS`) the local tools can run, applied to the clean
    speech: id ``<item>_ch_<name>``, ``background_id = <name>``, ``snr_db = 99`` (no added
    noise), ``condition = channel_<name>``; then ``channel_condition``, ``applied_to``
    (``speech``: here every transform, the room and the mixture ones alike, acts on the speech
    alone; combined with a background the telephone band, codecs, packet loss, clipping, level,
    echo and cuts would act on the mixture, see :mod:`aiplib.stimuli.channel`) and ``condition_params``
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

    cf = check_family(condition_family)
    ws = ws.with_family("background")
    if cf == "background":
        return build_manifest(ws, family, seed_start=seed_start, overwrite=overwrite)
    columns = family_manifest_columns(cf, family)  # checks the family
    fws = ws.with_family(cf)
    out = fws.manifest_csv(family)
    seed0 = FAMILY_SEED_START[(cf, family)] if seed_start is None else int(seed_start)
    items = read_item_bank(ws, family)
    inputs = [ws.item_bank(family)] + [ws.path(p) for p in items["path"]]
    params = dict(condition_family=cf, family=family, seed_start=seed0, definition_version=MANIFEST_DEFINITION_VERSION)
    if cf == "competing_speech":

        table = _distractor_table(ws)
        langs = _languages(table, languages)
        snr_list = [_snr_int(x) for x in (competing.SNRS_DB if snrs is None else snrs)]
        grid = competing.condition_grid(langs, snrs_db=snr_list,
                                        cocktail=langs[:competing.COCKTAIL_SIZE] if len(langs) > 1 else ())
        params.update(languages=langs, snrs_db=snr_list, gap_s=competing.GAP_S)
        inputs.append(ws.distractors_csv)
    else:

        names = list(CHANNEL_CONDITIONS) if conditions is None else list(conditions)
        reasons = {c: channel.skip_reason(c) for c in names}
        runnable = [c for c in names if reasons[c] is None]
        skipped = pd.DataFrame([(c, r) for c, r in reasons.items() if r], columns=["condition", "reason"])
        params.update(conditions={c: _resolve(c, {}) for c in runnable}, skipped=skipped.values.tolist(),
                      seeds="one per condition, skipped ones too")
    stamp = make_stamp(f"05_build_manifests:{cf}:{family}", params=params, inputs=inputs, ws=ws, module=__name__)
    stamp_file = stamp_path(fws.manifests, family)
    if cf == "channel":
        write_manifest_csv(skipped, channel_skipped_csv(ws))
    if out.is_file() and not overwrite and _up_to_date(stamp_file, stamp, ws, f"manifests/{cf}/{family}.csv"):
        return read_manifest(fws, family)
    rows, seed = [], seed0
    kept, n_probes = foreground_items(items)
    for it in kept.to_dict("records"):
        n = _n_samples(ws, it["path"])
        spec, extra = _item_spec(it, family, n, cf)
        rows.append(_row(it, spec, extra, seed))
        seed += 1
        if cf == "competing_speech":
            new = _competing_rows(ws, table, it, spec, extra, n, grid, seed, competing.GAP_S)
        else:
            new = _channel_rows(it, spec, extra, names, seed, skipped=set(names) - set(runnable))
        rows += new
        seed += len(new) if cf == "competing_speech" else len(names)
    df = _write_rows(rows, columns, out)
    meta = dict(condition_family=cf, family=family, seed_start=seed0, n_items=len(kept),
                n_probes_skipped=n_probes, n_rows=len(df),
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


def family_manifest_summary(ws, manifests: dict) -> pd.DataFrame:
    """Notebook 05's table: one row per (condition family, task) with ``rows``, ``items``,
    ``conditions`` (distinct non-clean ``background_id``) and ``skipped`` (channel conditions that
    cannot run here, with the reason)."""


    skipped = ""
    p = channel_skipped_csv(ws)
    if p.is_file():
        sk = pd.read_csv(p, dtype=str, keep_default_na=False)
        skipped = "; ".join(f"{c}: {r}" for c, r in zip(sk["condition"], sk["reason"]))
    rows = []
    for (cf, fam), df in manifests.items():
        rows.append(dict(condition_family=cf, task=fam, rows=len(df), items=df["speech_id"].nunique(),
                         conditions=df.loc[df["condition"] != "clean", "background_id"].nunique(),
                         skipped=skipped if cf == "channel" else ""))
    return pd.DataFrame(rows)
