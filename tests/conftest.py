"""Shared fixtures: the real benchmark the package ships and small, real statistics.

Statistics here use batch 2 (not the default 8) so that the suite stays fast; they
are computed by the real models into a temporary cache once per session.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprox.data.benchmark import load_benchmark
from autoprox.data.cache import StatisticsCache
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.zoo_scores import zoo_terminal_set
from autoprox.search.evolution import EvolutionConfig

from autoprox.core.resources import packaged_benchmark_dir

REPO = Path(__file__).resolve().parent.parent
zoo_terminal_set()  # the genomes of the tests may read zoo terminals

#: The ViT-Bench-101 files shipped as package data (``autoprox/resources/vit-bench-101``).
BENCH_DIR = packaged_benchmark_dir()
AF_FILE = BENCH_DIR / "gt_autoformer.pth"
PIT_FILE = BENCH_DIR / "gt_pit.pth"
SMALL_SPEC = InputSpec("gaussian", batch_size=2)
#: The evolution of :func:`small_settings`' search.
SMALL_EVOLUTION = EvolutionConfig(population_size=4, iterations=3, retry_cap=3, top_k=2, seed=5)
#: The evolution of :func:`searched_run`'s search.
SEARCHED_EVOLUTION = EvolutionConfig(population_size=5, iterations=6, retry_cap=4, top_k=2, seed=3)
#: The targets, evolution and outer folds of :func:`finished_protocol`'s evaluation protocol.
PROTOCOL_TARGETS = ("c100_kd", "flower_kd", "chaoyang_kd")
PROTOCOL_EVOLUTION = EvolutionConfig(population_size=4, iterations=2, retry_cap=3, top_k=2, seed=5)
PROTOCOL_FOLDS = 3


@pytest.fixture(scope="session")
def af_bench():
    return load_benchmark(AF_FILE)


@pytest.fixture(scope="session")
def pit_bench():
    return load_benchmark(PIT_FILE)


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory) -> StatisticsCache:
    """A statistics cache shared by the whole session (float16, the default precision)."""
    return StatisticsCache(tmp_path_factory.mktemp("stats-cache"))


@pytest.fixture(scope="session")
def small_spec() -> InputSpec:
    return SMALL_SPEC


@pytest.fixture(scope="session")
def af_small(af_bench):
    """The AutoFormer benchmark cut to its 16 smallest architectures (fast statistics)."""
    from autoprox.spaces.architectures import count_params

    order = sorted(range(len(af_bench)), key=lambda i: count_params(af_bench.archs[i]))
    return af_bench.subset(sorted(order[:16]))


@pytest.fixture(scope="session")
def af_tiny_file(af_small, tmp_path_factory):
    """The 8 smallest AutoFormer architectures in the project's plain-text format: for the tests that compute
    statistics into a fresh cache of their own, where the 16 of ``af_small_file`` only cost time."""
    from autoprox.spaces.architectures import count_params

    order = sorted(range(len(af_small)), key=lambda i: count_params(af_small.archs[i]))
    return benchmark_jsonl(af_small.subset(sorted(order[:8])), tmp_path_factory, "af8.jsonl")


@pytest.fixture(scope="session")
def pit_small(pit_bench):
    """The PiT benchmark cut to its 12 smallest architectures."""
    from autoprox.spaces.architectures import count_params

    order = sorted(range(len(pit_bench)), key=lambda i: count_params(pit_bench.archs[i]))
    return pit_bench.subset(sorted(order[:12]))


def benchmark_jsonl(bench, tmp_path_factory, name: str) -> Path:
    """``bench`` written in the project's plain-text format as ``name`` in a new temporary folder."""
    from autoprox.data.benchmark import write_benchmark_jsonl

    path = tmp_path_factory.mktemp("bench") / name
    write_benchmark_jsonl(bench, path)
    return path


@pytest.fixture(scope="session")
def af_small_file(af_small, tmp_path_factory):
    """The 16 small AutoFormer architectures of ``af_small`` in the project's plain-text format."""
    return benchmark_jsonl(af_small, tmp_path_factory, "af16.jsonl")


def unpacked_protocol(name: str, into: Path) -> Path:
    """A copy of the committed protocol ``runs/protocol/NAME`` in ``into``, with its archive
    unpacked (the whole ``protocol.json`` and the fold runs), as runs/README.md tells a user to."""
    import importlib.util
    import shutil

    spec = importlib.util.spec_from_file_location("runs_archive", REPO / "scripts" / "runs_archive.py")
    runs_archive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runs_archive)
    copy = Path(shutil.copytree(REPO / "runs" / "protocol" / name, into / name))
    runs_archive.unpack(copy)
    return copy


def tracked_files(pattern: str) -> list[Path]:
    """The files git tracks under the repository whose path matches ``pattern`` (a git pathspec glob),
    so that tests of committed runs read what is committed, not whatever else lies in runs/."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z", "--", f":(glob){pattern}"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    return sorted(REPO / name for name in listed.split("\0") if name)


@pytest.fixture(scope="session")
def small_settings(af_small_file, session_cache):
    """The settings of a small search on the 16 AutoFormer architectures of ``af_small_file``."""
    from autoprox.search.settings import SearchSettings

    return SearchSettings(bench=str(af_small_file), batch_size=2, cache_dir=str(session_cache.root), workers=1,
                          search_fraction=0.75, evolution=SMALL_EVOLUTION)


@pytest.fixture(scope="session")
def finished_run(small_settings, tmp_path_factory) -> Path:
    """A finished small search, run once per session; tests copy it before changing anything."""
    from autoprox.search.engine import run_search

    out = tmp_path_factory.mktemp("finished") / "run"
    run_search(small_settings, out, quiet=True)
    return out


@pytest.fixture(scope="session")
def searched_settings(af_small_file, session_cache):
    """The settings of the search of :func:`searched_run` (the search tests and the hall of fame tests read it)."""
    from autoprox.search.settings import SearchSettings

    return SearchSettings(bench=str(af_small_file), batch_size=2, cache_dir=str(session_cache.root), workers=1,
                          search_fraction=0.75, evolution=SEARCHED_EVOLUTION)


@pytest.fixture(scope="session")
def searched_run(searched_settings, tmp_path_factory):
    """A finished search of :data:`SEARCHED_EVOLUTION`, run once per session: its folder and report; tests copy
    the folder before changing anything."""
    from autoprox.search.engine import run_search

    out = tmp_path_factory.mktemp("runs") / "full"
    report = run_search(searched_settings, out, quiet=True)
    return out, report


@pytest.fixture(scope="session")
def protocol_settings(af_small_file, session_cache):
    """The fold searches' settings of :func:`finished_protocol` (the protocol and the bagging tests read it)."""
    from autoprox.search.settings import SearchSettings

    return SearchSettings(bench=str(af_small_file), targets=PROTOCOL_TARGETS, weights={"c100_kd": 2.0}, batch_size=2,
                          cache_dir=str(session_cache.root), workers=1, evolution=PROTOCOL_EVOLUTION)


@pytest.fixture(scope="session")
def finished_protocol(protocol_settings, tmp_path_factory):
    """An evaluation protocol without bags (3 outer folds, a search per fold), run once per session: its folder
    and result; tests read the folder (as --reuse-searches does) or copy it before changing anything."""
    from autoprox.apps.protocols.outer_folds import run_protocol

    out = tmp_path_factory.mktemp("protocol") / "out"
    return out, run_protocol(protocol_settings, out, folds=PROTOCOL_FOLDS, bootstrap=200, quiet=True)


@pytest.fixture(scope="session")
def dask_cluster():
    """A local Dask cluster of two worker processes (``--scheduler local:2``), started once per session for the tests
    that run work on a cluster (test_multispace, test_parallel): its start costs seconds of imports in each worker."""
    pytest.importorskip("distributed")
    from autoprox.core.parallel import make_executor

    executor = make_executor("local:2")
    yield executor
    executor.close()


@pytest.fixture
def run_copy(finished_run, tmp_path) -> Path:
    """A copy of :func:`finished_run` of the test's own."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy)
    return copy
