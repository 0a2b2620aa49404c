"""Languages without spaces between words (issue 37): stage 1 says that CER is the headline.

Real input folders (``test_custom.make_inputs``) validated by the custom profile's stage-1 code; the
scoring side is in ``test_scoring.py`` (``test_cjk_references_…``)."""
from __future__ import annotations

import pandas as pd
from test_custom import make_inputs

from aiplib.sources.corpora.custom.validate import validate_inputs


def _notes(rep, kind: str) -> list[str]:
    return [p.message for p in rep.problems if p.kind == kind]


def test_validation_says_cer_is_the_headline_for_transcripts_without_spaces(tmp_path):
    params = make_inputs(tmp_path / "in")
    assert _notes(validate_inputs(**params), "no_word_spaces") == []  # English: WER stays the headline
    pd.DataFrame({"file": ["a.wav", "sub/b.flac"],
                  "text": ["\u6211\u559c\u6b22\u732b\u3002", "\u4eca\u5929\u5f88\u597d\uff01"],  # 我喜欢猫。 今天很好！
                  "accent_group": ["g1", "g2"], "speaker": ["s1", "s2"]}).to_csv(params["texts"], index=False)
    rep = validate_inputs(**params)
    assert rep.ok
    [note] = [p for p in rep.problems if p.kind == "no_word_spaces"]
    assert note.severity == "warning" and note.file == params["texts"]
    assert note.message.startswith(
        "the transcripts are written without spaces between words (100% of their letters are CJK, "
        "Thai or a script like them): WER would count each sentence as one word, so stage 8 makes "
        "CER the headline")
