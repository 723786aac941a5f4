#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment in .venv:
# the pinned CPU build of torch first, then the project with its test extras,
# every install held to constraints.txt so that no extra can replace that torch.
#
# Environment: PYTHON (default python3) makes the venv; AUTOPROX_TORCH_INDEX (default
# PyTorch's CPU wheel index) is where the CPU torch comes from; set it empty to use
# pip's configured indexes only.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_INDEX="${AUTOPROX_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
TORCH_PIN="$(grep -E '^torch==' constraints.txt)"
PIP=(.venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -c constraints.txt)

say() { printf 'bootstrap: %s\n' "$*"; }
quiet_pip() {  # pip's own chatter, less the lines that say nothing
    "${PIP[@]}" "$@" 2>&1 | { grep -v -E '^(WARNING: Location|Requirement already satisfied|Looking in)' || true; }
}

if [ ! -x .venv/bin/python ]; then
    say "creating the virtual environment .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
else
    say "using the existing virtual environment .venv"
fi

installed="$(.venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null || true)"
if [ "torch==$installed" = "$TORCH_PIN" ]; then
    say "torch $installed (CPU build) already installed"
else
    say "installing ${TORCH_PIN} (the CPU build, about 200 MB; a few minutes on a slow link)${installed:+, replacing torch $installed}"
    # pip's configured indexes first (a local wheel, a mirror); PyTorch's CPU index only if they lack the build
    if ! "${PIP[@]}" --quiet "$TORCH_PIN" >/dev/null 2>&1; then
        [ -n "$TORCH_INDEX" ] || { say "no ${TORCH_PIN} on pip's indexes; set AUTOPROX_TORCH_INDEX"; exit 1; }
        say "not on pip's configured indexes: fetching it from $TORCH_INDEX"
        quiet_pip --quiet "$TORCH_PIN" --extra-index-url "$TORCH_INDEX"
    fi
fi

say "installing autoprox in editable mode with its dependencies (numpy, scipy, deap, joblib, sympy, pillow, matplotlib) and its test tools (pytest, pytest-xdist, hypothesis)"
quiet_pip --quiet -e ".[test]"

if [ "${AUTOPROX_TIMM:-1}" = 0 ]; then
    say "skipping timm (AUTOPROX_TIMM=0)"
else
    say "installing timm with the CPU torchvision of third_party/wheels (about 20 s; AUTOPROX_TIMM=0 skips it)"
    bash scripts/install_timm.sh --if-prebuilt
fi

.venv/bin/python -c "import autoprox, autoprox.primitives, torch, deap, sympy, joblib, scipy; print('bootstrap: autoprox environment ready: torch', torch.__version__)"
say "to add a package later without losing the CPU torch: .venv/bin/python -m pip install -c constraints.txt PACKAGE"
