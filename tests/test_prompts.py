"""aiplib.inference.prompts / aiplib.inference.prompts: named prompt sets, the authors' PROMPTS dict read with ast.

The fixture files are written here, shaped like the authors' inference script (imports and
side effects around a module-level ``PROMPTS = {...}`` of adjacent string literals) with made-up
texts. The fetch runs against a loopback http.server on 127.0.0.1.
"""
from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import sys
import textwrap
import threading

import pytest

from aiplib.core.errors import AiplibParameterError
from aiplib.inference import prompts as psets
from aiplib.inference.prompts import (
    DEFAULT_PROMPT_SET,
    PROMPTS,
    TASKS,
    PromptFileError,
    get_prompt_set,
    parse_prompts_file,
    prompt_for,
    prompt_set_record,
)
from aiplib.sources import download as dl

COMMIT = "0123456789abcdef0123456789abcdef01234567"

# Made-up texts; the fixture writes them as adjacent literals, in parentheses and joined with +.
ASR = "Write down every word you hear. Nothing else."
KWS = "Say the one word you hear. If there is none, say NOTHING."
ASR_P5 = "Attend to the nearest talker only. Write down every word you hear."
KWS_P5 = "Attend to the nearest talker only. Say the one word, or NOTHING."

SCRIPT = textwrap.dedent('''\
    #!/usr/bin/env python3
    """A made-up inference script: it must never run while being read."""
    import os
    import sys
    import aiplib_test_module_that_does_not_exist   # would fail at once if executed
    from pathlib import Path

    Path(__file__).with_name("EXECUTED").write_text("the prompts file was executed")
    os.environ["AIP_TEST_PROMPTS_EXECUTED"] = "1"

    ROOT = Path(__file__).resolve().parent

    # -- task prompts --
    PROMPTS = {
        "asr":  "Write down every word "
                "you hear. Nothing else.",
        "kws":  ("Say the one word you hear. "
                 "If there is none, say NOTHING."),
        "asr_steer":
                "An extra prompt the tasks do not use.",
        "asr_steer_p5":
                "Attend to the nearest talker only. " + "Write down every word you hear.",
        "kws_steer_p5":
                "Attend to the nearest talker only. "
                "Say the one word, "
                "or NOTHING.",
        "kws_steer_p1": "Another unused prompt.",
    }


    def tweak():
        PROMPTS["asr"] = "changed inside a function, which never runs at import"


    class Model:
        PROMPTS = {"asr": 1}


    if __name__ == "__main__":
        tweak()
    ''')

REQUIRED = ("asr", "kws", "asr_steer_p5", "kws_steer_p5")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in psets.ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("AIP_TEST_PROMPTS_EXECUTED", raising=False)
    monkeypatch.setattr(dl, "RETRY_WAIT_S", 0.0)


def write(tmp_path, text: str, name: str = "05_inference.py"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


# ------------------------------------------------------------------------------------ task file
def test_task_file_defines_tasks_and_both_sets():
    assert psets.required_tasks() == REQUIRED == tuple(TASKS)
    assert TASKS == {"asr": ("asr", "baseline"), "kws": ("kws", "baseline"),
                     "asr_steer_p5": ("asr", "p5"), "kws_steer_p5": ("kws", "p5")}
    assert DEFAULT_PROMPT_SET == "aip-closed-v1"
    assert psets.prompt_set_names() == ["aip-closed-v1", "paper"]
    assert [psets.canonical_prompt_set_name(n) for n in ("demo", "custom", None, "authors-05", "paper")] == [
        "aip-closed-v1", "aip-closed-v1", "aip-closed-v1", "paper", "paper"]
    with pytest.raises(AiplibParameterError, match="valid: aip-closed-v1, demo, custom, paper, authors-05"):
        get_prompt_set("paper-v2")
    src = psets.task_file()["prompt_sets"]["paper"]["source"]
    assert src["commit"] == "b5f426d9c3933749b782d9d8cde1a6398e31dd44"
    assert psets.prompts_url(src["base_url"], src["commit"], src["path"]) == (
        "https://raw.githubusercontent.com/IvLabs/AIP-Speech/"
        "b5f426d9c3933749b782d9d8cde1a6398e31dd44/scripts/05_inference.py")


def test_builtin_set_is_the_old_prompts_and_prompt_for_is_unchanged():
    demo = get_prompt_set()
    assert demo.name == "aip-closed-v1" and demo.kws_answer == psets.KWS_CLOSED_LIST
    for task, key in TASKS.items():
        expected = (PROMPTS[key]["prompt_id"], PROMPTS[key]["text"])
        assert prompt_for(task) == expected
        assert prompt_for(task, "demo") == expected == prompt_for(task, prompt_set="custom")
    assert prompt_for("asr") == ("asr_baseline_v1", "Transcribe the speech in this audio exactly.")
    rec = prompt_set_record(demo)
    assert rec["prompt_set"] == "aip-closed-v1" and rec["sha256"] is None
    assert rec["source"] == {"kind": "builtin", "module": "aiplib.inference.prompts"}
    blob = json.dumps({t: PROMPTS[k]["text"] for t, k in TASKS.items()}, sort_keys=True).encode()
    assert rec["texts_sha256"] == hashlib.sha256(blob).hexdigest()


# ------------------------------------------------------------------------------------ parsing
def test_parse_reads_the_literal_dict_without_executing_the_file(tmp_path):
    p = write(tmp_path, SCRIPT)
    got = parse_prompts_file(p)
    assert got == {"asr": ASR, "kws": KWS, "asr_steer": "An extra prompt the tasks do not use.",
                   "asr_steer_p5": ASR_P5, "kws_steer_p5": KWS_P5,
                   "kws_steer_p1": "Another unused prompt."}
    assert list(got) == ["asr", "kws", "asr_steer", "asr_steer_p5", "kws_steer_p5", "kws_steer_p1"]
    # nothing of the file ran: no marker file, no environment change, no module imported
    assert not (tmp_path / "EXECUTED").exists()
    assert "AIP_TEST_PROMPTS_EXECUTED" not in os.environ
    assert "aiplib_test_module_that_does_not_exist" not in sys.modules


def test_prompt_set_from_file_records_sha256_texts_and_ids(tmp_path):
    p = write(tmp_path, SCRIPT)
    ps = psets.prompt_set_from_file(p)
    assert ps.name == "paper" and ps.kws_answer == psets.KWS_OPEN_ANSWER
    assert dict(ps.texts) == {"asr": ASR, "kws": KWS, "asr_steer_p5": ASR_P5, "kws_steer_p5": KWS_P5}
    assert ps.other_keys == ("asr_steer", "kws_steer_p1")
    assert ps.sha256 == hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert ps.prompt("kws") == (f"paper_kws_{hashlib.sha256(KWS.encode()).hexdigest()[:10]}", KWS)
    with pytest.raises(KeyError, match=r"unknown task 'asr_steer'; valid tasks: asr, kws, asr_steer_p5, kws_steer_p5"):
        ps.prompt("asr_steer")
    assert prompt_for("asr_steer_p5", ps) == (ps.prompt_ids["asr_steer_p5"], ASR_P5)
    rec = prompt_set_record(ps)
    assert json.loads(json.dumps(rec)) == rec
    assert rec["prompt_set"] == "paper" and rec[psets.PROMPT_SET_FIELD] == "paper"
    assert rec["sha256"] == ps.sha256 and rec["variable"] == "PROMPTS"
    assert rec["source"] == {"kind": "file", "path": str(p.resolve())}
    assert rec["tasks"]["kws"] == {"prompt_id": ps.prompt_ids["kws"], "text": KWS,
                                   "text_sha256": hashlib.sha256(KWS.encode()).hexdigest()}
    assert rec["other_keys"] == ["asr_steer", "kws_steer_p1"]
    # a changed text gives a new prompt id (stage 7 resumes on it); the others keep theirs
    p2 = write(tmp_path, SCRIPT.replace("Say the one word you hear. ", "Name the word. "), "v2.py")
    ps2 = psets.prompt_set_from_file(p2)
    assert ps2.prompt_ids["kws"] != ps.prompt_ids["kws"]
    assert ps2.prompt_ids["asr"] == ps.prompt_ids["asr"]
    with pytest.raises(PromptFileError, match=r"SHA-256 .* differs"):
        psets.prompt_set_from_file(p, sha256="0" * 64)


def test_missing_key_names_the_file_and_the_key(tmp_path):
    text = re.sub(r'    "kws_steer_p5":\n(.*\n){3}', "", SCRIPT)
    assert '"kws_steer_p5"' not in text
    p = write(tmp_path, text)
    with pytest.raises(PromptFileError) as exc:
        psets.prompt_set_from_file(p)
    msg = str(exc.value)
    assert str(p) in msg and "no key 'kws_steer_p5'" in msg
    assert "keys found: asr, kws, asr_steer, asr_steer_p5, kws_steer_p1" in msg


BAD = {
    "name": ('    "kws":  ("Say the one word you hear. "\n', '    "kws":  KWS_TEXT,\n    "x": ("Say the one word you hear. "\n',
             "KWS_TEXT", r"`KWS_TEXT` is not a string literal"),
    "fstring": ('"Another unused prompt."', 'f"Another {ROOT} prompt."', "kws_steer_p1", "an f-string is not a string literal"),
    "call": ('"Another unused prompt."', '"Another unused prompt.".upper()', "kws_steer_p1", "is not a string literal"),
    "bytes": ('"Another unused prompt."', 'b"Another unused prompt."', "kws_steer_p1", "is not a string literal"),
    "int key": ('    "kws_steer_p1": "Another unused prompt.",', '    1: "Another unused prompt.",', "1: ",
                "key `1` of `PROMPTS` is not a string literal"),
    "unpacking": ('    "kws_steer_p1": "Another unused prompt.",', '    **EXTRA,', "**EXTRA", "unpacking"),
    "duplicate": ('    "kws_steer_p1": "Another unused prompt.",', '    "asr": "again",', '"asr": "again"',
                  "key 'asr' appears twice"),
    "not a dict": ("PROMPTS = {", "PROMPTS = dict(\n    _unused={", "PROMPTS = dict(", r"is `dict\(", ),
    "twice": ("ROOT = Path(", 'PROMPTS = {}\nROOT = Path(', "# -- task prompts", "assigned 2 times"),
    "item set": ("\n\ndef tweak", '\nPROMPTS["asr"] = "patched at import"\n\ndef tweak',
                 'PROMPTS["asr"] = "patched', "is assigned or deleted at module level"),
    "update": ("\n\ndef tweak", '\nif True:\n    PROMPTS.update(asr="patched")\n\ndef tweak',
               "PROMPTS.update", r"`PROMPTS.update\(...\)` is called"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_anything_but_string_literals_is_refused_with_file_and_line(tmp_path, case):
    old, new, at, match = BAD[case]
    assert old in SCRIPT
    text = SCRIPT.replace(old, new, 1)
    if case == "not a dict":
        text = text.replace('    "kws_steer_p1": "Another unused prompt.",\n}', '    "kws_steer_p1": "x",\n})')
    if case == "twice":
        at = "PROMPTS = {\n"
        line = [i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("PROMPTS = {")][1]
    else:
        line = line_of(text, at)
    p = write(tmp_path, text)
    with pytest.raises(PromptFileError, match=match) as exc:
        parse_prompts_file(p)
    assert str(exc.value).startswith(f"{p}:{line}: "), str(exc.value)
    assert not (tmp_path / "EXECUTED").exists()


def test_no_prompts_dict_and_syntax_errors_name_the_file(tmp_path):
    p = write(tmp_path, "import os\nOTHER = {'asr': 'x'}\n")
    with pytest.raises(PromptFileError, match=r"no module-level assignment `PROMPTS = \{\.\.\.\}`") as exc:
        parse_prompts_file(p)
    assert str(p) in str(exc.value)
    p = write(tmp_path, SCRIPT.replace("def tweak():", "def tweak(:"), "broken.py")
    with pytest.raises(PromptFileError, match=rf"{re.escape(str(p))}:{line_of(SCRIPT, 'def tweak')}: not a Python"):
        parse_prompts_file(p)
    with pytest.raises(PromptFileError, match="cannot read the prompts file"):
        parse_prompts_file(tmp_path / "absent.py")


# ------------------------------------------------------------------------------------ PROMPTS_FILE
def test_prompts_file_env_and_argument_use_a_local_copy(tmp_path, monkeypatch):
    p = write(tmp_path, SCRIPT)
    monkeypatch.setenv("PROMPTS_BASE_URL", "http://127.0.0.1:9/never-contacted")
    monkeypatch.setenv("PROMPTS_FILE", str(p))
    ps = get_prompt_set("paper")
    assert ps.texts["kws"] == KWS and ps.sha256 == hashlib.sha256(SCRIPT.encode()).hexdigest()
    assert ps.source == {"kind": "file", "path": str(p.resolve()), "stands_for": "scripts/05_inference.py"}
    assert prompt_for("kws", "authors-05") == ps.prompt("kws")
    monkeypatch.delenv("PROMPTS_FILE")
    assert get_prompt_set("authors-05", prompts_file=p).texts == ps.texts
    with pytest.raises(PromptFileError, match="absent.py does not exist"):
        get_prompt_set("paper", prompts_file=tmp_path / "absent.py")
    with pytest.raises(KeyError, match="valid tasks"):
        prompt_for("summarise", "paper", prompts_file=p)


# ------------------------------------------------------------------------------------ fetching
class _Server:
    """http.server on 127.0.0.1 in a thread serving ``files`` {url path: bytes}; logs requests."""

    def __init__(self, files):
        self.files, self.log = files, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.log.append(self.path)
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_fetch_over_loopback_caches_by_commit_and_checks_sha256(tmp_path, monkeypatch):
    body = SCRIPT.encode()
    sha = hashlib.sha256(body).hexdigest()
    files = {f"/IvLabs/AIP-Speech/{COMMIT}/scripts/05_inference.py": body}
    cache = tmp_path / "raw" / "prompts"
    with _Server(files) as srv:
        base = f"{srv.url}/IvLabs/AIP-Speech"
        ps = get_prompt_set("paper", base_url=base, commit=COMMIT, cache_dir=cache, sha256=sha)
        cached = cache / COMMIT / "05_inference.py"
        assert cached.read_bytes() == body
        assert ps.sha256 == sha == hashlib.sha256(cached.read_bytes()).hexdigest()
        assert dict(ps.texts) == {"asr": ASR, "kws": KWS, "asr_steer_p5": ASR_P5, "kws_steer_p5": KWS_P5}
        assert ps.source == {"kind": "url", "url": f"{base}/{COMMIT}/scripts/05_inference.py",
                             "base_url": base, "commit": COMMIT, "path": "scripts/05_inference.py",
                             "cached_file": str(cached), "downloaded": True}
        assert srv.log == [f"/IvLabs/AIP-Speech/{COMMIT}/scripts/05_inference.py"]
        assert not (cache / COMMIT / "EXECUTED").exists()
        # a wrong pin: the download is refused and kept aside, nothing cached under the name
        with pytest.raises(dl.ChecksumError, match="SHA-256"):
            get_prompt_set("paper", base_url=base, commit=COMMIT, cache_dir=tmp_path / "other",
                           sha256="f" * 64)
        assert not (tmp_path / "other" / COMMIT / "05_inference.py").exists()
        # a commit the server does not have: the error names the URL and the offline way out
        with pytest.raises(dl.DownloadError, match=r"HTTP 404.*PROMPTS_FILE") as exc:
            get_prompt_set("paper", base_url=base, commit="deadbeef", cache_dir=cache)
        assert f"{base}/deadbeef/scripts/05_inference.py" in str(exc.value)
    # server gone: the cached copy is used (no network), via the environment variables this time
    monkeypatch.setenv("PROMPTS_BASE_URL", base)
    monkeypatch.setenv("PROMPTS_COMMIT", COMMIT)
    again = get_prompt_set("authors-05", cache_dir=cache)
    assert again.source["downloaded"] is False and again.sha256 == sha
    assert prompt_set_record(again)["tasks"] == prompt_set_record(ps)["tasks"]
    with pytest.raises(PromptFileError, match="differs from the expected"):
        get_prompt_set("paper", base_url=base, commit=COMMIT, cache_dir=cache, sha256="0" * 64)


def test_unreachable_server_and_bad_commit(tmp_path):
    with pytest.raises(dl.DownloadError, match="cannot download http://127.0.0.1:9/.*PROMPTS_FILE"):
        get_prompt_set("paper", base_url="http://127.0.0.1:9/x", commit=COMMIT, cache_dir=tmp_path)
    for bad in ("../etc", "a/b", "", ".hidden"):
        with pytest.raises(AiplibParameterError, match="commit"):
            get_prompt_set("paper", base_url="http://127.0.0.1:9/x", commit=bad, cache_dir=tmp_path)
    with pytest.raises(AiplibParameterError, match="relative path"):
        get_prompt_set("paper", base_url="http://127.0.0.1:9/x", commit=COMMIT, path="../x.py",
                       cache_dir=tmp_path)


def test_default_cache_is_the_paper_workspace(tmp_path, monkeypatch):
    body = SCRIPT.encode()
    monkeypatch.setenv("AIP_DATA_ROOT", str(tmp_path / "data"))
    with _Server({f"/r/{COMMIT}/scripts/05_inference.py": body}) as srv:
        ps = get_prompt_set("paper", base_url=f"{srv.url}/r", commit=COMMIT)
    assert ps.source["cached_file"] == str((tmp_path / "data" / "paper" / "raw" / "prompts" / COMMIT
                                            / "05_inference.py").resolve())
