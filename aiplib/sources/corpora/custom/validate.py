"""Validation of the custom profile's inputs (:mod:`aiplib.sources.corpora.custom`): every problem
found at once."""

from __future__ import annotations

import re

import numpy as np

from aiplib.core.tasks import KEYWORDS, empty_keyword_entries, normalize_keyword
from aiplib.core.textnorm import (
    headline_measure,
    normalize_kws_label,
    normalize_text,
    reference_is_empty,
    spaceless_share,
)
from aiplib.io.audio import ACTIVE_PART_MIN_SILENCE_S, MIN_LOUDNESS_S, SR, active_span
from aiplib.io.formats import CATEGORIES
from aiplib.io.subaudible import (
    BAND_LIMITED_SHARE,
    SUBAUDIBLE_LIMIT_DB,
    SUBAUDIBLE_REFUSE_DB,
    audible_excess_db,
    effective_bandwidth_hz,
    remove_subaudible_steep,
    subaudible_power,
)
from aiplib.sources.corpora.custom.files import (
    absolute_path,
    licence_table,
    match_table,
    param_path,
    probe,
    read_table,
    scan,
    unique_ids,
)
from aiplib.sources.corpora.custom.report import Collector, ValidationReport

#: Longest utterance or keyword clip accepted, in s (the length of every curated background).
MAX_UTTERANCE_S = 30.0

#: Seconds per word of the normalised transcript below which an utterance gets a
#: ``short_for_text`` warning (10 words/s, twice the fastest read speech: truncated, or the wrong
#: text).
MIN_S_PER_WORD = 0.1

#: Fewer backgrounds than this give a warning: Spearman correlations over so few are weak.
MIN_BACKGROUNDS = 8

#: Licence and attribution recorded when the user gives none.
UNKNOWN_LICENCE = "unknown — supplied by the user"

#: Peak-to-median 100 ms frame level (dB) from which a background is inferred ``transient``.
TRANSIENT_PEAK_DB = 10.0

#: A 10 ms frame whose peak is below this level (dBFS) counts as digital silence.
DIGITAL_SILENCE_DBFS = -80.0

#: Longest run of digital silence kept inside a background (half of it at each end), s.
MAX_SILENT_GAP_S = 0.25

#: Share of an utterance's or keyword clip's samples in flat runs at its peak (within 0.1 %, at
#: least :data:`CLIPPED_RUN` samples long) from which it gets a ``clipped`` warning (0.1 %; speech
#: that was not clipped has a few samples near its peak, not runs).
CLIPPED_SHARE = 0.001

#: Shortest run of consecutive samples (at 16 kHz) at the peak level that counts as clipping.
CLIPPED_RUN = 3

#: Separators that make a KWS label or a keyword several words.
_MULTI = re.compile(r"[|,;+/\s]")

#: Frame length of :func:`_peak_to_median_db`, s.
_LEVEL_FRAME_S = 0.1


def keyword_list(keywords) -> list[str]:
    """The closed keyword set as a list of keywords normalised as KWS answers are
    (:func:`aiplib.core.tasks.normalize_keyword`: ``"Yes"`` → ``"yes"``, ``"up!"`` → ``"up"``), in
    order, without repeats.

    ``keywords`` is None (the paper's :data:`KEYWORDS`), a comma-separated string or a sequence;
    entries empty after normalisation are dropped, so the list may be empty (the caller reports
    them: :func:`keyword_entry_problems`).
    """
    if keywords is None:
        return list(KEYWORDS)
    words = []
    for entry in _keyword_entries(keywords):
        word = normalize_keyword(entry)
        if word and word not in words:
            words.append(word)
    return words


def _keyword_entries(keywords) -> list[str]:
    """The entries of a comma-separated string or a sequence, as str."""
    if isinstance(keywords, str):
        return keywords.split(",")
    return [str(k) for k in keywords]


def keyword_entry_problems(keywords) -> list[tuple[str, str]]:
    """``(severity, message)`` per problem of the entries of ``keywords`` (as :func:`keyword_list`
    reads them): fatal for an entry empty after normalisation (named by its position), a warning
    for an entry read otherwise than written (``'up!' is read as 'up'``)."""
    if keywords is None:
        return []
    entries = _keyword_entries(keywords)
    if not any(e.strip() for e in entries):
        return []  # the empty list is reported by _check_keywords
    out = []
    for i in empty_keyword_entries(entries):
        out.append(
            (
                "fatal",
                f"keyword entry {i} of {len(entries)} in {','.join(entries)!r} is empty after "
                "normalisation; remove the extra comma or the entry",
            )
        )
    for entry in entries:
        word = normalize_keyword(entry)
        if word and word != entry.strip().lower():
            out.append(
                (
                    "warning",
                    f"keyword {entry.strip()!r} is read as {word!r} (keywords are normalised "
                    "as KWS answers are: lower-case, punctuation stripped at both ends)",
                )
            )
    return out


def _opt(row: dict, key: str):
    """The stripped cell ``key`` of a table row, None when absent or blank."""
    return (row.get(key) or "").strip() or None


def _licence_of(row: dict) -> dict:
    """``licence`` and ``attribution`` of a table row, :data:`UNKNOWN_LICENCE` where not given."""
    return {k: _opt(row, k) or UNKNOWN_LICENCE for k in ("licence", "attribution")}


def _peak_to_median_db(y: np.ndarray, sr: int = SR) -> float:
    """Loudest minus median 100 ms frame RMS level of the first 30 s, dB.

    Frames more than 60 dB below the loudest (digital silence, zero padding) are left out.
    """
    y = y[: int(MAX_UTTERANCE_S * sr)]
    n = int(_LEVEL_FRAME_S * sr)
    k = y.size // n
    if k < 2:
        return 0.0
    rms = np.sqrt(np.mean(y[: k * n].astype(np.float64).reshape(k, n) ** 2, axis=1))
    db = 20 * np.log10(np.maximum(rms, 1e-12))
    db = db[db > db.max() - 60.0]
    return float(db.max() - np.median(db))


def strip_digital_silence(
    y,
    *,
    sr: int = SR,
    max_gap_s: float = MAX_SILENT_GAP_S,
    floor_dbfs: float = DIGITAL_SILENCE_DBFS,
):
    """Shorten runs of digital silence (10 ms frames peaking below ``floor_dbfs`` dBFS) in ``y``
    [shape=(n,)]: inside, a run keeps its first ``max_gap_s`` (s); at the ends, ``max_gap_s / 2``.

    Returns
    -------
    y_out : np.ndarray [shape=(m,)], float32, m ≤ n
        ``y`` itself (as float32) when nothing was removed.
    removed : dict
        Seconds removed: ``start_s``, ``end_s``, ``inside_s``.
    """
    y = np.asarray(y, dtype=np.float32)
    frame = max(1, sr // 100)
    k = -(-y.size // frame)
    silent = np.pad(np.abs(y), (0, k * frame - y.size)).reshape(k, frame).max(axis=1) < 10.0 ** (
        floor_dbfs / 20.0
    )
    gap = int(round(max_gap_s * 100))
    half = gap // 2
    keep = np.ones(k, dtype=bool)
    removed = dict(start_s=0.0, end_s=0.0, inside_s=0.0)
    d = np.diff(np.concatenate([[0], silent.astype(np.int8), [0]]))
    for a, b in zip(np.flatnonzero(d == 1), np.flatnonzero(d == -1)):
        if b - a <= gap:
            continue
        if a == 0:
            keep[: b - half] = False
            removed["start_s"] += (b - half) * frame / sr
        elif b == k:
            keep[a + half :] = False
            removed["end_s"] += (y.size - (a + half) * frame) / sr
        else:
            keep[a + gap : b] = False
            removed["inside_s"] += (b - a - gap) * frame / sr
    if keep.all() or not keep.any():
        return y, dict(start_s=0.0, end_s=0.0, inside_s=0.0)
    mask = np.repeat(keep, frame)[: y.size]
    return np.ascontiguousarray(y[mask]), {k2: round(v, 3) for k2, v in removed.items()}


#: A folder of clips and its table: folder and table parameter, the table's value column, other
#: names accepted for it, and the kind and text of the problem recorded for a clip the table does
#: not name.
_SPEECH = (
    "speech_dir",
    "texts",
    "text",
    {"transcript": "text"},
    "missing_transcript",
    "missing transcript",
)
#: The keyword-clip folder and its label table (fields as :data:`_SPEECH`).
_KWS = (
    "kws_dir",
    "kws_labels",
    "label",
    {"word": "label"},
    "missing_label",
    "missing keyword label",
)


def _listed_files(dir_value, table_value, probs, scans, spec: tuple):
    """The folder, its table and their pairing: ``(folder, pairs, ids)`` (``pairs`` the ``(path,
    row)`` of rows with a ``value_col``, ``ids`` their item ids), or None when either is unusable
    (problem recorded); a fatal ``no_items`` when neither the folder nor the table names an audio
    file."""
    dir_name, table_name, value_col, aliases, missing_kind, missing_text = spec
    folder = param_path(dir_value, dir_name, probs, kind="dir")
    table = param_path(table_value, table_name, probs)
    if folder is None or table is None:
        return None
    files, folder_scan = scan(folder, probs, role=dir_name)
    scans.append(folder_scan)
    df = read_table(
        table, ("file", value_col), probs, table_name, aliases=dict(aliases, path="file")
    )
    if df is None:
        return None
    pairs = match_table(
        df,
        folder,
        files,
        probs,
        what=f"{table_name} ({table.name})",
        value_col=value_col,
        missing_kind=missing_kind,
        missing_text=missing_text,
    )
    if not files and not pairs:
        probs.add("fatal", "no_items", folder, "no audio file found in the folder")
    return folder, pairs, unique_ids([p for p, _ in pairs], folder)


def _item_row(p, row, package, item_id, info, used: bool = True, **fields) -> dict:
    """One inventory row of an utterance or keyword clip (fields of :data:`INVENTORY_COLUMNS`)."""
    return dict(
        file=str(p),
        package=package,
        **_licence_of(row),
        used=used,
        item_id=item_id,
        accent_group=_opt(row, "accent_group"),
        speaker=_opt(row, "speaker") or "unknown",
        **fields,
        **info,
    )


def clipped_share(y) -> float:
    """Share of the samples of ``y`` [shape=(n,)] in runs of at least :data:`CLIPPED_RUN`
    consecutive samples whose magnitude is within 0.1 % of the peak: flat tops left by clipping
    (0.0 for an all-zero signal). A sine clipped at half its amplitude gives about 0.67."""
    a = np.abs(np.asarray(y, dtype=np.float64))
    peak = float(a.max()) if a.size else 0.0
    if peak == 0.0:
        return 0.0
    at = np.r_[0, (a >= peak * (1 - 1e-3)).astype(np.int8), 0]
    edges = np.diff(at)
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    return float(runs[runs >= CLIPPED_RUN].sum() / a.size)


def _check_subaudible(path, y, probs, role: str, stage: str) -> str:
    """Warn (``subaudible``) about a DC offset / sub-20 Hz rumble that ``stage`` removes
    (:func:`aiplib.io.subaudible.remove_subaudible_steep`); fatal when even the order-16 high-pass
    leaves 10 % or more of the power below 20 Hz
    (:data:`aiplib.io.subaudible.SUBAUDIBLE_REFUSE_DB`). Returns the inventory note (``""`` when
    clean), None when the file is refused (the fatal problem recorded)."""
    sub = subaudible_power(y, sr=SR)
    if sub["subaudible_db"] < SUBAUDIBLE_LIMIT_DB:
        return ""
    note = (
        f"DC offset {sub['dc_db']:.1f} dB and energy below 20 Hz "
        f"{sub['subaudible_db']:.1f} dB re the file's power"
    )
    _, rec = remove_subaudible_steep(y, sr=SR)
    if rec["residual_db"] >= SUBAUDIBLE_REFUSE_DB:
        probs.add(
            "fatal",
            "subaudible",
            path,
            f"{role}: {note}; {rec['residual_db']:.1f} dB is still there after a zero-phase 20 Hz "
            f"high-pass of order {rec['order']}, so the audible SNR of its stimuli would be "
            f"{audible_excess_db(rec['residual_db']):.2f} dB above the nominal one; take the "
            "rumble (just below 20 Hz) out of the recording or remove the file",
        )
        return None
    probs.add(
        "warning",
        "subaudible",
        path,
        f"{role}: {note} (inaudible, yet counted by the power-based SNR and the loudness gain): "
        f"{stage} removes them (zero-phase 20 Hz high-pass of order {rec['order']}, "
        f"{rec['residual_db']:.1f} dB left) before the SNR is set, so the nominal SNR is the "
        "audible one",
    )
    return note + f" (removed at {stage})"


def _check_item_audio(path, y, probs, role: str) -> str:
    """Notes on an utterance or keyword clip ``y`` (16 kHz): DC / sub-20 Hz power (stage 2 removes
    it), clipping (:data:`CLIPPED_SHARE`) and silence around the sound longer than
    :data:`aiplib.io.audio.ACTIVE_PART_MIN_SILENCE_S` (the SNR is set over the active part).
    Returns the inventory note, None when the file is refused (fatal problem recorded)."""
    notes = [_check_subaudible(path, y, probs, role, "stage 2")]
    if notes[0] is None:
        return None
    share = clipped_share(y)
    if share >= CLIPPED_SHARE:
        notes.append(f"clipped: {100 * share:.1f} % of its samples in flat runs at its peak")
        probs.add(
            "warning",
            "clipped",
            path,
            f"{role}: {notes[-1]} (clipped when recorded or converted): the distortion is in "
            "every stimulus of this item, the clean one included, so a recogniser hears it on "
            "top of each background; re-record it or remove the file",
        )
    span = active_span(y)
    if span is not None:
        silence = (y.size - (span[1] - span[0])) / SR
        notes.append(
            f"SNR over its active part {span[0] / SR:.2f}–{span[1] / SR:.2f} s "
            f"({silence:.2f} s of silence around the sound)"
        )
        probs.add(
            "warning",
            "active_part",
            path,
            f"{role}: {silence:.2f} s of its {y.size / SR:.2f} s is silence before and after the "
            f"sound (more than {ACTIVE_PART_MIN_SILENCE_S:g} s): the mixer sets its SNR over the "
            f"active part {span[0] / SR:.2f}–{span[1] / SR:.2f} s, not the whole clip, so the "
            "words hear the label's SNR (the clip is not trimmed: the background plays over the "
            "silence too)",
        )
    return "; ".join(n for n in notes if n)


def _check_words_per_second(path, text: str, duration_s: float, probs) -> None:
    """Warn (``short_for_text``) when ``duration_s`` < :data:`MIN_S_PER_WORD` × the words of
    ``text`` after :func:`aiplib.core.textnorm.normalize_text` (0.45 s for the 9 words of "the
    quick brown fox jumps over the lazy dog" is warned about)."""
    n = len(normalize_text(text).split())
    if n and duration_s < MIN_S_PER_WORD * n:
        probs.add(
            "warning",
            "short_for_text",
            path,
            f"utterance: {duration_s:.2f} s for {n} words of transcript "
            f"({duration_s / n:.3f} s per word, under {MIN_S_PER_WORD:g} s per word, "
            "twice as fast as the fastest read speech): a truncated recording or the wrong "
            "transcript? The missing words would count as deletions in its WER",
        )


def validate_speech(speech_dir, texts, probs, scans) -> list[dict]:
    """Check the utterance folder ``speech_dir`` against its transcript table ``texts``.

    Problems go to ``probs`` (a :class:`Collector`), the folder's scan summary to ``scans``.
    Returns one inventory row (dict) per accepted utterance; an empty list when the folder or the
    table is unusable. Raises nothing for bad inputs.
    """
    found = _listed_files(speech_dir, texts, probs, scans, _SPEECH)
    if found is None:
        return []
    _, pairs, ids = found
    rows = []
    for (p, row), item_id in zip(pairs, ids):
        if reference_is_empty(row["text"]):
            probs.add(
                "fatal",
                "empty_reference",
                p,
                f"the transcript {row['text']!r} holds no word after normalisation "
                "(tags such as [music], fillers such as 'uh' and punctuation are removed before "
                "scoring): its WER is undefined and the words a model outputs for it would go "
                "uncounted; give the words spoken or remove the file",
            )
            continue
        info, y = probe(p, probs, cap_s=MAX_UTTERANCE_S, role="utterance")
        if info is not None:
            _check_words_per_second(p, row["text"], info["duration_s"], probs)
            note = _check_item_audio(p, y, probs, "utterance")
            if note is None:
                continue
            text = " ".join(row["text"].split())
            rows.append(_item_row(p, row, "custom/speech", item_id, info, text=text, note=note))
    return rows


def _label_words(raw: str) -> list[str]:
    """The words of a KWS label, each normalised as a KWS answer (empty ones dropped)."""
    words = []
    for part in _MULTI.split(raw):
        word = normalize_kws_label(part)
        if word:
            words.append(word)
    return words


def _warn_normalised_label(path, raw: str, label: str, keywords: set, probs) -> str:
    """Warn that the one-word label ``raw`` is read as ``label``; returns the inventory note."""
    role = "one of the keywords" if label in keywords else "not a keyword"
    probs.add(
        "warning",
        "label_normalised",
        path,
        f"label {raw!r} is read as {label!r} ({role}): labels are normalised as KWS answers are "
        "(lower-case, first word, punctuation stripped at its ends)",
    )
    return f"label {raw!r} normalised to {label!r}"


def _warn_multi_word_label(path, label: str, probs) -> str:
    """Warn that a label of several words makes its clip skipped; returns the inventory note."""
    probs.add(
        "warning",
        "multi_keyword",
        path,
        f"label {label!r} holds several words: clip skipped "
        "(the closed-set first-word rule scores one word per clip)",
    )
    return (
        "skipped: the label holds several words; the first-word KWS rule scores one word per clip"
    )


def _kws_row(p, row, item_id, keywords: set, probs):
    """The inventory row of one keyword clip, or None when it is refused (problem recorded)."""
    raw = row["label"].strip()
    words = _label_words(raw)
    if not words:
        probs.add(
            "fatal",
            "missing_label",
            p,
            f"the label {raw!r} holds no word after normalisation "
            "(punctuation is stripped as in KWS answers)",
        )
        return None
    multi = len(words) > 1
    if multi:
        label = raw.lower()
    else:
        label = words[0]
    info, y = probe(p, probs, cap_s=MAX_UTTERANCE_S, role="keyword clip")
    if info is None:
        return None
    audio_note = _check_item_audio(p, y, probs, "keyword clip")
    if audio_note is None:
        return None
    note = ""
    is_target = None
    if multi:
        note = _warn_multi_word_label(p, row["label"], probs)
    else:
        is_target = label in keywords
        if label != raw.lower():
            note = _warn_normalised_label(p, raw, label, keywords, probs)
    return _item_row(
        p,
        row,
        "custom/kws",
        item_id,
        info,
        used=not multi,
        label=label,
        note="; ".join(x for x in (note, audio_note) if x),
        is_target=is_target,
    )


def _check_kws_rows(rows: list[dict], folder, keywords, probs) -> None:
    """Fatal when no clip is usable, a warning when no usable clip is a target."""
    used = [r for r in rows if r["used"]]
    if rows and not used:
        probs.add(
            "fatal", "no_items", folder, "no usable keyword clip (every label holds several words)"
        )
    if used and not any(r["is_target"] for r in used):
        probs.add(
            "warning",
            "no_targets",
            folder,
            f"no clip is labelled with one of the keywords {', '.join(keywords)}",
        )


def validate_kws(kws_dir, kws_labels, keywords, probs, scans) -> list[dict]:
    """Check the keyword-clip folder ``kws_dir`` against its label table ``kws_labels``.

    ``keywords`` is the closed set (list of str) that sets ``is_target``. Problems go to ``probs``,
    the folder's scan summary to ``scans``. Returns one inventory row (dict) per readable clip; a
    clip whose label holds several words has ``used = False``.
    """
    found = _listed_files(kws_dir, kws_labels, probs, scans, _KWS)
    if found is None:
        return []
    folder, pairs, ids = found
    keyword_set = set(keywords)
    rows = []
    for (p, row), item_id in zip(pairs, ids):
        kws_row = _kws_row(p, row, item_id, keyword_set, probs)
        if kws_row is not None:
            rows.append(kws_row)
    _check_kws_rows(rows, folder, keywords, probs)
    return rows


def _check_audible(path, y, probs):
    """Warn about a DC offset / sub-20 Hz rumble (refused when no high-pass takes it out) and a
    band-limited source; returns the inventory note, None when the file is refused."""
    sub_note = _check_subaudible(path, y, probs, "background", "stage 3")
    if sub_note is None:
        return None
    notes = [sub_note] if sub_note else []
    bw = effective_bandwidth_hz(y, sr=SR)
    if bw < BAND_LIMITED_SHARE * SR / 2:
        notes.append(
            f"band-limited: effective bandwidth {bw:.0f} Hz of the {SR // 2} Hz "
            f"a {SR // 1000} kHz file holds"
        )
        probs.add(
            "warning",
            "band_limited",
            path,
            f"background: {notes[-1]} (spectrum within 60 dB of its maximum; e.g. a recording "
            "resampled up from a lower rate): above it the background masks nothing, which its "
            "descriptors show only indirectly (rolloff, centroid)",
        )
    return "; ".join(notes)


def _licence_rows(folder, files: list, probs):
    """The backgrounds' licence table: ``(its path or None, {absolute file: row})``.

    Warns about a row naming no audio file of the folder, and about a folder with audio but no
    table.
    """
    lic_path = licence_table(folder)
    meta = {}
    if lic_path is not None:
        df = read_table(
            lic_path, ("file",), probs, "licences", aliases={"license": "licence", "path": "file"}
        )
        if df is not None:
            # an absolute file name wins over the folder
            for row in df.to_dict("records"):
                meta[absolute_path(folder / row["file"])] = row
            for p in meta:
                if p not in files:
                    probs.add(
                        "warning",
                        "licence_row",
                        p,
                        f"listed in {lic_path.name} but not an audio file of the folder",
                    )
    elif files:
        probs.add(
            "warning",
            "no_licence",
            folder,
            f"no licences.csv: every background's licence is recorded as '{UNKNOWN_LICENCE}'",
        )
    return lic_path, meta


def _declared_category(p, row: dict, table_name: str, probs):
    """The ``category`` cell of a background's licence row (lower-case, ``""`` when not given), or
    None when it is not one of :data:`CATEGORIES` (fatal problem recorded)."""
    cat = (row.get("category") or "").strip().lower()
    if cat and cat not in CATEGORIES:
        probs.add(
            "fatal",
            "category",
            p,
            f"category {row.get('category')!r} in {table_name} is not one of "
            f"{', '.join(CATEGORIES)}",
        )
        return None
    return cat


def _too_short_after_trim(p, y, info: dict, probs) -> bool:
    """True (fatal problem recorded) when the trimmed background ``y`` is shorter than the
    BS.1770 gating block: the copy stage 3 loops, so the raw file's ``too_short`` rule applies."""
    if y.size >= MIN_LOUDNESS_S * SR:
        return False
    probs.add(
        "fatal",
        "too_short",
        p,
        f"background: {y.size / SR:.3f} s ({y.size} samples at {SR} Hz) after shortening its "
        f"digital silence ({info['duration_s']:.3f} s as recorded) is shorter than the "
        f"{MIN_LOUDNESS_S:g} s ITU-R BS.1770 gating block (looped to fill a stimulus it would "
        f"repeat every {y.size / SR:.3f} s, a buzz rather than a background); give a recording "
        f"with at least {MIN_LOUDNESS_S:g} s of sound or remove it",
    )
    return True


def _trim_note(p, y, removed: dict, bg_id: str, probs):
    """Warn about shortened digital silence; returns ``(note, prepared_duration_s)``, ``("",
    None)`` when nothing was removed."""
    if not any(removed.values()):
        return "", None
    prepared_s = round(y.size / SR, 4)
    note = (
        f"digital silence shortened: {removed['start_s']:.2f} s removed at the start, "
        f"{removed['end_s']:.2f} s at the end, {removed['inside_s']:.2f} s inside "
        f"(runs longer than {MAX_SILENT_GAP_S:g} s); {prepared_s:.2f} s remain"
    )
    probs.add(
        "warning",
        "digital_silence",
        p,
        note + ": a stimulus on such a stretch would hear no background, so stage 1 writes "
        f"this trimmed copy to raw/backgrounds/{bg_id}.wav and stage 3 uses it",
    )
    return note, prepared_s


def _category_fields(p, y, row: dict, cat: str) -> dict:
    """``category``, ``category_source`` and ``description`` of a background; a category not
    declared is inferred from the peak-to-median level (:data:`TRANSIENT_PEAK_DB`)."""
    source = "licences.csv"
    desc = (row.get("description") or "").strip() or f"user background {p.name}"
    if not cat:
        pm = _peak_to_median_db(y)
        if pm >= TRANSIENT_PEAK_DB:
            cat = "transient"
        else:
            cat = "stationary"
        source = f"inferred (peak-to-median level {pm:.1f} dB)"
        desc = desc + f" (category inferred: {cat})"
    return dict(category=cat, category_source=source, description=desc)


def _background_row(p, bg_id: str, row: dict, table_name, probs):
    """The inventory row of one background recording, or None when it is refused (problem
    recorded)."""
    cat = _declared_category(p, row, table_name, probs)
    if cat is None:
        return None
    info, y = probe(p, probs, cap_s=None, role="background")
    if info is None:
        return None
    y, removed = strip_digital_silence(y)
    if _too_short_after_trim(p, y, info, probs):
        return None
    trim_note, prepared_s = _trim_note(p, y, removed, bg_id, probs)
    audible_note = _check_audible(p, y, probs)
    if audible_note is None:
        return None
    notes = [x for x in (trim_note, audible_note) if x]
    return dict(
        file=str(p),
        package="custom/backgrounds",
        **_licence_of(row),
        used=True,
        bg_id=bg_id,
        **_category_fields(p, y, row, cat),
        note="; ".join(notes),
        prepared_duration_s=prepared_s,
        **info,
    )


def _check_background_count(files: list, rows: list[dict], folder, probs) -> None:
    """Fatal when the folder holds no recording, a warning when fewer than
    :data:`MIN_BACKGROUNDS` were accepted."""
    if not files:
        probs.add("fatal", "no_items", folder, "no background recording found")
    elif 0 < len(rows) < MIN_BACKGROUNDS:
        probs.add(
            "warning",
            "few_backgrounds",
            folder,
            f"only {len(rows)} backgrounds accepted (fewer than {MIN_BACKGROUNDS}): the "
            "descriptor–degradation Spearman correlations will be weak and their intervals wide",
        )


def _check_looped(rows: list[dict], longest_s: float, probs) -> None:
    """Warn (``bg_looped``) about each background shorter than the longest utterance ``longest_s``
    (s; 0 when there is no utterance)."""
    for r in rows:
        dur = r["prepared_duration_s"] or r["duration_s"]
        if dur < longest_s:
            trimmed = " (after shortening its digital silence)" if r["prepared_duration_s"] else ""
            probs.add(
                "warning",
                "bg_looped",
                r["file"],
                f"background of {dur:.1f} s{trimmed} is shorter than the longest utterance "
                f"({longest_s:.1f} s): it is looped end to end to {MAX_UTTERANCE_S:g} s, "
                "so longer utterances hear it repeat",
            )


def validate_backgrounds(backgrounds_dir, longest_s: float, probs, scans) -> list[dict]:
    """Check the background folder ``backgrounds_dir`` and its optional ``licences.csv``.

    ``longest_s`` is the longest accepted utterance or keyword clip (s): shorter backgrounds get a
    ``bg_looped`` warning. Problems go to ``probs``, the folder's scan summary to ``scans``.
    Returns one inventory row (dict) per accepted background.
    """
    rows = []
    folder = param_path(backgrounds_dir, "backgrounds_dir", probs, kind="dir")
    if folder is None:
        return rows
    files, folder_scan = scan(folder, probs, role="backgrounds_dir")
    scans.append(folder_scan)
    lic_path, meta = _licence_rows(folder, files, probs)
    ids = unique_ids(files, folder, reserved=("clean",))
    for p, bg_id in zip(files, ids):
        if meta and p not in meta:
            probs.add(
                "warning",
                "no_licence",
                p,
                f"not in {lic_path.name}: licence recorded as '{UNKNOWN_LICENCE}'",
            )
        table_name = lic_path.name if lic_path is not None else None
        bg_row = _background_row(p, bg_id, meta.get(p, {}), table_name, probs)
        if bg_row is not None:
            rows.append(bg_row)
    _check_background_count(files, rows, folder, probs)
    _check_looped(rows, longest_s, probs)
    return rows


def _check_keywords(kw: list[str], probs) -> None:
    """Fatal for an empty keyword list or one holding several words in an entry; a warning for a
    list other than the paper's."""
    if not kw:
        probs.add("fatal", "keywords", "", "the keyword list is empty")
    elif any(_MULTI.search(k) for k in kw):
        probs.add("fatal", "keywords", "", f"keywords must be single words, got {kw}")
    elif tuple(kw) != KEYWORDS:
        probs.add(
            "warning",
            "keywords",
            "",
            "the keyword list differs from the paper's ten: it sets is_target, travels with the "
            "KWS item bank (itembanks/kws.json) and is named by the KWS prompt and used by the "
            "scoring, so the KWS results are not comparable with the paper's",
        )


def _note_spaceless_transcripts(speech: list[dict], texts, probs) -> None:
    """A warning (``no_word_spaces``) when the accepted transcripts are written without spaces
    between words (:func:`aiplib.core.textnorm.headline_measure`): CER is then the headline."""
    transcripts = [r["text"] for r in speech]
    if not transcripts or headline_measure(transcripts) != "cer":
        return
    probs.add(
        "warning",
        "no_word_spaces",
        texts,
        f"the transcripts are written without spaces between words "
        f"({spaceless_share(transcripts):.0%} of their letters are CJK, Thai or a script like "
        "them): WER would count each sentence as one word, so stage 8 makes CER the headline "
        "(score columns cer, delta_cer; the condition tables' cer_pp)",
    )


def _longest_item_s(speech: list[dict], kws: list[dict]) -> float:
    """Longest accepted utterance or used keyword clip, s (0 when there is none)."""
    durations = [r["duration_s"] for r in speech]
    durations += [r["duration_s"] for r in kws if r["used"]]
    return max(durations, default=0.0)


def validate_inputs(
    *, speech_dir, texts, kws_dir, kws_labels, backgrounds_dir, keywords=KEYWORDS
) -> ValidationReport:
    """Check the custom profile's folders and tables; find every problem, write nothing.

    Every audio file is decoded once as the pipeline will (:func:`aiplib.io.audio.load_audio`).

    Parameters
    ----------
    speech_dir, kws_dir, backgrounds_dir : str or Path
        Folders of utterances, keyword clips and backgrounds (searched recursively;
        ``backgrounds_dir`` may hold ``licences.csv``).
    texts, kws_labels : str or Path
        CSV or TSV tables; columns in :mod:`aiplib.sources.corpora.custom`.
    keywords : str or sequence of str
        Closed keyword set, a list or a comma-separated string (default :data:`KEYWORDS`).

    Returns
    -------
    ValidationReport
        ``report.ok`` is False when any problem is fatal; nothing is raised for bad inputs.

    Notes
    -----
    Fatal: a parameter not set or not found, an unscannable folder, a table without its columns, a
    file without transcript (label) or one empty after normalisation, a listed file missing, a
    duplicate row, an unreadable, empty, truncated (WAV data chunk shorter than its header says) or
    non-finite file, audio shorter than the 0.4 s BS.1770 block, silence, a clip longer than
    :data:`MAX_UTTERANCE_S`, sub-20 Hz power no high-pass takes out
    (:data:`aiplib.io.subaudible.SUBAUDIBLE_REFUSE_DB`), an unknown category, no usable items.
    Warnings: under :data:`MIN_S_PER_WORD` s per word, backgrounds shorter than the longest
    utterance, long digital silence, fewer than :data:`MIN_BACKGROUNDS` backgrounds, DC / sub-20 Hz
    power (removed at stage 2 or 3), a clipped utterance or clip (:data:`CLIPPED_SHARE`), an
    utterance or clip whose SNR is set over its active part (more than
    :data:`aiplib.io.audio.ACTIVE_PART_MIN_SILENCE_S` of silence), a band-limited background,
    multi-word or normalised labels, missing licences, a non-default keyword list, no target clip,
    a symbolic-link loop.
    """
    probs = Collector()
    kw = keyword_list(keywords)
    for severity, message in keyword_entry_problems(keywords):
        probs.add(severity, "keywords", "", message)
    _check_keywords(kw, probs)
    scans: list[dict] = []
    speech = validate_speech(speech_dir, texts, probs, scans)
    _note_spaceless_transcripts(speech, texts, probs)
    kws = validate_kws(kws_dir, kws_labels, kw, probs, scans)
    longest = _longest_item_s(speech, kws)
    bgs = validate_backgrounds(backgrounds_dir, longest, probs, scans)
    params = dict(
        speech_dir=speech_dir,
        texts=texts,
        kws_dir=kws_dir,
        kws_labels=kws_labels,
        backgrounds_dir=backgrounds_dir,
    )
    for name, value in params.items():
        if value in (None, ""):
            params[name] = ""
        else:
            params[name] = str(absolute_path(value))
    params["keywords"] = kw
    return ValidationReport(
        problems=probs.sorted(), speech=speech, kws=kws, backgrounds=bgs, params=params, scans=scans
    )
