"""The part of a model card that says how the model was trained: method, judge, data, cost.

TRL's card (`create_model_card`) knows the trainer and the base model only. A reader of a
pushed checkpoint also needs the reward method and its settings, which judge scored the
rollouts (its model and templates; server URLs are left out, they are private), what the
judging cost, what state the method built (RankBuffer's buffers), and whom to cite.
`training_section` renders that from plain values; the trainers append it to TRL's card.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: BibTeX of the papers whose methods the trainers implement, by registry name
#: (docs/references.md has the full list).
CITATIONS = {
    "rank_buffer": """@misc{yang2026rankbuffer,
    title  = {{RankBuffer: Efficient Ranking-Based Rewards for Open-Ended Generation}},
    author = {Zixuan Yang and Yiqun Chen and Qi Liu and Wei Yang and Erhan Zhang and Liyi Chen and Qimeng Wang
              and Yan Gao and Jiaxin Mao},
    year   = 2026,
}""",
    "matrix": """@misc{shen2026matrixreward,
    title  = {{MatrixReward: Reward from Rubric Matrix for Open-Ended Generation}},
    author = {Zihan Shen and Qi Liu and Zixuan Yang and Yiqun Chen and Chenglong Zhao and Xiaozhao Wang and Lei He},
    year   = 2026,
    eprint = {arXiv:2610.00389},
}""",
    "ralign": """@misc{ralign2026,
    title = {{R-Align: Enhancing Generative Reward Models through Rationale-Centric Meta-Judging}},
    year  = 2026,
    note  = {Code and prompts: https://github.com/lyn22333/R-Align},
}""",
}
CITATIONS["genrm"] = CITATIONS["ralign"]

#: TRL's own entry (its README and CITATION.cff), as TRL's part of the card also gives it
TRL_CITATION = """@software{vonwerra2020trl,
    title   = {{TRL: Transformers Reinforcement Learning}},
    author  = {von Werra, Leandro and Belkada, Younes and Tunstall, Lewis and Beeching, Edward and Thrush, Tristan
               and Lambert, Nathan and Huang, Shengyi and Rasul, Kashif and Gallou{\\'e}dec, Quentin},
    license = {Apache-2.0},
    url     = {https://github.com/huggingface/trl},
    year    = 2020,
}"""

SECTION_START = "<!-- trl-rankreward:training -->"


def training_section(
    *,
    method: str,
    settings: Mapping[str, Any],
    judge: str,
    base_model: str | None,
    dataset: str | None,
    usage: Mapping[str, float],
    method_state: Mapping[str, float],
) -> str:
    """Markdown: how the model was trained (method, judge, data, judge cost, method state, citations)."""
    lines = [SECTION_START, "## Training with trl-rankreward", ""]
    lines.append(f"- **Reward method:** `{method}` (trained with trl-rankreward on TRL's GRPO)")
    lines.append(f"- **Base model:** {base_model or 'not recorded'}")
    lines.append(f"- **Dataset:** {dataset or 'not recorded'}")
    lines.append(f"- **Judge:** {judge}")
    lines += ["", "| setting | value |", "|---|---|"]
    lines += [f"| `{key}` | `{value!r}` |" for key, value in sorted(settings.items())]
    lines += ["", "### Judge cost of this run", "", "| quantity | total |", "|---|---|"]
    lines += [f"| {key} | {_number(value)} |" for key, value in usage.items()]
    if method_state:
        lines += ["", "### Reward method state at the end", "", "| statistic | value |", "|---|---|"]
        lines += [f"| `{key}` | {_number(value)} |" for key, value in sorted(method_state.items())]
    lines += ["", "### Citations", ""]
    for citation in (CITATIONS.get(method), TRL_CITATION):
        if citation:
            lines += ["```bibtex", citation, "```", ""]
    return "\n".join(lines)


def redact_urls(text: str, urls: list[str]) -> str:
    """`text` with each judge server URL replaced by `<judge server>` (URLs can be private hosts)."""
    for url in sorted(urls, key=len, reverse=True):
        text = text.replace(url, "<judge server>")
    return text


def add_section(card_path: str, section: str) -> None:
    """Rewrite the card at `card_path` with its trl-rankreward section replaced by `section` (or appended)."""
    with open(card_path, encoding="utf-8") as f:
        head = f.read().split(SECTION_START, 1)[0].rstrip()
    with open(card_path, "w", encoding="utf-8") as f:
        f.write(f"{head}\n\n{section}\n")


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.4g}"
