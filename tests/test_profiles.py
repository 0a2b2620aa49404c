"""aiplib.corpora: the three profiles behind one interface (the Profile protocol and registry)."""
from __future__ import annotations

import pytest

from aiplib import pipeline
from aiplib.corpora import PROFILES, Profile, get_profile
from aiplib.errors import AiplibParameterError


@pytest.mark.parametrize("name", ["demo", "paper", "custom"])
def test_every_profile_implements_the_interface(name):
    mod = get_profile(name)
    assert mod.__name__ == f"aiplib.corpora.{name}" and PROFILES[name] == mod.__name__
    assert isinstance(mod, Profile)


def test_paper_stage_1_is_its_download():
    from aiplib.corpora import paper

    assert {"gather_raw", "download_all"} <= set(paper.__all__)
    assert get_profile("paper").gather_raw.__module__ == "aiplib.corpora.paper"


def test_unknown_profile_is_refused_by_name():
    with pytest.raises(AiplibParameterError, match=r"unknown profile 'timit'; choose demo, paper, custom"):
        get_profile("timit")
    with pytest.raises(AiplibParameterError, match="unknown profile 'timit'"):
        pipeline.stage_sizes("timit")
