"""Test helper: write Tables 2–5 of a workspace to ``results/tables/`` as notebook 09 does (without the figures)."""
from __future__ import annotations

import logging
from pathlib import Path

from aiplib.analysis import paper

log = logging.getLogger("paper_tables")


def write_tables(ws, *, n_resamples: int = 2000, seed: int = 0) -> dict[str, Path]:
    """Write Tables 2–5 to ``results/tables/`` as notebook 09 does (without drawing the figures).

    Tables 2, 3 need the descriptors, Table 4 an ASR accent group, Table 5 the steering scores;
    what cannot be made is skipped with a logged warning.

    Returns ``{file name ("table2_descriptor_correlations.csv" …): path}``.

    Raises
    ------
    AiplibError
        If the ASR or KWS scores are missing (:func:`aiplib.analysis.paper.load_inputs`).
    """
    scores, descriptors, battery = paper.load_inputs(ws)
    ws.tables_dir.mkdir(parents=True, exist_ok=True)
    kw = {"n_resamples": n_resamples, "seed": seed}
    tables = {}
    ranking = paper.background_ranking(scores, **kw)
    if descriptors is None:
        log.warning("descriptors/acoustic_descriptors.csv is missing: Figures 2, 3 and Tables 2, 3 skipped "
                    "(run stage 3)")
    else:
        tables["table2_descriptor_correlations"] = paper.table2_descriptor_correlations(scores, descriptors, **kw)
        tables["table3_descriptor_values"] = paper.table3_descriptor_values(ranking, descriptors, battery=battery)
    if scores["asr"]["accent_group"].isna().all():
        log.warning("no accent_group in the ASR item bank: Table 4 and Figure 5 skipped")
    else:
        t4, t4s = paper.table4_accent_dwer(scores, **kw)
        tables.update(table4_accent_dwer=paper.table4_accent_dwer_authors(scores),
                      table4_accent_dwer_item_means=t4, table4_accent_dwer_item_means_pooled_unspecified=t4s)
    t5 = paper.table5_prompt_steering_rer(scores, **kw)
    if t5.empty:
        log.warning("no steering scores: Figure 6 and Table 5 skipped")
    else:
        tables["table5_prompt_steering_rer"] = t5
    for name, t in tables.items():
        t.to_csv(ws.tables_dir / f"{name}.csv", index=False)
    return {f"{name}.csv": ws.tables_dir / f"{name}.csv" for name in tables}
