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
    # DeepSpeed compiles the CPU ops of the ZeRO-3 CPU paths (deepspeed_shm_comm, cpu_adam) on first use: build
    # them once here, so that no launch or test pays for (or is killed in) a build. Without deepspeed: nothing.
    if python -c "import deepspeed" >/dev/null 2>&1; then
        DS_ACCELERATOR=cpu python -m trl_rankreward.trainers.extension_builds >"$VENV/deepspeed-ops.log" 2>&1 ||
            echo "setup_venv.sh: building DeepSpeed's CPU ops failed ($VENV/deepspeed-ops.log); ZeRO-3 runs build them on first use" >&2
    fi
    touch "$stamp"
fi
