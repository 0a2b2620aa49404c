"""Issue #35 item 5: notebooks 02, 04 and 07 show their rule on one real row of the run, as 05, 06
and 08 do — a markdown cell giving the rule, then a code cell that recomputes the shown value and
asserts it equals what the stage wrote, placed before the notebook's Checks.

The cells themselves run in the smoke pipeline (``tests/test_notebook_checks.py``) and in the demo;
here their presence and what each one compares are checked on the paired sources."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

#: notebook → (what its code cell must compare the rule's value with: names the stage's output)
STAGE_OUTPUT = {
    "02_build_item_banks": ('banks["asr"]', "itembanks/asr.jsonl"),
    "04_extract_descriptors": ("acoustic_descriptors.csv", "librosa.stft"),
    "07_run_inference": ("read_inference_jsonl", "rec.generate", "mix_components", "ps.prompt"),
}
#: How the cell giving the rule on a real row begins (05, 06 and 08 use the same words).
RULE_HEADINGS = ("## The rule on one", "## The method on one")


def _rule_cells(stem: str):
    """(index of the rule's markdown cell, the code cell after it, index of the Checks heading)."""
    cells = jupytext.read(NOTEBOOKS / f"{stem}.py").cells
    markdown = [(i, c.source) for i, c in enumerate(cells) if c.cell_type == "markdown"]
    heads = [i for i, text in markdown if text.startswith(RULE_HEADINGS)]
    checks = [i for i, text in markdown if text.startswith("## Checks")]
    assert len(heads) == 1, f"{stem}: {len(heads)} cells headed {' or '.join(RULE_HEADINGS)} …"
    assert len(checks) == 1, f"{stem}: {len(checks)} '## Checks' headings"
    code = cells[heads[0] + 1]
    assert code.cell_type == "code", f"{stem}: the rule's heading is not followed by a code cell"
    return heads[0], code, checks[0]


@pytest.mark.parametrize("stem", sorted(STAGE_OUTPUT))
def test_rule_shown_on_a_real_row_before_the_checks(stem):
    head, code, checks = _rule_cells(stem)
    assert head < checks, f"{stem}: the rule on a real row comes after the Checks"
    assert "assert " in code.source, f"{stem}: the rule's cell asserts nothing"
    missing = [name for name in STAGE_OUTPUT[stem] if name not in code.source]
    assert not missing, f"{stem}: the rule's cell does not use {missing}"
    assert "report-hide" not in code.metadata.get("tags", ()), f"{stem}: the rule's cell is hidden"
