"""`write_fake_release`: a folder laid out like the R-Align authors' repository, with prompts of our own.

Tests of `r_align_release` need the two scripts the setting reads (`generate_model_judgment.py`
with the GenRM's system message, `metarm_judge.py` with the MetaRM prompt and its three fields),
but this repository ships none of the authors' text; these files hold short prompts written for
the tests, in the same module-level string constants. A line that would fail if the file were
run shows that the setting only parses it.
"""

from __future__ import annotations

from pathlib import Path

FAKE_GENRM_SYSTEM = "Test GenRM system: compare A and B, end with \\boxed{A} or \\boxed{B}."
FAKE_META_PROMPT = (
    "Test MetaRM.\n\nPair:\n{context_and_responses}\nReference:\n<golden_judge>\n{golden_explanation}\n</golden_judge>\n"
    "Model:\n<genrm_output>\n{genrm_explanation}\n</genrm_output>\nAnswer with <genrm_analysis> and <final_verdict>."
)
_NOT_TO_RUN = 'raise SystemExit("this file is parsed by the tests, never run")\n'


def write_fake_release(directory: str | Path) -> Path:
    """Write the two scripts into `directory` (created) and return it."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    (root / "generate_model_judgment.py").write_text(
        f"{_NOT_TO_RUN}\nCUSTOM_SYSTEM_PROMPT = {FAKE_GENRM_SYSTEM!r}\n", encoding="utf-8"
    )
    (root / "metarm_judge.py").write_text(
        f"{_NOT_TO_RUN}\nMETA_JUDGE_PROMPT_V1 = {FAKE_META_PROMPT!r}\n", encoding="utf-8"
    )
    return root


__all__ = ["FAKE_GENRM_SYSTEM", "FAKE_META_PROMPT", "write_fake_release"]
