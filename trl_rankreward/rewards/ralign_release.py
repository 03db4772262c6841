"""The R-Align authors' released evaluation protocol, as one setting (`r_align_release`).

A GenRM trained with R-Align (`lyn22333/GenRM-R-Align-8B`, `-14B`) was trained on the prompt of the authors' scripts
(github.com/lyn22333/R-Align: `generate_model_judgment.py`, `metarm_judge.py`), and their published table was
computed by them. With `r_align_release=DIR`, a checkout of that repository, every step follows their release: the
GenRM system message and MetaRM prompt are read from DIR's scripts with `ast` (nothing is executed, no prompt text
ships here); the layout (`pair_block`) keeps the dataset's order; the answer is `joined_text`, the GenRM verdict its
FIRST box (ours takes the last); thinking is dropped from both explanations (`drop_thinking`); an answer is never
asked again because it did not parse (`answer_once`). One difference, unobservable in any message or count: their
client writes a `reasoning_content` of JSON `null` as "None" before the separator; here it is empty.
"""

from __future__ import annotations

import ast
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ..data.prompts import user_prompt
from ..judging.backends.base import BackendError
from ..judging.calls import JudgeLedger, RetryPolicy
from ..judging.prompt_budget import WindowFitting
from ..judging.rendering import Rendered, TextCut
from ..judging.requests import JudgeError, JudgeFailure
from ..judging.server_settings import build_backend, build_judge
from .genrm_verdict import MIN_GENRM_ANSWER_TOKENS, Label, check_pair_row

METARM_SCRIPT = "metarm_judge.py"
METARM_PROMPT_CONSTANT = "META_JUDGE_PROMPT_V1"
METARM_FIELDS = ("context_and_responses", "genrm_explanation", "golden_explanation")

_BOXED = re.compile(r"\\boxed\{([AB])\}")
_BOXED_BARE = re.compile(r"boxed\{([AB])\}")
_ANSWER = (
    "<|The Start of Assistant {0}'s Answer with User|>\n\n{1}\n\n<|The End of Assistant {0}'s Answer with User|>\n\n"
)


class ReleaseError(ValueError):
    """DIR is not a usable checkout of the authors' repository (a script or a prompt constant is missing)."""


def read_string_constant(path: Path, name: str) -> str:
    """The string assigned to the module-level name `name` in the Python file `path` (parsed, never run)."""
    if not path.is_file():
        raise ReleaseError(
            f"{path} does not exist; r_align_release must be a checkout of github.com/lyn22333/R-Align "
            f"(git clone https://github.com/lyn22333/R-Align)"
        )
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in (n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value
            raise ReleaseError(f"{path}: {name} is not a plain string literal; expected the authors' prompt text")
    raise ReleaseError(
        f"{path} assigns no module-level {name}; expected the authors' script (github.com/lyn22333/R-Align), "
        "check that r_align_release points at their checkout"
    )


def pair_block(conversation: Sequence[dict], first: str, second: str) -> str:
    """The dialogue context (earlier turns as `User: ...` / `Assistant: ...` lines, another role capitalized),
    the user prompt (the last turn) and the two answers, `first` as Assistant A: the GenRM's user message and
    the MetaRM's context block."""
    turns = [(turn.get("role", ""), turn.get("content", "")) for turn in conversation[:-1]]
    names = {"user": "User", "assistant": "Assistant"}
    lines = "\n".join(f"{names.get(role, str(role).capitalize())}: {content}" for role, content in turns)
    context = f"<|Dialogue Context|>\n{lines}\n\n<|End of Dialogue Context|>\n\n" if turns else ""
    prompt = f"<|User Prompt|>\n{conversation[-1].get('content', '')}\n\n" if conversation else "<|User Prompt|>\n\n"
    return context + prompt + _ANSWER.format("A", first) + _ANSWER.format("B", second)


def joined_text(content: str | None, reasoning: str | None) -> str:
    """The answer as the authors' client returns it: reasoning, the `</think>` separator, content."""
    return f"{reasoning or ''}\n\n</think>\n\n{content or ''}"


def first_boxed_verdict(text: str | None) -> Label | None:
    """The first `\\boxed{A|B}` of the text, else the first `boxed{A|B}`; None without one."""
    match = _BOXED.search(text or "") or _BOXED_BARE.search(text or "")
    return match.group(1) if match else None  # type: ignore[return-value]


def drop_thinking(text: str | None) -> str:
    """What follows the last `</think>`, stripped (the whole text, stripped, without one)."""
    return (text or "").split("</think>")[-1].strip()


def _tagged(text: str, tag: str) -> str | None:
    """The text after the first `<tag>` up to the next `</tag>` or `<tag>`, stripped; None without `<tag>`."""
    opening = f"<{tag}>"
    return text.split(opening)[1].split(f"</{tag}>")[0].strip() if opening in text else None


def meta_verdict(text: str | None) -> bool | None:
    """The MetaRM's verdict: True for a `<final_verdict>` reading `correct` (any case), False for any
    other reading; None (a parse failure) unless both `<genrm_analysis>` and `<final_verdict>` open."""
    text = text or ""
    analysis, verdict = _tagged(text, "genrm_analysis"), _tagged(text, "final_verdict")
    return None if analysis is None or verdict is None else verdict.lower() == "correct"


@dataclass(frozen=True)
class ReleaseMetaRequest:
    """A MetaRM request in the authors' layout; `messages_with(cut)` rebuilds it with each shown text (never
    the conversation) passed through `cut`, to fit a server's window."""

    messages: tuple[dict, ...]
    query_id: str = ""
    step: int = 0
    messages_with: Callable[[Callable[[str], str]], list[dict]] | None = field(default=None, compare=False, repr=False)


async def answer_once(
    backend,
    messages: list[dict],
    parse: Callable[[str], Any],
    *,
    retry: RetryPolicy,
    ledger: JudgeLedger,
    request_kind: str,
    what: str,
    **decoding: Any,
) -> Any:
    """`parse(joined_text)` of the backend's answer, or a `JudgeFailure`: a backend failure is retried by
    `retry`; an answer is parsed once, as the authors' scripts do (None: a failure of kind "invalid")."""

    async def attempt(number: int):
        try:
            return await backend.complete(messages, **decoding)
        except BackendError as exc:
            ledger.record(request_kind=request_kind, parsed=False, failure=exc.kind)
            exc.tries = number
            raise

    try:
        completion = await retry.run(attempt)
    except BackendError as exc:
        return JudgeFailure(exc.kind, f"{what} failed after {exc.tries} attempt(s): {exc}", exc.tries)
    usage = {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}
    text = joined_text(completion.text, completion.reasoning)
    value = parse(text)
    if value is None:
        ledger.record(request_kind=request_kind, parsed=False, failure="invalid", **usage)
        return JudgeFailure("invalid", f"{what}: the answer does not parse under the release protocol: {text[-200:]!r}")
    ledger.record(request_kind=request_kind, parsed=True, **usage)
    return value


@dataclass(frozen=True)
class RAlignRelease:
    """The authors' protocol with the prompts of one checkout (`RAlignRelease.load(DIR)`)."""

    directory: str
    genrm_system: str = field(repr=False)
    meta_template: str = field(repr=False)

    @classmethod
    def load(cls, directory: str | Path) -> RAlignRelease:
        """Read both prompts from the scripts in `directory` (parsed with `ast`, never run)."""
        root = Path(directory).expanduser()
        if not root.is_dir():
            raise ReleaseError(
                f"r_align_release={str(directory)!r} is not a folder; give a checkout of github.com/lyn22333/R-Align"
            )
        system = read_string_constant(root / "generate_model_judgment.py", "CUSTOM_SYSTEM_PROMPT")
        template = read_string_constant(root / METARM_SCRIPT, METARM_PROMPT_CONSTANT)
        fields = sorted({name for _, name, _, _ in string.Formatter().parse(template) if name is not None})
        if tuple(fields) != METARM_FIELDS:
            raise ReleaseError(
                f"{root / METARM_SCRIPT}: {METARM_PROMPT_CONSTANT} has the fields {fields}; expected exactly "
                f"{list(METARM_FIELDS)} (is this the authors' release?)"
            )
        return cls(str(root.resolve()), system, template)

    def genrm_messages(self, conversation: Sequence[dict], first: str, second: str) -> list[dict[str, str]]:
        """The GenRM request: the authors' system message, then the pair block (`first` as A)."""
        return [
            {"role": "system", "content": self.genrm_system},
            {"role": "user", "content": pair_block(conversation, first, second)},
        ]

    def meta_messages(
        self,
        conversation: Sequence[dict],
        response_a: str,
        response_b: str,
        golden: str,
        genrm_answer: str,
        cut: Callable[[str], str] = str,
    ) -> list[dict[str, str]]:
        """The MetaRM request: the authors' prompt filled as their script fills it (`cut` on each shown text)."""
        prompt = self.meta_template.format(
            context_and_responses=pair_block(conversation, cut(response_a), cut(response_b)),
            golden_explanation=cut(drop_thinking(golden)),
            genrm_explanation=cut(drop_thinking(genrm_answer)),
        )
        return [{"role": "user", "content": prompt}]

    def genrm_row(self, row: dict, seed: int = 0) -> dict:
        """GenRM columns of a pairwise row, in the dataset's order (`seed` is not used: no swap)."""
        check_pair_row(row)
        conversation = _conversation(row["prompt"])
        return {
            "prompt": self.genrm_messages(conversation, row["response_a"], row["response_b"]),
            "pair_prompt": conversation,
            "display_order": "ab",
            "display_label": row["label"],
        }

    verdict = staticmethod(first_boxed_verdict)

    @staticmethod
    def completion_text(completion) -> str:
        return joined_text(completion.text, completion.reasoning)

    def meta_request(self, sample, *, step: int = 0) -> ReleaseMetaRequest:
        """The MetaRM request of a label-correct `ralign_reward.GenRMSample`."""
        texts = (_conversation(sample.prompt), sample.response_a, sample.response_b, sample.golden_rationale,
                 sample.completion)  # fmt: skip
        messages_with = partial(self.meta_messages, *texts)
        return ReleaseMetaRequest(tuple(messages_with()), sample.key, step, messages_with)


def _conversation(prompt) -> list[dict]:
    """A pair's prompt as chat turns: messages as they are, a text as one user turn."""
    return user_prompt(prompt) if isinstance(prompt, str) else [dict(turn) for turn in prompt]


def build_meta_judge(settings, release: RAlignRelease | None = None):
    """The MetaRM the `metarm_*` settings describe: an `LLMJudge`, or with `release` a `ReleaseMetaJudge`."""
    if release is None:
        return build_judge(settings)
    if settings.templates:
        raise ValueError(f"{settings.prefix}templates and r_align_release both set the MetaRM prompt; keep one of them")
    return ReleaseMetaJudge(build_backend(settings), retry=settings.retry_policy(),
                            temperature=settings.temperature, max_tokens=settings.max_tokens)  # fmt: skip


class ReleaseMetaJudge:
    """The MetaRM asked with the authors' prompt and parsed with their rule (`meta_verdict`): True, False or a
    `JudgeFailure`; fitted to the server's window as the GenRM's prompt is."""

    def __init__(self, backend, *, retry: RetryPolicy | None = None, temperature: float = 0.4, max_tokens: int = 16384):
        self.backend = backend
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.ledger = JudgeLedger()
        self.fitting = WindowFitting(backend, self.ledger)

    def describe(self) -> str:
        model = getattr(self.backend, "model", None) or type(self.backend).__name__
        return f"MetaRM {model!r} with the R-Align release prompt (temperature {self.temperature:g})"

    async def judge(self, request: ReleaseMetaRequest) -> bool | JudgeFailure:
        if not isinstance(request, ReleaseMetaRequest):
            raise TypeError(f"ReleaseMetaJudge answers ReleaseMetaRequest only, got {type(request).__name__}")
        what = f"MetaRM request (pair {request.query_id!r})"

        def render_with_limit(limit: int | None) -> Rendered:
            cut = TextCut(limit)
            return cut.rendered(request.messages_with(cut) if request.messages_with else list(request.messages))

        async def ask(backend, fitted):
            return await answer_once(
                backend, fitted.rendered.messages, meta_verdict, retry=self.retry, ledger=self.ledger,
                request_kind="meta", what=what, temperature=self.temperature, max_tokens=fitted.max_tokens,
            )  # fmt: skip

        try:
            return await self.fitting.send(
                render_with_limit, ask, reserve=min(self.max_tokens, MIN_GENRM_ANSWER_TOKENS),
                max_tokens=self.max_tokens, what=what, fix="serve the MetaRM with a longer --max-model-len",
            )  # fmt: skip
        except JudgeError as exc:
            return exc.as_failure()
