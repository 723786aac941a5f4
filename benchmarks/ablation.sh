#!/usr/bin/env bash
# Issue 6 ablation: one search per configuration for a space, into runs/ablation/<space>-<name>.
# Usage: bash benchmarks/ablation.sh SPACE [NAME ...]   (default: every configuration below)
# The paper's setting is the committed reference run (runs/<space>-reference).
set -euo pipefail
cd "$(dirname "$0")/.."
space="$1"; shift
declare -A CONFIGS=(
  [sum]="--aggregation sum"
  [gene]="--aggregation gene"
  [gene-arch]="--aggregation gene --arch-terminals"
  [gene-arch-cv]="--aggregation gene --arch-terminals --cv-folds 5 --parsimony"
  [free-gene-arch-cv]="--genome free --aggregation gene --arch-terminals --cv-folds 5 --parsimony"
  [mean-cv]="--cv-folds 5 --parsimony"
)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(sum gene gene-arch gene-arch-cv free-gene-arch-cv)
for name in "${names[@]}"; do
  out="runs/ablation/${space}-${name}"
  if [ -f "$out/best.json" ] && grep -q '"finished": true' "$out/best.json"; then
    echo "skip $out (finished)"; continue
  fi
  resume=""; [ -f "$out/config.json" ] && resume="--resume"
  echo "== $out: ${CONFIGS[$name]}"
  if [ -n "$resume" ]; then
    /usr/bin/time -v ${AUTOPROX:-.venv/bin/autoprox} search --resume --out "$out" --quiet
  else
    # shellcheck disable=SC2086
    /usr/bin/time -v ${AUTOPROX:-.venv/bin/autoprox} search --space "$space" --out "$out" --quiet ${CONFIGS[$name]}
  fi
done
