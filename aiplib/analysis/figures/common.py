"""Task names, figure/table names, colours and figure saving (part of :mod:`aiplib.analysis.figures`)."""
from __future__ import annotations

import re
from pathlib import Path

from aiplib.core.tasks import BASE_TASKS, task_file  # noqa: F401 - BASE_TASKS: the baseline task of each family

STEER_TASKS = {t["family"]: name for name, t in task_file()["tasks"].items() if t["variant"] == "p5"}
"""Steering-prompt task of each family (Figure 6, Table 5): the task of ``aiplib/core/tasks.yaml`` with
the authors' prompt 5 (``{"asr": "asr_steer_p5", "kws": "kws_steer_p5"}``)."""

FIG7_KWS_EXCLUDE = ("qwen2_audio_7b",)
"""Models left out of Figure 7b (KWS accuracy per SNR), as in the paper. Matched after
lower-casing and mapping ``-`` / ``.`` to ``_``."""

FIGURE_NAMES = ("figure2_descriptor_regressions", "figure3_descriptor_correlations",
                "figure4_background_ranking", "figure5_accent_degradation",
                "figure6_prompt_steering_rer", "figure7_snr_performance")
"""Output names of the figures (``results/figures/<name>.png`` / ``.pdf``), as the paper's
README lists them."""

TABLE_NAMES = ("table2_descriptor_correlations", "table3_descriptor_values",
               "table4_accent_dwer", "table4_accent_dwer_pooled_unspecified",
               "table4_accent_dwer_authors", "table5_prompt_steering_rer")
"""Output names of the tables (``results/tables/<name>.csv``). Table 4 holds our accent groups
per model only; the ``pooled`` (over models) and ``unspecified`` (items without an accent
group) rows are in ``table4_accent_dwer_pooled_unspecified``; the authors' view (their accent
labels, unmapped strings as they are, flat mean over rows) is ``table4_accent_dwer_authors``."""

_FAMILY_LABEL = {"asr": "ASR", "kws": "KWS"}

_FAMILY_COLOURS = {"asr": "#332288", "kws": "#88CCEE"}

_DEG_LABEL = {"asr": "ΔWER (pp)", "kws": "ΔAcc (pp)"}

_CATEGORY_COLOURS = {"stationary": "#4477AA", "transient": "#EE6677", "music": "#228833",
                     "speech-like": "#CCBB44"}

_OTHER_COLOUR = "#BBBBBB"

def _model_colours(models) -> dict:
    """One colour per model (tab10 by sorted name), grey for ``pooled``: same in every figure."""
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    names = sorted(m for m in set(models) if m != "pooled")
    out = {m: cmap(i % 10) for i, m in enumerate(names)}
    out["pooled"] = "#555555"
    return out


def _norm_id(s: str) -> str:
    return re.sub(r"[-.]", "_", str(s).lower())


def _categories(bg_ids, battery) -> list[str]:
    if battery is None or "category" not in battery.columns:
        return ["unknown"] * len(bg_ids)
    return [battery["category"].get(b, "unknown") or "unknown" for b in bg_ids]


def _category_legend(ax, cats) -> None:
    from matplotlib.patches import Patch

    order = list(_CATEGORY_COLOURS)
    seen = sorted(set(cats), key=lambda c: (order.index(c) if c in order else len(order), c))
    handles = [Patch(color=_CATEGORY_COLOURS.get(c, _OTHER_COLOUR), label=c) for c in seen]
    ax.legend(handles=handles, fontsize=7, frameon=False, loc="best")


def _new_figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def save_figure(fig, out_dir, name: str, *, formats=("png", "pdf"), dpi: int = 200) -> list[Path]:
    """Write ``fig`` as ``<out_dir>/<name>.<fmt>`` for each format; return the paths.

    PDFs carry no creation date, so re-running on the same data gives the same bytes.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        p = out_dir / f"{name}.{fmt}"
        meta = {"CreationDate": None} if fmt == "pdf" else {}
        fig.savefig(p, format=fmt, dpi=dpi, metadata=meta)
        paths.append(p)
    return paths
