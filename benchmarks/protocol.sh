#!/usr/bin/env bash
# Issue 13, item 1: the evaluation protocol, 5 outer folds of all 100 architectures, for each
# space's default configuration and its committed selected one (runs/<space>-best/config.json).
# Usage: bash benchmarks/protocol.sh [SPACE ...]   (default: autoformer pit)
# Output: runs/protocol/<space>-<configuration>/protocol.json and one run directory per fold.
# Every protocol resumes where it stopped: run the script again after an interruption.
#
# Expected time (2-core machine, warm statistics cache): each fold is a whole 200-iteration search on
# 80 architectures; the committed 60-architecture searches spent 2-12 minutes in evolution
# (runs/*/checkpoint.json "elapsed"), so one configuration takes roughly 20-70 minutes with one fold
# at a time, about half that with FOLD_WORKERS=2 on otherwise idle cores. Each AutoFormer fold holds its
# search part's statistics in memory (about 5 GB for 80 architectures, from BENCHMARKS.md's 3.5 GB
# for 60), so FOLD_WORKERS=2 needs about 10 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
spaces=("$@")
[ ${#spaces[@]} -eq 0 ] && spaces=(autoformer pit)
autoprox=${AUTOPROX:-.venv/bin/autoprox}
fold_workers=${FOLD_WORKERS:-1}

evaluate() {  # evaluate OUT SEARCH-OPTIONS...
  local out="$1"; shift
  if [ -f "$out/protocol.json" ] && grep -q '"finished": true' "$out/protocol.json"; then
    echo "skip $out (finished)"; return
  fi
  echo "== $out"
  if [ -f "$out/protocol.json" ]; then
    /usr/bin/time -v "$autoprox" evaluate --resume --out "$out" --fold-workers "$fold_workers"
  else
    /usr/bin/time -v "$autoprox" evaluate --out "$out" --folds 5 --repeats 1 --protocol-seed 0 \
      --fold-workers "$fold_workers" --workers "${WORKERS:-2}" "$@"
  fi
}

for space in "${spaces[@]}"; do
  # The paper's configuration: template genomes, block mean, statistics only.
  evaluate "runs/protocol/${space}-default" --space "$space"
  # The committed selected configurations (runs/<space>-best/config.json, from the ablation).
  case "$space" in
    autoformer) evaluate "runs/protocol/autoformer-best" --space autoformer --aggregation gene --arch-terminals ;;
    pit) evaluate "runs/protocol/pit-best" --space pit --genome free --aggregation gene --arch-terminals \
           --cv-folds 5 --parsimony ;;
    *) echo "unknown space: $space" >&2; exit 2 ;;
  esac
done
