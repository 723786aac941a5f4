"""Helpers of the tests that drive the command line: run a command and read what a user sees, write small
benchmark files, and mount real small file systems that fill up or turn read-only."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

from autoprox.cli.main import main
from autoprox.spaces.architectures import arch_to_config
from tests.conftest import REPO

PUBLISHED = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
             "element_wise_sqrt(sigmoid(F4g)))))")


def entries_of(bench, indices) -> list[dict]:
    """The entries ``indices`` of ``bench`` as a benchmark file holds them."""
    return [{"arch": arch_to_config(bench.archs[i]), **{f"{t}_acc": float(v[i]) for t, v in bench.accuracies.items()}}
            for i in indices]


def written_jsonl(path: Path, entries) -> Path:
    """``entries`` written to ``path`` as JSON Lines."""
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return path


def cli_env(session_cache) -> dict:
    """The environment of a command run as a subprocess with the session's statistics cache."""
    return dict(os.environ, AUTOPROX_CACHE=str(session_cache.root), PYTHONPATH=str(REPO))


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """The exit code, stdout and stderr of ``autoprox ARGV`` run in this process (arguments made strings)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def one_error_line(err: str) -> str:
    """The single ``autoprox: error:`` line of a command's stderr (and nothing like a traceback)."""
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.startswith("autoprox: error:")]
    assert len(lines) == 1, err
    return lines[0]


def warning_lines(err: str) -> list[str]:
    """The ``autoprox: warning:`` lines of a command's stderr."""
    return [line for line in err.splitlines() if line.startswith("autoprox: warning:")]


@contextmanager
def tmpfs(path: Path, size: str, read_only: bool = False):
    """A tmpfs of ``size`` mounted on ``path`` (a real file system that fills up, or with ``read_only`` one no
    file can be created in, root included); skipped where mounting is not allowed."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a real full or read-only file system needs root to mount a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0777" + (",ro" if read_only else ""), "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, options: str) -> None:
    """Mount ``path`` again with ``options`` (``ro`` or ``rw``)."""
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True, capture_output=True)


def fill(path: Path, leave: int) -> Path:
    """A file that fills the file system of ``path`` up to ``leave`` bytes free."""
    filler = path / "filler"
    free = shutil.disk_usage(path).free - leave
    with open(filler, "wb") as handle:
        handle.write(b"\0" * max(0, free))
    return filler


def small_search_argv(tmp_path, af_small_file, cache, *extra: str) -> list[str]:
    """``autoprox search`` on ``af_small_file`` at the smallest useful scale, then ``extra``."""
    return ["search", "--bench", str(af_small_file), "--batch-size", "2", "--workers", "1", "--population", "4",
            "--retry-cap", "2", "--search-fraction", "0.75", "--cache-dir", str(cache), *extra]
