"""aiplib.sources.download (pooch): resumable downloads, verification, safe extraction, progress file, caches.

Everything runs against a local HTTP server on 127.0.0.1 (tests/fake_corpora.py).
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from fake_corpora import FakeServer, closed_port_url

from aiplib.core import errors
from aiplib.core.errors import AiplibError
from aiplib.sources import download as dl

PAYLOAD = bytes(range(256)) * 4096  # 1 MiB


@pytest.fixture()
def server():
    with FakeServer({"/data/file.bin": PAYLOAD, "/data/small.txt": b"hello\n"}) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch):
    monkeypatch.setattr(dl, "RETRY_WAIT_S", 0.0)


def test_download_verifies_md5_and_records_sha256(server, tmp_path):
    info = dl.download_file(f"{server.url}/data/file.bin", tmp_path / "file.bin",
                            md5=hashlib.md5(PAYLOAD).hexdigest(), progress=False)
    assert (tmp_path / "file.bin").read_bytes() == PAYLOAD
    assert info["verified_by"] == "md5"
    assert info["sha256"] == hashlib.sha256(PAYLOAD).hexdigest()
    assert not (tmp_path / "file.bin.part").exists()


def test_interrupted_download_resumes_with_range(server, tmp_path):
    url = f"{server.url}/data/file.bin"
    server.cut_once["/data/file.bin"] = len(PAYLOAD) // 2
    with pytest.raises(errors.DownloadError, match="broke off") as exc:
        dl.download_file(url, tmp_path / "file.bin", retries=0, progress=False)
    assert url in str(exc.value)
    part = tmp_path / "file.bin.part"
    have = part.stat().st_size                 # kept, not deleted (less the last unfinished chunk)
    assert len(PAYLOAD) // 4 <= have <= len(PAYLOAD) // 2
    assert part.read_bytes() == PAYLOAD[:have]
    assert not (tmp_path / "file.bin").exists()
    dl.download_file(url, tmp_path / "file.bin", sha256=hashlib.sha256(PAYLOAD).hexdigest(), progress=False)
    assert (tmp_path / "file.bin").read_bytes() == PAYLOAD
    assert server.log[-1]["range"] == f"bytes={have}-"  # continued, not restarted


def test_retry_resumes_within_one_call(server, tmp_path):
    server.cut_once["/data/file.bin"] = len(PAYLOAD) // 2
    dl.download_file(f"{server.url}/data/file.bin", tmp_path / "f", retries=1, progress=False)
    assert (tmp_path / "f").read_bytes() == PAYLOAD
    assert server.log[0]["range"] is None and server.log[1]["range"].startswith("bytes=")


def test_server_without_ranges_restarts_cleanly(server, tmp_path):
    (tmp_path / "f.part").write_bytes(b"garbage that is not the start of the file")
    server.ignore_range = True
    dl.download_file(f"{server.url}/data/file.bin", tmp_path / "f", progress=False)
    assert (tmp_path / "f").read_bytes() == PAYLOAD


def test_complete_part_file_is_accepted(server, tmp_path):
    (tmp_path / "f.part").write_bytes(PAYLOAD)
    dl.download_file(f"{server.url}/data/file.bin", tmp_path / "f", progress=False)
    assert (tmp_path / "f").read_bytes() == PAYLOAD


def test_checksum_mismatch_names_the_file(server, tmp_path):
    with pytest.raises(errors.ChecksumError, match=r"file\.bin.*MD5") as exc:
        dl.download_file(f"{server.url}/data/file.bin", tmp_path / "file.bin", md5="0" * 32, progress=False)
    assert isinstance(exc.value, AiplibError)
    assert not (tmp_path / "file.bin").exists()
    assert (tmp_path / "file.bin.corrupt").exists()


def test_unreachable_url_is_named_with_hint(tmp_path):
    url = f"{closed_port_url()}/x/babble.wav"
    with pytest.raises(errors.DownloadError) as exc:
        dl.download_file(url, tmp_path / "babble.wav", retries=0, hint="set AIP_MIRROR_X", progress=False)
    assert url in str(exc.value) and "AIP_MIRROR_X" in str(exc.value)


def test_http_error_names_url(server, tmp_path):
    with pytest.raises(errors.DownloadError, match="HTTP 404") as exc:
        dl.download_file(f"{server.url}/nope.zip", tmp_path / "nope.zip", progress=False)
    assert f"{server.url}/nope.zip" in str(exc.value)


def test_disk_space_is_checked_first_and_reported_in_gb(server, tmp_path, monkeypatch):
    monkeypatch.setattr(dl, "_free_bytes", lambda p: 1000)
    with pytest.raises(errors.InsufficientDiskSpaceError, match=r"needs 0\.00 GB, only 0\.00 GB free"):
        dl.download_file(f"{server.url}/data/file.bin", tmp_path / "f", progress=False)
    assert not (tmp_path / "f.part").exists() or (tmp_path / "f.part").stat().st_size == 0
    with pytest.raises(errors.InsufficientDiskSpaceError, match="GB"):
        dl.check_disk_space(tmp_path, 5e9)


# --------------------------------------------------------------------------------------------
# safe extraction
# --------------------------------------------------------------------------------------------
def _tar(tmp_path, members, name="evil.tar.gz"):
    p = tmp_path / name
    with tarfile.open(p, "w:gz") as tf:
        for m in members:
            tf.addfile(m[0], io.BytesIO(m[1]) if m[1] is not None else None)
    return p


def _file(name, data=b"x"):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _link(name, target, kind):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


@pytest.mark.parametrize("bad", [
    _file("../escaped.txt"),
    _file("ok/../../escaped.txt"),
    _file("/tmp/aip_abs_escaped.txt"),
    _link("ok/link", "/etc/passwd", tarfile.SYMTYPE),
    _link("ok/hard", "../escaped.txt", tarfile.LNKTYPE),
], ids=["dotdot", "nested-dotdot", "absolute", "symlink", "hardlink"])
def test_unsafe_tar_members_are_refused(tmp_path, bad):
    target = tmp_path / "out"
    archive = _tar(tmp_path, [_file("ok/first.txt"), bad])
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(errors.UnsafeArchiveError, match="refusing") as exc:
        dl.safe_extract(archive, target)
    assert bad[0].name in str(exc.value) and "evil.tar.gz" in str(exc.value)
    assert not (tmp_path / "escaped.txt").exists()
    assert not os.path.exists("/tmp/aip_abs_escaped.txt")
    assert list(target.rglob("*")) == []                      # nothing written at all
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "out") == before


@pytest.mark.parametrize("name", ["../escaped.txt", "/tmp/aip_abs_escaped_zip.txt", "a/../../escaped.txt"])
def test_unsafe_zip_members_are_refused(tmp_path, name):
    p = tmp_path / "evil.zip"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("ok.txt", b"fine")
        zf.writestr(zipfile.ZipInfo(name), b"bad")
    with pytest.raises(errors.UnsafeArchiveError):
        dl.safe_extract(p, tmp_path / "out")
    assert not (tmp_path / "escaped.txt").exists() and not os.path.exists("/tmp/aip_abs_escaped_zip.txt")
    assert list((tmp_path / "out").rglob("*")) == []


def test_zip_symlink_is_refused(tmp_path):
    p = tmp_path / "link.zip"
    info = zipfile.ZipInfo("ok/link")
    info.external_attr = (0o120777 << 16)
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(errors.UnsafeArchiveError, match="symbolic link"):
        dl.safe_extract(p, tmp_path / "out")


def test_safe_archive_extracts(tmp_path):
    archive = _tar(tmp_path, [_file("top/a.txt", b"A"), _file("top/sub/b.txt", b"B")], name="ok.tar.gz")
    names = dl.safe_extract(archive, tmp_path / "out")
    assert {Path(n).relative_to(tmp_path / "out").as_posix() for n in names} == {"top/a.txt", "top/sub/b.txt"}
    assert (tmp_path / "out/top/sub/b.txt").read_bytes() == b"B"


def test_not_an_archive(tmp_path):
    p = tmp_path / "x.tar.gz"
    p.write_bytes(b"not an archive")
    with pytest.raises(errors.DownloadError, match="not a readable"):
        dl.safe_extract(p, tmp_path / "out")



def test_not_a_zip_archive_names_the_file(tmp_path):
    """A corrupt .zip (a mirror serving an error page) is a one-line DownloadError, not zipfile's traceback."""
    p = tmp_path / "master.zip"
    p.write_bytes(os.urandom(5000))
    with pytest.raises(errors.DownloadError, match=r"master\.zip: not a readable ZIP or TAR archive"):
        dl.safe_extract(p, tmp_path / "out")

# --------------------------------------------------------------------------------------------
# fetch: skip when complete, progress file
# --------------------------------------------------------------------------------------------
def test_fetch_records_progress_and_skips_when_complete(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("pkg/a.txt", "A")
    data = buf.getvalue()
    with FakeServer({"/c/pkg.zip": data}) as srv:
        prog = tmp_path / "checks" / "download_progress.json"
        d = dl.Download(f"{srv.url}/c/pkg.zip", tmp_path / "c" / "pkg.zip", key="c/pkg.zip",
                        extract_to=tmp_path / "c", md5=hashlib.md5(data).hexdigest())
        kw = dict(progress_file=prog, progress=False)
        e1 = dl.fetch(d, **kw)
        assert e1["skipped"] is False and (tmp_path / "c/pkg/a.txt").read_text() == "A"
        assert (tmp_path / "c/pkg.zip").exists()                       # archive kept next to data
        assert (tmp_path / "c/.pkg.zip.completed").exists()
        rec = json.loads(prog.read_text())["files"]["c/pkg.zip"]
        assert rec["status"] == "complete" and rec["sha256"] == hashlib.sha256(data).hexdigest()
        n = len(srv.log)
        e2 = dl.fetch(d, **kw)
        assert e2["skipped"] is True and len(srv.log) == n            # no request at all
        # progress file lost: the archive on disk is verified, not downloaded again
        prog.unlink()
        e3 = dl.fetch(d, **kw)
        assert e3["skipped"] is False and len(srv.log) == n
        # force downloads again
        dl.fetch(d, force=True, **kw)
        assert len(srv.log) == n + 1


def test_progress_file_roundtrip(tmp_path):
    p = tmp_path / "progress.json"
    assert dl.read_progress(p) == {}
    dl.update_progress(p, "a/b", {"status": "complete"})
    assert dl.read_progress(p) == {"a/b": {"status": "complete"}}
    dl.update_progress(p, "a/b", None)
    assert dl.read_progress(p) == {}
    p.write_text("{corrupt")
    assert dl.read_progress(p) == {}


# --------------------------------------------------------------------------------------------
# caches
# --------------------------------------------------------------------------------------------
def test_set_cache_env_only_fills_unset(monkeypatch, tmp_path):
    for v in ("HF_HOME", "TORCH_HOME", "HF_DATASETS_CACHE"):
        monkeypatch.setenv(v, "recorded")  # so that monkeypatch restores the real state afterwards
        monkeypatch.delenv(v)
    done = dl.set_cache_env(tmp_path / "cache")
    assert done == {"HF_HOME": str(tmp_path / "cache/huggingface"), "TORCH_HOME": str(tmp_path / "cache/torch"),
                    "HF_DATASETS_CACHE": str(tmp_path / "cache/huggingface/datasets")}
    monkeypatch.setenv("TORCH_HOME", "/user/torch")
    monkeypatch.setenv("HF_HOME", "/user/hf")
    monkeypatch.delenv("HF_DATASETS_CACHE")
    assert dl.set_cache_env(tmp_path / "cache") == {}
    assert os.environ["TORCH_HOME"] == "/user/torch" and "HF_DATASETS_CACHE" not in os.environ


def test_default_cache_root_is_models_cache(monkeypatch):
    from aiplib.core.workspace import repo_root

    for v in ("HF_HOME", "TORCH_HOME", "HF_DATASETS_CACHE"):
        monkeypatch.setenv(v, "recorded")  # so that monkeypatch restores the real state afterwards
        monkeypatch.delenv(v)
    done = dl.set_cache_env()
    assert done["TORCH_HOME"] == str(repo_root() / "models" / "cache" / "torch")
