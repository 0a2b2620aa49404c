"""aiplib.sources.corpora: the three profiles behind one interface (the Profile protocol and registry)."""
from __future__ import annotations

import pytest

from aiplib.core.errors import AiplibParameterError
from aiplib.sources import pipeline
from aiplib.sources.corpora import PROFILES, Profile, get_profile


@pytest.mark.parametrize("name", ["demo", "paper", "custom"])
def test_every_profile_implements_the_interface(name):
    mod = get_profile(name)
    assert mod.__name__ == f"aiplib.sources.corpora.{name}" and PROFILES[name] == mod.__name__
    assert isinstance(mod, Profile)


def test_paper_stage_1_is_its_download():
    from aiplib.sources.corpora import paper

    assert {"gather_raw", "download_all"} <= set(paper.__all__)
    assert get_profile("paper").gather_raw.__module__ == "aiplib.sources.corpora.paper"


def test_unknown_profile_is_refused_by_name():
    with pytest.raises(AiplibParameterError, match=r"unknown profile 'timit'; choose demo, paper, custom"):
        get_profile("timit")
    with pytest.raises(AiplibParameterError, match="unknown profile 'timit'"):
        pipeline.stage_sizes("timit")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_takes_stage_3_s_seed(name):
    """Notebook 03 passes its ``seed`` to ``battery_specs`` (``make SEED=N`` reaches the demo's
    babble / hubbub choice), so every profile's ``battery_specs`` must take it."""
    import inspect

    assert "seed" in inspect.signature(get_profile(name).battery_specs).parameters
    assert "battery_specs(ws, seed=seed)" in open("notebooks/03_curate_backgrounds.py").read()
