"""Condition families (issue 14): which kinds of interference a run covers, and their plumbing.

``background`` is the paper's battery (a recording added at an SNR, :mod:`aiplib.mixing`);
``competing_speech`` mixes the target with other talkers (:mod:`aiplib.competing`); ``channel``
passes the clean speech through a phone / codec / room transform (:mod:`aiplib.channel`). A *suite*
is the families one run covers (``make all SUITE=background,channel``; default ``background``, so
``make all`` does what it always did, at the same cost).

Every family has its own manifests (``manifests/<cf>/<asr|kws>.csv``, built by stage 5 with
:func:`aiplib.family_manifests.build_family_manifest`), its own inference files
(``inference/<cf>/<model>/<task>.jsonl``) and scores (``results/scores/<cf>/``): the workspace
view :meth:`aiplib.workspace.Workspace.with_family` resolves those folders, so stage 7 and 8 run
on a family unchanged. ``background`` keeps today's paths.

This module: the names (:data:`CONDITION_FAMILIES`, :func:`parse_suite`), the family of a manifest
row (:func:`row_family`), the distractor table of stage 1 (:func:`prepare_distractors`) and stage
7's loop over the suite with its time per family (:func:`run_suite`).
"""
from __future__ import annotations

import datetime as _dt
import json
import time

import numpy as np

from .errors import AiplibParameterError

__all__ = ["CONDITION_FAMILIES", "DEFAULT_SUITE", "FAMILY_COLUMNS", "FAMILY_SEED_START", "check_family",
           "parse_suite", "row_family", "prepare_distractors", "family_manifest_summary", "run_suite",
           "STAGE7_TIMES_COLUMNS"]

CONDITION_FAMILIES = ("background", "competing_speech", "channel")
"""The condition families, in report order."""

DEFAULT_SUITE = ("background",)
"""The suite of ``make all`` without ``SUITE=``: today's battery only."""

FAMILY_COLUMNS = {
    "background": [],
    "competing_speech": ["setting", "distractor_languages", "same_voice_as_target", "distractor_ids",
                         "distractor_text", "looped", "condition_params"],
    "channel": ["channel_condition", "applied_to", "condition_params"],
}
"""Columns a family's manifest has after :data:`aiplib.manifests.EXTRA_COLUMNS`, in order
(meanings: :func:`aiplib.family_manifests.build_family_manifest`)."""

FAMILY_SEED_START = {("competing_speech", "asr"): 20000, ("competing_speech", "kws"): 30000,
                     ("channel", "asr"): 40000, ("channel", "kws"): 50000}
"""First seed of each family manifest's row counter (``background``: the authors' 0 / 10000,
:data:`aiplib.manifests.SEED_START`); notebook 05's ``seed_offset`` is added to each."""


def check_family(name) -> str:
    """``name`` if it is one of :data:`CONDITION_FAMILIES`.

    Raises
    ------
    AiplibParameterError
        Naming the unknown family and the valid ones.
    """
    name = str(name).strip()
    if name not in CONDITION_FAMILIES:
        raise AiplibParameterError(f"unknown condition family {name!r}; choose among "
                                   f"{', '.join(CONDITION_FAMILIES)}")
    return name


def parse_suite(value) -> tuple:
    """The condition families of a suite parameter.

    Parameters
    ----------
    value : str or sequence of str or None
        ``"background"``, a comma list (``"background,channel"``), ``"all"``, or empty/None
        (:data:`DEFAULT_SUITE`).

    Returns
    -------
    tuple of str
        Distinct families in :data:`CONDITION_FAMILIES` order.

    Raises
    ------
    AiplibParameterError
        For an unknown name (the message lists the valid ones).

    Examples
    --------
    >>> parse_suite("channel, background"), parse_suite("all")[1]
    (('background', 'channel'), 'competing_speech')
    """
    if value is None:
        return DEFAULT_SUITE
    parts = [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(p).strip() for p in value]
    parts = [p for p in parts if p]
    if not parts:
        return DEFAULT_SUITE
    chosen = {check_family(p) for p in parts if p != "all"}  # every name is checked, with "all" too
    if "all" in parts:
        return CONDITION_FAMILIES
    return tuple(f for f in CONDITION_FAMILIES if f in chosen)


def row_family(row) -> str:
    """The condition family of a manifest row: its ``condition_family``; ``background`` when the
    column is absent or empty (the authors' rows, manifests of older versions)."""
    v = row.get("condition_family") if hasattr(row, "get") else None
    if v is None or (isinstance(v, float) and v != v):
        return "background"
    v = str(v).strip()
    return v if v and v.lower() not in ("nan", "<na>", "none") else "background"


# ------------------------------------------------------------------------- stage 1: distractors
def prepare_distractors(ws, *, distractors_dir: str = "", distractor_texts: str = "", languages=None):
    """Stage 1: write the competing-speech distractor table ``raw/distractors/distractors.csv``.

    ``demo``: the installed Debian Asterisk prompt packages of ``languages`` (default
    :data:`aiplib.corpora.asterisk_langs.DEMO_LANGUAGES`, fr it ru es and en, the same language;
    :func:`~aiplib.corpora.asterisk_langs.asterisk_distractors`), decoded once to FLAC under
    ``raw/distractors/audio/`` (same samples; ~3 min the first time: 1,197 files, 251 of them English). ``paper``/``custom``: the folder
    ``distractors_dir`` with its texts table ``distractor_texts``
    (:func:`~aiplib.corpora.asterisk_langs.folder_distractors`, validated as custom speech); when
    neither is given nothing is written (the suite then cannot hold ``competing_speech``).

    Returns
    -------
    pandas.DataFrame or None
        The table (columns :data:`~aiplib.corpora.asterisk_langs.DISTRACTOR_COLUMNS`), or None
        when nothing was written.

    Raises
    ------
    AiplibParameterError
        Only one of ``distractors_dir`` / ``distractor_texts`` given.
    MissingPackageError
        Demo: a language's packages are not installed (names them and how to get them).
    ValidationError
        The folder or its table fails the custom speech validation.
    """
    from .corpora import asterisk_langs as al
    from .formats import write_csv_atomic

    if bool(distractors_dir) != bool(distractor_texts):
        raise AiplibParameterError("competing speech needs both distractors_dir and distractor_texts "
                                   f"(got distractors_dir={distractors_dir!r}, distractor_texts={distractor_texts!r})")
    if distractors_dir:
        table = al.folder_distractors(distractors_dir, distractor_texts)
    elif ws.profile == "demo":
        table = _decoded(ws, al.asterisk_distractors(tuple(languages or al.DEMO_LANGUAGES)))
    else:
        return None
    ws.distractors_csv.parent.mkdir(parents=True, exist_ok=True)
    write_csv_atomic(table, ws.distractors_csv)
    return table


def _decoded(ws, table):
    """The Asterisk G.722 prompts decoded once to 16-bit FLAC under ``raw/distractors/audio/``.

    Reading G.722 takes an ffmpeg process (~0.1 s a file); stages 5 and 7 read each utterance many
    times. The decoder's output is 16-bit, so FLAC PCM_16 holds exactly the samples
    :func:`aiplib.audio.load_audio` gives for the G.722 file (checked per file; float32 FLAC is not
    possible, so a file that is not exact keeps its G.722 path). ``path`` becomes relative to the
    workspace root; ``source_path`` keeps the package's file. A decoded file is kept while the
    SHA-256 of its source file is the one recorded in ``raw/distractors/audio/sources.json``; a
    source that changed (a newer Debian package) is decoded again.
    """
    import soundfile as sf

    from .audio import SR, load_audio
    from .formats import write_json_atomic
    from .hashing import sha256_file

    out = ws.raw / "distractors" / "audio"
    index_path = out / "sources.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    paths, n_decoded = [], 0
    for did, lang, src in zip(table["distractor_id"], table["language"], table["path"]):
        dest = out / lang / f"{did}.flac"
        rel = ws.rel(dest)
        digest = sha256_file(src)
        if not (dest.is_file() and index.get(rel) == digest):
            y = load_audio(src)
            if not np.array_equal(np.round(y.astype(np.float64) * 32768.0) / 32768.0, y):
                index.pop(rel, None)
                paths.append(src)
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(dest.name + ".part")
            sf.write(str(tmp), y, SR, subtype="PCM_16", format="FLAC")
            tmp.replace(dest)
            index[rel] = digest
            n_decoded += 1
            if n_decoded % 200 == 0:  # a stop part-way keeps what is done
                write_json_atomic(index, index_path)
        paths.append(rel)
    if n_decoded or not index_path.is_file():
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(index, index_path)
    return table.assign(source_path=table["path"], path=paths)


# ------------------------------------------------------------------------- stage 5: the table
def family_manifest_summary(ws, manifests: dict) -> pd.DataFrame:
    """Notebook 05's table: one row per (condition family, task) with ``rows``, ``items``,
    ``conditions`` (distinct non-clean ``background_id``) and ``skipped`` (channel conditions that
    cannot run here, with the reason)."""
    import pandas as pd

    from .manifests import channel_skipped_csv

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


# ------------------------------------------------------------------------- stage 7: the suite
STAGE7_TIMES_COLUMNS = ["run_start", "condition_family", "models", "tasks", "seconds", "n_stimuli", "n_run",
                        "n_errors"]
"""Columns of ``checks/stage7_families.csv``: one row per family per stage-7 run (appended)."""


def run_suite(ws, suite, **kwargs):
    """Stage 7 over a suite: :func:`aiplib.inference.run_inference` on each family's view.

    Parameters
    ----------
    ws : Workspace
        Any view; each family runs on ``ws.with_family(cf)``.
    suite : str or sequence of str
        :func:`parse_suite`.
    **kwargs
        Passed to ``run_inference`` (``models``, ``tasks``, ``limit``, ``prompt_set`` …).

    Returns
    -------
    summary : pandas.DataFrame
        ``run_inference``'s summary rows with a first column ``condition_family``.
    times : pandas.DataFrame
        One row per family, :data:`STAGE7_TIMES_COLUMNS`: ``seconds`` is the wall time of that
        family's ``run_inference`` call (model loading included: each call loads and closes its
        models), ``n_run`` the stimulus-prompt decodes made. Appended to
        ``checks/stage7_families.csv`` (the shared ``checks`` folder), so the report can list the
        stage-7 time per family (take the last row per family with ``n_run > 0``).
    """
    import pandas as pd

    from .inference import run_inference

    start = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    frames, times = [], []
    for cf in parse_suite(suite):
        t0 = time.perf_counter()
        s = run_inference(ws.with_family(cf), **kwargs)
        secs = time.perf_counter() - t0
        frames.append(s.assign(condition_family=cf)[["condition_family", *s.columns]])
        num = lambda c: int(pd.to_numeric(s[c], errors="coerce").fillna(0).sum())  # noqa: E731
        times.append(dict(run_start=start, condition_family=cf, models=",".join(sorted(set(s["model"].astype(str)))),
                          tasks=",".join(dict.fromkeys(s["task"].astype(str))), seconds=round(secs, 3),
                          n_stimuli=num("n_stimuli"), n_run=num("n_run"), n_errors=num("n_errors")))
    times = pd.DataFrame(times, columns=STAGE7_TIMES_COLUMNS)
    path = ws.with_family("background").checks / "stage7_families.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    # appended, never rewritten: stage-7 shards finishing at once (a Slurm array) keep every row
    with open(path, "a", newline="") as f:
        times.to_csv(f, header=f.tell() == 0, index=False)
    return pd.concat(frames, ignore_index=True), times
