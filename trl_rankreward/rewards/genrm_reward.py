"""A GenRM as the reward of downstream RLHF (R-Align paper, Sec. 5.1 and Appendix D).

`GenRMPairwiseReward`: every rollout is judged pairwise against the query's reference response
(`Group.references[0]`) and gets

    reward = (2 s - 1) - length_penalty,        s = score of the rollout vs the reference
                                                    (win 1, loss 0; 1/2 steps with both_orders)
    length_penalty = min(max_penalty, coef * max(0, |L_gen - L_ref| / L_ref - tolerance))
    (with only_longer: max(0, L_gen - L_ref) in place of |L_gen - L_ref|)

with lengths WITHOUT thinking (Appendix D, "Length Constraint"). The paper gives only the relative difference;
tolerance, coef, max_penalty, only_longer and the unit (`length_fn`: the policy's tokens in a trainer, whitespace
words by default, which undercount languages without spaces) are ours. An invalid rollout gets -1 - max_penalty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..judging.backends.base import DEFAULT_TEMPERATURE, GENRM_MAX_TOKENS
from ..judging.calls import JudgeLedger, RetryPolicy, complete_and_parse
from ..judging.parsing import AmbiguousAnswer, InvalidAnswer, strip_thinking
from ..judging.prompt_budget import WindowFitting
from ..judging.requests import JudgeError, JudgeFailure, PairwiseRequest, request_kind, text_id
from ..judging.server_settings import build_backend
from .base import Candidates, Group, GroupRewardMethod, RunContext, ScoreOutcome
from .genrm_verdict import display_order, displayed_pair, genrm_fitting, genrm_messages, read_verdict, to_canonical
from .options import DataNeeds, MethodOptions, option
from .pairwise import BOTH_ORDERS_HELP, judge_pairs
from .ralign_release import RAlignRelease, answer_once
from .ralign_reward import RAlignReward


def word_count(text: str) -> int:
    """Whitespace-separated words: the default length unit."""
    return len(text.split())


def length_penalty(
    l_gen: int, l_ref: int, *, coef: float, tolerance: float, max_penalty: float, only_longer: bool = False
) -> float:
    """The length penalty of the module docstring."""
    if l_ref <= 0:
        raise ValueError(
            f"The reference answer has length {l_ref} after removing thinking; the length penalty is relative "
            "to it, so give each query a non-empty reference response"
        )
    difference = max(0, l_gen - l_ref) if only_longer else abs(l_gen - l_ref)
    return min(max_penalty, coef * max(0.0, difference / l_ref - tolerance))


class GenRMJudge:
    """A judge for `PairwiseRequest` backed by a GenRM trained by `RAlignGenRMTrainer`: our prompt (`genrm_verdict`)
    in a display order seeded by `seed` (a request's display "ab"/"ba" overrides it), the last box parsed, an
    unparseable answer retried; with `release`, the R-Align authors' layout (`RAlignRelease`: the query as one
    `<|User Prompt|>`), their first box read once. Either is fitted to the GenRM's window (`judging.prompt_budget`):
    the responses (never the query) are cut to an equal share, and a pair leaving fewer than
    `MIN_GENRM_ANSWER_TOKENS` for the answer fails as `too_long`, unsent."""

    def __init__(
        self,
        backend,
        *,
        seed: int = 0,
        retry: RetryPolicy | None = None,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = GENRM_MAX_TOKENS,
        release: RAlignRelease | None = None,
    ):
        self.backend = backend
        self.release = release
        self.seed = seed
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.ledger = JudgeLedger()
        self.fitting = WindowFitting(backend, self.ledger)

    @classmethod
    def from_settings(cls, settings, *, r_align_release: str | None = None) -> GenRMJudge:
        """A GenRM judge over the server of `settings` (`JudgeServerSettings`), with its retries and decoding."""
        release = RAlignRelease.load(r_align_release) if r_align_release else None
        return cls(build_backend(settings), seed=settings.seed, retry=settings.retry_policy(),
                   temperature=settings.temperature, max_tokens=settings.max_tokens, release=release)  # fmt: skip

    def describe(self) -> str:
        model = getattr(self.backend, "model", None) or type(self.backend).__name__
        return f"GenRM {model!r} (temperature {self.temperature:g}, max_tokens {self.max_tokens}, seed {self.seed})"

    def order_for(self, request: PairwiseRequest) -> str:
        if request.display in ("ab", "ba"):
            return request.display
        return display_order(self.seed, f"{request.query_id}|{request.step}|{text_id(request.a)}|{text_id(request.b)}")

    async def judge(self, request: PairwiseRequest) -> str | JudgeFailure:
        if not isinstance(request, PairwiseRequest):
            raise TypeError(f"GenRMJudge answers PairwiseRequest only, got {type(request).__name__}")
        order, what = self.order_for(request), f"GenRM pairwise request (query_id={request.query_id!r})"
        calls = {"retry": self.retry, "ledger": self.ledger, "request_kind": request_kind(request), "what": what}
        release, conversation = self.release, [{"role": "user", "content": request.query}]

        def messages_of(a: str, b: str) -> list[dict]:
            if release is not None:
                return release.genrm_messages(conversation, *displayed_pair(a, b, order))
            return genrm_messages(request.query, a, b, order)

        def parse_released(text: str) -> str | None:
            shown = release.verdict(text)
            return None if shown is None else to_canonical(shown, order)

        async def ask(backend, fitted):
            messages = fitted.rendered.messages
            decoding = {"temperature": self.temperature, "max_tokens": fitted.max_tokens}
            if release is not None:
                return await answer_once(backend, messages, parse_released, **calls, **decoding)
            parse = lambda out: _canonical_verdict(out.text, order)  # noqa: E731
            return (await complete_and_parse(backend, messages, parse, **calls, **decoding))[0]

        fitting = genrm_fitting(messages_of, request.a, request.b, max_tokens=self.max_tokens, what=what)
        try:
            return await self.fitting.send(ask=ask, **fitting)
        except JudgeError as exc:
            return exc.as_failure()


def _canonical_verdict(text: str, order: str) -> str:
    """The boxed verdict mapped back to canonical A/B; else `AmbiguousAnswer` or `InvalidAnswer`."""
    shown, failure = read_verdict(text)
    if failure == "ambiguous":
        raise AmbiguousAnswer(
            f"GenRM answer holds boxed verdicts for both A and B (not the GenRM's own): {text[-200:]!r}"
        )
    if shown is None:
        raise InvalidAnswer(f"GenRM answer has no single \\boxed{{A|B}}: {text[-200:]!r}")
    return to_canonical(shown, order)


@dataclass
class GenRMOptions(MethodOptions):
    both_orders: bool = option(False, BOTH_ORDERS_HELP)
    length_coef: float = option(1.0, "Slope of the length penalty.")
    length_tolerance: float = option(0.2, "Relative length difference from the reference that costs nothing.")
    max_length_penalty: float = option(1.0, "Cap of the length penalty.")
    only_longer: bool = option(False, "Penalize only rollouts longer than the reference.")
    r_align_release: str | None = option(
        None,
        "Checkout of github.com/lyn22333/R-Align: the GenRM judge asks in the authors' layout and "
        "reads their verdict (GenRMJudge, docs/ralign.md). None: our GenRM prompt.",
    )

    def __post_init__(self):
        super().__post_init__()
        if self.length_coef < 0 or self.length_tolerance < 0 or self.max_length_penalty < 0:
            raise ValueError(
                f"length_coef ({self.length_coef}), length_tolerance ({self.length_tolerance}) and "
                f"max_length_penalty ({self.max_length_penalty}) must all be >= 0"
            )

    def data_needs(self) -> DataNeeds:
        return DataNeeds(references=1, min_group_size=1)


class GenRMPairwiseReward(GroupRewardMethod):
    """Each rollout vs the query's reference (A = rollout, B = reference), minus a length penalty (module
    docstring). Cost: U `PairwiseRequest`s (2U with `both_orders`), one round."""

    name = "genrm"
    options_class = GenRMOptions
    citation = RAlignReward.citation

    def __init__(
        self, judge, options: GenRMOptions | None = None, *, length_fn: Callable[[str], int] | None = None, **kwargs
    ):
        super().__init__(judge, options, **kwargs)
        self.length_fn = length_fn or word_count

    @classmethod
    def for_run(cls, judge, options: GenRMOptions, run: RunContext) -> GenRMPairwiseReward:
        return cls(judge, options, answer_format=run.answer_format, seed=run.seed, length_fn=run.length_fn)

    def penalty(self, answer: str, reference: str) -> float:
        """Length penalty of a final answer against a reference, thinking removed from both."""
        return length_penalty(
            self.length_fn(strip_thinking(answer)),
            self.length_fn(strip_thinking(reference)),
            coef=self.options.length_coef,
            tolerance=self.options.length_tolerance,
            max_penalty=self.options.max_length_penalty,
            only_longer=self.options.only_longer,
        )

    async def score_group(self, group: Group, candidates: Candidates, *, epoch: int, step: int) -> ScoreOutcome:
        if not group.references:
            raise ValueError(
                f"GenRMPairwiseReward compares rollouts with a reference response, but group {group.query_id!r} "
                "has none; add a 'references' column (best first) to the dataset"
            )
        reference = group.references[0]
        texts = [(answer, reference) for answer in candidates.answers]
        scores = await judge_pairs(self.judge, group, texts, step=step, both_orders=self.options.both_orders)
        penalties = [self.penalty(answer, reference) for answer in candidates.answers]
        values = [2.0 * s - 1.0 - p for s, p in zip(scores, penalties, strict=True)]
        details = {
            "requests": len(texts) * (2 if self.options.both_orders else 1),
            "rounds": 1 if texts else 0,
            "win_rate": sum(scores) / len(scores) if scores else None,
            "length_penalty": sum(penalties) / len(penalties) if penalties else None,
        }
        return ScoreOutcome(values, invalid_reward=-1.0 - self.options.max_length_penalty, details=details)

    def step_metrics(self, results):
        out = super().step_metrics(results)
        for key in ("win_rate", "length_penalty"):
            values = [r.details[key] for r in results if r.details.get(key) is not None]
            if values:
                out[f"genrm/{key}"] = sum(values) / len(values)
        return out
