"""Stage 5 for every condition family: ``manifests/<cf>/<task>.csv`` from the family's
``manifest_plan`` (:data:`aiplib.stimuli.families.MIXERS`).

A family's rows follow the background manifest's schema (:mod:`aiplib.stimuli.manifests`, built
with its row builder :func:`~aiplib.stimuli.manifests.item_row`) with the family's own columns
after them (:attr:`aiplib.core.tasks.ConditionFamily.columns`). Every item keeps its clean row;
seeds count the rows from the family's ``seed_start``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

from aiplib.core.stamps import make_stamp, stamp_path, write_stamp
from aiplib.core.tasks import CONDITION_FAMILIES, TASK_FAMILIES, check_family, parse_suite
from aiplib.io.formats import read_item_bank, read_manifest, write_manifest_csv
from aiplib.stimuli.families import MIXERS
from aiplib.stimuli.manifests import (
    MANIFEST_DEFINITION_VERSION,
    SNRS_DB,
    FamilyOptions,
    build_manifest,
    foreground_items,
    item_row,
    item_spec,
    manifest_columns,
    manifest_hash,
    speech_n_samples,
    stamp_up_to_date,
    write_manifest_rows,
)


def family_manifest_columns(condition_family: str, task: str) -> list[str]:
    """All columns of ``manifests/<cf>/<task>.csv``: :func:`manifest_columns` then the family's
    :attr:`aiplib.core.tasks.ConditionFamily.columns`.

    Raises
    ------
    AiplibParameterError
        An unknown condition family or task family.
    """
    spec = CONDITION_FAMILIES[check_family(condition_family)]
    return manifest_columns(task) + list(spec.columns)


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
    snrs=None,
    conditions=None,
) -> pd.DataFrame:
    """Build (or read back) ``manifests/<cf>/<task>.csv`` of a condition family (stage 5).

    Rows per item, in item-bank order: the clean row (the background manifest's but for ``seed``
    and ``condition_family``, so ΔWER pairs inside the family), then the rows of the family's
    ``manifest_plan`` (:data:`aiplib.stimuli.families.MIXERS`), given the options (competing
    speech: ``snrs`` in dB, its languages those of the distractor table; channel: ``conditions``;
    None: the family's default, :class:`aiplib.stimuli.manifests.FamilyOptions`). ``seed`` counts
    the rows from ``seed_start`` (default the family's ``seed_start``). ``background`` is
    :func:`build_manifest` at ``battery_snrs`` (dB). Conditions that cannot run here go to
    :func:`skipped_csv`. Kept while the stamp ``manifests/<cf>/<task>.stamp.json`` matches
    (parameters, item bank, speech WAVs, the family's inputs), else rebuilt.

    Raises
    ------
    AiplibParameterError
        Unknown family, a family's refusal (e.g. competing speech without a distractor table),
        repeated ids.
    """
    cf = check_family(condition_family)
    ws = ws.with_family("background")
    columns = family_manifest_columns(cf, family)  # checks the task
    options = FamilyOptions(snrs=snrs, conditions=conditions)
    plan = MIXERS[cf].manifest_plan(ws, family, options)
    if plan is None:
        return build_manifest(
            ws, family, snrs=battery_snrs, seed_start=seed_start, overwrite=overwrite
        )
    fws = ws.with_family(cf)
    out = fws.manifest_csv(family)
    if seed_start is None:
        seed0 = CONDITION_FAMILIES[cf].seed_start[family]
    else:
        seed0 = int(seed_start)
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
        and stamp_up_to_date(stamp_file, stamp, ws, f"manifests/{cf}/{family}.csv")
    ):
        return read_manifest(fws, family)
    kept, n_probes = foreground_items(items)
    rows = []
    seed = seed0
    for item in kept.to_dict("records"):
        n = speech_n_samples(ws, item["path"])
        spec, extra = item_spec(item, family, n, cf)
        new, n_seeds = plan.item_rows(item, spec, extra, n, seed + 1)
        rows += [item_row(item, spec, extra, seed), *new]
        seed += 1 + n_seeds
    df = write_manifest_rows(rows, columns, out)
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
    ws = ws.with_family("background")
    out = {}
    for cf in parse_suite(suite):
        for task in TASK_FAMILIES:
            if not ws.item_bank(task).is_file():
                warnings.warn(f"no item bank for {task!r}; its manifest is skipped")
                continue
            out[(cf, task)] = build_family_manifest(
                ws,
                cf,
                task,
                seed_start=CONDITION_FAMILIES[cf].seed_start[task] + seed_offset,
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
        rows.append(
            dict(
                condition_family=cf,
                task=task,
                rows=len(df),
                items=df["speech_id"].nunique(),
                conditions=df.loc[df["condition"] != "clean", "background_id"].nunique(),
                skipped=_skipped_text(skipped_csv(ws, cf)),
            )
        )
    return pd.DataFrame(rows)


def _skipped_text(path: Path) -> str:
    """``condition: reason; …`` of a ``skipped.csv`` (``""`` when there is none)."""
    if not path.is_file():
        return ""
    sk = pd.read_csv(path, dtype=str, keep_default_na=False)
    return "; ".join(f"{c}: {r}" for c, r in zip(sk["condition"], sk["reason"]))
