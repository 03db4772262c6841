"""Offline generation with an LLM: prompt templates, reading the answer, and one resumable runner.

Templates' `{NAME}` placeholders are replaced in one pass (values are not re-expanded, JSON braces stay);
a placeholder without a value is an error naming it. `extract_json_object` strips thinking and finds the
JSON; a check that fails raises `InvalidOutput` (what was expected, what came), which the runner retries.

The runner sends pending jobs with bounded concurrency, retries invalid answers and backend errors up to
`max_attempts` (`judging.calls.RetryPolicy`), and appends each result to a JSONL the moment it arrives
(fsynced); a rerun skips the ids already there, so a crash loses nothing finished and duplicates nothing.
Jobs that fail every attempt go to a failures JSONL (rewritten each run) and the summary. Each prompt is
fitted to the server's window (`judging.prompt_budget.WindowFitting`: shown texts cut to an equal share,
`max_tokens` what the window leaves; a job without `MIN_GENERATION_TOKENS` left fails as `too_long`)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from tqdm.auto import tqdm

from ..data.records import append_record, read_records, repair_tail
from ..judging.calls import JudgeLedger, RetryPolicy, complete_and_parse
from ..judging.parsing import json_objects, strip_thinking
from ..judging.prompt_budget import WindowFitting
from ..judging.rendering import Rendered
from ..judging.requests import JudgeError
from ..user_errors import ConfigError, MissingFileError

_PLACEHOLDER = re.compile(r"\{([A-Za-z][A-Za-z0-9_]*)\}")


def fill(text: str, values: Mapping[str, object], *, where: str = "template") -> str:
    """Replace every `{NAME}` in `text` by `values[NAME]`; an unknown NAME raises KeyError naming it."""

    def replace(match: re.Match) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"{where} has placeholder {{{name}}} but no value for it (known: {sorted(values)})")
        return str(values[name])

    return _PLACEHOLDER.sub(replace, text)


@dataclass(frozen=True)
class PromptTemplate:
    """A system + user prompt and the decoding settings to send it with."""

    system: str
    user: str
    temperature: float = 0.2
    max_tokens: int = 1024

    def messages(self, values: Mapping[str, object]) -> list[dict[str, str]]:
        """Chat messages with the placeholders filled (no system message when `system` is empty)."""
        messages = [{"role": "system", "content": fill(self.system, values, where="system prompt")}]
        messages.append({"role": "user", "content": fill(self.user, values, where="user prompt")})
        return messages if self.system else messages[1:]


T = TypeVar("T", bound=PromptTemplate)


def load_template(spec: str, presets: Mapping[str, T]) -> T:
    """A preset by name, or a preset overridden by a YAML file (a mapping of template fields) or a Python file
    (a dict `TEMPLATE`); the key `base` names the preset the file overrides (default: the first)."""
    if spec in presets:
        return presets[spec]
    path = Path(spec)
    if not path.is_file():
        raise MissingFileError(f"Template {spec!r} is neither a preset ({sorted(presets)}) nor an existing file")
    if path.suffix == ".py":
        namespace: dict = {}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        overrides = namespace.get("TEMPLATE")
    else:
        overrides = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(overrides, dict):
        raise ConfigError(f"{path} must define a mapping of template fields (a YAML mapping or a dict TEMPLATE)")
    overrides = dict(overrides)
    base_name = overrides.pop("base", next(iter(presets)))
    if base_name not in presets:
        raise ConfigError(f"{path}: base {base_name!r} is not one of {sorted(presets)}")
    base = presets[base_name]
    known = {f.name for f in dataclasses.fields(base)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown template field(s) {unknown}; known fields are {sorted(known)}")
    return dataclasses.replace(base, **overrides)


class InvalidOutput(ValueError):
    """A generation that does not satisfy the required format or constraints (retried at once)."""

    retryable = True
    backoff = False


def extract_json_object(text: str) -> dict:
    """The first JSON object in `text` after removing `<think>` blocks (fenced or bare)."""
    answer = strip_thinking(text)
    objects = json_objects(answer)
    if not objects:
        raise InvalidOutput(f"No JSON object found in the answer: {answer[:200]!r}")
    return objects[0]


#: the fewest answer tokens a generation is sent with (3-5 rubrics, or a rationale, in JSON); a window that
#: leaves fewer after the prompt fails the job as `too_long` unsent
MIN_GENERATION_TOKENS = 512


@dataclass(frozen=True)
class Job:
    """One generation: `id` keys the result; `render_with_limit(limit_chars)` gives its messages with the texts
    they show cut to `limit_chars` (None: whole), for a prompt over the server's window; `context` goes to the
    parser (e.g. the label)."""

    id: str
    render_with_limit: Callable[[int | None], Rendered]
    context: Any = None


@dataclass
class RunSummary:
    """Counts of one run, the ids that failed, and the tokens the backend reported."""

    total: int = 0
    already_done: int = 0
    succeeded: int = 0
    failed_ids: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: int = 0  # jobs sent with their shown texts cut to fit the window
    output_path: str = ""
    failures_path: str = ""

    @property
    def failed(self) -> int:
        return len(self.failed_ids)

    def __str__(self) -> str:
        text = (
            f"{self.total} jobs: {self.already_done} already done, {self.succeeded} generated, {self.failed} failed; "
            f"tokens: {self.prompt_tokens} prompt, {self.completion_tokens} completion. Results: {self.output_path}"
        )
        if self.truncated:
            text += f"\n{self.truncated} prompts were cut to fit the server's context window."
        if self.failed:
            text += f"\nFailed ids (reasons in {self.failures_path}; rerun to retry them): {self.failed_ids[:20]}"
        return text


@dataclass
class ResumableRunner:
    """Run `Job`s through `backend.complete` and append `{id_key: job.id, **parse(text, job), "attempts": n}` lines
    to `output_path`; `parse` raises `InvalidOutput` on an invalid answer. Failures go to `failures_path`
    (default: `rubrics.jsonl` -> `rubrics.failures.jsonl`)."""

    backend: Any
    output_path: str | Path
    id_key: str
    parse: Callable[[str, Job], dict]
    temperature: float
    max_tokens: int
    failures_path: str | Path | None = None
    max_concurrency: int = 32
    max_attempts: int = 3
    response_format: dict | None = None
    desc: str = "generating"

    def __post_init__(self):
        if self.max_attempts < 1 or self.max_concurrency < 1:
            raise ValueError(
                f"max_attempts and max_concurrency must be >= 1, got {self.max_attempts}, {self.max_concurrency}"
            )
        self.output_path = Path(self.output_path)
        default = self.output_path.with_name(f"{self.output_path.stem}.failures{self.output_path.suffix}")
        self.failures_path = Path(self.failures_path or default)

    async def run(self, jobs: Iterable[Job]) -> RunSummary:
        by_id: dict[str, Job] = {}
        for job in jobs:
            by_id.setdefault(job.id, job)
        done = {record[self.id_key] for record in read_records(self.output_path)}
        summary = RunSummary(len(by_id), len(done & by_id.keys()))
        summary.output_path, summary.failures_path = str(self.output_path), str(self.failures_path)
        pending = [job for job in by_id.values() if job.id not in done]
        self.output_path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.output_path)
        semaphore, ledger = asyncio.Semaphore(self.max_concurrency), JudgeLedger()
        fitting = WindowFitting(self.backend, ledger)
        with (
            open(self.output_path, "a", encoding="utf-8") as results,
            open(self.failures_path, "w", encoding="utf-8") as failures,
            tqdm(total=len(pending), desc=self.desc, unit="job", dynamic_ncols=True) as bar,
        ):

            async def one(job: Job) -> None:
                async with semaphore:
                    record = await self._attempts(job, fitting)
                if "errors" in record:
                    append_record(failures, record)
                    summary.failed_ids.append(job.id)
                    bar.set_postfix(failed=summary.failed)
                else:
                    append_record(results, record)
                    summary.succeeded += 1
                bar.update(1)

            await asyncio.gather(*(one(job) for job in pending))
        summary.prompt_tokens, summary.completion_tokens = ledger.prompt_tokens, ledger.completion_tokens
        summary.truncated = ledger.snapshot().truncated_requests
        return summary

    async def _attempts(self, job: Job, fitting: WindowFitting) -> dict:
        """The result record after the first valid answer, or a failure record once the retries are spent."""
        last_text = ""

        def parse(completion) -> dict:
            nonlocal last_text
            last_text = completion.text
            return self.parse(completion.text, job)

        async def ask(backend, fitted):
            return await complete_and_parse(
                backend,
                fitted.rendered.messages,
                parse,
                retry=RetryPolicy(max_attempts=self.max_attempts),
                ledger=fitting.ledger,
                request_kind=self.id_key,
                what=what,
                temperature=self.temperature,
                max_tokens=fitted.max_tokens,
                response_format=self.response_format,
            )

        what = f"{self.desc} for {self.id_key}={job.id!r}"
        try:
            fields, tries = await fitting.send(
                job.render_with_limit,
                ask,
                reserve=min(self.max_tokens, MIN_GENERATION_TOKENS),
                max_tokens=self.max_tokens,
                what=what,
                fix="serve the generator with a longer --max-model-len (--max_model_len where /models lists none)",
            )
        except JudgeError as error:
            return {self.id_key: job.id, "attempts": error.attempts, "errors": error.errors,
                    "last_output": last_text[:4000]}  # fmt: skip
        return {self.id_key: job.id, **fields, "attempts": tries}


def check_columns(dataset, columns: Iterable[str], needs: str) -> None:
    """Raise unless `dataset` has every column; the message starts with `needs` (what needs which dataset)."""
    for column in columns:
        if column not in dataset.column_names:
            raise ConfigError(f"{needs} with {column!r} (`trl-rankreward data ...`)")


def run_jobs(
    jobs: Iterable[Job],
    backend,
    output_path: str | Path,
    *,
    template,
    temperature: float | None = None,
    max_tokens: int | None = None,
    **options,
) -> RunSummary:
    """Run `jobs` to the end with a `ResumableRunner` (`options`: its other fields); decoding settings not given
    are `template`'s."""
    runner = ResumableRunner(
        backend,
        output_path,
        temperature=template.temperature if temperature is None else temperature,
        max_tokens=template.max_tokens if max_tokens is None else max_tokens,
        **options,
    )
    return asyncio.run(runner.run(jobs))
