"""Papers are cited by name (docs/references.md), never by the maintainers' working files.

Users get the repository, not our copies of the papers' texts or the planning notes, so a
docstring or page that points at such a file points at nothing. docs/references.md has the
citations; the model card cites the same papers with the same titles.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trl_rankreward.rewards.registry import REWARD_METHODS
from trl_rankreward.trainers.model_card import TRL_CITATION, method_citation

ROOT = Path(__file__).resolve().parents[1]
REFERENCES = (ROOT / "docs" / "references.md").read_text(encoding="utf-8")

#: a path into the maintainers' paper copies (not a URL such as huggingface.co/papers/...), or the design notes
_WORKING_FILE = re.compile(r"(?<![\w./-])papers/|DESIGN" r"\.md")
SCANNED = [
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "trl_rankreward").rglob("*.py")),
    *sorted((ROOT / "tests").rglob("*.py")),
    *sorted((ROOT / "benchmarks").rglob("*.py")),
]


def test_no_references_to_working_files():
    found = []
    for path in SCANNED:
        relative = path.relative_to(ROOT).as_posix()
        if path == Path(__file__).resolve():  # this file spells the pattern out
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if _WORKING_FILE.search(line):
                found.append(f"{relative}:{number}: {line.strip()}")
    assert not found, "cite the paper by name (see docs/references.md) instead of:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_should():
    assert _WORKING_FILE.search("RankBuffer (`papers/rankbuffer.txt`, Sec. 3)")
    assert _WORKING_FILE.search("see DESIGN.md, Layers")
    assert not _WORKING_FILE.search("[DeepSeekMath](https://huggingface.co/papers/2402.03300)")


@pytest.mark.parametrize("heading", ["RankBuffer", "MatrixReward", "R-Align", "TRL"])
def test_every_paper_has_a_section(heading):
    assert f"\n## {heading}\n" in REFERENCES


def test_model_card_citations_agree_with_the_references_page():
    cited = {method_citation(name) for name in REWARD_METHODS} - {None}
    assert len(cited) == 3  # RankBuffer, MatrixReward, R-Align (genrm)
    for entry in [*cited, TRL_CITATION]:
        title = re.search(r"title\s*=\s*\{\{(.+?)\}\}", entry).group(1)
        assert title in REFERENCES, title
        eprint = re.search(r"arXiv:(\d{4}\.\d{4,5})", entry)
        if eprint:
            assert f"https://arxiv.org/abs/{eprint.group(1)}" in REFERENCES


@pytest.mark.parametrize("page", ["references.md", "architecture.md"])
def test_paths_named_on_the_page_exist(page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    missing = []
    for path in set(re.findall(r"`([\w./-]+/[\w.-]+\.(?:py|yaml))`", text)):
        if not any((base / path).exists() for base in (ROOT, ROOT / "trl_rankreward")):
            missing.append(path)
    assert not missing, f"docs/{page} names files that do not exist: {sorted(missing)}"
