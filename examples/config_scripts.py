"""Which example script trains a config: the one named by the YAML's filename prefix.

`examples/configs/<prefix>_*.yaml` belongs to `examples/<SCRIPT_FOR_PREFIX[prefix]>.py`. The config
tests (tests/trainers/test_examples.py) and the launch matrix (scripts/launch_matrix.py) both read
the mapping here, so a new script is mapped once and a new config needs no mapping at all.
Plain Python, no imports: reading it costs nothing.
"""

from pathlib import Path

SCRIPT_FOR_PREFIX = {
    "rankbuffer": "train_rankbuffer",
    "matrixreward": "train_matrixreward",
    "baseline": "train_baseline",
    "ralign": "train_ralign_genrm",
    "genrm": "train_genrm_rlhf",
}


def script_for(path: str | Path) -> str:
    """The example script (a module name under examples/) that trains the config at `path`."""
    name = Path(path).name
    prefix = name.split("_", 1)[0]
    if prefix not in SCRIPT_FOR_PREFIX:
        raise ValueError(f"{name}: no example script for prefix {prefix!r}; known: {sorted(SCRIPT_FOR_PREFIX)}")
    return SCRIPT_FOR_PREFIX[prefix]
