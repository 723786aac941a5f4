"""Helpers shared by the benchmark scripts: timing medians and machine description."""

from __future__ import annotations

import os
import platform
import resource
import statistics
import time
from typing import Callable


def median_seconds(function: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """Median wall time of ``repeats`` calls, and every time."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> str:
    import torch

    return (f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def private_mb() -> float:
    """This process's private resident memory now (``RssAnon`` of ``/proc/self/status``), in MB;
    unlike the peak RSS it leaves out file pages a memory map reads, which the kernel can drop."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")
