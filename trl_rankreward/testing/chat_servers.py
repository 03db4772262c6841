"""Chat servers for client tests: a real model behind `transformers serve`, and a server that answers as scripted;
and `run_in_group`, which runs a command in a session of its own and kills all of it when the call ends.

`serve_transformers` runs `transformers serve` offline on CPU in its own session, pinned to `model_dir`
(requests must name it as `ServedModel.model` does). `serve_chat_script` compares two clients message for
message (ours and the R-Align authors'): `answer(messages) -> Reply` decides each answer from the messages
alone; a `Reply` can carry `reasoning_content` and fail its first `fail_first` requests with HTTP 500 (with
`retry-after-ms`). Request bodies are kept in `requests`; `reset()` clears them between clients."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .scripted_judge import JSONHandler, LoopbackServer, chat_completion, openai_error


class ServedModel(str):
    """The server's base URL (`http://127.0.0.1:<port>/v1`), with `.model`, `.log_path` and `.stop()`."""

    model: str
    log_path: Path
    process: subprocess.Popen

    def stop(self) -> None:
        """Kill the server now, as a crash would (idempotent)."""
        kill_session(self.process)

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
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
    """Run `transformers serve` on `model_dir` on loopback until it answers `GET /v1/models`; yield its base URL."""
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
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{served}/models", timeout=2) as response:
            if response.status == 200:
                return
        time.sleep(0.25)
    raise TimeoutError(
        f"transformers serve did not answer GET {served}/models within {timeout_s:g}s. "
        f"Server log ({served.log_path}):\n{served.log_tail()}"
    )


ABSENT = object()  # a Reply.reasoning that leaves the `reasoning_content` key out


@dataclass(frozen=True)
class Reply:
    """One scripted answer: its content, its `reasoning_content` (`ABSENT`: no such key; None: JSON null) and how
    many requests of the same messages fail with HTTP 500 before it is given."""

    content: str | None = ""
    reasoning: object = ABSENT
    fail_first: int = 0


def messages_key(messages) -> str:
    """The identity of a request: its messages as canonical JSON."""
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


class ChatScriptServer(LoopbackServer):
    def __init__(self, answer: Callable[[list[dict]], Reply], models: tuple[str, ...]):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answer, self.models = answer, models
        self.requests: list[dict] = []
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._seen.clear()

    def respond(self, body: dict) -> tuple[int, dict]:
        messages = body.get("messages") or []
        reply = self.answer(messages)
        with self._lock:
            self.requests.append(body)
            key = messages_key(messages)
            self._seen[key] += 1
            failing = self._seen[key] <= reply.fail_first
        if failing:
            return 500, openai_error("scripted server error", "server_error", 500)
        message: dict = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not ABSENT:
            message["reasoning_content"] = reply.reasoning
        words, answered = len(messages_key(messages).split()), len((reply.content or "").split())
        return 200, chat_completion(message, body.get("model", ""), words, answered, "chatcmpl-scripted")


class _Handler(JSONHandler):
    server: ChatScriptServer

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in self.server.models]})
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        status, payload = self.server.respond(body)
        self._send(status, payload, {"retry-after-ms": "5"} if status >= 500 else None)


@contextlib.contextmanager
def serve_chat_script(
    answer: Callable[[list[dict]], Reply], *, models: tuple[str, ...] = ("genrm", "metarm")
) -> Iterator[ChatScriptServer]:
    """Serve `answer` on loopback for the duration of the block."""
    server = ChatScriptServer(answer, models).start()
    try:
        yield server
    finally:
        server.stop()


def kill_session(process: subprocess.Popen) -> None:
    """SIGKILL every process in the session `process` leads, and reap it (a hung collective would not heed SIGTERM)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
        os.killpg(process.pid, signal.SIGKILL)
    for pid in session_members(process.pid):  # the groups its children started in the session
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def run_in_group(
    command: Sequence[str], *, timeout: float | None, capture_output: bool = False, **popen_kwargs
) -> subprocess.CompletedProcess:
    """`subprocess.run(command, timeout=..., capture_output=..., **popen_kwargs)` with all of the command's
    processes killed at the end; `timeout=None` waits for its exit. `subprocess.run(timeout=...)` kills only
    `accelerate launch`, and its workers run on, holding CPU, memory and gloo ports: this starts the command with
    `start_new_session=True` and kills the whole session however the call ends (a timeout raises
    `subprocess.TimeoutExpired` with the output so far), including groups a child started in it (ninja's)."""
    if capture_output:
        popen_kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = subprocess.Popen(command, start_new_session=True, **popen_kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        kill_session(process)
        expired.stdout, expired.stderr = process.communicate()  # the whole output up to the kill
        raise
    finally:
        kill_session(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def session_members(sid: int) -> list[int]:
    """The pids of session `sid`'s running processes (zombies, already dead, left out)."""
    import psutil  # accelerate's dependency

    members = []
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getsid(process.pid) == sid:
                members.append(process.pid)
    return members


def session_survivors(sid: int, within_s: float = 5.0) -> list[int]:
    """`session_members(sid)` once they had up to `within_s` to end (a SIGKILL lands asynchronously)."""
    deadline = time.monotonic() + within_s
    while (alive := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
