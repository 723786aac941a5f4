#!/usr/bin/env bash
# Set up (or refresh) the project's virtual environment in .venv:
# the pinned CPU build of torch first, then the project with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "torch==2.13.0" 2>&1 | { grep -v "^WARNING: Location" || true; }
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]" 2>&1 | { grep -v "^WARNING: Location" || true; }
[ "${AUTOPROX_TIMM:-1}" = 0 ] || bash scripts/install_timm.sh --if-prebuilt  # timm extra, ~20 s; AUTOPROX_TIMM=0 skips it
.venv/bin/python -c "import autoprox, primitives, torch, deap, sympy, joblib, scipy; print('autoprox environment ready: torch', torch.__version__)"
