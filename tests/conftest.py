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

from autoprox.core.resources import packaged_benchmark_dir

REPO = Path(__file__).resolve().parent.parent

#: The slow tests: every test of a file named here, or the tests named ``FILE::TEST`` (a
#: parametrised test with all its cases). Chosen by their own time in ``--durations=0``
#: (BENCHMARKS.md, the test suite): each takes seconds to minutes, together most of the suite.
#: ``python -m pytest -m "not slow" -q`` is the quick check; CI and the README run everything.
SLOW_TESTS: frozenset[str] = frozenset({
    # whole searches, protocols, transfer studies and their resumes (module fixtures run searches)
    "tests/test_api.py", "tests/test_bagging.py", "tests/test_fitness_modes.py", "tests/test_generalise.py",
    "tests/test_halloffame.py", "tests/test_patience.py", "tests/test_protocol.py", "tests/test_restarts.py",
    "tests/test_search.py", "tests/test_selection.py", "tests/test_transfer.py", "tests/test_failures.py",
    "tests/test_curves.py",
    # every committed or recorded proxy replayed on real statistics
    "tests/test_speed.py", "tests/test_counted.py", "tests/test_kernels.py", "tests/test_spread_terminals.py",
    # whole proxy zoos and ranking tables, ensembles on real statistics, Dask clusters, timm models, fuzzing
    "tests/test_zoo.py", "tests/test_ranking.py", "tests/test_ensemble.py", "tests/test_parallel.py",
    "tests/test_timm_models.py", "tests/test_fuzz_parsers.py",
    # single tests of seconds to minutes in files that are otherwise quick
    "tests/test_cli.py::test_rank_table_of_a_comma_list_in_each_format",
    "tests/test_cli.py::test_cache_build_reports_what_it_computed",
    "tests/test_cli.py::test_search_seed_proxies_autoprox_a_and_p_and_refusals",
    "tests/test_cli.py::test_rank_single_zoo_proxy_keeps_the_single_proxy_output",
    "tests/test_cli.py::test_rank_a_genome_and_a_proxy_file",
    "tests/test_export.py::test_reference_runs_export_proxies_that_reproduce_the_engine",
    "tests/test_export.py::test_exported_modules_reproduce_the_engine_in_a_fresh_interpreter",
    "tests/test_export.py::test_descriptors_read_from_the_models_equal_the_engines",
    "tests/test_export.py::test_descriptors_can_be_given_when_the_model_does_not_tell",
    "tests/test_vitsearch.py::test_too_many_samples_for_a_narrow_budget_says_so",
    "tests/test_vitsearch.py::test_genome_scores_match_the_engine",
    "tests/test_fitness.py::test_two_seeds_average_the_scores",
    "tests/test_fitness.py::test_each_target_uses_its_class_count",
    "tests/test_context.py::test_show_export_curves_and_rank_on_a_run_copied_elsewhere",
    "tests/test_context.py::test_search_refuses_a_non_empty_folder_that_is_not_a_run_and_leaves_it_untouched",
    "tests/test_space_plugins.py::test_commands_on_autoformer_s",
    "tests/test_space_plugins.py::test_commands_on_a_space_given_as_a_file",
    "tests/test_space_plugins.py::test_space_name_carries_the_definition_to_worker_processes",
    "tests/test_cache.py::test_build_cache_workers_give_identical_results",
    "tests/test_proxies.py::test_every_registered_proxy_scores_a_tiny_benchmark",
    # a wheel built and used from an empty folder; searches with an operator of one's own
    "tests/test_wheel.py",
    # the newcomer cases that run searches, protocols or the README's tour
    "tests/test_newcomer.py::test_the_readme_tour_runs_in_a_scratch_copy_and_the_committed_file_checks_pass",
    "tests/test_newcomer.py::test_every_search_ends_comparing_its_proxy_with_the_parameter_count_on_the_test_split",
    "tests/test_newcomer.py::test_patience_says_why_the_search_stopped",
    "tests/test_newcomer.py::test_sigterm_stops_at_once_and_leaves_the_test_figures_to_the_resume",
    "tests/test_newcomer.py::test_the_progress_line_shows_the_best_fitness_so_far",
    "tests/test_newcomer.py::test_parallel_steps_keep_their_workers_and_report_progress_as_results_arrive",
    "tests/test_newcomer.py::test_an_interrupted_evaluate_gives_its_own_quoted_resume_hint",
    "tests/test_newcomer.py::test_the_protocol_folder_has_its_own_lock",
    "tests/test_newcomer.py::test_a_free_tree_seeds_a_free_genome_search",
    "tests/test_newcomer.py::test_vit_search_takes_the_space_a_space_file_registers",
    "tests/test_newcomer.py::test_rank_a_run_proxy_finds_its_benchmark_and_the_table_uses_its_test_split",
    "tests/test_newcomer.py::test_evaluate_refuses_folds_too_small_to_rank",
    "tests/test_custom_primitive.py::test_a_registered_primitive_is_searched_recorded_and_exported",
    "tests/test_custom_primitive.py::test_a_run_with_a_primitive_not_registered_is_refused_on_resume_and_export",
    "tests/test_custom_primitive.py::test_registering_a_primitive_changes_no_default_search",
})
#: The ViT-Bench-101 files shipped as package data (``autoprox/resources/vit-bench-101``).
BENCH_DIR = packaged_benchmark_dir()
AF_FILE = BENCH_DIR / "gt_autoformer.pth"
PIT_FILE = BENCH_DIR / "gt_pit.pth"
SMALL_SPEC = InputSpec("gaussian", batch_size=2)


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


def pytest_collection_modifyitems(config, items):
    """Mark the tests :data:`SLOW_TESTS` names as ``slow`` (registered in pyproject.toml)."""
    for item in items:
        path, _, name = item.nodeid.partition("::")
        if path in SLOW_TESTS or f"{path}::{name.split('[')[0]}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
