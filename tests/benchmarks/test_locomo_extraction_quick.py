"""The LoCoMo extraction harness runs end to end on a tiny slice: scripted model, and an OpenAI-compatible server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from benchmarks import locomo_extraction
from benchmarks.locomo import DEFAULT_DATA

pytestmark = pytest.mark.skipif(not DEFAULT_DATA.exists(), reason=f"LoCoMo data not found at {DEFAULT_DATA}")


def test_scripted_model_on_one_session(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert locomo_extraction.main(["--conversations", "1", "--sessions", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["model"].startswith("scripted") and result["conversations"] == result["sessions"] == 1
    # the scripted model proposes each turn that passes the 20-word filter once, and nothing fails
    assert result["decisions"]["ADD"] == result["applied"]["ADD"] > 0
    assert result["decisions"]["ADD"] + result["skipped"]["short"] == result["turns"]
    assert result["failed"] == {} and result["memories_per_session"]["total"] > 0
    assert 0 < result["evidence_recall"]["@5"] <= result["evidence_recall"]["@25"] <= result["coverage"] <= 1
    assert "evidence recall" in capsys.readouterr().out


@pytest.fixture
def server() -> Iterator[str]:
    """An OpenAI-compatible chat server on 127.0.0.1: NOOP, then one malformed answer in three."""
    calls = {"n": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            calls["n"] += 1
            content: Any = "not json" if calls["n"] % 3 == 0 else json.dumps({"decisions": [{"action": "NOOP"}]})
            raw = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                           "finish_reason": "stop"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def test_against_an_openai_compatible_server(server: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert locomo_extraction.main(["--conversations", "1", "--sessions", "1", "--base-url", server,
                                   "--model", "test", "--timeout", "10", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    calls = result["turns"] - result["skipped"]["short"]
    assert result["failed"]["malformed"] == calls // 3  # counted, and the run goes on
    assert result["decisions"]["NOOP"] == calls - calls // 3 and result["memories_per_session"]["total"] == 0
