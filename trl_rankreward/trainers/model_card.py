"""The part of a model card that says how the model was trained: method, judge, data, cost (`training_section`),
which TRL's card (trainer and base model only) lacks, and `compose_card`, which puts it first in the card.
Judge server URLs are left out: they can be private hosts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ..rewards.registry import REWARD_METHODS, reward_method_class

#: TRL's own entry (its README and CITATION.cff), as TRL's part of the card also gives it
TRL_CITATION = """@software{vonwerra2020trl,
    title   = {{TRL: Transformers Reinforcement Learning}},
    author  = {von Werra, Leandro and Belkada, Younes and Tunstall, Lewis and Beeching, Edward and Thrush, Tristan
               and Lambert, Nathan and Huang, Shengyi and Rasul, Kashif and Gallou{\\'e}dec, Quentin},
    license = {Apache-2.0},
    url     = {https://github.com/huggingface/trl},
    year    = 2020,
}"""

QUICK_START = """## Quick start

```python
from transformers import pipeline

generator = pipeline("text-generation", model="{model}", device_map="auto")
messages = [{{"role": "user", "content": "Explain in two sentences why the sky is blue."}}]
print(generator(messages, max_new_tokens=128, return_full_text=False)[0]["generated_text"])
```"""


def training_section(
    *,
    method: str,
    algorithm: str,
    settings: Mapping[str, Any],
    judge: str,
    base_model: str | None,
    dataset: str | None,
    usage: Mapping[str, float],
    method_state: Mapping[str, float],
    evaluation: str | None = None,
) -> str:
    """Markdown: the headline (method, algorithm, base model, data, judge, its cost, the win rate if evaluated), then
    the settings, the cost in full and the method's state."""
    lines = ["## How this model was trained", ""]
    lines.append(f"- **Reward method:** `{method}`")
    lines.append(f"- **Training:** {algorithm}, with trl-rankreward on TRL")
    lines.append(f"- **Base model:** {base_model_text(base_model)}")
    lines.append(f"- **Dataset:** {dataset or 'not recorded'}")
    lines.append(f"- **Judge:** {judge}")
    cost = [f"{_number(value)} {key}" for key, value in usage.items() if "calls" in key or "tokens" in key]
    lines.append(f"- **Judge cost:** {', '.join(cost[:4]) or 'none recorded'}")
    if evaluation:
        lines.append(f"- **Evaluation:** {evaluation}")
    lines += ["", "### Settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| `{key}` | {'not set' if value is None else f'`{value!r}`'} |" for key, value in sorted(settings.items())]
    lines += ["", "### Judge cost of this run", "", "| quantity | total |", "|---|---|"]
    lines += [f"| {key} | {_number(value)} |" for key, value in usage.items()]
    if method_state:
        lines += ["", "### Reward method state at the end", "", "| statistic | value |", "|---|---|"]
        lines += [f"| `{key}` | {_number(value)} |" for key, value in sorted(method_state.items())]
    return "\n".join(lines)


def base_model_text(name: str | None) -> str:
    """The base model as given: a link for a Hub id, the path itself for a local folder."""
    if not name:
        return "not recorded"
    if os.path.isdir(os.path.expanduser(name)):
        return f"`{name}` (a local folder)"
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name):
        return f"[{name}](https://huggingface.co/{name})"
    return f"`{name}`"


def describe_judge(judge) -> str:
    """A judge as a reader can use it: its own `describe()`, else its class name (never a repr with an address)."""
    describe = getattr(judge, "describe", None)
    return describe() if callable(describe) else type(judge).__name__


def redact_urls(text: str, urls: list[str]) -> str:
    """`text` with each judge server URL replaced by `<judge server>` (URLs can be private hosts)."""
    for url in sorted(urls, key=len, reverse=True):
        text = text.replace(url, "<judge server>")
    return text


def redact_server_urls(config: dict[str, Any]) -> dict[str, Any]:
    """`config` (a `TrainingArguments.to_dict()`) with every `*base_urls` value redacted as `redact_urls` does."""
    redacted = dict(config)
    for key, value in config.items():
        if key.endswith("base_urls") and value:
            urls = [value] if isinstance(value, str) else list(value)
            redacted[key] = [redact_urls(url, urls) for url in urls]
    return redacted


def method_citation(name: str) -> str | None:
    """BibTeX of the paper behind reward method `name`; None for a method of no paper or not in the registry."""
    return reward_method_class(name).citation if name in REWARD_METHODS else None


def compose_card(card_path: str, section: str, *, citation: str | None, model_ref: str) -> None:
    """Rewrite TRL's card at `card_path`: its front matter, a title, `section`, a quick start loading `model_ref`,
    TRL's framework versions, the citations (the rest of TRL's text is wrong for a local base model or PPO)."""
    with open(card_path, encoding="utf-8") as f:
        text = f.read()
    _, front, body = text.split("---\n", 2)
    versions = re.search(r"^### Framework versions\n\n(.*?)(?:\n\n|\Z)", body, re.MULTILINE | re.DOTALL)
    title = f"# Model Card for {model_ref.rstrip('/').rsplit('/', 1)[-1]}"  # the Hub repo's or the folder's name
    parts = [f"---\n{front}---", title, section, QUICK_START.format(model=model_ref)]
    if versions:
        parts.append(f"### Framework versions\n\n{versions.group(1)}")
    parts += ["## Citations", *(f"```bibtex\n{c}\n```" for c in (citation, TRL_CITATION) if c)]
    with open(card_path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts) + "\n")


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.4g}"
