"""Stage 1 of the custom profile reads ``licenses.csv`` when there is no ``licences.csv``
(:func:`aiplib.sources.corpora.custom.validate.validate_inputs`): the inventory must list the table it read
and ``make stamps`` must hash that one table, so an unchanged workspace reads up to date."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_custom import make_inputs

from aiplib.core import stamps
from aiplib.core.workspace import workspace
from aiplib.sources import pipeline

KEYWORDS = "yes,no,up,down,left,right,on,off,stop,go"


def _licences(bg: Path, name: str) -> Path:
    p = bg / name
    pd.DataFrame({"file": ["noise_0.wav"], "licence": ["CC0 1.0"]}).to_csv(p, index=False)
    return p


def test_american_spelling_is_in_the_inventory_and_an_old_stamp_is_up_to_date(tmp_path):
    params = make_inputs(tmp_path / "in", n_bg=8, licences=False)
    lic = _licences(Path(params["backgrounds_dir"]), "licenses.csv")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    with pytest.warns(UserWarning):
        pipeline.gather_raw(ws, keywords=KEYWORDS, **params)
    inv = pd.read_csv(ws.raw / "inventory.csv", keep_default_na=False)
    row = inv[inv["file"] == str(lic)]
    assert len(row) == 1 and row["package"].iloc[0] == "custom/metadata"
    assert row["sha256"].iloc[0] == stamps.file_sha256(lic)
    rec = stamps.read_stamp(ws.raw / "raw.stamp.json")
    assert str(lic) in rec["inputs"] and pipeline.raw_changes(ws, rec) == []
    # a stamp of an older version (no inputs): compared with raw/inventory.csv, still up to date
    assert pipeline.raw_changes(ws, dict(rec, inputs={})) == []


def test_only_the_licence_table_stage_1_reads_is_an_input(tmp_path):
    """Both spellings present: stage 1 reads licences.csv; an edit of licenses.csv changes nothing."""
    params = make_inputs(tmp_path / "in", n_bg=8)
    bg = Path(params["backgrounds_dir"])
    us = _licences(bg, "licenses.csv")
    ws = workspace("custom", data_root=tmp_path / "data", create=False)
    files = pipeline.raw_input_files(ws, dict(params, keywords=KEYWORDS))
    assert bg / "licences.csv" in files and us not in files
    with pytest.warns(UserWarning):
        pipeline.gather_raw(ws, keywords=KEYWORDS, **params)
    us.write_text(us.read_text() + "noise_1.wav,CC BY 4.0\n")
    assert pipeline.raw_changes(ws, stamps.read_stamp(ws.raw / "raw.stamp.json")) == []
    assert json.loads((ws.raw / "raw.stamp.json").read_text())["inputs"].get(str(us)) is None
