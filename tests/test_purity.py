"""`rewards/` and `judging/` must import neither torch nor trl (docs/architecture.md, The purity rule)."""

import pkgutil
import subprocess
import sys

import trl_rankreward.judging
import trl_rankreward.rewards

# Modules that legitimately wrap heavy libraries behind an optional extra.
OPTIONAL_HEAVY = {
    "trl_rankreward.judging.backends.transformers_backend",  # in-process model: imports torch by design
    "trl_rankreward.judging.quality_judge",  # sentence-transformers, loaded lazily inside the judge
}


def _modules(package) -> list[str]:
    names = []
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name not in OPTIONAL_HEAVY:
            names.append(info.name)
    return names


def test_rewards_and_judging_import_without_torch_or_trl():
    modules = _modules(trl_rankreward.rewards) + _modules(trl_rankreward.judging)
    assert modules, "no modules found"
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in ('torch', 'trl') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported heavy modules: {out.stdout.strip()}"


#: modules outside rewards/ and judging/ that must stay as light: the judge-hacking audit (run before training,
#: in `probe-judge`), the monitor's core, which the trainer wraps, and the judging workers (each a process)
LIGHT = ["trl_rankreward.evaluation.audit", "trl_rankreward.trainers.hacking_monitor",
         "trl_rankreward.testing.biased_judges", "trl_rankreward.trainers.judge_workers"]  # fmt: skip


def test_audit_and_monitor_import_without_torch_or_trl():
    code = (
        "import importlib, sys\n"
        f"for m in {LIGHT!r}: importlib.import_module(m)\n"
        "print(','.join(m for m in ('torch', 'trl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported heavy modules: {out.stdout.strip()}"
