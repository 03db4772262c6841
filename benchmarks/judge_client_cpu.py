"""Judge client CPU per request: the project's client against bare HTTP loops, side by side in one run.

One scripted judge server (`testing.serve_scripted_judge`) runs in a child process, so its CPU is
not counted; this process sends the same `--requests` pointwise requests (rendered once, with the
request kind's `response_format`, as `LLMJudge` sends them) at most `--concurrency` at a time with:

- `LLMJudge + OpenAICompatibleBackend`: the project's path (rendering, the replica pool, HTTP,
  parsing and validating the verdict, the retry policy, the ledger);
- `OpenAICompatibleBackend.complete` alone: the client without the judge layer (the replica pool,
  HTTP, reading the completion), on the rendered requests;
- `bare openai.AsyncOpenAI`: `chat.completions.create` and the answer's text, when `openai` is installed;
- `bare aiohttp`: one `aiohttp.ClientSession`, POST, `json.loads`, the answer's text.

Each round runs every client once, in that order, on a fresh event loop; `CPU ms/request` is this
process's CPU time (`time.process_time`) over the round per request, and the table gives the
median over `--rounds` rounds and its ratio to the bare `aiohttp` loop's median.

    PYTHONPATH=. python benchmarks/judge_client_cpu.py    # 1,000 requests, 3 rounds, 64 in flight
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import statistics
import time

import aiohttp

from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.parsing import answer_schema
from trl_rankreward.judging.rendering import render
from trl_rankreward.judging.requests import JudgeFailure, PointwiseRequest
from trl_rankreward.testing import serve_scripted_judge

MODEL = "scripted-judge"


def _serve(connection) -> None:
    """Child process: serve the scripted judge, send its URL, serve until told to quit."""
    with serve_scripted_judge(model=MODEL) as url:
        connection.send(str(url))
        connection.recv()


def make_requests(n: int) -> list[PointwiseRequest]:
    return [
        PointwiseRequest(query=f"Question {i}: name a colour and say why.", query_id=f"q{i}",
                         response=f"Answer {i}: blue, because the sky on a clear day is blue and so is the sea.")
        for i in range(n)
    ]  # fmt: skip


async def judge_loop(url: str, requests, concurrency: int) -> int:
    judge = LLMJudge(OpenAICompatibleBackend(url, MODEL, max_concurrency=concurrency, check_on_start=False))
    verdicts = await asyncio.gather(*(judge.judge(r) for r in requests))
    return sum(not isinstance(v, JudgeFailure) for v in verdicts)


async def backend_loop(url: str, bodies: list[dict], concurrency: int) -> int:
    backend = OpenAICompatibleBackend(url, MODEL, max_concurrency=concurrency, check_on_start=False)
    decoding = ("temperature", "max_tokens", "response_format")
    completions = await asyncio.gather(
        *(backend.complete(b["messages"], **{k: b[k] for k in decoding}) for b in bodies)
    )
    return sum(bool(c.text) for c in completions)


async def openai_loop(url: str, bodies: list[dict], concurrency: int) -> int:
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="EMPTY", max_retries=0, timeout=30)
    slots = asyncio.Semaphore(concurrency)

    async def one(body):
        async with slots:
            response = await client.chat.completions.create(**body)
            return response.choices[0].message.content

    try:
        return sum(bool(text) for text in await asyncio.gather(*(one(b) for b in bodies)))
    finally:
        await client.close()


async def aiohttp_loop(url: str, bodies: list[dict], concurrency: int) -> int:
    slots = asyncio.Semaphore(concurrency)
    headers = {"Authorization": "Bearer EMPTY", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def one(body):
            async with slots:
                async with session.post(f"{url}/chat/completions", data=json.dumps(body), headers=headers) as response:
                    return json.loads(await response.read())["choices"][0]["message"]["content"]

        return sum(bool(text) for text in await asyncio.gather(*(one(b) for b in bodies)))


def measure(client, url: str, items: list, concurrency: int) -> tuple[float, float, int]:
    """(CPU seconds, wall seconds, answers) of one run of `client` over `items`, on a fresh event loop."""
    cpu, wall = time.process_time(), time.perf_counter()
    answered = asyncio.run(client(url, items, concurrency))
    return time.process_time() - cpu, time.perf_counter() - wall, answered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="pointwise requests per client and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight at once")
    args = parser.parse_args()
    requests = make_requests(args.requests)
    bodies = [
        {"model": MODEL, "messages": render(r).messages, "temperature": 0.0, "max_tokens": 1024,
         "response_format": answer_schema(r)}
        for r in requests
    ]  # fmt: skip
    clients = {
        "LLMJudge + OpenAICompatibleBackend": (judge_loop, requests),
        "OpenAICompatibleBackend.complete alone": (backend_loop, bodies),
    }
    with contextlib.suppress(ImportError):
        import openai  # noqa: F401

        clients["bare openai.AsyncOpenAI"] = (openai_loop, bodies)
    clients["bare aiohttp"] = (aiohttp_loop, bodies)

    connection, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(target=_serve, args=(child,), daemon=True)
    server.start()
    url = connection.recv()
    try:
        cpu = {name: [] for name in clients}
        wall = {name: [] for name in clients}
        for client, items in clients.values():  # warm-up: imports, first connections
            measure(client, url, items[:50], args.concurrency)
        for _ in range(args.rounds):
            for name, (client, items) in clients.items():
                seconds, elapsed, answered = measure(client, url, items, args.concurrency)
                if answered != args.requests:
                    raise SystemExit(f"{name}: {answered} of {args.requests} requests answered")
                cpu[name].append(seconds)
                wall[name].append(elapsed)
    finally:
        connection.send("quit")
        server.join(timeout=10)
    report(cpu, wall, args)
    return 0


def report(cpu: dict, wall: dict, args) -> None:
    n = args.requests
    print(f"{n} pointwise requests per client and round, {args.concurrency} in flight, {args.rounds} rounds; "
          f"medians\n")  # fmt: skip
    print("| client | CPU ms/request | x bare aiohttp | requests/s (wall) | CPU ms/request per round |")
    print("|---|---|---|---|---|")
    base = statistics.median(cpu["bare aiohttp"]) / n
    for name in cpu:
        median = statistics.median(cpu[name]) / n
        rate = n / statistics.median(wall[name])
        rounds = " / ".join(f"{1000 * s / n:.2f}" for s in cpu[name])
        print(f"| {name} | {1000 * median:.2f} | {median / base:.2f} | {rate:.0f} | {rounds} |")


if __name__ == "__main__":
    raise SystemExit(main())
