"""The demo fingerprint: what a finished demo run must reproduce on any machine, and the check.

A fingerprint (``benchmarks/demo_fingerprint.json``, layout in ``docs/FILE_FORMATS.md``) holds

* ``inputs``: the SHA-256 of every input file of stages 2-5 (item banks and their audio, the
  background WAVs, the descriptor table, both manifests), with ``input_packages`` (the Debian
  package(s) each file comes from, where known) and ``package_versions`` (their versions);
* ``slice``: the rule of the fingerprint slice (:mod:`aiplib.inference.fingerprint_slice`) and
  stage 7's transcript of each of its stimuli under every task of the stimulus's family;
* ``headline``: Table R1 and the Findings' numbers, as the result CSVs of stages 8-9 hold them;
* ``made_on``: the machine, aiplib version and date (informational, never compared).

:func:`compute_fingerprint` reads it from a finished run, :func:`compare` lists the differences
(:class:`Divergence`) in the order inputs, decoding, scoring, and the command line
(``python -m aiplib.analysis.fingerprint verify|write``) is what ``make verify`` and
``make fingerprint`` call.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from aiplib.core import __version__
from aiplib.core.errors import AiplibError
from aiplib.core.hashing import file_sha256
from aiplib.core.stage_records import built_at_smoke_size
from aiplib.core.tasks import TASK_FAMILIES
from aiplib.core.workspace import PROFILES, repo_root, workspace
from aiplib.inference.fingerprint_slice import SLICE_SEED, SLICE_SIZE, select_slice
from aiplib.inference.models.ct2_numerics import numerics_record
from aiplib.inference.models.registry import DEFAULT_MODEL
from aiplib.inference.prompts import TASKS
from aiplib.io.formats import read_inference_jsonl, read_item_bank, read_manifest, write_json_atomic
from aiplib.io.formats.tables import read_battery_csv
from aiplib.sources.corpora.debian import installed_version
from aiplib.sources.corpora.demo import DEBIAN_PACKAGES

#: Significant digits of the descriptor table's numbers in its checksum
#: (:func:`rounded_table_sha256`).
DESCRIPTOR_SIGNIFICANT_DIGITS = 9

#: Version of the fingerprint's layout (``format``); compared, as a different layout cannot match.
FORMAT_VERSION = 1

#: The committed demo fingerprint, relative to the project root.
DEFAULT_FINGERPRINT = Path("benchmarks") / "demo_fingerprint.json"

#: The kinds of :class:`Divergence`, in the order :func:`compare` lists them.
KINDS = ("inputs", "decoding", "scoring")

#: The stage folder of each input, in pipeline order (the order inputs are compared in).
INPUT_FOLDERS = ("itembanks", "bg", "descriptors", "manifests")

#: Exit status of the command line: the run matches the fingerprint.
EXIT_MATCH = 0

#: Exit status of the command line: a number differs from the fingerprint.
EXIT_DIVERGES = 1

#: Exit status of the command line: a part of the run is missing.
EXIT_MISSING = 2

#: A CSV cell that is an integer.
_INTEGER = re.compile(r"-?[0-9]+")


class MissingRunPart(AiplibError):
    """The run lacks a part the fingerprint needs (an input file, stage 7's transcripts, a
    table)."""


@dataclass(frozen=True)
class HeadlineTable:
    """Which cells of ``results/tables/<name>.csv`` the fingerprint keeps.

    ``keys``: the columns naming a row; ``columns``: the cells kept (those the CSV has);
    ``where``: column → the values a row must have to be kept (every row when empty).
    """

    name: str
    keys: tuple
    columns: tuple
    where: tuple = ()


#: The condition tables give Table R1 (clean and overall rows) and the Findings' overall and SNR
#: rows: the columns naming a row,
CONDITION_KEYS = ("model", "scope", "snr_db")

#: the columns kept,
CONDITION_COLUMNS = (
    "wer_pp",
    "acc_pp",
    "delta_pp",
    "ci_low_pp",
    "ci_high_pp",
    "n_items",
    "p_value",
    "verdict",
)
#: and the scopes kept.
CONDITION_SCOPES = ("scope", ("clean", "overall", "snr"))

#: The other tables the Findings cite (Figure 4's ranking through Table 3, which lists it).
FINDINGS_TABLES = (
    HeadlineTable(
        "table2_descriptor_correlations",
        ("task", "descriptor"),
        ("n", "r_s", "ci_low", "ci_high", "p", "p_permutation", "p_bh"),
        (("model", ("pooled",)),),
    ),
    HeadlineTable(
        "table3_descriptor_values",
        ("bg_id",),
        ("rank", "mean_degradation_pp", "asr_delta_wer_pp", "kws_delta_acc_pp"),
    ),
    HeadlineTable(
        "table4_accent_dwer", ("model", "accent_label"), ("n_items", "mean_delta_wer_pp")
    ),
    HeadlineTable(
        "table4_accent_dwer_item_means",
        ("model", "accent_group"),
        ("n_items", "item_mean_delta_wer_pp", "ci_low_pp", "ci_high_pp"),
    ),
    HeadlineTable(
        "table5_prompt_steering_rer",
        ("model", "steer_task"),
        ("n_items", "rer", "ci_low", "ci_high", "base_flag"),
    ),
)


@dataclass(frozen=True)
class Divergence:
    """One difference between a fingerprint and a run.

    ``kind``: one of :data:`KINDS`; ``where``: the input file (relative to the profile folder),
    ``"<id> task <task>"`` or ``"slice rule <field>"`` for decoding, ``"<table>.csv column <c>
    row <key>"`` for scoring; ``expected`` (the fingerprint's) and ``actual`` (the run's) values,
    None where absent; ``package``: for inputs, the Debian package(s) and version(s) the file
    comes from (empty where none is known).
    """

    kind: str
    where: str
    expected: object
    actual: object
    package: str = ""

    def describe(self) -> str:
        """One line: ``"<kind> differ(s) first at <where> (from Debian package …): <actual>
        expected <expected>"`` (checksums shortened to 12 hex digits)."""
        verb = "differs"
        if self.kind == "inputs":
            verb = "differ"
        origin = ""
        if self.package:
            origin = f" (from Debian package {self.package})"
        return (
            f"{self.kind} {verb} first at {self.where}{origin}: "
            f"{self._shown(self.actual)} expected {self._shown(self.expected)}"
        )

    def _shown(self, value) -> str:
        if value is None:
            return "nothing"
        if self.kind == "inputs":
            return f"sha256 {str(value)[:12]}…"
        return json.dumps(value, ensure_ascii=False)


# ------------------------------------------------------------------------------------ inputs
def input_files(ws) -> list[str]:
    """The input files of a run, relative to ``ws.root``, in pipeline order: per family the item
    bank (``itembanks/<family>.jsonl``) and its audio, the background WAVs (``bg/*.wav``), the
    descriptor table, the manifests (``manifests/<family>.csv``).

    Raises
    ------
    MissingRunPart
        A file of stages 2-5 is missing (the message names it and the stage to run).
    """
    files = []
    for family in TASK_FAMILIES:
        files.append(ws.rel(ws.item_bank(family)))
        bank = _item_bank(ws, family)
        files.extend(sorted(str(p) for p in bank["path"]))
    backgrounds = sorted(ws.rel(p) for p in ws.bg.glob("*.wav"))
    if not backgrounds:
        raise MissingRunPart(f"{ws.bg}: no background WAVs (run stage 03)")
    files.extend(backgrounds)
    files.append(ws.rel(ws.descriptor_csv))
    files.extend(ws.rel(ws.manifest_csv(family)) for family in TASK_FAMILIES)
    missing = [f for f in files if not ws.path(f).is_file()]
    if missing:
        raise MissingRunPart(
            f"{ws.path(missing[0])} is missing ({len(missing)} input file(s) "
            "missing; run stages 02-05)"
        )
    return files


def _item_bank(ws, family: str) -> pd.DataFrame:
    try:
        return read_item_bank(ws, family)
    except FileNotFoundError as exc:
        raise MissingRunPart(str(exc)) from None


def inventory_packages(ws) -> dict[str, str]:
    """``raw/inventory.csv`` (stage 1) as {file relative to the profile folder: Debian package};
    empty when there is no inventory."""
    path = ws.raw / "inventory.csv"
    if not path.is_file():
        return {}
    inventory = pd.read_csv(path, dtype=str, keep_default_na=False)
    return dict(zip(inventory["file"], inventory["package"]))


def _packages_of(source_files: str, source: str, inventory: dict, known: set) -> list[str]:
    """The packages of one item or background: those of its ``source_file``(s) (``;``-separated)
    in the inventory, else the first word of its ``source`` when that names a known package
    (``espeak-ng (synthetic voice)`` → ``espeak-ng``)."""
    found = set()
    for part in str(source_files).split(";"):
        package = inventory.get(part.strip())
        if package:
            found.add(package)
    words = str(source).split()
    if not found and words and words[0] in known:
        found.add(words[0])
    return sorted(found)


def input_packages(ws, files: list[str]) -> dict[str, list[str]]:
    """For each input file whose origin is known, the Debian package(s) it comes from (sorted).

    Item audio: its item-bank row (``source_file`` in ``raw/inventory.csv``, or ``source``);
    an item bank: the union of its items'; a background: its ``descriptors/battery.csv`` row
    (``source_file`` in the inventory, or ``source_package``). Derived tables (descriptors,
    manifests) and synthetic noises have none.
    """
    inventory = inventory_packages(ws)
    known = set(inventory.values()) | set(DEBIAN_PACKAGES)
    found = {}
    for family in TASK_FAMILIES:
        bank = _item_bank(ws, family)
        union = set()
        for row in bank.to_dict("records"):
            packages = _packages_of(
                row.get("source_file", ""), row.get("source", ""), inventory, known
            )
            found[str(row["path"])] = packages
            union.update(packages)
        found[ws.rel(ws.item_bank(family))] = sorted(union)
    battery = read_battery_csv(ws.battery_csv)
    for row in [] if battery is None else battery.to_dict("records"):
        packages = _packages_of(
            row.get("source_file", ""), row.get("source_package", ""), inventory, known
        )
        found[str(row["path"])] = packages
    return {f: found[f] for f in files if found.get(f)}


def package_versions(ws, packages) -> dict[str, str | None]:
    """{package: version}: the version stage 1 recorded in ``raw/debian_packages.csv`` where it
    has one, else the version installed on this machine now (None when not installed)."""
    recorded = {}
    path = ws.debian_packages_csv
    if path.is_file():
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
        for package, version in zip(table["package"], table["version"]):
            if version and not version.startswith("unknown"):
                recorded[package] = version
    versions = {}
    for package in sorted(set(packages)):
        version = recorded.get(package) or installed_version(package)
        versions[package] = version
    return versions


# ------------------------------------------------------------------------------------- slice
def run_record(ws, model: str) -> dict:
    """The last ``run`` record of ``inference/<model>/run_log.jsonl`` ({} without one)."""
    path = ws.run_log(model)
    if not path.is_file():
        return {}
    records, _skipped = read_inference_jsonl(path, require_id=False)
    runs = [r for r in records if r.get("event") == "run"]
    if not runs:
        return {}
    return runs[-1]


def _transcripts(ws, model: str, task: str) -> dict[str, str]:
    path = ws.inference_jsonl(model, task)
    if not path.is_file():
        raise MissingRunPart(
            f"{path} is missing: stage 7 has not run {model} on task {task} (run make 07)"
        )
    rows, _skipped = read_inference_jsonl(path)
    return {row["id"]: str(row.get("raw")) for row in rows}


def slice_transcripts(ws, model: str = DEFAULT_MODEL) -> tuple[dict, list[dict]]:
    """The fingerprint slice of a finished run: ``(rule, rows)``.

    ``rule``: ``size`` (:data:`SLICE_SIZE`), ``seed`` (:data:`SLICE_SEED`), ``model``,
    ``n_stimuli``, ``decoding`` and ``decoding_key`` (from the model's last run record; None
    without one). ``rows``: ``{"id", "task", "response"}`` (stage 7's ``raw``) for each slice
    stimulus and each task of its family, sorted by task and id.

    Raises
    ------
    MissingRunPart
        A manifest, a task's inference file, or the transcript of a slice stimulus is missing.
    """
    manifests = {}
    for family in TASK_FAMILIES:
        try:
            manifests[family] = read_manifest(ws, family)
        except FileNotFoundError as exc:
            raise MissingRunPart(str(exc)) from None
    chosen = select_slice(manifests, SLICE_SIZE, SLICE_SEED)
    rows = []
    missing = []
    for task, (family, _variant) in TASKS.items():
        ids = chosen.loc[chosen["task_family"] == family, "id"].astype(str)
        responses = _transcripts(ws, model, task)
        for stimulus in ids:
            if stimulus not in responses:
                missing.append(f"{stimulus} task {task}")
                continue
            rows.append({"id": stimulus, "task": task, "response": responses[stimulus]})
    if missing:
        raise MissingRunPart(
            f"stage 7 has no transcript of {len(missing)} slice stimulus/task "
            f"pair(s) of {model} (first: {missing[0]}); "
            "run make 07 without a limit"
        )
    rows.sort(key=_row_order)
    record = run_record(ws, model)
    rule = {
        "size": SLICE_SIZE,
        "seed": SLICE_SEED,
        "model": model,
        "n_stimuli": len(chosen),
        "decoding": record.get("decoding"),
        "decoding_key": record.get("decoding_key"),
    }
    return rule, rows


def _row_order(row: dict) -> tuple:
    return (row["task"], row["id"])


# ---------------------------------------------------------------------------------- headline
def _cell(text: str):
    """A CSV cell as the fingerprint keeps it: None (empty), int, float, or the text itself."""
    if text == "":
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _row_key(row: dict, keys) -> str:
    parts = [f"{k}={row[k]}" for k in keys if row.get(k, "") != ""]
    return ", ".join(parts)


def headline_cells(path, spec: HeadlineTable, model: str | None = None) -> dict[str, dict]:
    """The kept cells of one result CSV: {row key (``"model=…, scope=overall"``): {column: value}}.

    Values are the CSV's text read as a number where it is one (so a number compares exactly as
    the CSV prints it), None where empty. With ``model``, a table keyed by model keeps that
    model's rows only (another model audited beside it does not count as a difference).

    Raises
    ------
    AiplibError
        A key column of ``spec`` is missing, or two rows have the same key.
    """
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing_keys = [k for k in spec.keys if k not in table.columns]
    if missing_keys:
        raise AiplibError(
            f"{path}: no column {', '.join(missing_keys)} to name its rows by "
            "(the fingerprint's table layout is out of date)"
        )
    for column, allowed in spec.where:
        table = table[table[column].isin(allowed)]
    if model is not None and "model" in spec.keys:
        table = table[table["model"] == model]
    columns = [c for c in spec.columns if c in table.columns]
    cells = {}
    for row in table.to_dict("records"):
        key = _row_key(row, spec.keys)
        if key in cells:
            raise AiplibError(f"{path}: two rows are named {key!r} by {', '.join(spec.keys)}")
        cells[key] = {c: _cell(row[c]) for c in columns}
    return cells


def headline_specs(tables_dir) -> list[HeadlineTable]:
    """The tables of the headline present in ``tables_dir``: ``conditions_<task>`` of every task
    (Table R1, Findings overall / SNR), then :data:`FINDINGS_TABLES`.

    Raises
    ------
    MissingRunPart
        No ``conditions_<task>.csv`` is there (stages 8-9 have not run).
    """
    specs = []
    for task in TASKS:
        if (Path(tables_dir) / f"conditions_{task}.csv").is_file():
            specs.append(
                HeadlineTable(
                    f"conditions_{task}", CONDITION_KEYS, CONDITION_COLUMNS, (CONDITION_SCOPES,)
                )
            )
    if not specs:
        raise MissingRunPart(f"{tables_dir}: no conditions_<task>.csv (run make 08 09)")
    present = [s for s in FINDINGS_TABLES if (Path(tables_dir) / f"{s.name}.csv").is_file()]
    return specs + present


def headline(ws, model: str = DEFAULT_MODEL) -> dict[str, dict]:
    """Table R1 and the Findings' numbers of a run: {table name: :func:`headline_cells`}, the
    tables keyed by model restricted to ``model``."""
    tables = {}
    for spec in headline_specs(ws.tables_dir):
        tables[spec.name] = headline_cells(ws.tables_dir / f"{spec.name}.csv", spec, model)
    return tables


def run_models(ws) -> list[str]:
    """The models that have scored rows in a run (``results/tables/coverage.csv``; [] without)."""
    path = ws.tables_dir / "coverage.csv"
    if not path.is_file():
        return []
    coverage = pd.read_csv(path, dtype=str, keep_default_na=False)
    return sorted(set(coverage["model"]))


# ------------------------------------------------------------------------------- fingerprint
def made_on(ws, model: str) -> dict:
    """Where and when the fingerprint was made (never compared): date, aiplib, Python, platform,
    this machine's numeric path and the one the model's last run recorded (where it did)."""
    try:
        numerics = numerics_record()
    except AiplibError as exc:
        numerics = {"error": str(exc)}
    record = run_record(ws, model)
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "aiplib": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numerics": numerics,
        "run_numerics": (record.get("info") or {}).get("numerics"),
        "run_versions": record.get("versions"),
    }


def input_record(ws) -> dict:
    """The input part of a fingerprint of workspace ``ws`` (stages 2-5 done, nothing later needed):
    ``{"inputs": {path: sha256}, "input_packages": {path: [package]}, "package_versions":
    {package: version}}``.

    Raises
    ------
    MissingRunPart
        An input file of stages 2-5 is missing.
    """
    files = input_files(ws)
    packages = input_packages(ws, files)
    every_package = [p for names in packages.values() for p in names]
    digests = {}
    for f in files:
        if f == ws.rel(ws.descriptor_csv):
            digests[f] = rounded_table_sha256(ws.path(f))
        else:
            digests[f] = file_sha256(ws.path(f))
    return {
        "inputs": digests,
        "input_packages": packages,
        "package_versions": package_versions(ws, every_package),
    }


def compute_fingerprint(ws, model: str = DEFAULT_MODEL) -> dict:
    """The fingerprint of a finished run in workspace ``ws`` (layout: module docstring and
    ``docs/FILE_FORMATS.md``), JSON-serialisable.

    Raises
    ------
    MissingRunPart
        An input file of stages 2-5, stage 7's transcripts of the slice, or the result tables of
        stages 8-9 are missing (the message names what and the stage to run).
    """
    inputs = input_record(ws)
    rule, rows = slice_transcripts(ws, model)
    fingerprint = {
        "format": FORMAT_VERSION,
        "profile": ws.profile,
        "inputs": inputs["inputs"],
        "input_packages": inputs["input_packages"],
        "package_versions": inputs["package_versions"],
        "slice": {"rule": rule, "rows": rows},
        "headline": headline(ws, model),
        "made_on": made_on(ws, model),
    }
    return json.loads(json.dumps(fingerprint))


def counts(fingerprint: dict) -> tuple[int, int, int]:
    """``(inputs, transcripts, headline numbers)`` of a fingerprint (numbers: cells not None)."""
    cells = [
        v
        for table in fingerprint["headline"].values()
        for row in table.values()
        for v in row.values()
        if v is not None
    ]
    return len(fingerprint["inputs"]), len(fingerprint["slice"]["rows"]), len(cells)


def write_fingerprint(fingerprint: dict, path) -> Path:
    """Write ``fingerprint`` to ``path`` as JSON with sorted keys (so a regenerated file diffs
    line by line), atomically (:func:`aiplib.io.formats.write_json_atomic`); returns the path."""
    ordered = json.loads(json.dumps(fingerprint, sort_keys=True))
    return write_json_atomic(ordered, path)


# ----------------------------------------------------------------------------------- compare
def _input_order(path: str) -> tuple:
    folder = path.split("/", 1)[0]
    rank = len(INPUT_FOLDERS)
    if folder in INPUT_FOLDERS:
        rank = INPUT_FOLDERS.index(folder)
    return (rank, path)


def _package_note(path: str, expected: dict, actual: dict) -> str:
    """``"minetest-data 5.6.1+dfsg-2"`` (the version here; the fingerprint's beside when it
    differs); several packages separated by ``", "``."""
    names = expected.get("input_packages", {}).get(path)
    if not names:
        names = actual.get("input_packages", {}).get(path)
    notes = []
    for name in names or []:
        here = actual.get("package_versions", {}).get(name)
        there = expected.get("package_versions", {}).get(name)
        note = f"{name} {here or 'not installed here'}"
        if there != here:
            note += f", {there or 'unknown'} in the fingerprint"
        notes.append(note)
    return "; ".join(notes)


def _compare_inputs(expected: dict, actual: dict) -> list[Divergence]:
    wanted = expected.get("inputs", {})
    found = actual.get("inputs", {})
    out = []
    for path in sorted(set(wanted) | set(found), key=_input_order):
        if wanted.get(path) == found.get(path):
            continue
        package = _package_note(path, expected, actual)
        out.append(Divergence("inputs", path, wanted.get(path), found.get(path), package))
    return out


def rounded_table_sha256(path, significant: int = DESCRIPTOR_SIGNIFICANT_DIGITS) -> str:
    """SHA-256 of a CSV table with every number rounded to ``significant`` significant digits.

    The descriptor table holds full-precision floats from librosa, whose FFT and matrix products
    may differ in the last bits between CPUs (BLAS kernels are chosen per CPU); rounded, the table
    is the same wherever the descriptors are. Text cells are kept as written.
    """
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    lines = [",".join(table.columns)]
    for row in table.itertuples(index=False):
        cells = []
        for text in row:
            value = _cell(text)
            if isinstance(value, float):
                cells.append(f"{value:.{significant}g}")
            else:
                cells.append(str(text))
        lines.append(",".join(cells))
    return hashlib.sha256(("\n".join(lines) + "\n").encode("utf-8")).hexdigest()


def compare_inputs(expected: dict, ws) -> list[Divergence]:
    """The input differences between fingerprint ``expected`` and workspace ``ws`` through stage 5
    (:func:`input_record`), in :data:`INPUT_FOLDERS` order; [] when every checksum agrees."""
    return _compare_inputs(expected, input_record(ws))


def _compare_slice(expected: dict, actual: dict) -> list[Divergence]:
    rule = expected["slice"]["rule"]
    rule_here = actual["slice"]["rule"]
    out = []
    for field in sorted(set(rule) | set(rule_here)):
        if rule.get(field) != rule_here.get(field):
            out.append(
                Divergence("decoding", f"slice rule {field}", rule.get(field), rule_here.get(field))
            )
    wanted = {(r["task"], r["id"]): r["response"] for r in expected["slice"]["rows"]}
    found = {(r["task"], r["id"]): r["response"] for r in actual["slice"]["rows"]}
    for task, stimulus in sorted(set(wanted) | set(found)):
        response = wanted.get((task, stimulus))
        response_here = found.get((task, stimulus))
        if response != response_here:
            out.append(Divergence("decoding", f"{stimulus} task {task}", response, response_here))
    return out


def _compare_headline(expected: dict, actual: dict) -> list[Divergence]:
    wanted = expected["headline"]
    found = actual["headline"]
    out = []
    for table in sorted(set(wanted) | set(found)):
        rows = wanted.get(table, {})
        rows_here = found.get(table, {})
        for key in sorted(set(rows) | set(rows_here)):
            cells = rows.get(key, {})
            cells_here = rows_here.get(key, {})
            for column in sorted(set(cells) | set(cells_here)):
                value = cells.get(column)
                value_here = cells_here.get(column)
                present = (column in cells) == (column in cells_here)
                if value != value_here or not present:
                    where = f"{table}.csv column {column} row {key or '(one row)'}"
                    out.append(Divergence("scoring", where, value, value_here))
    return out


def compare(expected: dict, actual: dict) -> list[Divergence]:
    """Every difference between fingerprint ``expected`` and ``actual`` (both as
    :func:`compute_fingerprint` returns them or as read from their JSON): inputs (in pipeline
    order), then decoding (the slice's rule, then its rows by task and id), then scoring (the
    headline by table, row and column; numbers compared exactly as written). ``made_on`` and
    ``package_versions`` are never compared (the latter only explains an input's difference).

    Raises
    ------
    AiplibError
        The two fingerprints have different ``format`` versions.
    """
    if expected.get("format") != actual.get("format"):
        raise AiplibError(
            f"fingerprint format {expected.get('format')} cannot be compared with "
            f"format {actual.get('format')}; regenerate it (make fingerprint)"
        )
    out = _compare_inputs(expected, actual)
    out += _compare_slice(expected, actual)
    out += _compare_headline(expected, actual)
    return out


# ------------------------------------------------------------------------------ command line
def _shown_path(path: Path) -> str:
    try:
        return path.resolve().relative_to(repo_root()).as_posix()
    except ValueError:
        return str(path)


def _fingerprint_path(given) -> Path:
    if given:
        return Path(given).expanduser()
    return repo_root() / DEFAULT_FINGERPRINT


def _workspace(args):
    ws = workspace(args.profile, data_root=args.data_root, create=False)
    if not ws.root.is_dir():
        raise MissingRunPart(f"{ws.root} does not exist (run make all PROFILE={args.profile})")
    return ws


def summary_line(divergences: list[Divergence]) -> str:
    """``"N difference(s): inputs a, decoding b, scoring c"``."""
    per_kind = [f"{kind} {sum(d.kind == kind for d in divergences)}" for kind in KINDS]
    return f"{len(divergences)} difference(s): {', '.join(per_kind)}"


def _report(divergences: list[Divergence], shown: str, show_all: bool) -> None:
    print(f"fingerprint: {divergences[0].describe()}")
    if show_all:
        for divergence in divergences[1:]:
            print(f"  {divergence.describe().replace(' first at ', ' at ', 1)}")
    print(f"fingerprint: {summary_line(divergences)} against {shown}")


def _notes(ws, expected: dict, divergences: list[Divergence]) -> list[str]:
    """Lines that explain a difference before it is read: other models in the run (pooled tables
    mix them), a machine off the pinned numeric path."""
    notes = []
    model = expected["slice"]["rule"]["model"]
    others = [m for m in run_models(ws) if m != model]
    if others:
        notes.append(
            f"the run also scored {', '.join(others)}: their rows are left out, but the "
            "pooled Table 2 and Table 3 mix every model, so they may differ"
        )
    decoding_differs = any(d.kind == "decoding" for d in divergences)
    if decoding_differs:
        state = numerics_record()
        if not state["pinned"]:
            notes.append(f"this machine is not on the pinned numeric path ({state['reason']})")
    return notes


def verify(args) -> int:
    """``verify``: compare the run with the fingerprint, inputs first (a run through stage 5 can
    be checked); prints one line (and the count per kind when they differ) and returns
    :data:`EXIT_MATCH`, :data:`EXIT_DIVERGES` or :data:`EXIT_MISSING`."""
    path = _fingerprint_path(args.fingerprint)
    shown = _shown_path(path)
    if not path.is_file():
        print(
            f"fingerprint: {shown} does not exist (make fingerprint writes it from a full demo run)"
        )
        return EXIT_MISSING
    expected = json.loads(path.read_text(encoding="utf-8"))
    try:
        ws = _workspace(args)
        input_divergences = compare_inputs(expected, ws)
        if input_divergences:
            if built_at_smoke_size(ws.executed):
                print(
                    f"fingerprint: note: {ws.root} was built at smoke size ($AIP_SMOKE in its "
                    "stage records); the fingerprint is of a full-size demo run (make all without "
                    "AIP_SMOKE), so its inputs differ"
                )
            _report(input_divergences, shown, args.all)
            return EXIT_DIVERGES
        actual = compute_fingerprint(ws, expected["slice"]["rule"]["model"])
        divergences = compare(expected, actual)
        notes = _notes(ws, expected, divergences)
    except AiplibError as exc:
        print(f"fingerprint: cannot verify the run: {exc}")
        return EXIT_MISSING
    for note in notes:
        print(f"fingerprint: note: {note}")
    if not divergences:
        n_inputs, n_rows, n_numbers = counts(expected)
        print(
            f"fingerprint: the run matches {shown} ({n_inputs} inputs, {n_rows} transcripts, "
            f"{n_numbers} headline numbers)"
        )
        return EXIT_MATCH
    _report(divergences, shown, args.all)
    return EXIT_DIVERGES


def write(args) -> int:
    """``write``: compute the run's fingerprint and write it; returns 0, or :data:`EXIT_MISSING`."""
    path = _fingerprint_path(args.fingerprint)
    try:
        fingerprint = compute_fingerprint(_workspace(args), args.model)
    except AiplibError as exc:
        print(f"fingerprint: cannot fingerprint the run: {exc}")
        return EXIT_MISSING
    write_fingerprint(fingerprint, path)
    n_inputs, n_rows, n_numbers = counts(fingerprint)
    print(
        f"fingerprint: wrote {_shown_path(path)} ({n_inputs} inputs, {n_rows} transcripts, "
        f"{n_numbers} headline numbers); commit it"
    )
    return EXIT_MATCH


def main(argv=None) -> int:
    """``python -m aiplib.analysis.fingerprint verify|write --profile demo --data-root DIR
    [--fingerprint FILE] [--model ID] [--all]``; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m aiplib.analysis.fingerprint",
        description="the demo fingerprint: verify a run, or write it",
    )
    parser.add_argument("command", choices=("verify", "write"))
    parser.add_argument("--profile", default="demo", choices=PROFILES)
    parser.add_argument(
        "--data-root",
        default=None,
        help="the parent of the profile folders (default $AIP_DATA_ROOT or data/)",
    )
    parser.add_argument(
        "--fingerprint", default=None, help=f"the fingerprint file (default {DEFAULT_FINGERPRINT})"
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="write: the model whose transcripts are kept (verify: the fingerprint's)",
    )
    parser.add_argument("--all", action="store_true", help="verify: list every difference")
    args = parser.parse_args(argv)
    if args.command == "verify":
        return verify(args)
    return write(args)


if __name__ == "__main__":
    sys.exit(main())
