"""`serve_transformers`: a real OpenAI-compatible server (`transformers serve`) for tests.

Starts `transformers serve <model_dir> --host 127.0.0.1 --port <free port> --device cpu`
in its own process group, offline (`HF_HUB_OFFLINE=1`), waits until `GET /v1/models`
answers, and kills the whole group on exit. The server is pinned to the model it was
started with and refuses any other `model` name (HTTP 400), so requests must name it
exactly as the yielded `ServedModel.model` does (the absolute path of `model_dir`).

    with serve_transformers(build_tiny_model(tmp_path / "tiny")) as url:
        backend = OpenAICompatibleBackend(url, url.model)
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from .process_group import kill_session

_LOG_TAIL_CHARS = 4000


class ServedModel(str):
    """The server's base URL (`http://127.0.0.1:<port>/v1`), with `.model`, `.log_path` and `.stop()`."""

    model: str
    log_path: Path
    process: subprocess.Popen

    def stop(self) -> None:
        """Kill the server now, as a crash would (idempotent); the context exit then has nothing to do."""
        kill_session(self.process)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-_LOG_TAIL_CHARS:]
        except OSError as exc:
            return f"(log unreadable: {exc})"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve_transformers(
    model_dir: str | Path, *, port: int | None = None, startup_timeout_s: float = 120.0
) -> Iterator[ServedModel]:
    """Run `transformers serve` on `model_dir` on loopback; yield its base URL (a `ServedModel`)."""
    model = str(Path(model_dir).resolve())
    if not Path(model, "config.json").exists():
        raise FileNotFoundError(f"{model} holds no config.json; build a model first (testing.build_tiny_model)")
    port = port or free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="transformers-serve-", suffix=".log", delete=False)
    command = [sys.executable, "-m", "transformers.cli.transformers", "serve", model]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "info"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    log_file.close()
    served = ServedModel(f"http://127.0.0.1:{port}/v1")
    served.model, served.log_path, served.process = model, Path(log_file.name), process
    try:
        _wait_ready(served, startup_timeout_s)
        yield served
    finally:
        kill_session(process)
        Path(log_file.name).unlink(missing_ok=True)


def _wait_ready(served: ServedModel, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise RuntimeError(
                f"transformers serve exited with code {served.process.returncode} before answering at {served}. "
                f"Server log ({served.log_path}):\n{served.log_tail()}"
            )
        try:
            with urllib.request.urlopen(f"{served}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise TimeoutError(
        f"transformers serve did not answer GET {served}/models within {timeout_s:g}s. "
        f"Server log ({served.log_path}):\n{served.log_tail()}"
    )
