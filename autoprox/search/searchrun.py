"""The one interface of a run, of one benchmark or of several: :class:`SearchRun`.

:class:`~autoprox.search.context.RunContext` (one benchmark) and
:class:`~autoprox.search.multispace.MultiRunContext` (several at once) both implement it; where they differ, each
does it its own way (:attr:`SearchRun.parts`, :meth:`SearchRun.with_session`, :meth:`SearchRun.test_prefetch`),
so that the engine, the API and the commands never ask which kind they hold.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from autoprox.core.parallel import Executor
from autoprox.data.prefetch import Prefetch
from autoprox.proxies.proxy import Proxy
from autoprox.search.fitness import MemoisedFitness
from autoprox.search.rundir import RunDirectory
from autoprox.search.settings import SearchSettings


@runtime_checkable
class SearchRun(Protocol):
    """A run, of one benchmark (:class:`RunContext`) or of several at once
    (:class:`~autoprox.search.multispace.MultiRunContext`): what the engine, the API, ``show``, ``rank``,
    ``export`` and the reports ask of one. Make one with :func:`~autoprox.search.multispace.new_context` (a new
    run) or :func:`~autoprox.search.multispace.open_context` (a run directory), which choose the kind.

    Attributes
    ----------
    settings : SearchSettings
        The run's settings, resolved (targets named, benchmark paths portable).
    run : RunDirectory or None
        The run directory, when there is one.
    bench, split, plan : object
        The benchmark, the search/test split and the statistics plan (of a multi-space run: their
        side-by-side forms, whose ``space``, ``search``, ``test`` and ``to_json()`` read alike).
    targets : tuple of str
        The targets (of a multi-space run: its (benchmark, target) pairs, ``SPACE/TARGET``).
    parts : tuple of SearchRun
        One single-benchmark context (:class:`~autoprox.search.context.RunContext`) per benchmark: the run itself
        when it has one benchmark.
    """

    @property
    def settings(self) -> SearchSettings: ...

    @property
    def run(self) -> RunDirectory | None: ...

    @property
    def bench(self) -> Any: ...

    @property
    def split(self) -> Any: ...

    @property
    def plan(self) -> Any: ...

    @property
    def targets(self) -> tuple[str, ...]: ...

    @property
    def parts(self) -> tuple["SearchRun", ...]: ...

    def check_start(self) -> None:
        """Every refusal a new search makes of its settings, before anything is written or computed."""

    def fitness_evaluator(self, executor: Executor | None = None, quiet: bool = True
                          ) -> tuple[MemoisedFitness, dict | None]:
        """The fitness of the search part, and the fitted base of an objective beyond one (None otherwise)."""

    def config_json(self, command: Sequence[str] | None = None) -> dict:
        """What ``config.json`` records for this run (:func:`run_config`)."""

    def with_session(self, changes: Mapping[str, Any]) -> "SearchRun":
        """This run with session settings changed (by setting name: ``workers``, ``evolution.iterations``)."""

    def test_prefetch(self, executor: Executor | None = None) -> Prefetch:
        """The test split's statistics to compute during the evolution, or nothing to compute."""

    def indices(self, part: str) -> list:
        """The architectures of ``part`` (``search``, ``test``, ``all``)."""

    def archs(self, part: str) -> list:
        """The architecture configs of ``part``."""

    def score(self, proxy: Proxy, part: str, workers: Any = None,
              progress: Callable[[int, int], None] | None = None) -> Any:
        """Scores of ``proxy`` on ``part``; InvalidProxy where it fails."""

    def figures(self, scores: Any, part: str, targets: Sequence[str] | None = None,
                weights: Mapping[str, float] | None = None) -> dict:
        """Per-target correlations and the JCM of ``scores`` on ``part``."""

    def beyond_size(self, scores: Any, part: str, targets: Sequence[str] | None = None) -> dict:
        """The beyond-size report of ``scores`` on ``part``."""

    def evaluate(self, proxy: Proxy, part: str, targets: Sequence[str] | None = None,
                 weights: Mapping[str, float] | None = None, workers: Any = None,
                 progress: Callable[[int, int], None] | None = None) -> dict:
        """Figures of ``proxy`` on ``part``, or ``{"invalid": reason}``."""


__all__ = ["SearchRun"]
