"""download_file without network: hf_hub_download is replaced by a local file."""

import datetime
import hashlib
import json

import pytest

from convrag.data import download
from convrag.errors import DataError

PAYLOAD = b'[{"title": "A", "text": "a"}]\n'


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    calls = []

    def fake(**kwargs):
        calls.append(kwargs)
        src = tmp_path / "hfcache" / kwargs["filename"]
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_bytes(PAYLOAD)
        return str(src)

    monkeypatch.setattr(download, "hf_hub_download", fake)
    return calls


def test_download_copies_and_records_sha256(tmp_path, fake_hub):
    out = tmp_path / "raw" / "musique_corpus.json"
    digest = download.download_file("osunlp/HippoRAG_2", "musique_corpus.json", "abc123", out,
                                    cache_dir=tmp_path / "hfcache")
    expected = hashlib.sha256(PAYLOAD).hexdigest()
    assert digest == expected and out.read_bytes() == PAYLOAD
    side = json.loads((tmp_path / "raw" / "musique_corpus.json.sha256").read_text())
    assert side["sha256"] == expected and side["bytes"] == len(PAYLOAD)
    assert (side["repo_id"], side["revision"], side["filename"]) == ("osunlp/HippoRAG_2", "abc123", "musique_corpus.json")
    assert datetime.datetime.fromisoformat(side["downloaded_at"]).tzinfo is not None
    (call,) = fake_hub
    assert call["repo_type"] == "dataset" and call["revision"] == "abc123"
    assert call["cache_dir"] == str(tmp_path / "hfcache")
    # a matching expected hash (any case) passes
    assert download.download_file("r/x", "f.json", "main", out, sha256=expected.upper()) == expected


def test_sha256_mismatch_leaves_nothing(tmp_path, fake_hub):
    out = tmp_path / "raw" / "f.json"
    with pytest.raises(DataError, match=r"sha256 mismatch for dataset r/x@v1: f.json: expected 0+, got [0-9a-f]{64}"):
        download.download_file("r/x", "f.json", "v1", out, sha256="0" * 64)
    assert list((tmp_path / "raw").iterdir()) == []


def test_hub_failure_is_a_data_error(tmp_path, monkeypatch):
    def boom(**kwargs):
        raise OSError("offline")

    monkeypatch.setattr(download, "hf_hub_download", boom)
    with pytest.raises(DataError, match=r"download failed for dataset r/x@main: f.json: OSError: offline"):
        download.download_file("r/x", "f.json", "main", tmp_path / "f.json")
    assert not (tmp_path / "f.json").exists()


def test_hipporag_file_names():
    assert download.HIPPORAG_FILES == {
        "musique": ("musique.json", "musique_corpus.json"),
        "2wikimultihopqa": ("2wikimultihopqa.json", "2wikimultihopqa_corpus.json"),
        "hotpotqa": ("hotpotqa.json", "hotpotqa_corpus.json"),
    }
