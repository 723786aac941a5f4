#!/usr/bin/env bash
# Install the optional timm extra into .venv without touching the pinned CPU torch.
#
# timm imports torchvision unconditionally, and PyPI's torchvision wheels are CUDA builds
# whose operators fail to register next to the CPU torch (and `pip install timm` alone
# swaps the CPU torch for a CUDA build of several GB). So torchvision comes from
# third_party/wheels (0.21.0+cpu, built against torch 2.13.0 for CPython 3.11, see
# third_party/README.md), everything is installed under a constraints file pinning
# torch==2.13.0 and torchvision==0.21.0+cpu, and the result is checked to be CPU-only.
# On another Python version (or with --build) torchvision is built here from Debian's
# source tarball, once (~13 min on 2 cores), into $AUTOPROX_WHEEL_CACHE; with
# --if-prebuilt (what bootstrap.sh runs) the script installs timm only when a built wheel
# fits, and otherwise says how to build one and leaves the environment as it is.
#
# usage: bash scripts/install_timm.sh [--build | --if-prebuilt]   (VENV_PYTHON=... for another environment)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${VENV_PYTHON:-.venv/bin/python}"
TORCH="2.13.0"
TORCHVISION="0.21.0+cpu"
TIMM="1.0.31"
WHEELS="$PWD/third_party/wheels"
CACHE="${AUTOPROX_WHEEL_CACHE:-$HOME/.cache/autoprox-wheels}"
BUILD=0
PREBUILT_ONLY=0
case "${1:-}" in
    --build) BUILD=1 ;;
    --if-prebuilt) PREBUILT_ONLY=1 ;;
    "") ;;
    *) echo "usage: bash scripts/install_timm.sh [--build | --if-prebuilt]" >&2; exit 2 ;;
esac

if [ ! -x "$PY" ]; then
    echo "install_timm: $PY not found; run scripts/bootstrap.sh first" >&2
    exit 1
fi
"$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH' else 1)" || {
    echo "install_timm: the environment's torch is not $TORCH (the committed torchvision is built against it)" >&2
    exit 1
}
TAG="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
mkdir -p "$CACHE"
have_wheel() { ls "$1"/torchvision-0.21.0+cpu-"$TAG"-"$TAG"-linux_"$(uname -m)".whl >/dev/null 2>&1; }

if [ "$PREBUILT_ONLY" = 1 ] && ! have_wheel "$WHEELS" && ! have_wheel "$CACHE"; then
    echo "install_timm: no torchvision wheel built for $TAG here; timm (optional) not installed." \
         "Build one with: bash scripts/install_timm.sh (about 13 min, once)" >&2
    exit 0
fi
if [ "$BUILD" = 1 ] || { ! have_wheel "$WHEELS" && ! have_wheel "$CACHE"; }; then
    echo "install_timm: building torchvision $TORCHVISION against torch $TORCH for $TAG (about 13 min on 2 cores, once)" >&2
    T="$(mktemp -d)"; A="$T/apt"; mkdir -p "$A/lists/partial" "$A/cache/archives/partial"
    echo "deb-src http://deb.debian.org/debian trixie main" > "$A/sources.list"
    APTO=(-o Dir::Etc::SourceList="$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$A/lists" -o Dir::Cache="$A/cache")
    apt-get "${APTO[@]}" -qq update
    # only the upstream tarball is needed (the .dsc and .debian.tar.xz may be missing on a mirror)
    (cd "$T" && apt-get "${APTO[@]}" -qq source --download-only pytorch-vision=0.21.0-3 || true)
    echo "8642229e73dc4305bcb210acfcdd9077  $T/pytorch-vision_0.21.0.orig.tar.gz" | md5sum -c -
    tar xzf "$T/pytorch-vision_0.21.0.orig.tar.gz" -C "$T"
    "$PY" -m pip install --quiet "setuptools<80" wheel ninja   # the build's setup.py needs pkg_resources
    FORCE_CUDA=0 TORCHVISION_USE_PNG=0 TORCHVISION_USE_JPEG=0 TORCHVISION_USE_WEBP=0 \
    TORCHVISION_USE_NVJPEG=0 TORCHVISION_USE_VIDEO_CODEC=0 TORCHVISION_USE_FFMPEG=0 \
    MAX_JOBS="${MAX_JOBS:-2}" PYTORCH_VERSION="$TORCH" BUILD_VERSION="$TORCHVISION" \
        "$PY" -m pip wheel --quiet --no-build-isolation --no-deps "$T/vision-0.21.0" -w "$CACHE"
    rm -rf "$T"
fi

CONSTRAINTS="$(mktemp)"
trap 'rm -f "$CONSTRAINTS"' EXIT
printf 'torch==%s\ntorchvision==%s\ntimm==%s\n' "$TORCH" "$TORCHVISION" "$TIMM" > "$CONSTRAINTS"
"$PY" -m pip install --quiet --disable-pip-version-check --find-links "$WHEELS" --find-links "$CACHE" \
    -c "$CONSTRAINTS" "timm==$TIMM" 2>&1 | { grep -v "^WARNING: Location" || true; }
"$PY" - <<'EOF'
import torch, torchvision, timm
assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build; the CPU build was replaced"
boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
torchvision.ops.nms(boxes, torch.tensor([1.0, 0.5]), 0.5)  # the compiled operators are registered
timm.create_model("deit_tiny_patch16_224", pretrained=False)
print(f"timm {timm.__version__} ready: torchvision {torchvision.__version__}, torch {torch.__version__} (CPU)")
EOF
