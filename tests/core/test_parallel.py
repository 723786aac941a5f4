"""Executors (joblib here, a Dask LocalCluster on the loopback address) and sharded fitness."""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np
import pytest

from autoprox.core.errors import ConfigError
from autoprox.core.parallel import LocalExecutor, parse_scheduler
from autoprox.data.cache import (
    StatisticsCache,
    StatsPlan,
    StatsRequest,
    load_statistics,
)
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.proxy import AUTOPROX_A, AUTOPROX_P
from autoprox.search.fitness import FitnessEvaluator
from autoprox.search.shards import ShardedScorer, shard_ranges
from autoprox.spaces.descriptors import terminal_values

pytestmark = pytest.mark.slow

distributed = pytest.importorskip("distributed")

GENOMES = [
    AUTOPROX_A,
    AUTOPROX_P,
    "block_mean(to_mean_scalar(element_wise_product(frobenius_norm(F2), element_wise_sqrt(sigmoid(F4g)))))",
    "block_mean(to_mean_scalar(element_wise_sum(no_op(A_log_params), element_wise_abs(F3))))",
]


def _square(x: int) -> int:
    return x * x


def _slow_pid(x: int) -> tuple[int, int]:
    time.sleep(0.5)
    return x, os.getpid()


def test_parse_scheduler():
    assert parse_scheduler(None) == ("local", None)
    assert parse_scheduler("local:3") == ("local-cluster", 3)
    assert parse_scheduler("10.0.0.5:8786") == ("address", "tcp://10.0.0.5:8786")
    assert parse_scheduler("tcp://host:8786") == ("address", "tcp://host:8786")
    for bad in ("local:0", "local:x", "somewhere", "host:port"):
        with pytest.raises(ConfigError):
            parse_scheduler(bad)


@pytest.mark.parametrize("workers", [1, 2])
def test_local_executor_keeps_order_and_covers_every_job(workers):
    jobs = [(i,) for i in range(7)]
    with LocalExecutor(workers) as executor:
        assert executor.run(_square, jobs) == [i * i for i in range(7)]
        assert sorted(executor.run_unordered(_square, jobs)) == [i * i for i in range(7)]


@pytest.fixture(scope="module")
def cluster_executor(dask_cluster):
    """conftest's local cluster of two workers (test_multispace runs a search on it too)."""
    return dask_cluster


def test_local_cluster_runs_tasks_on_two_worker_processes(cluster_executor):
    assert cluster_executor.workers == 2
    results = cluster_executor.run(_slow_pid, [(i,) for i in range(6)])
    assert [x for x, _ in results] == list(range(6))
    assert len({pid for _, pid in results}) == 2 and os.getpid() not in {pid for _, pid in results}


def _interrupt_handler() -> object:
    import signal

    return signal.getsignal(signal.SIGINT)


def test_local_cluster_workers_leave_a_ctrl_c_to_this_process(cluster_executor):
    """A Ctrl-C reaches every process of the terminal's group: the workers ignore it (no traceback of their own) and
    this process, whose handler is as it was, stops the work and closes the cluster."""
    import signal

    from autoprox.core.parallel import _workers_ignore_interrupts

    assert cluster_executor.run(_interrupt_handler, [(), ()]) == [signal.SIG_IGN, signal.SIG_IGN]

    def mine(number, frame):  # this process's handler, whatever it was (a shell's background job ignores SIGINT)
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGINT, mine)
    try:
        with _workers_ignore_interrupts():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, before)


def test_statistics_computed_on_the_cluster_equal_local_ones(cluster_executor, af_small, small_spec, tmp_path):
    from autoprox.data.cache import compute_into_cache
    from autoprox.spaces.architectures import arch_to_config

    archs = list(af_small.archs[:3])
    jobs = [(str(tmp_path / "dask"), "float16", a.space, arch_to_config(a), small_spec.to_json(), 0, 100) for a in archs]
    assert len(cluster_executor.run(compute_into_cache, jobs)) == 3
    local = StatisticsCache(tmp_path / "local")
    remote = StatisticsCache(tmp_path / "dask")
    for arch in archs:
        request = StatsRequest(arch, small_spec, 0, 100)
        for mine, theirs in zip(local.get(request), remote.load(request)):
            for name in mine:
                assert np.array_equal(mine[name].numpy(), theirs[name].numpy())


def test_a_killed_worker_loses_no_finished_task(cluster_executor):
    """Kill one worker while tasks run: Dask reschedules its tasks; every result comes back."""
    client = cluster_executor.client
    victim = list(client.scheduler_info()["workers"])[0]

    def kill_soon():
        time.sleep(0.8)
        try:
            client.run(os._exit, 1, workers=[victim])
        except (OSError, distributed.comm.CommClosedError):  # the worker dies before it answers
            pass

    killer = threading.Thread(target=kill_soon)
    killer.start()
    results = cluster_executor.run(_slow_pid, [(i,) for i in range(8)])
    killer.join()
    assert [x for x, _ in results] == list(range(8))
    client.wait_for_workers(2, timeout=60)


def test_shard_ranges_cover_everything_once():
    for size, count in ((16, 2), (7, 3), (3, 5), (60, 4)):
        ranges = shard_ranges(size, count)
        assert [i for r in ranges for i in r] == list(range(size))
        assert all(len(r) > 0 for r in ranges)


def test_sharded_scores_equal_local_fitness_to_the_last_digit(cluster_executor, af_small, session_cache, small_spec):
    archs = list(af_small.archs[:10])
    plan = StatsPlan(small_spec, (0, 1), {"c100_kd": 100})
    terminals = [terminal_values(a) for a in archs]
    stats = load_statistics(session_cache, plan, archs)
    local = FitnessEvaluator.from_statistics(stats, {"c100_kd": af_small.accuracies["c100_kd"][:10]}, ["c100_kd"],
                                             plan.target_classes, terminals=terminals)
    sharded = ShardedScorer(cluster_executor.client, session_cache, plan, archs, terminals)
    assert len(sharded.actors) == 2
    for genome in GENOMES:
        tree = parse_genome(genome)
        mine, theirs = local.architecture_scores(tree), sharded.architecture_scores(tree)
        assert mine.keys() == theirs.keys()
        for classes in mine:
            assert np.array_equal(mine[classes], theirs[classes]), genome
    invalid = parse_genome("block_mean(to_mean_scalar(element_wise_product(element_wise_log(element_wise_revert("
                           "element_wise_abs(F1))), no_op(F2))))")
    with pytest.raises(InvalidProxy):
        local.architecture_scores(invalid)
    with pytest.raises(InvalidProxy):
        sharded.architecture_scores(invalid)


def test_a_search_on_the_cluster_is_the_local_search(cluster_executor, af_small_file, session_cache, tmp_path):
    """Statistics sharded on two worker processes, genomes sent to them: the same run to the last digit."""
    import json

    from autoprox.search.engine import run_search
    from autoprox.search.evolution import EvolutionConfig
    from autoprox.search.settings import SearchSettings

    settings = SearchSettings(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), batch_size=2,
                              cache_dir=str(session_cache.root), workers=1, search_fraction=0.75,
                              evolution=EvolutionConfig(population_size=5, iterations=4, retry_cap=3, seed=2))
    local = run_search(settings, tmp_path / "local", quiet=True)
    remote = run_search(settings, tmp_path / "dask", quiet=True, executor=cluster_executor)
    for key in ("genome", "search", "test", "params", "beyond_size", "iteration"):
        assert remote[key] == local[key], key

    def log(run):
        return [{k: v for k, v in json.loads(line).items() if k != "elapsed"} for line in (run / "log.jsonl").open()]

    assert log(tmp_path / "dask") == log(tmp_path / "local")
    # counted evaluation holds its counts in the search's process: refused before any run directory is made
    from dataclasses import replace

    from autoprox.core.errors import ConfigError

    with pytest.raises(ConfigError, match="--evaluation counted runs in this process"):
        run_search(replace(settings, evaluation="counted"), tmp_path / "counted", quiet=True,
                   executor=cluster_executor)
    assert not (tmp_path / "counted").exists()


def test_cache_build_through_a_local_cluster_equals_the_local_one(af_small, tmp_path, capsys):
    from autoprox.cli.main import main
    from autoprox.data.benchmark import write_benchmark_jsonl
    from autoprox.networks.statistics import InputSpec

    bench = tmp_path / "af4.jsonl"
    write_benchmark_jsonl(af_small.subset(range(4)), bench)
    common = ["cache", "build", "--bench", str(bench), "--batch-size", "1", "--targets", "c100_kd"]
    assert main([*common, "--cache-dir", str(tmp_path / "local"), "--workers", "1"]) == 0
    assert main([*common, "--cache-dir", str(tmp_path / "dask"), "--scheduler", "local:2"]) == 0
    assert "4 computed" in capsys.readouterr().out
    spec = InputSpec("gaussian", batch_size=1)
    for arch in af_small.archs[:4]:
        request = StatsRequest(arch, spec, 0, 100)
        for mine, theirs in zip(StatisticsCache(tmp_path / "local").load(request),
                                StatisticsCache(tmp_path / "dask").load(request)):
            assert all(np.array_equal(mine[n].numpy(), theirs[n].numpy()) for n in mine)


def test_scheduler_without_an_answering_scheduler_is_one_line(capsys, monkeypatch):
    from autoprox.cli.main import main

    real, asked = distributed.Client, []

    def client(address, timeout):  # Dask's own client, tried for 2 s instead of the 20 s the command waits
        asked.append(timeout)
        return real(address, timeout="2s")

    monkeypatch.setattr(distributed, "Client", client)
    assert main(["cache", "build", "--space", "pit", "--scheduler", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.startswith("autoprox: error: no Dask scheduler answered at tcp://127.0.0.1:1")
    assert len(asked) == 1  # the command did try to connect


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_threaded_map_returns_the_loops_values_and_raises_its_first_error(threads):
    from autoprox.core.parallel import ThreadedMap

    mapper = ThreadedMap(threads)
    try:
        assert mapper(lambda i: i * 0.5, 7).tolist() == [i * 0.5 for i in range(7)]
        assert mapper(lambda i: 1.0, 0).tolist() == []

        def failing(i: int) -> float:
            if i in (3, 5, 6, 30):
                raise ValueError(f"item {i}")
            return float(i)

        for _ in range(20):  # whichever thread fails first, the plain loop's first failure is raised
            with pytest.raises(ValueError, match="item 3$"):
                mapper(failing, 40)
    finally:
        mapper.close()


def test_threaded_map_refuses_no_threads():
    from autoprox.core.parallel import ThreadedMap

    with pytest.raises(ConfigError, match="at least 1"):
        ThreadedMap(0)


def loky_leak_limit() -> int:
    """In a local worker: the growth loky takes for a memory leak."""
    from joblib.externals.loky import process_executor

    return process_executor._MAX_MEMORY_LEAK_SIZE


@pytest.mark.slow
def test_parallel_steps_keep_their_workers_and_report_progress_as_results_arrive(pit_small, small_spec):
    import warnings

    from autoprox.core.parallel import WORKER_GROWTH_LIMIT, LocalExecutor
    from autoprox.proxies.zoo_scores import compute_raw_values

    # the cause: loky stops a worker whose resident size grew 300 MB past its first task's, and
    # warns "A worker stopped while some jobs were given to the executor"; networks of every size
    # legitimately hold more than that, so each local worker raises the limit
    assert list(LocalExecutor(2).run(loky_leak_limit, [(), ()])) == [WORKER_GROWTH_LIMIT] * 2
    archs = list(pit_small.archs[:6])
    calls: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = compute_raw_values(["snip"], archs, small_spec, 0, 100, workers=2,
                                     progress=lambda done, total: calls.append(done))
    assert not [w for w in caught if "A worker stopped" in str(w.message)]
    assert calls == list(range(len(archs) + 1))  # one step per architecture, not 0 then 6
    assert all(r.ok for r in results["snip"])
    serial = compute_raw_values(["snip"], archs, small_spec, 0, 100, workers=1)
    assert [r.raw for r in results["snip"]] == [r.raw for r in serial["snip"]]  # each result at its own index


def _own_cluster():
    """A cluster of one worker process of the test's own (closed by the test, unlike conftest's)."""
    return distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                    dashboard_address=":0")


@pytest.mark.parametrize("ordered", [False, True])
def test_a_scheduler_that_stops_mid_map_is_one_error_naming_it(ordered):
    from autoprox.core.errors import SchedulerLostError
    from autoprox.core.parallel import DaskExecutor

    cluster = _own_cluster()
    executor = DaskExecutor(distributed.Client(cluster, timeout="2s"), None, "a test cluster",
                            cluster.scheduler_address)
    threading.Timer(1.0, cluster.close).start()
    jobs = [(i,) for i in range(30)]
    with pytest.raises(SchedulerLostError, match=f"the Dask scheduler at {cluster.scheduler_address} went away"):
        if ordered:
            executor.run(_slow_pid, jobs)
        else:
            list(executor.run_unordered(_slow_pid, jobs))
    executor.close()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_search_whose_scheduler_stops_says_how_to_resume(af_small_file, tmp_path, capsys):
    """The scheduler closed while the search builds its cache: one line naming it and --resume, exit 2;
    the statistics computed before are kept. distributed's own "Failed to reconnect to scheduler ..., closing
    client", which the client logged above that line as the command closed it, is left out while autoprox holds
    the client, and the logger is left as it was."""
    from autoprox.cli.main import main

    cluster, cache = _own_cluster(), tmp_path / "cache"
    client_log = logging.getLogger("distributed.client")
    filters, level, records = list(client_log.filters), client_log.level, _Records()
    client_log.addHandler(records)

    def stop_after_first_entry():
        deadline = time.time() + 120
        while time.time() < deadline and not any(p.is_file() for p in cache.rglob("*") if cache.exists()):
            time.sleep(0.05)
        cluster.close()

    threading.Thread(target=stop_after_first_entry, daemon=True).start()
    out = tmp_path / "run"
    try:
        status = main(["search", "--bench", str(af_small_file), "--cache-dir", str(cache), "--batch-size", "1",
                       "--scheduler", cluster.scheduler_address, "--iterations", "2", "--population", "4",
                       "--quiet", "--out", str(out)])
    finally:
        client_log.removeHandler(records)
    assert not [m for m in records.messages if m.startswith("Failed to reconnect")], records.messages
    assert client_log.filters == filters and client_log.level == level
    err = capsys.readouterr().err
    assert status == 2, err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"autoprox: error: the Dask scheduler at {cluster.scheduler_address} went away"), err
    assert line.endswith(f"continue it with autoprox search --resume --out {out}"), err
    assert "Traceback" not in err and any(p.is_file() for p in cache.rglob("*"))
