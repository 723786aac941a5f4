"""The test split's statistics computed in a background process during a search's evolution (issue 32:
the default search spent 0:40 after its evolution on them): the same entries, nothing half written when
it is stopped, and the same search."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import numpy as np
import pytest

from autoprox.data.cache import StatisticsCache, StatsRequest
from autoprox.data.prefetch import Prefetch
from autoprox.networks.statistics import STAT_NAMES
from autoprox.search.engine import run_search


def _leftovers(root) -> list:
    """Anything under ``root`` that is not a finished entry (temporary files above all)."""
    return [p for p in root.rglob("*") if p.is_file() and (p.suffix != ".npz" or p.name.startswith("."))]


def test_a_prefetch_writes_the_entries_a_plain_cache_computes(af_small, small_spec, tmp_path):
    requests = [StatsRequest(arch, small_spec, 0, 100) for arch in af_small.archs[:3]]
    cache = StatisticsCache(tmp_path / "ahead")
    cache.get(requests[0])  # one entry already there: the prefetch leaves it alone
    progress = []
    with Prefetch(cache, requests).start() as prefetch:
        assert prefetch.started and prefetch.missing == requests[1:]
        deadline = time.monotonic() + 300
        while prefetch.remaining and time.monotonic() < deadline:  # as during an evolution: it ends first
            time.sleep(0.2)
        assert prefetch.wait(lambda done, total: progress.append((done, total))) == 2
    assert progress == []  # both ended before: (3, 3) is left to the final report's own progress line
    plain = StatisticsCache(tmp_path / "plain")
    for request in requests:
        assert cache.contains(request)
        for mine, theirs in zip(cache.load(request), plain.get(request)):
            for name in STAT_NAMES:
                np.testing.assert_allclose(mine[name].numpy(), theirs[name].numpy(), rtol=1e-6, atol=0)
    assert _leftovers(tmp_path / "ahead") == []


def test_a_prefetch_with_nothing_missing_starts_no_process(af_small, small_spec, tmp_path):
    request = StatsRequest(af_small.archs[0], small_spec, 0, 100)
    cache = StatisticsCache(tmp_path / "cache")
    cache.get(request)
    prefetch = Prefetch(cache, [request]).start()
    assert not prefetch.started and prefetch.wait() == 0


def test_a_stopped_prefetch_ends_its_process_and_leaves_no_partial_entry(af_small, small_spec, tmp_path):
    requests = [StatsRequest(arch, small_spec, 0, 100) for arch in af_small.archs]
    cache = StatisticsCache(tmp_path / "cache")
    prefetch = Prefetch(cache, requests).start()
    executor = prefetch._executor
    deadline = time.monotonic() + 60
    while (prefetch._running is None or not executor._processes) and time.monotonic() < deadline:
        time.sleep(0.05)  # a task handed to the process: stopped while it runs
    processes = list(executor._processes.values())
    prefetch.stop()
    assert not prefetch.started
    deadline = time.monotonic() + 30  # killed at once; reaped within moments
    while any(process.is_alive() for process in processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes and not any(process.is_alive() for process in processes)
    assert _leftovers(tmp_path / "cache") == []
    written = [r for r in requests if cache.contains(r)]
    assert len(written) < len(requests)  # stopped before its end: the rest was dropped
    for request in written:  # what it finished is whole
        assert cache.load(request) is not None


def test_the_final_report_computes_what_the_background_process_has_not_started(af_small, small_spec, tmp_path):
    """A search that ends before its prefetch (a short one): waiting drops the tasks not started, which the
    final report computes with all its workers rather than one background process."""
    from autoprox.data.cache import build_cache

    requests = [StatsRequest(arch, small_spec, 0, 100) for arch in af_small.archs]
    cache = StatisticsCache(tmp_path / "cache")
    prefetch = Prefetch(cache, requests).start()
    progress = []
    written = prefetch.wait(lambda done, total: progress.append((done, total)))
    assert not prefetch.started and written < len(requests)
    assert progress and progress[0] == (0, len(requests)) and all(done < total for done, total in progress)
    assert [done for done, _ in progress] == sorted(set(done for done, _ in progress))
    assert sum(cache.contains(r) for r in requests) == written
    assert build_cache(cache, requests, workers=2)["computed"] == len(requests) - written
    assert _leftovers(tmp_path / "cache") == []


@pytest.mark.slow
def test_a_search_computes_its_test_split_in_the_background_after_its_search_split(small_settings, finished_run,
                                                                                 tmp_path, monkeypatch):
    """With two workers and the test split not cached, the search starts the prefetch once the search split's
    statistics are there; the final report then computes nothing, and the search is the one-worker search."""
    import autoprox.proxies.scorers as scorers
    import autoprox.search.space_evaluator as space_evaluator
    from autoprox.data.benchmark import load_benchmark
    from autoprox.spaces.architectures import arch_key

    events = []

    def recording(real):
        def build_cache(cache, requests, **kwargs):
            result = real(cache, requests, **kwargs)
            events.append(("build", {arch_key(r.arch) for r in requests}, result["computed"]))
            return result
        return build_cache

    real_start = Prefetch.start

    def start(self):
        events.append(("prefetch", {arch_key(r.arch) for r in self.missing}, None))
        return real_start(self)

    monkeypatch.setattr(space_evaluator, "build_cache", recording(space_evaluator.build_cache))
    monkeypatch.setattr(scorers, "build_cache", recording(scorers.build_cache))
    monkeypatch.setattr(Prefetch, "start", start)
    settings = replace(small_settings, workers=2, cache_dir=str(tmp_path / "cache"))
    report = run_search(settings, tmp_path / "run", quiet=True)
    bench = load_benchmark(settings.bench)
    search = {arch_key(bench.archs[i]) for i in report["split"]["search"]}
    test = {arch_key(bench.archs[i]) for i in report["split"]["test"]}
    assert events[0] == ("build", search, len(search))
    assert events[1] == ("prefetch", test, None)
    assert ("build", test, 0) in events[2:]  # the final report found them all
    plain = json.loads((finished_run / "best.json").read_text())
    assert report["genome"] == plain["genome"]
    assert report["test"]["jcm"] == pytest.approx(plain["test"]["jcm"], abs=1e-9)
