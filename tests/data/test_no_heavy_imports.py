"""data/ and rubrics/ (and their CLI commands) import neither torch nor trl."""

import pkgutil
import subprocess
import sys

import trl_rankreward.data
import trl_rankreward.rubrics


def test_data_and_rubrics_import_without_torch_or_trl():
    modules = [
        info.name
        for package in (trl_rankreward.data, trl_rankreward.rubrics)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    ] + ["trl_rankreward.commands.data", "trl_rankreward.commands.rubrics"]
    assert {"trl_rankreward.data.sources", "trl_rankreward.data.pairwise", "trl_rankreward.rubrics.runner"} <= set(
        modules
    ), modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(','.join(m for m in ('torch', 'trl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported heavy modules: {out.stdout.strip()}"
