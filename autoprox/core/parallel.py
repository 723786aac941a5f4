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

Within one process, :class:`ThreadedMap` maps a function over items in threads, for work
that releases the GIL (torch and NumPy kernels on large arrays) and must share memory:
the fitness of a genome on architectures whose statistics are held once; and
:func:`blas_threads` holds NumPy's and SciPy's BLAS to a number of threads for a block.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import math
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from autoprox.core.errors import ConfigError, SchedulerLostError

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


#: A local worker's growth in resident size that loky takes for a leak (its own default is 300 MB,
#: less than the activations of one large network: see :func:`release_freed_memory`).
WORKER_GROWTH_LIMIT = 8 * 2**30


def local_worker_setup(parent: int) -> None:
    """Initializer of every local (loky) worker: exit with ``parent`` (:func:`exit_with_parent`), and
    raise loky's leak limit to :data:`WORKER_GROWTH_LIMIT`, so a worker is not stopped, with the
    warning "A worker stopped while some jobs were given to the executor", for holding memory that
    its networks legitimately needed."""
    exit_with_parent(parent)
    try:
        from joblib.externals.loky import process_executor
    except ImportError:  # a joblib without its vendored loky: nothing to raise
        return
    if hasattr(process_executor, "_MAX_MEMORY_LEAK_SIZE"):
        process_executor._MAX_MEMORY_LEAK_SIZE = max(process_executor._MAX_MEMORY_LEAK_SIZE, WORKER_GROWTH_LIMIT)


def release_freed_memory() -> None:
    """Hand the memory freed by a finished task back to the system (glibc's ``malloc_trim``).

    A task builds networks of every size; glibc keeps what they freed, so a worker's
    resident size grows by the largest network's activations. loky takes a growth of more
    than 300 MB after a worker's first task for a leak: it stops the worker, warns "A worker
    stopped while some jobs were given to the executor ... memory leak" and starts another
    (seconds of imports each time). Trimming after each task keeps the size near where it
    was; what fragmentation still holds is under :data:`WORKER_GROWTH_LIMIT`.
    """
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to trim
        pass


def _run_and_release(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` in a local worker, then its freed memory released (:func:`release_freed_memory`)."""
    try:
        return fn(*args)
    finally:
        release_freed_memory()


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
                        initializer=local_worker_setup, initargs=(os.getpid(),))

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


class _QuietReconnectFailure(logging.Filter):
    """Drops ``distributed.client``'s "Failed to reconnect to scheduler ..., closing client": the client logs it as
    it is closed after its scheduler went away, above autoprox's own line for that (:class:`SchedulerLostError`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to reconnect to scheduler")


class DaskExecutor(Executor):
    """Tasks on a Dask cluster through a ``distributed.Client``.

    While it holds the client (until :meth:`close`), ``distributed.client``'s log line on failing to reconnect
    to a lost scheduler is left out: the error autoprox raises says it in one line.
    """

    def __init__(self, client, cluster=None, description: str = "a Dask cluster", address: str | None = None) -> None:
        self.client = client
        self.cluster = cluster
        self.workers = max(1, sum(client.nthreads().values()))
        self.description = description
        self.address = address or str(client.scheduler.address)
        self._quiet = _QuietReconnectFailure()
        logging.getLogger("distributed.client").addFilter(self._quiet)

    def _submit(self, fn: Callable, jobs: Sequence[tuple]) -> list:
        return [self.client.submit(fn, *args, pure=False, retries=TASK_RETRIES) for args in jobs]

    def _lost(self, exc: BaseException) -> SchedulerLostError:
        """The one-line error for a scheduler that stopped answering (``exc``: what Dask raised)."""
        reason = getattr(exc, "reason", None)
        return SchedulerLostError(self.address, reason if reason and reason != "unknown" else type(exc).__name__)

    def run_unordered(self, fn: Callable, jobs: Sequence[tuple]) -> Iterator[Any]:
        from distributed import as_completed

        try:
            futures = self._submit(fn, jobs)
            for future in as_completed(futures):
                yield future.result()
        except _scheduler_gone_errors() as exc:
            raise self._lost(exc) from exc

    def run(self, fn: Callable, jobs: Sequence[tuple]) -> list:
        try:
            return self.client.gather(self._submit(fn, jobs))
        except _scheduler_gone_errors() as exc:
            raise self._lost(exc) from exc

    def close(self) -> None:
        try:
            self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            logging.getLogger("distributed.client").removeFilter(self._quiet)


def _scheduler_gone_errors() -> tuple[type[BaseException], ...]:
    """What ``distributed`` raises for a task when its scheduler went away: the task cancelled
    (``scheduler-connection-lost``) or the connection closed under a call."""
    from distributed.comm.core import CommClosedError

    try:
        from distributed.client import FutureCancelledError
    except ImportError:  # distributed before 2024.5 cancels with the standard class
        from concurrent.futures import CancelledError as FutureCancelledError

    return FutureCancelledError, CommClosedError


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
                          "pip install 'autoprox[dask]' (in a clone: pip install -e '.[dask]')") from None
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
    host, port = host_port.rsplit(":", 1)
    if "://" not in text and int(port) < 1024 and difflib.get_close_matches(host.lower(), ["local"], cutoff=0.75):
        # 'locl:2' is a slip for local:2, not a scheduler on port 2 of a host 'locl' (waited for 20 s, then refused)
        raise ConfigError(f"--scheduler {text}: did you mean local:{port} ({port} worker processes here)? A "
                          "scheduler address is HOST:PORT of a running 'dask scheduler' (its port is 8786 by default)")
    return "address", address


@contextlib.contextmanager
def _workers_ignore_interrupts() -> Iterator[None]:
    """Start processes, within the block, that ignore SIGINT: a Ctrl-C reaches every process of the terminal's
    group, and a local cluster's workers would each print a traceback of their own. This process keeps its handler
    (restored on leaving) and closes the cluster itself; a child that finds SIGINT ignored does not turn it into a
    KeyboardInterrupt (Python's documented rule). Off the main thread, where no handler can be set, it does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def make_executor(scheduler: str | None = None, workers: int = 1) -> Executor:
    """The executor ``scheduler`` names (see the module docstring); ``workers`` is for the local one."""
    kind, value = parse_scheduler(scheduler)
    if kind == "local":
        return LocalExecutor(workers)
    distributed = _distributed()
    if kind == "local-cluster":
        with _workers_ignore_interrupts():
            cluster = distributed.LocalCluster(n_workers=int(value), threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address=None,
                                               silence_logs=logging.ERROR)
        return DaskExecutor(distributed.Client(cluster), cluster, f"a local Dask cluster of {value} workers",
                            cluster.scheduler_address)
    try:
        client = distributed.Client(str(value), timeout="20s")
    except OSError as exc:
        raise ConfigError(f"no Dask scheduler answered at {value} ({exc})") from None
    return DaskExecutor(client, None, f"the Dask cluster at {value}", str(value))


class ThreadedMap:
    """``values[i] = function(i)`` for ``i < count`` in ``threads`` threads of this process, failing
    as a plain loop would.

    Thread ``k`` takes items ``k, k + threads, ...`` (interleaved, so items of unequal cost
    spread evenly); this thread does its share itself. When items raise, the exception
    raised is the one of the lowest item, the one ``for i in range(count)`` would have
    stopped at, and no thread starts an item above the lowest failure found so far. So
    the result, or the error, does not depend on ``threads`` as long as ``function(i)``
    depends on ``i`` alone (items may share read-only data; each item's own mutable state
    is touched by one thread at a time).

    Threads pay off only where ``function`` spends its time outside the GIL. A
    KeyboardInterrupt reaches this thread; the others finish the item they are on.
    ``initializer`` runs once in each new thread (thread-local settings such as torch's
    intra-op thread count, which a new thread does not take from the one that starts it).
    """

    def __init__(self, threads: int, initializer: Callable[[], Any] | None = None) -> None:
        if threads < 1:
            raise ConfigError(f"threads must be at least 1, got {threads}")
        self.threads = threads
        self.initializer = initializer
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, function: Callable[[int], float], count: int) -> np.ndarray:
        """The float64 array of ``function(i)`` for ``i < count``; raises as the plain loop would."""
        threads = min(self.threads, count)
        if threads <= 1:
            return np.fromiter((function(i) for i in range(count)), dtype=np.float64, count=count)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="autoprox-map",
                                            initializer=self.initializer)
        values = np.empty(count, dtype=np.float64)
        lowest = [math.inf]  # the lowest item that raised so far
        failures: dict[int, BaseException] = {}
        lock = threading.Lock()

        def share(first: int) -> None:
            for i in range(first, count, threads):
                if i > lowest[0]:
                    return
                try:
                    values[i] = function(i)
                except Exception as exc:
                    with lock:
                        failures[i] = exc
                        lowest[0] = min(lowest[0], i)
                    return

        futures = [self._pool.submit(share, k) for k in range(1, threads)]
        share(0)
        for future in futures:
            future.result()
        if failures:
            raise failures[min(failures)]
        return values

    def close(self) -> None:
        """Stop the threads (a later call starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@contextlib.contextmanager
def blas_threads(count: int) -> Iterator[None]:
    """Run a block with the BLAS libraries loaded in this process (NumPy's and SciPy's OpenBLAS, or MKL) held to
    ``count`` threads each, restoring them after (threadpoolctl).

    For many small linear-algebra calls, such as a table search's ridge fits on a few hundred rows, the threads'
    hand-offs cost more than they save, and far more on a machine busy with other work, where a waiting BLAS thread
    spins on a core another process needs: a 500-row table search took 1,642 s with OpenBLAS's two threads and
    127 s with one, beside other work on two cores (BENCHMARKS.md).
    """
    with threadpool_limits(limits=count, user_api="blas"):
        yield


__all__ = ["DaskExecutor", "Executor", "LocalExecutor", "TASK_RETRIES", "ThreadedMap", "as_executor", "blas_threads",
           "make_executor", "parse_scheduler"]
