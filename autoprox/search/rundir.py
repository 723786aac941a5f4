"""The run directory: what a search writes as it goes, and reads back to resume.

======================  ==============================================================
``config.json``         the full configuration (seeds, split, benchmark hash, cache key)
``log.jsonl``           one line per iteration, appended as it happens (unfiltered)
``evaluations.jsonl``   every genome evaluated, with its fitness and iteration
``checkpoint.json``     population and RNG state after the last completed iteration
``best.json``           the best genome with search- and test-split figures
======================  ==============================================================

JSON files are replaced atomically; the ``.jsonl`` logs are appended line by line
and, on resume, cut back to the checkpoint's iteration (a torn last line is dropped).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterator

from autoprox.core.atomic import atomic_write_json, atomic_write_text
from autoprox.core.errors import RunDirError  # noqa: F401 (re-exported)

CONFIG = "config.json"
LOG = "log.jsonl"
EVALUATIONS = "evaluations.jsonl"
CHECKPOINT = "checkpoint.json"
BEST = "best.json"



def read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise RunDirError(f"{path} not found") from None
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None


def read_jsonl(path: Path) -> Iterator[dict]:
    """Records of a JSON Lines file; a torn (unparsable) line is skipped."""
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


class RunDirectory:
    """Paths and writers of one search run."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def file(self, name: str) -> Path:
        return self.path / name

    def exists(self) -> bool:
        return self.file(CONFIG).is_file()

    def create(self, config: dict) -> None:
        """Start a run in a new or empty directory; a directory holding anything else is refused, untouched."""
        if self.exists():
            raise RunDirError(
                f"{self.path} already holds a run; resume it with --resume or choose another --out"
            )
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path} is a file, not a directory; choose another --out")
        if self.path.is_dir() and any(self.path.iterdir()):
            raise RunDirError(f"{self.path} is not empty and holds no run (no {CONFIG}); its files are left as they "
                              "are: choose another --out")
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.file(CONFIG), config)

    def config(self) -> dict:
        if not self.exists():
            raise RunDirError(f"{self.path} is not a run directory (no {CONFIG})")
        return read_json(self.file(CONFIG))

    def update_config(self, config: dict) -> None:
        atomic_write_json(self.file(CONFIG), config)

    def _append(self, name: str, record: dict) -> None:
        with open(self.file(name), "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
            handle.flush()

    def append_log(self, record: dict) -> None:
        self._append(LOG, record)

    def append_evaluation(self, record: dict) -> None:
        self._append(EVALUATIONS, record)

    def log(self) -> list[dict]:
        return list(read_jsonl(self.file(LOG)))

    def evaluations(self) -> list[dict]:
        return list(read_jsonl(self.file(EVALUATIONS)))

    def write_checkpoint(self, state: dict) -> None:
        atomic_write_json(self.file(CHECKPOINT), state)

    def checkpoint(self) -> dict | None:
        path = self.file(CHECKPOINT)
        return read_json(path) if path.is_file() else None

    def write_best(self, best: dict) -> None:
        atomic_write_json(self.file(BEST), best)

    def truncate_logs(self, iteration: int) -> None:
        """Keep only the records of iterations up to ``iteration`` (resume)."""
        for name in (LOG, EVALUATIONS):
            kept = [r for r in read_jsonl(self.file(name)) if int(r.get("iteration", 0)) <= iteration]
            atomic_write_text(self.file(name), "".join(json.dumps(r) + "\n" for r in kept))
