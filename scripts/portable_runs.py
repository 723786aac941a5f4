"""Make run directories made before autoprox recorded benchmarks portably open on any machine.

Usage: python scripts/portable_runs.py RUNS_DIR [--check] [--tracked]

Runs written before the run object (``RunContext``) recorded their benchmark by the
absolute path of the machine that made them (``/work/shared/vit-bench-101/gt_pit.pth``)
and the cache directory of that machine. This rewrites, in every ``config.json``,
``transfer.json`` and ``vit_search.json`` below RUNS_DIR, a benchmark path whose file
lies in the usual places (``autoprox.data.benchmark.bench_search_dirs``) with the
recorded sha256 to its bare file name, drops the recorded cache directory, and cuts the
program path in the recorded command to its name. Files are replaced atomically; nothing
else is touched. ``--check`` only lists the files that still hold an absolute path and
exits 1 if there are any; ``--tracked`` reads only the files git tracks (a checkout's
committed runs, not output of one's own written beside them).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from autoprox.core.atomic import atomic_write_json
from autoprox.data.benchmark import bench_search_dirs, file_sha256

RUN_FILES = ("config.json", "transfer.json", "vit_search.json")


def portable_name(path: str, sha256: str | None) -> str:
    """``path``'s file name when a file of that name and digest lies in the usual places, else ``path``."""
    name = Path(path).name
    for directory in bench_search_dirs():
        candidate = directory / name
        if candidate.is_file() and (sha256 is None or file_sha256(candidate) == sha256):
            return name
    return path


def make_portable(data: dict, out_dir: Path) -> dict:
    """The same record with machine paths replaced (see the module docstring)."""
    sha256 = (data.get("benchmark") or {}).get("sha256") or data.get("benchmark_sha256")
    settings = data.get("settings")
    if isinstance(settings, dict) and isinstance(settings.get("bench"), str) and Path(settings["bench"]).is_absolute():
        settings["bench"] = portable_name(settings["bench"], sha256)
    benchmark = data.get("benchmark")
    if isinstance(benchmark, dict) and isinstance(benchmark.get("path"), str):
        if Path(benchmark["path"]).is_absolute():
            benchmark["path"] = portable_name(benchmark["path"], sha256)
        benchmark.setdefault("file", Path(benchmark["path"]).name)
    stats = data.get("stats")
    if isinstance(stats, dict):
        stats.pop("cache_dir", None)
    command = data.get("command")
    if isinstance(command, list) and command:
        command[0] = Path(str(command[0])).name
        for index, word in enumerate(command[:-1]):
            if word == "--out" and Path(str(command[index + 1])).is_absolute():
                command[index + 1] = str(out_dir)
    return data


def absolute_paths(text: str) -> bool:
    return any(f'"{root}' in text for root in ("/work/", "/root/", "/tmp/", "/home/"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", type=Path)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--tracked", action="store_true", help="only the files git tracks")
    args = parser.parse_args(argv)
    left = []
    paths = sorted(p for name in RUN_FILES for p in args.runs.rglob(name))
    if args.tracked:
        listed = subprocess.run(["git", "-C", str(args.runs), "ls-files", "-z"], capture_output=True, check=True)
        tracked = {(args.runs / name).resolve() for name in listed.stdout.decode().split("\0") if name}
        paths = [p for p in paths if p.resolve() in tracked]
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if args.check:
            if absolute_paths(text):
                left.append(path)
            continue
        data = json.loads(text)
        fixed = make_portable(json.loads(text), path.parent)
        if fixed != data:
            atomic_write_json(path, fixed)
            print(f"rewrote {path}")
        if absolute_paths(path.read_text(encoding="utf-8")):
            left.append(path)
    for path in left:
        print(f"still holds an absolute path: {path}", file=sys.stderr)
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main())
