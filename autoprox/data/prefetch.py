"""Statistics computed ahead, in one background process: a search's test split during its evolution.

A search reads its test split's statistics only for its final report. Computed then, they add
their whole time after the evolution's last line (0:40 of the default search on a 2-core
machine). The evolution leaves part of the second core idle (its two scoring threads hold
Python's lock in turn), so one background process at a lower priority (``nice`` 10) computes
them meanwhile, in what the evolution leaves, and the final report only waits for what is not
done yet.

A prefetch computes nothing the search would not compute anyway, with the same function as
:func:`~autoprox.data.cache.build_cache`'s workers (so the entries are the same), and it
decides nothing: the final report still asks the cache for every entry, and computes there,
with the usual errors, anything the prefetch did not write (a task that failed, a cache that
cannot be written). Stopped (a signal, an error, a search stopped early), it ends its process
and removes what that process had half written.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Callable, Sequence

from autoprox.core.parallel import local_worker_setup
from autoprox.data.cache import CacheWarning, StatisticsCache, StatsRequest, compute_into_cache, \
    remove_partial_writes, request_job

#: The background process's niceness: the evolution it runs beside keeps the cores it uses.
BACKGROUND_NICENESS = 10


def background_worker_setup(parent: int, niceness: int) -> None:
    """Initializer of the background process: a local worker's (:func:`~autoprox.core.parallel.local_worker_setup`,
    so it ends with the search that started it) at ``niceness``."""
    local_worker_setup(parent)
    try:
        os.nice(niceness)
    except OSError:  # not allowed here: it runs at the search's priority
        pass


class Prefetch:
    """The entries of ``requests`` that ``cache`` lacks, computed in one background process from :meth:`start`.

    A feeder thread hands the process one entry at a time, so that nothing waits in the process's queue:
    finishing drops what is not started without cancelling a task (joblib's loky cannot kill its workers
    once a queued task was cancelled), and stopping kills the one task that runs.

    Parameters
    ----------
    cache : StatisticsCache or None
        Where the entries go (and where the final report reads them); None only with no requests.
    requests : sequence of StatsRequest
        What the final report will read; the entries already cached are left alone.
    niceness : int
        The background process's ``nice`` increment.
    """

    def __init__(self, cache: StatisticsCache | None, requests: Sequence[StatsRequest],
                 niceness: int = BACKGROUND_NICENESS) -> None:
        self.cache = cache
        self.total = len(requests)
        self.missing = [r for r in requests if not cache.contains(r)]
        self.niceness = niceness
        self._executor = None
        self._feeder: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stopping = False
        self._running = None  # the future of the task the process computes now
        self._ended = 0  # tasks ended, written or failed
        self._written = 0
        self._messages: list[str] = []

    @classmethod
    def nothing(cls) -> "Prefetch":
        """A prefetch of no entries: it starts nothing, and the final report computes them as before."""
        return cls(None, [])

    @property
    def started(self) -> bool:
        """Whether a background process was started (nothing was missing, or the cache cannot be written)."""
        return self._executor is not None

    @property
    def remaining(self) -> int:
        """How many of its tasks have not ended yet."""
        return len(self.missing) - self._ended if self.started else 0

    def start(self) -> "Prefetch":
        """Start the background process on the missing entries; nothing when none is missing or the cache
        cannot be written (the final report then computes, or says why it cannot, as before)."""
        if not self.missing or self.cache.write_problem(self.missing[0].arch.space) is not None:
            return self
        from joblib.externals.loky.process_executor import ProcessPoolExecutor

        self._executor = ProcessPoolExecutor(max_workers=1, initializer=background_worker_setup,
                                             initargs=(os.getpid(), self.niceness))
        self._feeder = threading.Thread(target=self._feed, args=(self._executor,), name="autoprox-prefetch",
                                        daemon=True)
        self._feeder.start()
        return self

    def _feed(self, executor) -> None:
        for request in self.missing:
            with self._lock:
                if self._stopping:
                    return
                self._running = executor.submit(compute_into_cache, *request_job(self.cache, request))
                future = self._running
            try:
                messages = future.result()[1]
            except BaseException:  # failed, or killed by stop(): the final report computes this entry
                messages = None
            with self._lock:
                self._ended += 1
                if messages is not None:
                    self._written += 1
                    self._messages.extend(messages)
                self._running = None

    def wait(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Finish: the tasks the background process has not started are dropped (the final report computes
        them with all its workers, faster than one process), and the one it runs is waited for,
        ``progress(done, total)`` as the count of entries there goes (counting the entries cached before, as
        :func:`~autoprox.data.cache.build_cache` counts them; never with ``done == total``, which the final
        report's own progress line says). Returns how many entries it wrote.

        Its warnings are raised here; a task that failed is left to the final report, which computes its
        entry again and raises the error there, where it belongs.
        """
        if not self.started:
            return 0
        with self._lock:
            self._stopping = True
        reported = None
        try:
            while True:
                done = self.total - len(self.missing) + self._written
                if progress is not None and done != reported and done < self.total:
                    progress(done, self.total)
                    reported = done
                if not self._feeder.is_alive():
                    break
                self._feeder.join(0.2)
        finally:
            self.stop()
        for message in dict.fromkeys(self._messages):
            warnings.warn(message, CacheWarning, stacklevel=2)
        return self._written

    def stop(self) -> None:
        """End the background process now, tasks not yet run dropped, and remove what it had half written."""
        if self._executor is None:
            return
        executor, self._executor = self._executor, None
        with self._lock:
            self._stopping = True
            unfinished = self._running is not None and not self._running.done()
        executor.shutdown(wait=True, kill_workers=unfinished)
        self._feeder.join()
        if unfinished:
            remove_partial_writes(self.cache, self.missing)

    def __enter__(self) -> "Prefetch":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
