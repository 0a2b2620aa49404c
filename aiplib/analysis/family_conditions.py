"""Notebook 09's list of conditions of the condition families: one listing per family with a table
(:data:`CONDITION_LISTINGS`), each ``listing(rows, *, distractors) -> list of dict`` with
``family, condition, parameters, applied_to, source, status`` (``run``, ``available`` or
``skipped: <reason>``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

import pandas as pd

from aiplib.core.tasks import CONDITION_FAMILIES
from aiplib.io.formats import parse_bool
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.stimuli.channel import describe
from aiplib.stimuli.competing import COCKTAIL_SIZE, GAP_S, condition_grid


# ------------------------------------------------------------------------------ competing speech
def _cell(r: pd.Series, column: str) -> str | None:
    """A distractor-table cell as text, None when the column is absent or the cell empty."""
    if column not in r.index:
        return None
    value = str(r[column])
    if value in ("", "nan"):
        return None
    return value


def _voice(lang: str, table: pd.DataFrame | None) -> dict:
    """Voice, credit, licence, source and same-voice flag of a distractor language: from the run's
    distractor table when given, else the demo's list."""
    if table is None or "language" not in table or not (table["language"] == lang).any():
        return al.VOICES.get(lang, {})
    rows = table[table["language"] == lang]
    r = rows.iloc[0]
    return dict(
        voice=_cell(r, "voice") or "?",
        credit=_cell(r, "attribution") or "?",
        licence=_cell(r, "licence") or "?",
        source=_cell(r, "source"),
        same_voice_as_target=any(parse_bool(v) is True for v in rows["same_voice_as_target"]),
    )


def _run_groups(rows: pd.DataFrame) -> list[tuple]:
    """``(condition_id, setting, languages, SNRs in dB, "run")`` per noisy condition of ``rows``, in
    first-seen order."""
    c = rows.rename(columns={"background_id": "bg_id"})
    c = c[c["bg_id"] != "clean"]
    snr = pd.to_numeric(c["snr_db"], errors="coerce")
    groups = []
    for cid, g in c.groupby("bg_id", sort=False):
        setting = str(g["setting"].iloc[0])
        langs = str(g["distractor_languages"].iloc[0]).split("+")
        snrs = sorted(snr[g.index].dropna().astype(int).unique())
        groups.append((cid, setting, langs, snrs, "run"))
    return groups


def _demo_groups() -> list[tuple]:
    """``(condition_id, setting, languages, SNRs in dB, "available")`` per condition of the demo's
    grid (:func:`aiplib.stimuli.competing.condition_grid`), in grid order."""
    grid = condition_grid(al.DEMO_LANGUAGES, cocktail=al.DEMO_LANGUAGES[:COCKTAIL_SIZE])
    snrs = {}
    conditions = {}
    for g in grid:
        cid = g["condition_id"]
        conditions.setdefault(cid, (g["setting"], list(g["languages"])))
        snrs.setdefault(cid, set()).add(g["snr_db"])
    groups = []
    for cid, (setting, langs) in conditions.items():
        groups.append((cid, setting, langs, sorted(snrs[cid]), "available"))
    return groups


def _competing_parameters(setting: str, langs: list, snrs: list, voices: list) -> str:
    """The parameters cell of one competing-speech condition."""
    voice_names = "+".join(v.get("voice", "?") for v in voices)
    text = (
        f"languages={'+'.join(langs)}, voices={voice_names}, "
        f"SNR={','.join(f'{s:g}' for s in snrs)} dB (target over total distractor power), "
        f"gap={GAP_S:g} s, each utterance at -23 LUFS"
    )
    if setting == "cocktail":
        text += f", {len(langs)} streams at equal power"
    if any(v.get("same_voice_as_target") for v in voices):
        text += ", same voice as the target (control)"
    return text


def _competing_sources(langs: list, voices: list) -> str:
    """The source cell of one competing-speech condition: per language, its source, credit and
    licence."""
    cells = []
    for lang, v in zip(langs, voices):
        source = v.get("source") or f"Debian asterisk-core-sounds-{lang}(-g722)"
        cells.append(f"{source}: {v.get('credit', '?')}, {v.get('licence', '?')}")
    return "; ".join(cells)


def competing_conditions(
    rows: pd.DataFrame | None = None, *, distractors: pd.DataFrame | None = None
) -> list[dict]:
    """The competing-speech conditions for the report's list (``family, condition, parameters,
    applied_to, source, status``): those of ``rows`` (score or manifest rows, ``run``), else the
    demo's grid (``available``); voices and sources from ``distractors`` (default the demo's
    Asterisk voices)."""
    if rows is not None and len(rows):
        groups = _run_groups(rows)
    else:
        groups = _demo_groups()
    out = []
    for cid, setting, langs, snrs, status in groups:
        voices = [_voice(lang, distractors) for lang in langs]
        out.append(
            dict(
                family=CONDITION_FAMILIES["competing_speech"].name,
                condition=cid,
                parameters=_competing_parameters(setting, langs, snrs, voices),
                applied_to="target speech (mixed)",
                source=_competing_sources(langs, voices),
                status=status,
            )
        )
    return out


# ------------------------------------------------------------------------------ channel
def _run_applied_to(rows: pd.DataFrame | None) -> dict:
    """Condition → ``applied_to`` of the noisy rows of ``rows`` (``{}`` without rows)."""
    if rows is None or not len(rows):
        return {}
    ch = rows.rename(columns={"background_id": "bg_id"})
    noisy = ch[ch["bg_id"] != "clean"].drop_duplicates("bg_id")
    return noisy.set_index("bg_id")["applied_to"].to_dict()


def _channel_status(condition: str, available: bool, reason: str, run: dict) -> str:
    """``run``, ``available`` or ``skipped: <reason>``."""
    if not available:
        return f"skipped: {reason}"
    if condition in run:
        return "run"
    return "available"


def channel_conditions(rows: pd.DataFrame | None = None, *, distractors=None) -> list[dict]:
    """The channel conditions for the report's list (``family, condition, parameters, applied_to,
    source, status``): every grid condition (:func:`aiplib.stimuli.channel.describe`), ``run`` when
    in ``rows`` (score or manifest rows, whose ``applied_to`` is shown), ``available`` or
    ``skipped: <reason>``; ``distractors`` is not used."""
    run = _run_applied_to(rows)
    out = []
    for r in describe().itertuples(index=False):
        out.append(
            dict(
                family=CONDITION_FAMILIES["channel"].name,
                condition=r.condition,
                parameters=r.parameters,
                applied_to=run.get(r.condition, r.applies_to),
                source=r.source or "",
                status=_channel_status(r.condition, r.available, r.skip_reason, run),
            )
        )
    return out


#: Condition family name → its listing, for the families with a table
#: (:attr:`aiplib.core.tasks.ConditionFamily.table`), in
#: :data:`aiplib.core.tasks.CONDITION_FAMILIES` order.
CONDITION_LISTINGS: Mapping[str, Callable] = MappingProxyType(
    {"competing_speech": competing_conditions, "channel": channel_conditions}
)
