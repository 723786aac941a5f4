"""Write a benchmark of a space file's architectures from a benchmark of the same networks.

The example space files re-state the built-in spaces (``spaces/autoformer-ti.json`` is
AutoFormer-Ti with ``embed_dim`` for ``hidden_dim``; ``spaces/pit.toml`` is PiT), so the
accuracies of ViT-Bench-101 are real accuracies of their architectures. The released files
ship with the package (``autoprox/resources/vit-bench-101/``); this script reads one and writes a CSV table of the space
file's configs, with a ``space`` column naming the space file (copied beside the table),
so that the table says which space it belongs to.

    python examples/family_bench.py autoprox/resources/vit-bench-101/gt_autoformer.pth \\
        examples/spaces/autoformer-ti.json /tmp/af-file --rename hidden_dim=embed_dim --count 20
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
from pathlib import Path

from autoprox.data.benchmark import ACC_SUFFIX, load_benchmark


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", help="a benchmark file (.pth, .jsonl, .csv)")
    parser.add_argument("space_file", help="the space file whose configs to write (.json or .toml)")
    parser.add_argument("out", help="folder for the table and a copy of the space file")
    parser.add_argument("--rename", action="append", default=[], metavar="OLD=NEW", help="rename a config key")
    parser.add_argument("--count", type=int, default=None, help="only the first N architectures")
    args = parser.parse_args(argv)

    renames = dict(item.split("=", 1) for item in args.rename)
    bench = load_benchmark(args.bench)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    space_copy = out / Path(args.space_file).name
    shutil.copyfile(args.space_file, space_copy)
    table = out / f"{Path(args.bench).stem}-{Path(args.space_file).stem}.csv"
    count = len(bench) if args.count is None else min(args.count, len(bench))
    with open(table, "w", newline="", encoding="utf-8") as handle:
        handle.write(f"# {count} architectures of {Path(args.bench).name}, written as configs of "
                     f"{space_copy.name} by examples/family_bench.py\n")
        writer = csv.writer(handle)
        writer.writerow(["arch", "space", *(t + ACC_SUFFIX for t in bench.targets)])
        for i in range(count):
            config = {renames.get(k, k): v for k, v in bench.configs[i].items()}
            accs = [bench.accuracies[t][i] for t in bench.targets]
            writer.writerow([json.dumps(config), space_copy.name, *("" if math.isnan(a) else repr(float(a)) for a in accs)])
    written = load_benchmark(table)  # checks every row against the space file
    print(f"wrote {table}: {len(written)} architectures of space {written.space}, targets {', '.join(written.targets)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
