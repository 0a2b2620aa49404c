"""Stage 5 for every condition family: ``manifests/<cf>/<task>.csv`` from the family's
``manifest_plan`` hook (:data:`aiplib.stimuli.families.FAMILY_MODULES`).

A family's rows follow the background manifest's schema (:mod:`aiplib.stimuli.manifests`) with the
family's own columns after them. Every item keeps its clean row; seeds count the rows from the
family's ``SEED_START``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

from aiplib.core.stamps import make_stamp, stamp_path, write_stamp
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.core.tasks import check_family, parse_suite
from aiplib.io.formats import read_item_bank, read_manifest, write_manifest_csv
from aiplib.stimuli.families import FAMILY_MODULES
from aiplib.stimuli.manifests import (
    MANIFEST_DEFINITION_VERSION,
    SNRS_DB,
    _item_spec,
    _n_samples,
    _row,
    _up_to_date,
    _write_rows,
    build_manifest,
    foreground_items,
    manifest_columns,
    manifest_hash,
)


def family_manifest_columns(condition_family: str, task: str) -> list[str]:
    """All columns of ``manifests/<cf>/<task>.csv``: :func:`manifest_columns` then the family's
    ``COLUMNS``."""
    return manifest_columns(task) + FAMILY_MODULES[check_family(condition_family)].COLUMNS


def skipped_csv(ws, condition_family: str) -> Path:
    """``manifests/<cf>/skipped.csv``: the family's conditions that cannot run here, with the
    reason."""
    return ws.with_family(condition_family).manifests / "skipped.csv"


def build_family_manifest(
    ws,
    condition_family: str,
    family: str,
    *,
    seed_start: int | None = None,
    battery_snrs=SNRS_DB,
    overwrite: bool = False,
    **options,
) -> pd.DataFrame:
    """Build (or read back) ``manifests/<cf>/<task>.csv`` of a condition family (stage 5).

    Rows per item, in item-bank order: the clean row (the background manifest's but for ``seed``
    and ``condition_family``, so ΔWER pairs inside the family), then the rows of the family's
    ``manifest_plan`` hook, given ``options`` (competing speech: ``languages``, ``snrs``; channel:
    ``conditions``). ``seed`` counts the rows from ``seed_start`` (default the family's
    ``SEED_START``). ``background`` is :func:`build_manifest` at ``battery_snrs`` (dB). Conditions
    that cannot run here go to :func:`skipped_csv`. Kept while the stamp
    ``manifests/<cf>/<task>.stamp.json`` matches (parameters, item bank, speech WAVs, the family's
    inputs), else rebuilt.

    Raises
    ------
    AiplibParameterError
        Unknown family, a family hook's refusal (e.g. competing speech without a distractor
        table), repeated ids.
    """
    cf = check_family(condition_family)
    ws = ws.with_family("background")
    columns = family_manifest_columns(cf, family)  # checks the task
    plan = FAMILY_MODULES[cf].manifest_plan(ws, family, **options)
    if plan is None:
        return build_manifest(
            ws, family, snrs=battery_snrs, seed_start=seed_start, overwrite=overwrite
        )
    fws = ws.with_family(cf)
    out = fws.manifest_csv(family)
    seed0 = FAMILY_MODULES[cf].SEED_START[family] if seed_start is None else int(seed_start)
    items = read_item_bank(ws, family)
    inputs = [ws.item_bank(family)] + [ws.path(p) for p in items["path"]] + plan.inputs
    params = (
        dict(
            condition_family=cf,
            family=family,
            seed_start=seed0,
            definition_version=MANIFEST_DEFINITION_VERSION,
        )
        | plan.params
    )
    stamp = make_stamp(
        f"05_build_manifests:{cf}:{family}", params=params, inputs=inputs, ws=ws, module=__name__
    )
    stamp_file = stamp_path(fws.manifests, family)
    if plan.skipped is not None:
        write_manifest_csv(plan.skipped, skipped_csv(ws, cf))
    if (
        out.is_file()
        and not overwrite
        and _up_to_date(stamp_file, stamp, ws, f"manifests/{cf}/{family}.csv")
    ):
        return read_manifest(fws, family)
    rows, seed = [], seed0
    kept, n_probes = foreground_items(items)
    for it in kept.to_dict("records"):
        n = _n_samples(ws, it["path"])
        spec, extra = _item_spec(it, family, n, cf)
        new, n_seeds = plan.item_rows(it, spec, extra, n, seed + 1)
        rows += [_row(it, spec, extra, seed), *new]
        seed += 1 + n_seeds
    df = _write_rows(rows, columns, out)
    meta = dict(
        condition_family=cf,
        family=family,
        seed_start=seed0,
        n_items=len(kept),
        n_probes_skipped=n_probes,
        n_rows=len(df),
        conditions=sorted(set(df.loc[df["condition"] != "clean", "background_id"])),
        params=params,
        manifest_sha256=manifest_hash(fws, family),
    )
    (fws.manifests / f"{family}.json").write_text(json.dumps(meta, indent=2, default=str))
    write_stamp(stamp_file, stamp, outputs=[out], ws=ws)
    return read_manifest(fws, family)


def build_family_manifests(
    ws, suite, *, seed_offset: int = 0, snrs=SNRS_DB, overwrite: bool = False
) -> dict:
    """Stage 5 for a suite: every (condition family, task) manifest whose item bank exists, the
    background battery at ``snrs`` (dB), ``seed_offset`` added to every family's first seed.

    Returns
    -------
    dict
        ``{(condition_family, task): DataFrame}``.
    """
    ws, out = ws.with_family("background"), {}
    for cf in parse_suite(suite):
        for task in TASK_FAMILIES:
            if not ws.item_bank(task).is_file():
                warnings.warn(f"no item bank for {task!r}; its manifest is skipped")
                continue
            out[(cf, task)] = build_family_manifest(
                ws,
                cf,
                task,
                seed_start=FAMILY_MODULES[cf].SEED_START[task] + seed_offset,
                battery_snrs=snrs,
                overwrite=overwrite,
            )
    return out


def family_manifest_summary(ws, manifests: dict) -> pd.DataFrame:
    """Notebook 05's table: one row per (condition family, task) with ``rows``, ``items``,
    ``conditions`` (distinct non-clean ``background_id``) and ``skipped`` (the family's conditions
    that cannot run here, with the reason)."""
    rows = []
    for (cf, task), df in manifests.items():
        p = skipped_csv(ws, cf)
        sk = pd.read_csv(p, dtype=str, keep_default_na=False) if p.is_file() else None
        rows.append(
            dict(
                condition_family=cf,
                task=task,
                rows=len(df),
                items=df["speech_id"].nunique(),
                conditions=df.loc[df["condition"] != "clean", "background_id"].nunique(),
                skipped=""
                if sk is None
                else "; ".join(f"{c}: {r}" for c, r in zip(sk["condition"], sk["reason"])),
            )
        )
    return pd.DataFrame(rows)
