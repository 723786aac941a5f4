#!/usr/bin/env bash
# Issue 6, per-target search: one search per target of a space, into runs/per-target/<space>-<target>.
# Usage: bash benchmarks/per_target.sh SPACE [TARGET ...]   (default: every target of the space)
# Configuration: the joint search's richest template setting (aggregation gene, architecture
# terminals, 5-fold CV, parsimony), 200 iterations, seed 0, split seed 0; only --targets differs.
set -euo pipefail
cd "$(dirname "$0")/.."
space="$1"; shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  case "$space" in
    autoformer) targets=(c100_kd flower_kd chaoyang_kd imagenet_super) ;;
    pit) targets=(c100_kd flower_kd chaoyang_kd) ;;
    *) echo "unknown space: $space" >&2; exit 2 ;;
  esac
fi
for target in "${targets[@]}"; do
  out="runs/per-target/${space}-${target}"
  if [ -f "$out/best.json" ] && grep -q '"finished": true' "$out/best.json"; then
    echo "skip $out (finished)"; continue
  fi
  echo "== $out"
  if [ -f "$out/config.json" ]; then
    /usr/bin/time -v ${AUTOPROX:-.venv/bin/autoprox} search --resume --out "$out" --quiet
  else
    /usr/bin/time -v ${AUTOPROX:-.venv/bin/autoprox} search --space "$space" --out "$out" --quiet --workers "${WORKERS:-1}" \
      --targets "$target" --aggregation gene --arch-terminals --cv-folds 5 --parsimony
  fi
done
