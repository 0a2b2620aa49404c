"""Stage 9: Figures 2–7 and Tables 2–5 from ``results/scores`` and the descriptors.

Reads ``results/scores/<task>.csv`` (stage 8), ``descriptors/acoustic_descriptors.csv`` and
``descriptors/battery.csv``; writes ``results/figures/<name>.png`` and ``.pdf`` and
``results/tables/<name>.csv``. Figures are drawn on :class:`matplotlib.figure.Figure` objects
(Agg canvas, never pyplot), so nothing is displayed and a notebook's backend is left alone.

Conventions
-----------
* Degradation is positive when noise hurts: ΔWER = WER(noisy) − WER(clean);
  ΔAcc = acc(clean) − acc(noisy). Figures and tables show both in percentage points (columns ending ``_pp``).
* Per background, degradation is averaged over items, then over SNRs, then over models for the
  ``pooled`` value (:func:`aiplib.analysis.stats.degradation_by_background`); descriptors are
  rank-correlated with it across backgrounds (:func:`aiplib.analysis.stats.descriptor_correlations`).
* Every interval is a 95 % percentile bootstrap over items (backgrounds for correlations), with
  ``seed`` and ``n_resamples`` written into the tables.
"""
from aiplib.analysis.figures.common import (
    BASE_TASKS,
    STEER_TASKS,
    FIG7_KWS_EXCLUDE,
    FIGURE_NAMES,
    TABLE_NAMES,
    save_figure,
)
from aiplib.analysis.figures.descriptors import (
    table2_descriptor_correlations,
    figure2_descriptor_regressions,
    figure3_descriptor_correlations,
    table3_descriptor_values,
    top_descriptors,
)
from aiplib.analysis.figures.backgrounds import background_ranking, figure4_background_ranking  # noqa: F401
from aiplib.analysis.figures.accent import (
    table4_accent_dwer,
    table4_accent_dwer_authors,
    figure5_accent_degradation,
    authors_accent_label,
    authors_accent_labels,
)
from aiplib.analysis.figures.steering import (
    table5_prompt_steering_rer,
    figure6_prompt_steering_rer,
    TABLE5_COLUMNS,
)  # noqa: F401
from aiplib.analysis.figures.snr import snr_curves, figure7_snr_performance  # noqa: F401
from aiplib.analysis.figures.make_all import make_all_figures  # noqa: F401
