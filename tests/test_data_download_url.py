"""Downloads by URL (GitHub files of MTRAG and CORAL): sha256 sidecar, a checksum mismatch
leaves no file, 4xx fails at once, 5xx is retried then fails naming the URL. A local HTTP
server stands in for the real host."""

import http.server
import json
import threading

import pytest

from convrag.data.download import download_url, sha256_file
from convrag.errors import DataError


@pytest.fixture
def server(tmp_path):
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "tasks.jsonl").write_text('{"a": 1}\n')
    hits = {"flaky": 0}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(tmp_path / "www"), **kw)

        def do_GET(self):
            if self.path == "/down":
                hits["flaky"] += 1
                self.send_error(503, "busy")
                return
            super().do_GET()

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", hits
    httpd.shutdown()


def test_download_records_sha256_and_checks_it(server, tmp_path):
    base, _ = server
    out = tmp_path / "raw" / "tasks.jsonl"
    digest = download_url(f"{base}/tasks.jsonl", out)
    assert out.read_text() == '{"a": 1}\n' and digest == sha256_file(out)[0]
    side = json.loads((tmp_path / "raw" / "tasks.jsonl.sha256").read_text())
    assert side["sha256"] == digest and side["bytes"] == 9 and side["url"].endswith("/tasks.jsonl")
    bad = tmp_path / "raw" / "bad.jsonl"
    with pytest.raises(DataError, match="sha256 mismatch"):
        download_url(f"{base}/tasks.jsonl", bad, sha256="0" * 64)
    assert not bad.exists()


def test_client_errors_fail_at_once_server_errors_are_retried(server, tmp_path):
    base, hits = server
    with pytest.raises(DataError, match="HTTP 404"):
        download_url(f"{base}/missing.jsonl", tmp_path / "m", backoff_s=0)
    with pytest.raises(DataError, match=r"/down after 3 attempts"):
        download_url(f"{base}/down", tmp_path / "d", backoff_s=0)
    assert hits["flaky"] == 3 and not (tmp_path / "d").exists()
