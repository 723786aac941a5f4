"""Files shipped inside the package: the ViT-Bench-101 ground truth and the recommended proxies.

They are package data (``autoprox/resources/``), so they are there wherever autoprox is
installed, from a wheel or from a clone, whatever the working directory.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: Folder of the packaged ViT-Bench-101 files (``gt_autoformer.pth``, ``gt_pit.pth``, NOTICE).
BENCHMARK_FOLDER = "vit-bench-101"
#: Folder of the packaged recommended-proxy manifest and the proxy files it names.
RECOMMENDED_FOLDER = "recommended"


def resource_dir(name: str) -> Path:
    """The packaged folder ``autoprox/resources/NAME`` as a file-system path."""
    return Path(str(resources.files("autoprox").joinpath("resources", name)))


def packaged_benchmark_dir() -> Path:
    """Where the packaged ViT-Bench-101 files lie."""
    return resource_dir(BENCHMARK_FOLDER)


def packaged_manifest() -> Path:
    """The packaged recommended-proxy manifest (``recommended.json``)."""
    return resource_dir(RECOMMENDED_FOLDER) / "recommended.json"


__all__ = ["BENCHMARK_FOLDER", "RECOMMENDED_FOLDER", "packaged_benchmark_dir", "packaged_manifest", "resource_dir"]
