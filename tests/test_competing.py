"""Competing speech (issue 14): the distractor corpus, the mixer and the leakage measures."""
from __future__ import annotations

import gzip
import json
import math

import numpy as np
import pandas as pd
import pytest

from aiplib.analysis import family_results
from aiplib.core.errors import AiplibParameterError, MissingPackageError, ValidationError
from aiplib.io.audio import SR, write_wav
from aiplib.scoring import leakage
from aiplib.sources.corpora import asterisk_langs as al
from aiplib.stimuli import competing as comp
from aiplib.stimuli.mixing import mix

SNRS = (-10, -5, 0, 5, 10)


def mix_competing(*args, **kwargs):
    """The mixture and info of :func:`comp.competing_components`."""
    c = comp.competing_components(*args, **kwargs)
    return c["mixture"], c["info"]


def _speechlike(seconds: float, f0: float, seed: int) -> np.ndarray:
    """A tone with a 3–5 Hz syllable-like envelope plus a little noise (loudness measurable)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    env = 0.5 + 0.5 * np.sin(2 * np.pi * (3 + seed % 3) * t + seed)
    y = 0.3 * env * np.sin(2 * np.pi * f0 * t) + 0.01 * rng.standard_normal(t.size)
    return y.astype(np.float32)


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> pd.DataFrame:
    """A distractor table of three fake languages, three utterances each (1.0–2.0 s)."""
    root = tmp_path_factory.mktemp("distractors")
    rows = []
    for li, lang in enumerate(("aa", "bb", "cc")):
        for k in range(3):
            p = write_wav(root / lang / f"u{k}.wav", _speechlike(1.0 + 0.5 * k, 150 + 90 * li + 20 * k, 10 * li + k))
            rows.append(dict(distractor_id=f"{lang}-u{k}", language=lang, voice=f"{lang}_voice",
                             same_voice_as_target=lang == "cc", key=f"u{k}", path=str(p),
                             text=f"{lang}word{k} shared{k} common", text_norm="", n_words=3,
                             duration_s=1.0 + 0.5 * k, source="test", licence="CC0", attribution="test"))
    return pd.DataFrame(rows, columns=al.DISTRACTOR_COLUMNS)


@pytest.fixture(scope="module")
def target() -> np.ndarray:
    return _speechlike(3.3, 220.0, 99)


# ------------------------------------------------------------------------------ mixing
@pytest.mark.parametrize("languages", [["aa"], ["aa", "bb", "cc"]], ids=["single", "cocktail"])
@pytest.mark.parametrize("snr", SNRS)
def test_achieved_snr_equals_the_request(table, target, languages, snr):
    c = comp.competing_components(target, table, snr, seed=5, languages=languages)
    y = c["mixture"].astype(np.float64)
    d_in_mix = y - c["speech"]  # the distractor as it is in the returned mixture
    achieved = 10 * math.log10(np.sum(c["speech"] ** 2) / np.sum(d_in_mix ** 2))
    assert achieved == pytest.approx(snr, abs=0.01)
    assert c["info"]["achieved_snr_db"] == pytest.approx(snr, abs=1e-4)
    assert np.max(np.abs(y - c["speech"] - c["distractor"])) < 1e-6     # parts add up to the mixture
    assert np.max(np.abs(c["mixture"])) <= 1.0
    if len(languages) == 3:  # equal-power cocktail: every stream at the same SNR, total at the request
        s = c["info"]["stream_snr_db"]
        assert s[0] == pytest.approx(s[1], abs=1e-9) and s[1] == pytest.approx(s[2], abs=1e-9)
        assert np.sum(c["streams"], axis=0) == pytest.approx(c["distractor"], abs=1e-6)


def test_the_mixture_is_the_background_mixer_output(table, target):
    d, _, _ = comp.build_distractor(table, target.size, languages=["aa", "bb", "cc"], seed=3)
    y, info = mix_competing(target, table, -5, 3, languages=["aa", "bb", "cc"])
    y_ref, mi = mix(target, d, -5.0, 3)          # the authors' mixer, same power definition
    assert np.array_equal(y, y_ref) and y.dtype == np.float32
    assert mi.bg_offset == 0                      # distractor has the target's length: no mixer offset


def test_same_seed_gives_bit_identical_mixture_and_info(table, target):
    y1, i1 = mix_competing(target, table, 0, 11, languages=["aa", "bb", "cc"])
    y2, i2 = mix_competing(target, table, 0, 11, languages=["aa", "bb", "cc"])
    assert np.array_equal(y1, y2) and y1.tobytes() == y2.tobytes()
    assert json.dumps(i1, sort_keys=True, default=str) == json.dumps(i2, sort_keys=True, default=str)
    y3, i3 = mix_competing(target, table, 0, 12, languages=["aa", "bb", "cc"])
    assert not np.array_equal(y1, y3)
    assert i1["streams"][0]["offset_samples"] != i3["streams"][0]["offset_samples"] or \
        i1["streams"][0]["ids"] != i3["streams"][0]["ids"]


def test_stream_covers_the_target_and_records_what_is_heard(table, target):
    rng = np.random.default_rng(0)
    d, part = comp.distractor_stream(table, "aa", target.size, rng)
    rng = np.random.default_rng(0)
    order = rng.permutation(3)                   # the draws distractor_stream makes, in order
    first = table[table.language == "aa"].sort_values("distractor_id").iloc[order[0]]
    assert part["ids"][0] == first["distractor_id"]
    assert part["starts_s"][0] == -part["offset_s"] and 0 <= part["offset_samples"] < first["duration_s"] * SR
    # the utterances heard, end to end with 0.2 s gaps, reach past the target's end
    assert part["starts_s"][-1] < target.size / SR
    assert all(b > a for a, b in zip(part["starts_s"], part["starts_s"][1:]))
    gap = int(round(comp.GAP_S * SR))
    s0 = int(round(part["starts_s"][1] * SR))
    assert np.all(d[s0 - gap: s0] == 0)          # silence before the second utterance
    assert part["texts"][0] == first["text"] and part["voice"] == "aa_voice"


def test_a_short_pool_loops_and_is_flagged(table):
    d, part = comp.distractor_stream(table, "aa", 12 * SR, np.random.default_rng(1))
    assert part["looped"] and len(part["ids"]) > 3 and d.shape == (12 * SR,)
    d, part = comp.distractor_stream(table, "aa", 1 * SR, np.random.default_rng(1))
    assert not part["looped"]


def test_info_flags_same_voice_and_rejects_bad_languages(table, target):
    _, info = mix_competing(target, table, 5, 2, languages="cc")
    assert info["streams"][0]["same_voice_as_target"] is True and info["setting"] == "single"
    assert info["languages"] == ["cc"] and info["target_snr_db"] == 5.0
    as_csv = table.astype(str)                  # a table read back from CSV: "False" is not a voice match
    assert comp.distractor_stream(as_csv, "aa", 100, np.random.default_rng(0))[1]["same_voice_as_target"] is False
    assert comp.distractor_stream(as_csv, "cc", 100, np.random.default_rng(0))[1]["same_voice_as_target"] is True
    with pytest.raises(AiplibParameterError):
        comp.build_distractor(table, 100, languages=["aa", "aa"], seed=0)
    with pytest.raises(AiplibParameterError):
        comp.build_distractor(table, 100, languages=["zz"], seed=0)


def test_condition_grid():
    g = comp.condition_grid(al.LANGUAGES)
    assert len(g) == (4 + 1) * 5
    assert g[0] == dict(condition_id="talker_fr", setting="single", languages=("fr",), snr_db=-10)
    assert g[-1] == dict(condition_id="cocktail_fr_it_ru", setting="cocktail", languages=("fr", "it", "ru"),
                         snr_db=10)


# ------------------------------------------------------------------------------ leakage
def test_asr_leakage_of_a_hand_made_hypothesis():
    r = leakage.leakage_asr("Please enter SU password, favor now.", "Please enter your password.",
                         ["Por favor ingrese su contrasena", "Gracias"])
    # hyp words: please enter su password favor now (6); leak vocabulary: por favor ingrese su
    # contrasena gracias; leak words: su, favor → 2/6. Alignment: your→su substitution,
    # favor and now inserted → 2 insertions, 1 of them a leak word (favor).
    assert r == dict(n_hyp_words=6, n_leak_words=2, leak_share=2 / 6, n_insertions=2, n_leak_insertions=1,
                     leak_words="su favor")
    # a distractor word that the target also says is not a leak
    assert leakage.leakage_asr("the agent", "the agent", "agent de la")["n_leak_words"] == 0
    assert math.isnan(leakage.leakage_asr("", "a b", "c")["leak_share"])


def test_kws_leakage():
    assert leakage.leakage_kws("Favor.", "por favor", label="yes") == dict(first_word="favor", kws_leak=True)
    assert leakage.leakage_kws("yes", "yes por favor", label="yes")["kws_leak"] is False
    assert leakage.leakage_kws("", "por favor", label="no")["kws_leak"] is False   # read as "silence"


def test_leakage_summary_pools_items_and_reports_the_bootstrap():
    rng = np.random.default_rng(0)
    n = 12
    words = rng.integers(3, 9, n)
    leak = np.minimum(words, rng.integers(0, 3, n))
    df = pd.DataFrame(dict(setting="single", distractor_languages="fr", target_snr_db=[-10] * n + [10] * n,
                           n_hyp_words=np.r_[words, words], n_leak_words=np.r_[leak, 0 * leak],
                           n_leak_insertions=np.r_[leak // 2, 0 * leak]))
    s = family_results.leakage_summary(df, n_resamples=500, seed=3)
    lo = s[s.target_snr_db == -10].iloc[0]
    assert lo.n_items == 12 and lo.n_hyp_words == words.sum()
    assert lo.leak_share == pytest.approx(leak.sum() / words.sum(), abs=1e-12)
    assert lo.leak_share_ci_low <= lo.leak_share <= lo.leak_share_ci_high
    assert lo.leak_insertions_per_item == pytest.approx((leak // 2).mean())
    assert lo.n_resamples == 500 and lo.seed == 3 and lo.level == 0.95
    hi = s[s.target_snr_db == 10].iloc[0]
    assert hi.leak_share == 0.0 and hi.leak_share_ci_high == 0.0
    assert s.equals(family_results.leakage_summary(df, n_resamples=500, seed=3))  # reproducible
    few = family_results.leakage_summary(df.head(4), n_resamples=500)
    assert math.isnan(few.leak_share_ci_low.iloc[0]) and "observation" in few.note.iloc[0]
    k = family_results.leakage_summary(pd.DataFrame(dict(setting="single", distractor_languages="fr", target_snr_db=0,
                                               kws_leak=[True] * 3 + [False] * 9)), task="kws")
    assert k.kws_leak_rate.iloc[0] == 0.25


# ------------------------------------------------------------------------------ corpus
def _fake_package(root, lang, voice, entries: dict, *, bom=False):
    doc = root / f"usr/share/doc/asterisk-core-sounds-{lang}"
    doc.mkdir(parents=True)
    lines = ["; Core Asterisk Sounds in Fake", ""] + [f"{k}: {t}" for k, t in entries.items()]
    with gzip.open(doc / f"core-sounds-{lang}.txt.gz", "wt", encoding="utf-8") as fh:
        fh.write(("\ufeff" if bom else "") + "\n".join(lines) + "\n")
    return root / "usr/share/asterisk/sounds" / voice


def test_transcript_parser_and_selection_rule_on_a_fake_package(tmp_path):
    entries = {"agent-pass": "Composez votre  mot de passe.", "digits/7": "sept", "beeperr": "(ahooga)",
               "tone": "[ascending tones] un deux trois", "short": "un deux trois quatre",
               "dir-welcome": "", "broken": "non pu? essere fatto", "no-audio": "il manque le fichier"}
    sounds = _fake_package(tmp_path, "fr", "fr_CA_f_June", entries, bom=True)
    parsed = al.read_transcripts(tmp_path / "usr/share/doc/asterisk-core-sounds-fr/core-sounds-fr.txt.gz")
    assert parsed["agent-pass"] == "Composez votre mot de passe." and parsed["dir-welcome"] == ""
    assert parsed["digits/7"] == "sept" and len(parsed) == 8
    for key, sec in dict(**{"agent-pass": 2.0, "digits/7": 2.0, "beeperr": 2.0, "tone": 2.0, "short": 1.0,
                            "dir-welcome": 2.0, "broken": 2.0}).items():
        write_wav(sounds / f"{key}.wav", _speechlike(sec, 200, 1), subtype="PCM_16")
    df = al.asterisk_distractors(["fr"], roots=[tmp_path])
    # kept: agent-pass (5 words, 2 s) and tone (3 words once "[ascending tones]" is removed);
    # dropped: digits/7 (1 word), beeperr (stage direction only), short (1.0 s < 1.5 s),
    # dir-welcome (empty), broken (damaged '?'), no-audio (no file)
    assert list(df.distractor_id) == ["fr-agent-pass", "fr-tone"]
    r = df.iloc[0]
    assert r.text_norm == "composez votre mot de passe" and r.n_words == 5
    assert r.duration_s == pytest.approx(2.0) and r.voice == "fr_CA_f_June" and r.sex == "female"
    assert not r.same_voice_as_target and r.licence == "CC BY-SA 3.0" and r.source == "asterisk-core-sounds-fr-wav"
    assert df.iloc[1].text_norm == "un deux trois"
    assert al.is_damaged("sar? esattamente") and not al.is_damaged("Casella di posta? Premere")


@pytest.mark.parametrize("lang,voice", [("es", "es_MX_f_Allison"), ("en", "en_US_f_Allison")])
def test_the_target_voice_is_flagged(tmp_path, lang, voice):
    sounds = _fake_package(tmp_path, lang, voice, {"gracias": "muchas gracias a usted"})
    write_wav(sounds / "gracias.wav", _speechlike(2.0, 200, 1))
    df = al.asterisk_distractors([lang], roots=[tmp_path])
    assert df.same_voice_as_target.tolist() == [True] and df.voice.tolist() == [voice]
    assert df.distractor_id.tolist() == [f"{lang}-gracias"]
    assert "en" not in al.LANGUAGES and al.VOICES["fr"]["same_voice_as_target"] is False


def test_missing_packages_say_how_to_get_them(tmp_path, monkeypatch):
    with pytest.raises(AiplibParameterError):
        al.find_root("xx")
    monkeypatch.setattr(al, "_roots", lambda extra=None: [tmp_path])   # nothing installed anywhere
    with pytest.raises(MissingPackageError, match="asterisk-core-sounds-ru-g722") as e:
        al.find_root("ru")
    assert "apt-get install" in str(e.value) and al.ROOT_ENV in str(e.value)


def test_folder_distractors_use_the_custom_validation(tmp_path):
    d = tmp_path / "speech"
    write_wav(d / "de" / "a.wav", _speechlike(1.5, 180, 2))
    write_wav(d / "b.flac.wav", _speechlike(2.0, 240, 3))
    (tmp_path / "texts.csv").write_text("file,text,language,speaker,same_voice_as_target\n"
                                        "de/a.wav,Guten Tag zusammen,de,anna,false\n"
                                        "b.flac.wav,Bonjour à tous,fr,bob,true\n", encoding="utf-8")
    df = al.folder_distractors(d, tmp_path / "texts.csv")
    assert list(df.columns) == al.DISTRACTOR_COLUMNS
    assert df.language.tolist() == ["fr", "de"] or df.language.tolist() == ["de", "fr"]
    r = df.set_index("language").loc["de"]
    assert r.text_norm == "guten tag zusammen" and r.voice == "anna" and not r.same_voice_as_target
    assert r.duration_s == pytest.approx(1.5) and df.set_index("language").loc["fr"].same_voice_as_target
    (tmp_path / "bad.csv").write_text("file,text,language\nde/a.wav,Guten Tag,de\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="missing transcript"):   # b.flac.wav not in the table
        al.folder_distractors(d, tmp_path / "bad.csv")


def test_real_french_asterisk_package():
    try:
        al.find_root("fr")
    except MissingPackageError as exc:
        pytest.skip(f"asterisk-core-sounds-fr(-g722) not installed here: {str(exc).splitlines()[0]}")
    df = al.asterisk_distractors(["fr"])
    assert len(df) > 200 and set(df.voice) == {"fr_CA_f_June"}
    r = df.set_index("distractor_id").loc["fr-agent-alreadyon"]
    assert r.text_norm == "cet agent est présentemnet en ligne composez votre numéro d agent suivi du dièse"
    assert r.n_words == 14 and (df.n_words >= al.MIN_WORDS).all() and (df.duration_s >= al.MIN_DURATION_S).all()
    if r.source.endswith("g722"):
        assert r.duration_s == pytest.approx(5.173875)
    # one real distractor mixed under a synthetic target at -5 dB
    y, info = mix_competing(_speechlike(2.5, 220, 4), df, -5, 1, languages="fr")
    assert info["achieved_snr_db"] == pytest.approx(-5, abs=0.01) and info["streams"][0]["ids"][0].startswith("fr-")
