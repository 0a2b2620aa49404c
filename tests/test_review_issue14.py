"""Review of the condition families (issue 14): each test pins one bug found in the review
(2026-12-01); see the review report for the file:line of each."""
from __future__ import annotations

import numpy as np
import pandas as pd
from test_families import add_distractors, fam_ws  # noqa: F401  (fixture)

from aiplib.inference import keys
from aiplib.io.audio import load_audio, write_wav
from aiplib.stimuli.families import materialize
from aiplib.stimuli.family_manifests import build_family_manifest, build_family_manifests


def test_changed_distractor_audio_changes_the_resume_key(fam_ws):  # noqa: F811
    """A competing-speech row's audio depends on the distractor recordings it mixes in; when one
    of them changes (same table: same path, id, text and duration) the resume key must change, or
    stage 7 keeps the old transcript for the new stimulus."""
    df = build_family_manifest(fam_ws, "competing_speech", "asr").set_index("id", drop=False)
    row = df.loc["a00_talker_fr_snr0"].to_dict()
    before = keys.stimulus_base(row, fam_ws, {})
    heard = materialize(row, fam_ws)[0]
    table_bytes = fam_ws.distractors_csv.read_bytes()
    table = pd.read_csv(fam_ws.distractors_csv)
    first = row["distractor_ids"].split("|")[0]
    path = table.loc[table["distractor_id"] == first, "path"].iloc[0]
    y = load_audio(path)
    write_wav(path, (0.5 * y[::-1]).astype(np.float32))          # other samples, same length
    assert fam_ws.distractors_csv.read_bytes() == table_bytes     # the table did not change
    assert materialize(row, fam_ws)[0].tobytes() != heard.tobytes()  # the stimulus did
    assert keys.stimulus_base(row, fam_ws, {}) != before


def test_notebook05_cells_survive_a_suite_without_background(fam_ws, capsys):  # noqa: F811
    """notebooks/05_build_manifests.py with suite=channel: ``manifests`` (background only) is
    empty, and the excerpt cell ``manifests["asr"].head(6)`` raised KeyError. The notebook's own
    code cells run here (after its parameters and workspace cells), on the test's workspace."""
    from pathlib import Path

    import jupytext

    nb = jupytext.read(Path(__file__).resolve().parents[1] / "notebooks" / "05_build_manifests.py")
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    first = next(i for i, src in enumerate(code) if "build_family_manifests(" in src)
    ns = {"display": lambda *a, **k: None}
    exec(compile(code[0], "<05 parameters>", "exec"), ns)  # noqa: S102  (the defaults)
    ns.update(suite="channel", ws=fam_ws, snrs=[10, 0])
    for i, src in enumerate(code[first:], start=first):
        exec(compile(src, f"<05 cell {i}>", "exec"), ns)  # noqa: S102
    assert ns["manifests"] == {}                               # no background in this suite
    assert ns["by_family"] and {cf for cf, _ in ns["by_family"]} == {"channel"}
    assert "no background ASR manifest" in capsys.readouterr().out


def test_same_voice_control_flag_does_not_depend_on_row_order():
    """competing_table's ``same_voice_control`` came from the first noisy row of each condition;
    rows of one condition differ (demo: the es distractor is the voice of the 12 Allison items,
    not of the 16 synthetic ones), so the same scores in another row order gave another flag."""
    import tempfile

    import test_family_results as tfr

    from aiplib.analysis import family_results as fr
    from aiplib.core.workspace import workspace
    from aiplib.scoring.score import score_inference

    with tempfile.TemporaryDirectory() as d:
        wf = tfr.WithFamily(workspace("demo", data_root=d))
        view = wf.with_family("competing_speech")
        man, inf = tfr._competing_rows("asr")
        for r in man:                     # es is the voice of the odd items only
            if r["background_id"] == "talker_es":
                r["same_voice_as_target"] = int(r["speech_id"][-2:]) % 2 == 1
        tfr._write(view, "asr", man, inf)
        score_inference(view)
        asr = fr.read_family_scores(wf, "competing_speech")["asr"]
    a = fr.competing_table(asr, n_resamples=200)
    b = fr.competing_table(asr.iloc[::-1].reset_index(drop=True), n_resamples=200)
    flag = lambda t: t.loc[t["condition_id"] == "talker_es", "same_voice_control"].unique().tolist()  # noqa: E731
    assert flag(a) == flag(b)


def test_make_merge_folds_a_family_s_mix_diagnostics_shards(tmp_path):
    """``make merge`` runs ``python -m aiplib.inference.shards <root>/inference/<family>`` for the families;
    their mix-diagnostics shards (``checks/<family>/``) stayed unmerged: merge_all only found the
    checks folder of a folder named ``inference``."""
    from aiplib.inference import shards
    from aiplib.inference.run_records import MIX_DIAG_FIELDS

    root = tmp_path / "demo"
    inf = root / "inference" / "channel"
    (inf / "m").mkdir(parents=True)
    chk = root / "checks" / "channel"
    chk.mkdir(parents=True)
    row = dict.fromkeys(MIX_DIAG_FIELDS, "")
    row["stimulus_id"] = "a00_ch_telephone"
    pd.DataFrame([row], columns=MIX_DIAG_FIELDS).to_csv(chk / "mix_diagnostics.shard-0-of-2.csv", index=False)
    assert shards.main([str(inf)]) == 0
    assert (chk / "mix_diagnostics.csv").is_file()
    assert pd.read_csv(chk / "mix_diagnostics.csv")["stimulus_id"].tolist() == ["a00_ch_telephone"]


def test_channel_seeds_do_not_depend_on_which_codecs_this_ffmpeg_has(fam_ws, monkeypatch):  # noqa: F811
    """The channel rows' seeds count the *runnable* rows, so a codec the local ffmpeg lacks (AMR-NB
    on Debian, present elsewhere) shifts the seed of every later condition: the packet-loss frames
    of the same item and condition differ between two machines."""
    import json

    from aiplib.stimuli import channel
    from aiplib.stimuli.families import materialize

    def rows(skip):
        monkeypatch.setattr(channel, "skip_reason", lambda name, **p: "no encoder" if name in skip else None)
        df = build_family_manifest(fam_ws, "channel", "asr", overwrite=True).set_index("id", drop=False)
        return df.loc["a01_ch_packet_loss_10pct"].to_dict()

    here, there = rows({"amr_nb_12k2"}), rows(set())
    lost = lambda r: materialize(r, fam_ws)[0]  # noqa: E731
    assert json.loads(here["condition_params"]) == json.loads(there["condition_params"])
    assert here["seed"] == there["seed"]
    assert lost(here).tobytes() == lost(there).tobytes()


def test_kws_leak_reads_the_distractor_words_as_it_reads_the_answer():
    """leakage_kws split the distractor text with the paper's ASR normalisation (``l'appel`` →
    ``l appel``) but read the answer with the KWS first-word rule (``l'appel``): a French word with
    an apostrophe never leaked, a bare ``S.`` leaked through ``s'il``, and an empty answer (read as
    ``silence``) leaked whenever the distractor said "silence"."""
    from aiplib.scoring.leakage import leakage_kws

    assert leakage_kws("L'appel.", "L'appel est terminé.", label="yes")["kws_leak"] is True
    assert leakage_kws("S.", "S'il vous plaît.", label="yes")["kws_leak"] is False
    assert leakage_kws("", "Silence, s'il vous plaît.", label="yes")["kws_leak"] is False
    assert leakage_kws("Merci!", "merci beaucoup", label="yes")["kws_leak"] is True
    assert leakage_kws("Yes.", "yes merci", label="yes")["kws_leak"] is False   # the label never leaks
