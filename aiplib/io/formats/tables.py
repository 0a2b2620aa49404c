"""Item banks, battery, descriptor table and manifests: readers and writers
(:mod:`aiplib.io.formats`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from aiplib.core.atomic import write_text_atomic
from aiplib.core.errors import AiplibParameterError
from aiplib.core.tasks import KEYWORDS, TASK_FAMILIES, family_spec, normalize_keywords

__all__ = [
    "ITEM_BANK_FIELDS",
    "write_item_bank",
    "read_item_bank",
    "read_item_bank_keywords",
    "CATEGORIES",
    "BATTERY_COLUMNS",
    "BATTERY_TEXT_COLUMNS",
    "read_battery_csv",
    "write_battery_csv",
    "DESCRIPTORS",
    "DESCRIPTOR_TABLE_COLUMNS",
    "read_descriptor_table",
    "write_descriptor_table",
    "MANIFEST_REQUIRED",
    "read_manifest_csv",
    "read_manifest",
    "find_manifest",
    "read_manifest_meta",
    "write_manifest_csv",
    "manifest_view",
    "write_csv_atomic",
    "write_json_atomic",
    "parse_bool",
]


def write_csv_atomic(df: pd.DataFrame, path) -> Path:
    """Write ``df`` (no index) to ``path`` (folder created) atomically: ``<path>.part``, fsync, then
    a rename (:func:`aiplib.core.atomic.write_text_atomic`)."""
    return write_text_atomic(path, df.to_csv(index=False))


#: descriptors/battery.csv, descriptors/acoustic_descriptors.csv and manifests are written the
#: same way.
write_battery_csv = write_descriptor_table = write_manifest_csv = write_csv_atomic


def write_json_atomic(obj, path) -> Path:
    """Write ``obj`` as indented UTF-8 JSON to ``path`` atomically, like :func:`write_csv_atomic`
    (paths, NumPy integers and other non-JSON values as their ``str``)."""
    text = json.dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n"
    return write_text_atomic(path, text)


def read_text_csv(path) -> pd.DataFrame:
    """Every cell as the string written (no NA parsing)."""
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)


def parse_bool(v):
    """A flag as written in a CSV: True for ``true/1/1.0/yes/y``, False for ``false/0/0.0/no/n``
    (any case, bools and numbers too), ``pandas.NA`` for anything else (empty, NaN)."""
    t = str(v).strip().lower()
    if t in ("true", "1", "1.0", "yes", "y"):
        return True
    if t in ("false", "0", "0.0", "no", "n"):
        return False
    return pd.NA


# ============================================================================== item banks
#: Fields an item bank row must have, per family (other fields are kept).
ITEM_BANK_FIELDS = {
    "asr": ("item_id", "path", "duration_s", "text"),
    "kws": ("item_id", "path", "duration_s", "label", "is_target"),
}


def write_item_bank(ws, family: str, rows, *, keywords=None) -> Path:
    """Write ``itembanks/<family>.jsonl`` (one JSON object per item with at least the family's
    :data:`ITEM_BANK_FIELDS`, atomically) and its sidecar ``<family>.json`` (``{"family",
      "n_items"}``,
    plus for KWS the closed ``keywords``, default :data:`aiplib.core.tasks.KEYWORDS`); returns the
    JSONL path.

    Raises
    ------
    AiplibParameterError
        Unknown family, a row missing a required field, or a bad keyword set.
    """
    if family not in ITEM_BANK_FIELDS:
        raise AiplibParameterError(
            f"unknown family {family!r}; choose one of {tuple(ITEM_BANK_FIELDS)}"
        )
    rows = list(rows)
    for i, r in enumerate(rows):
        missing = [k for k in ITEM_BANK_FIELDS[family] if k not in r]
        if missing:
            raise AiplibParameterError(
                f"item bank {family}: row {i} ({r.get('item_id')!r}) lacks {missing}"
            )
    lines = [json.dumps(r, ensure_ascii=False) + "\n" for r in rows]
    path = write_text_atomic(ws.item_bank(family), "".join(lines))
    side = {"family": family, "n_items": len(rows)}
    if TASK_FAMILIES[family].keyword_set is not None:
        side["keywords"] = list(normalize_keywords(keywords))
    write_json_atomic(side, ws.item_bank_sidecar(family))
    return path


def read_item_bank(ws, family: str) -> pd.DataFrame:
    """Read ``itembanks/<family>.jsonl`` as a DataFrame (``item_id`` kept as str).

    Raises
    ------
    FileNotFoundError
        Before stage 2.
    AiplibParameterError
        Item ids repeat or required fields are missing.
    ValueError
        A line is not valid JSON (naming the file and line).
    """
    path = ws.item_bank(family)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: item bank not found; run stage 02_build_item_banks first")
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{i}: not valid JSON ({exc.msg})") from None
    df = pd.DataFrame(rows)
    required = ITEM_BANK_FIELDS.get(family, ("item_id", "path", "duration_s"))
    missing = set(required) - set(df.columns)
    if missing:
        raise AiplibParameterError(f"{path}: missing fields {sorted(missing)}")
    df["item_id"] = df["item_id"].map(str)
    dup = df["item_id"][df["item_id"].duplicated()].tolist()
    if dup:
        raise AiplibParameterError(f"{path}: repeated item ids {dup[:5]}")
    return df


def read_item_bank_keywords(ws) -> tuple[str, ...]:
    """The closed keyword set of the workspace's KWS item bank: ``keywords`` of
    ``itembanks/kws.json``, else
    :data:`aiplib.core.tasks.KEYWORDS` (no sidecar, or none named: the authors' files).

    Raises
    ------
    AiplibParameterError
        If the sidecar is not valid JSON or its keyword set is empty.
    """
    p = ws.item_bank_sidecar("kws")
    if not p.is_file():
        return KEYWORDS
    try:
        side = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise AiplibParameterError(f"{p}: not valid JSON ({exc})") from None
    kw = side.get("keywords") if isinstance(side, dict) else None
    return KEYWORDS if kw is None else normalize_keywords(kw)


# ======================================================================= battery, descriptors
#: The categories a background belongs to.
CATEGORIES = ("stationary", "transient", "music", "speech-like")
#: Columns of descriptors/battery.csv in order (aiplib.battery.backgrounds.curate_battery).
BATTERY_COLUMNS = [
    "bg_id",
    "category",
    "description",
    "source_package",
    "source_file",
    "licence",
    "attribution",
    "synthetic",
    "source_duration_s",
    "looped",
    "gain_db",
    "lufs_before",
    "lufs_after",
    "peak_after",
    "clipped_samples",
    "silent_share",
    "silent_share_1s",
    "subaudible_db",
    "subaudible_removed",
    "bandwidth_hz",
    "path",
]
#: Columns of descriptors/battery.csv read as text.
BATTERY_TEXT_COLUMNS = (
    "bg_id",
    "category",
    "description",
    "source_package",
    "source_file",
    "licence",
    "attribution",
    "path",
)


def _read_bg_table(path, index: bool, **read_csv_args) -> pd.DataFrame | None:
    """A per-background table (None when ``path`` does not exist), indexed by ``bg_id`` if
    ``index``."""
    if not Path(path).is_file():
        return None
    df = pd.read_csv(path, keep_default_na=False, **read_csv_args)
    return df.set_index("bg_id") if index else df


def read_battery_csv(path, *, index: bool = False) -> pd.DataFrame | None:
    """Read ``descriptors/battery.csv`` (None when it does not exist), indexed by ``bg_id`` if
    ``index``; text columns stay strings as written (``"NA"`` is not NaN, an empty cell ``""``)."""
    return _read_bg_table(path, index, dtype={c: str for c in BATTERY_TEXT_COLUMNS})


#: The nine descriptors in column order (definitions: aiplib.battery.descriptors.DESCRIPTOR_INFO).
DESCRIPTORS = [
    "zcr",
    "spectral_centroid",
    "spectral_rolloff",
    "spectral_bandwidth",
    "spectral_flux",
    "spectral_flatness",
    "spectral_contrast",
    "rms_variance",
    "vad_speech_fraction",
]
#: Columns of the descriptor table: the descriptors plus the share of descriptor frames that are
#: digital silence.
DESCRIPTOR_TABLE_COLUMNS = ["bg_id", *DESCRIPTORS, "silent_frame_share"]


def read_descriptor_table(path, *, index: bool = False) -> pd.DataFrame | None:
    """Read ``descriptors/acoustic_descriptors.csv`` (None when it does not exist), indexed by
    ``bg_id`` if ``index``: ``bg_id`` as written (str), every other column float (an empty cell
    NaN)."""
    return _read_bg_table(
        path,
        index,
        dtype={"bg_id": str},
        na_values={c: ["", "nan", "NaN"] for c in DESCRIPTOR_TABLE_COLUMNS[1:]},
    )


# ============================================================================== manifests
#: The authors' first manifest columns: every manifest has them.
MANIFEST_REQUIRED = [
    "id",
    "speech_id",
    "background_id",
    "snr_db",
    "condition",
    "seed",
    "speech_path",
    "bg_path",
]


def read_manifest_csv(path) -> pd.DataFrame:
    """Read a manifest CSV (ours, or the authors'): text stays as written (``"NA"`` too);
    ``snr_db``, ``seed`` int; ``is_target`` bool; ``bg_offset``, ``n_samples`` Int64; ``bg_active``
    boolean; ``duration_s`` float.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    AiplibParameterError
        If a column of the authors' schema is missing.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: manifest not found; run stage 05_build_manifests first")
    df = read_text_csv(path)
    missing = [c for c in MANIFEST_REQUIRED if c not in df.columns]
    if missing:
        raise AiplibParameterError(f"{path}: missing columns {missing}")
    for c in ("snr_db", "seed"):
        df[c] = pd.to_numeric(df[c]).astype("int64") if len(df) else df[c].astype("int64")
    if "is_target" in df.columns:
        df["is_target"] = df["is_target"].map(lambda v: bool(parse_bool(v) is True))
    for c, dtype in (("bg_offset", "Int64"), ("n_samples", "Int64"), ("duration_s", float)):
        if c in df.columns:
            df[c] = pd.to_numeric(df[c].replace("", None)).astype(dtype)
    if "bg_active" in df.columns:
        df["bg_active"] = df["bg_active"].map(parse_bool).astype("boolean")
    return df


def read_manifest(ws, family: str) -> pd.DataFrame:
    """:func:`read_manifest_csv` of ``manifests/<family>.csv`` (FileNotFoundError before stage
    5)."""
    return read_manifest_csv(ws.manifest_csv(family))


def find_manifest(ws, family: str, manifests_dir=None) -> pd.DataFrame | None:
    """:func:`read_manifest_csv` of ``<manifests_dir>/<family>.csv`` when ``manifests_dir`` is
    given, else of the workspace's ``manifests/<family>.csv``; None when that file does not exist
    (files re-scored from elsewhere, whose inference rows carry the manifest columns: ``make
    score``)."""
    if manifests_dir:
        path = Path(manifests_dir) / f"{family}.csv"
    else:
        path = ws.manifest_csv(family)
    if not path.is_file():
        return None
    return read_manifest_csv(path)


def read_manifest_meta(ws, family: str) -> dict:
    """The sidecar ``manifests/<family>.json`` of stage 5 (``seed_start``, ``snrs_db``, counts,
    ``sha256``); ``{}`` when missing or unreadable."""
    try:
        meta = json.loads(ws.manifest_csv(family).with_suffix(".json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def manifest_view(m: pd.DataFrame, family: str) -> pd.DataFrame:
    """Manifest rows (or inference rows carrying them) of ``family`` (``"asr"``/``"kws"``) under the
    score files' names, indexed by ``stimulus_id`` (also a column), last row per id.

    ``stimulus_id`` = ``id``; ``item_id`` = ``speech_id``; ``bg_id`` = ``background_id`` ("clean" on
    clean rows); ``snr_db`` (float dB, NaN on clean rows: the manifest's 99 is a marker);
    ``reference`` = ``transcript`` or ``keyword``; ``accent_group`` (else ``accent``); ``accent``
    (else ``accent_group``); ``is_target`` (text); ``condition``; ``bg_active`` (nullable boolean,
    NA on clean rows and when unknown). A missing ``item_id`` / ``bg_id`` (``NA`` read as NaN by the
    authors) comes from the id.
    """

    def col(name, default=""):
        return (
            m[name]
            if name in m.columns
            else pd.Series([default] * len(m), index=m.index, dtype=object)
        )

    def text(series):
        return series.map(
            lambda v: (
                ""
                if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                else str(v)
            )
        )

    sid, cond, bg, item, accent = (
        text(col(c)) for c in ("id", "condition", "background_id", "speech_id", "accent")
    )
    clean = (cond == "clean") | (bg == "clean")
    item = item.where(
        item != "", sid.where(~sid.str.endswith("_clean"), sid.str[:-6]).where(clean, "")
    )
    from_id = [
        s_[len(i_) + 1 : s_.rfind("_snr")]
        if i_ and s_.startswith(i_ + "_") and "_snr" in s_
        else ""
        for s_, i_ in zip(sid, item)
    ]
    bg = bg.where((bg != "") | clean, pd.Series(from_id, index=bg.index))
    snr = pd.to_numeric(col("snr_db", np.nan), errors="coerce").astype(float).where(~clean)
    acc = text(col("accent_group"))
    acc = acc.where(acc != "", accent)
    view = pd.DataFrame(
        {
            "stimulus_id": sid,
            "item_id": item,
            "bg_id": bg.where(~clean, "clean"),
            "snr_db": snr,
            "reference": text(col(family_spec(family).reference)),
            "accent_group": acc,
            "accent": accent.where(accent != "", acc),
            "is_target": text(col("is_target")),
            "condition": np.where(clean, "clean", "noisy"),
            "bg_active": col("bg_active", pd.NA).map(parse_bool).astype("boolean"),
        }
    )
    view.loc[clean.to_numpy(), "bg_active"] = pd.NA
    return view.drop_duplicates("stimulus_id", keep="last").set_index("stimulus_id", drop=False)
