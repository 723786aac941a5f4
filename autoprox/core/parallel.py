"""Where independent tasks run: this machine's processes (joblib) or a Dask cluster.

Every parallel step of autoprox (statistics, the zoo, ViT search, protocol folds) hands
its tasks to an :class:`Executor`. A task is a plain module-level function with plain
arguments, so it crosses processes and machines cheaply, and each task writes what it
computes (a cache entry, a run directory) itself: a task lost with its worker is run
again, and finished tasks are never lost.

``scheduler`` strings, as ``--scheduler`` takes them:

- ``None``: this machine, ``workers`` joblib processes (one task at a time in this
  process when ``workers`` is 1);
- ``local:N``: a Dask ``LocalCluster`` of N single-threaded worker processes on the
  loopback address, started here and closed afterwards;
- ``tcp://HOST:PORT`` (or ``HOST:PORT``): the Dask scheduler of a running cluster
  (``dask scheduler`` and ``dask worker tcp://HOST:PORT --nthreads 1`` on each machine).

Dask and distributed are an optional extra (``pip install 'autoprox[dask]'``); without
them everything runs as before on joblib.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Iterator, Sequence

from autoprox.core.errors import ConfigError

#: How often Dask runs a task again after it raised (a worker killed mid-task is
#: rescheduled by Dask itself, up to its ``allowed-failures``).
TASK_RETRIES = 2


class Executor:
    """Runs ``fn(*args)`` for every argument tuple of ``jobs``."""

    #: Number of tasks that can run at once.
    workers: int = 1
    #: What it is, for progress lines and run records.
    description: str = "this process"

    def run_unordered(self, fn: Callable, jobs: Sequence[tuple]) -> Iterator[Any]:
        """Results as the tasks finish (in any order)."""
        raise NotImplementedError

    def run(self, fn: Callable, jobs: Sequence[tuple]) -> list:
        """Results in the order of ``jobs``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the executor started (a local cluster's processes)."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def exit_with_parent(parent: int) -> None:
    """Local worker initializer: end this worker as soon as the process that started it is gone.

    A command killed while its workers run (SIGKILL, or a crash) cannot stop them itself;
    each would otherwise finish its task and idle for minutes holding a network's memory.
    """
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="autoprox-exit-with-parent", daemon=True).start()


class LocalExecutor(Executor):
    """``workers`` joblib (loky) processes on this machine; in this process when ``workers`` is 1."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self.description = "this process" if workers == 1 else f"{workers} local processes"

    def _parallel(self, ordered: bool):
        from joblib import Parallel

        return Parallel(n_jobs=self.workers, backend="loky",
                        return_as="generator" if ordered else "generator_unordered",
                        initializer=exit_with_parent, initargs=(os.getpid(),))

    def run_unordered(self, fn: Callable, jobs: Sequence[tuple]) -> Iterator[Any]:
        if self.workers == 1 or len(jobs) <= 1:
            return (fn(*args) for args in jobs)
        from joblib import delayed

        return self._parallel(ordered=False)(delayed(fn)(*args) for args in jobs)

    def run(self, fn: Callable, jobs: Sequence[tuple]) -> list:
        if self.workers == 1 or len(jobs) <= 1:
            return [fn(*args) for args in jobs]
        from joblib import delayed

        return list(self._parallel(ordered=True)(delayed(fn)(*args) for args in jobs))


class DaskExecutor(Executor):
    """Tasks on a Dask cluster through a ``distributed.Client``."""

    def __init__(self, client, cluster=None, description: str = "a Dask cluster") -> None:
        self.client = client
        self.cluster = cluster
        self.workers = max(1, sum(client.nthreads().values()))
        self.description = description

    def _submit(self, fn: Callable, jobs: Sequence[tuple]) -> list:
        return [self.client.submit(fn, *args, pure=False, retries=TASK_RETRIES) for args in jobs]

    def run_unordered(self, fn: Callable, jobs: Sequence[tuple]) -> Iterator[Any]:
        from distributed import as_completed

        futures = self._submit(fn, jobs)
        for future in as_completed(futures):
            yield future.result()

    def run(self, fn: Callable, jobs: Sequence[tuple]) -> list:
        return self.client.gather(self._submit(fn, jobs))

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def as_executor(workers: "int | Executor") -> Executor:
    """``workers`` as an executor: an :class:`Executor` as it is, a count as that many local processes.

    Every function that runs tasks in parallel takes ``workers`` this way, so a command
    hands its executor (``--scheduler``) down as it would hand down a count.
    """
    return workers if isinstance(workers, Executor) else LocalExecutor(int(workers))


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ConfigError("--scheduler needs Dask: install the extra with "
                          "pip install -e '.[dask]' (or pip install dask distributed)") from None
    return distributed


def parse_scheduler(text: str | None) -> tuple[str, str | int | None]:
    """``("local", None)``, ``("local-cluster", N)`` or ``("address", "tcp://...")``; ConfigError otherwise."""
    if text is None or text == "":
        return "local", None
    if text.startswith("local:"):
        count = text.split(":", 1)[1]
        if not count.isdigit() or int(count) < 1:
            raise ConfigError(f"--scheduler local:N needs a positive worker count, got {text!r}")
        return "local-cluster", int(count)
    address = text if "://" in text else f"tcp://{text}"
    host_port = address.split("://", 1)[1]
    if ":" not in host_port or not host_port.rsplit(":", 1)[1].isdigit():
        raise ConfigError(f"--scheduler takes local:N or a scheduler address HOST:PORT, got {text!r}")
    return "address", address


def make_executor(scheduler: str | None = None, workers: int = 1) -> Executor:
    """The executor ``scheduler`` names (see the module docstring); ``workers`` is for the local one."""
    kind, value = parse_scheduler(scheduler)
    if kind == "local":
        return LocalExecutor(workers)
    distributed = _distributed()
    if kind == "local-cluster":
        cluster = distributed.LocalCluster(n_workers=int(value), threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=None)
        return DaskExecutor(distributed.Client(cluster), cluster, f"a local Dask cluster of {value} workers")
    try:
        client = distributed.Client(str(value), timeout="20s")
    except OSError as exc:
        raise ConfigError(f"no Dask scheduler answered at {value} ({exc})") from None
    return DaskExecutor(client, None, f"the Dask cluster at {value}")


__all__ = ["DaskExecutor", "Executor", "LocalExecutor", "TASK_RETRIES", "as_executor", "make_executor",
           "parse_scheduler"]
