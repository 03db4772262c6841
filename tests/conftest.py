"""Shared fixtures: a tiny random-weight chat model (built once per session) and a tiny dataset; and a check at
the session's start that no stale DeepSpeed build lock would hang the ZeRO-3 tests."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


def pytest_sessionstart(session):
    """A build lock left by a killed DeepSpeed op build would hang every ZeRO-3 test until its timeout, printing
    nothing: stop the session at once with the file to remove (trainers.extension_builds has the rule)."""
    from trl_rankreward.trainers.extension_builds import StaleBuildLock, check_build_locks

    try:
        check_build_locks()
    except StaleBuildLock as exc:
        pytest.exit(f"StaleBuildLock: {exc}", returncode=3)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from trl_rankreward.testing import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("tiny_model")))


def write_tiny_dataset(path, n_queries: int = 4) -> str:
    """A JSON-lines dataset in our column layout: chat prompt, query_id, rubrics, 3 references (best first)."""
    with open(path, "w") as f:
        for i in range(n_queries):
            row = {
                "prompt": [{"role": "user", "content": f"Question {i}: name a colour."}],
                "query_id": f"q{i}",
                "rubrics": [{"text": "Names a colour", "weight": 2.0}, {"text": "Is short", "weight": 1.0}],
                "references": [f"Blue is a colour ({i}).", "Red.", "I do not know."],
            }
            f.write(json.dumps(row) + "\n")
    return str(path)


@pytest.fixture
def tiny_dataset(tmp_path):
    return write_tiny_dataset(tmp_path / "data.jsonl")


@pytest.fixture
def models_server():
    """A stdlib server that answers only the backend's start check (GET <base>/models), listing model "m"."""

    class Models(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "m"}]}).encode() if self.path == "/v1/models" else b"{}"
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1"
    httpd.shutdown()
    httpd.server_close()
