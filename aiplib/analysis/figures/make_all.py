"""Stage 9 in one call: every figure and table (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import logging
from pathlib import Path

from aiplib.analysis.figures.accent import (
    figure5_accent_degradation,
    table4_accent_dwer,
    table4_accent_dwer_authors,
)
from aiplib.analysis.figures.backgrounds import background_ranking, figure4_background_ranking
from aiplib.analysis.figures.common import BASE_TASKS, STEER_TASKS, save_figure
from aiplib.analysis.figures.descriptors import (
    figure2_descriptor_regressions,
    figure3_descriptor_correlations,
    table2_descriptor_correlations,
    table3_descriptor_values,
)
from aiplib.analysis.figures.snr import figure7_snr_performance, snr_curves
from aiplib.analysis.figures.steering import figure6_prompt_steering_rer, table5_prompt_steering_rer
from aiplib.core.errors import AiplibError
from aiplib.io.formats import load_scores, read_battery_csv, read_descriptor_table

log = logging.getLogger("aiplib.analysis.figures")


# -------------------------------------------------------------------------------- everything
def make_all_figures(ws, *, n_resamples: int = 2000, seed: int = 0, formats=("png", "pdf")
                     ) -> dict[str, Path]:
    """Write every figure and table the available inputs allow.

    Parameters
    ----------
    ws : aiplib.core.workspace.Workspace
    n_resamples, seed : int
        Bootstrap settings for every interval (recorded in the tables).
    formats : sequence of str
        Figure formats (default PNG and PDF).

    Returns
    -------
    dict of str -> pathlib.Path
        File name (e.g. ``"figure2_descriptor_regressions.png"``) → path, for what was written.
        Outputs that cannot be made are skipped with a logged warning: Figures 2, 3 and Tables
        2, 3 without ``descriptors/acoustic_descriptors.csv``; Figure 6 and Table 5 without
        ``results/scores/asr_steer_p5.csv`` / ``kws_steer_p5.csv``; Table 4 and Figure 5 when no
        ASR item has an ``accent_group`` (a custom profile without that column).

    Raises
    ------
    AiplibError
        If ``results/scores/asr.csv`` or ``kws.csv`` is missing (run stage 8 first).
    """
    scores = load_scores(ws)
    missing = [t for t in BASE_TASKS.values() if t not in scores]
    if missing:
        raise AiplibError(f"stage 9 needs results/scores/{{{','.join(missing)}}}.csv under "
                          f"{ws.results}; run stage 8 (scoring) first")
    descriptors = read_descriptor_table(ws.descriptor_csv, index=True)
    battery = read_battery_csv(ws.battery_csv, index=True)
    fig_dir, tab_dir = ws.figures_dir, ws.tables_dir
    tab_dir.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    kw = {"n_resamples": n_resamples, "seed": seed}

    def fig_out(name, fig):
        for p in save_figure(fig, fig_dir, name, formats=formats):
            written[p.name] = p

    def tab_out(name, table):
        p = tab_dir / f"{name}.csv"
        table.to_csv(p, index=False)
        written[p.name] = p

    ranking = background_ranking(scores, **kw)
    if descriptors is None:
        log.warning("descriptors/acoustic_descriptors.csv is missing: Figures 2, 3 and Tables 2, "
                    "3 skipped (run stage 3)")
    else:
        t2 = table2_descriptor_correlations(scores, descriptors, **kw)
        tab_out("table2_descriptor_correlations", t2)
        fig_out("figure2_descriptor_regressions",
                figure2_descriptor_regressions(scores, descriptors, t2, battery=battery))
        fig_out("figure3_descriptor_correlations", figure3_descriptor_correlations(t2))
        tab_out("table3_descriptor_values",
                table3_descriptor_values(ranking, descriptors, battery=battery))
    fig_out("figure4_background_ranking", figure4_background_ranking(ranking, battery=battery))
    if scores["asr"]["accent_group"].isna().all():
        log.warning("no accent_group in the ASR item bank: Table 4 and Figure 5 skipped")
    else:
        t4, t4s = table4_accent_dwer(scores, **kw)
        t4a = table4_accent_dwer_authors(scores)
        tab_out("table4_accent_dwer", t4)
        tab_out("table4_accent_dwer_pooled_unspecified", t4s)
        tab_out("table4_accent_dwer_authors", t4a)
        if t4.empty:
            log.warning("no ASR item has an accent group: Table 4 is empty, Figure 5 skipped")
        else:
            fig_out("figure5_accent_degradation", figure5_accent_degradation(t4, t4a))
    t5 = table5_prompt_steering_rer(scores, **kw)
    absent = [t for t in STEER_TASKS.values() if t not in scores]
    if t5.empty:
        log.warning("no steering scores (%s): Figure 6 and Table 5 skipped",
                    ", ".join(f"results/scores/{t}.csv" for t in absent))
    else:
        if absent:
            log.warning("steering scores missing for %s: Figure 6 / Table 5 show only the rest",
                        ", ".join(absent))
        tab_out("table5_prompt_steering_rer", t5)
        fig_out("figure6_prompt_steering_rer", figure6_prompt_steering_rer(t5))
    fig_out("figure7_snr_performance", figure7_snr_performance(snr_curves(scores, **kw)))
    return written
