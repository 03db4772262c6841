"""Which example script trains a config: the script of the reward method the YAML names.

A judge-reward config names its method (`reward_method: rank_buffer_plus`); the script that trains it is
`trainers.judge_reward.script_for_method(name)`, derived from which trainer serves the method, so the
registry alone lists the methods. Configs of a trainer that is not a reward method name their script by
their filename prefix (`SCRIPT_FOR_PREFIX`). The config tests (tests/trainers/test_examples.py) and the
launch matrix (scripts/launch_matrix.py) both read the mapping here, so a new config needs no mapping.
"""

from pathlib import Path

#: configs of trainers that are not reward methods, by filename prefix (`<prefix>_*.yaml`)
SCRIPT_FOR_PREFIX = {"ralign": "train_ralign_genrm"}


def script_for(path: str | Path) -> str:
    """The example script (a module name under examples/) that trains the config at `path`."""
    import yaml

    name = Path(path).name
    with open(path, encoding="utf-8") as f:
        method = (yaml.safe_load(f) or {}).get("reward_method")
    if method is not None:
        from trl_rankreward.trainers.judge_reward import script_for_method

        return Path(script_for_method(method)).stem
    prefix = name.split("_", 1)[0]
    if prefix not in SCRIPT_FOR_PREFIX:
        raise ValueError(
            f"{name}: no reward_method and no example script for prefix {prefix!r}; name the method "
            f"(reward_method: NAME) or use one of the prefixes {sorted(SCRIPT_FOR_PREFIX)}"
        )
    return SCRIPT_FOR_PREFIX[prefix]
