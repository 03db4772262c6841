# Sourced by scripts/test.sh and scripts/quickstart.sh: create and activate .venv once.
# torch is pinned to the CPU build first; an unpinned torch would pull a multi-GB CUDA build.
VENV="${TRL_RANKREWARD_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
stamp="$VENV/.installed-$(cat setup.cfg pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    python -m pip install -q --upgrade pip
    python -m pip install -q "torch==2.13.0"
    python -m pip install -q -e ".[embedded,dev]"
    touch "$stamp"
fi
