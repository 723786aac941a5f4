"""The Python API, in the manner of gplearn's and PySR's estimators.

>>> from autoprox import ProxySearch
>>> search = ProxySearch(space="pit", iterations=50, out="runs/pit-notebook").fit()  # doctest: +SKIP
>>> search.best_.genome, search.best_.test_jcm                                         # doctest: +SKIP
>>> search.equations_.to_markdown()                                                    # doctest: +SKIP
>>> search.best_.score_architectures([{"base_dim": 32, "mlp_ratio": 4, ...}])          # doctest: +SKIP
>>> ProxySearch.from_run("runs/pit-best").best_.score(model, images, labels)           # doctest: +SKIP

A fitted search is a run directory (the same one ``autoprox search`` writes); every
attribute ending in ``_`` is read from it, so ``from_run`` gives the same object for a
run made from the command line. The parameters are the options of ``autoprox search``
(:mod:`autoprox.search.options`, one table for both): the same names with ``_`` for
``-``, the same defaults, the same checks and the same one-line errors;
``inspect.signature(ProxySearch)`` lists them.
"""
from __future__ import annotations

import inspect
import math
import os
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Mapping

from autoprox.core.errors import BenchmarkError, ConfigError, NotFittedError, RunDirError
from autoprox.genome.tree import parse_genome, score_architecture, uses_spread_terminals
from autoprox.proxies.proxy import Proxy
from autoprox.search.searchrun import SearchRun
from autoprox.search.multispace import new_context, open_context
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.options import OPTIONS, option_values, options_for
from autoprox.search.resume import resume_search
from autoprox.search.rundir import BEST, RunDirectory, run_folder_proxy
from autoprox.core.atomic import given_path
from autoprox.search.settings import SearchSettings, options_from_settings, settings_from_options


@dataclass(frozen=True)
class FoundProxy:
    """A discovered proxy: its genome, its figures, and its readable and runnable forms.

    ``jcm`` and ``kendall`` are search-split figures (what evolution saw); ``test_jcm``
    is the test split's when the run's ``best.json`` reports it. ``run_dir`` is the run it
    was found by, when there is one: :meth:`score_architectures` then computes statistics
    as that run did (input, batch, seeds, cache).
    """

    genome: str
    jcm: float | None = None
    kendall: Mapping[str, float] = field(default_factory=dict)
    test_jcm: float | None = None
    complexity: int | None = None
    run_dir: str | None = field(default=None, compare=False)

    @cached_property
    def tree(self):
        return parse_genome(self.genome)

    @cached_property
    def formula(self):
        """The readable formula (:class:`autoprox.reports.simplify.Formula`), simplified where safe."""
        from autoprox.reports.simplify import readable_formula

        return readable_formula(self.tree)

    @property
    def sympy(self):
        """The per-block expression as a SymPy object (the aggregation over blocks is in :attr:`text`)."""
        return self.formula.shown

    @property
    def latex(self) -> str:
        return self.formula.latex

    @property
    def text(self) -> str:
        return self.formula.text

    @property
    def proxy(self) -> Proxy:
        """The engine's proxy object, for :meth:`autoprox.search.context.RunContext.score` and ranking."""
        return Proxy(self.genome, self.tree)

    def score_architectures(self, archs, workers: int | None = None, cache_dir: str | None = None,
                            progress: bool = False):
        """Scores of architectures, computed as the engine scores them (statistics cached), through the one path
        of every proxy (:meth:`autoprox.proxies.proxy.Proxy.score_architectures`), with the run's cache and plan.

        Parameters
        ----------
        archs : sequence of dict, or str
            Architecture configs (``{"base_dim": 32, ...}``, any registered space's), or a
            benchmark: a space name with a packaged file (``"pit"``) or a benchmark file's path.
        workers : int, optional
            Processes computing missing statistics (default: the run's, else 1).
        cache_dir : str, optional
            The statistics cache (default: the run's, else ``$AUTOPROX_CACHE`` or ``~/.cache/autoprox``).
        progress : bool
            Show a progress line on stderr while statistics are computed.

        Returns
        -------
        numpy.ndarray
            One score per architecture, in the order given (statistics with a 100-class head,
            or the run's class count when it used one set).
        """
        from autoprox.data.cache import StatisticsCache
        from autoprox.proxies.proxy import architectures_given

        workers = OPTIONS["workers"].value(workers) if workers is not None else None
        parsed = architectures_given(archs)  # before a run's context is opened: a bad one is named first
        plan = cache = None
        if self.run_dir is not None:
            context = open_context(self.run_dir).parts[0]  # a multi-space run's benchmarks share one plan
            plan, cache = context.plan, context.cache
            workers = context.settings.workers if workers is None else workers
            if cache_dir is not None:
                cache = StatisticsCache(cache_dir, cache.precision)
        return self.proxy.score_architectures(parsed, workers=workers or 1, cache_dir=cache_dir, progress=progress,
                                              cache=cache, plan=plan)

    def torch_source(self) -> str:
        """A standalone Python module (torch only) computing this proxy on any model, as ``autoprox export`` writes."""
        from autoprox.reports.export import export_source

        return export_source(self.tree, self.formula)

    def score(self, model, images, labels, descriptors: Mapping[str, float] | None = None,
              head_classes: int | None = 100) -> float:
        """Score a PyTorch ViT ``model`` from one forward/backward pass on ``images`` and ``labels``.

        The model's blocks must have timm's names (``attn.qkv``, ``attn.proj``, ``mlp.fc1``,
        ``mlp.act``). A proxy that reads architecture-level terminals (``A_params``, ...)
        reads the descriptors from the model (parameters counted with a ``head_classes``
        head, as the engine counts them; MACs through hooks) unless ``descriptors`` gives
        them by name. The same pass and numbers as the exported module's ``score``.

        The weights the proxy's statistics come from get their gradients whatever their
        ``requires_grad`` (a frozen one is unfrozen for the pass and frozen again after); a
        statistic the proxy reads that the pass cannot give (a weight the model's forward
        does not use) raises ``MissingStatistic`` naming the block and the weight.
        """
        from autoprox.networks.runtime import collect
        from autoprox.spaces.descriptors import TERMINAL_PREFIX

        names = sorted({node.name[len(TERMINAL_PREFIX):].removeprefix("log_") for node in self.tree
                        if node.name.startswith(TERMINAL_PREFIX)})
        stats, values = collect(model, images, labels, descriptors=descriptors, head_classes=head_classes,
                                names=tuple(names), spread=uses_spread_terminals(self.tree),
                                needs={node.name for node in self.tree if node.arity == 0})
        terminals = {}
        for name, value in values.items():
            terminals[f"{TERMINAL_PREFIX}{name}"] = float(value)
            terminals[f"{TERMINAL_PREFIX}log_{name}"] = math.log(float(value))
        return float(score_architecture(self.tree, stats, terminals or None))


#: What :meth:`ProxySearch.fit` (or :meth:`ProxySearch.from_run`) sets: read before, :class:`NotFittedError`.
_FITTED = ("best_", "hall_of_fame_", "report_", "run_dir_", "equations_")


def search_signature() -> inspect.Signature:
    """The signature of ``ProxySearch(...)``: every search option of the table, keyword only, with its default."""
    return inspect.Signature([inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default)
                              for o in options_for("search")])


class _Estimator(type):
    """Gives the class the signature of its parameters (``inspect.signature(ProxySearch)``), made from the option
    table each time it is asked, so that a row registered later is among them."""

    @property
    def __signature__(cls) -> inspect.Signature:
        return search_signature()


class ProxySearch(metaclass=_Estimator):
    """A proxy search as an estimator: set it up, :meth:`fit` it, read the fitted attributes.

    Parameters
    ----------
    Every option of ``autoprox search`` under its Python name (``--cv-folds`` is ``cv_folds``),
    with the same default and the same check (:data:`autoprox.search.options.SEARCH_OPTIONS`).
    Lists may be given as Python sequences (``targets=["c100_kd"]``) or as the command line's
    comma strings; ``weights`` as a mapping. An empty comma string is refused, and so is an empty sequence (a
    list or a tuple alike) except for a parameter whose default is empty, where it is that default, as
    ``get_params`` gives it back: ``targets=[]`` and ``targets=()`` both mean the benchmark's default targets. An
    unknown name, a bad value or an unknown ``space`` raises
    :class:`~autoprox.core.errors.ConfigError` at once, with one line naming it; what depends on the benchmark's
    file (``targets`` it lacks, a space of a ``space_file``) is refused by :meth:`fit`, before anything is written.

    Attributes
    ----------
    best_ : FoundProxy
        The best proxy, with its search- and test-split figures (``best.json``).
    hall_of_fame_ : list of FoundProxy
        The best distinct proxies seen, best first.
    equations_ : autoprox.reports.equations.EquationTable
        The hall of fame as a table: complexity, formula, search and test figures
        (``to_csv``, ``to_markdown``).
    run_dir_ : pathlib.Path
        The run directory: ``out``, or the new temporary folder a fit without ``out`` searched in.
    report_ : dict
        The content of ``best.json``.

    Notes
    -----
    :meth:`fit` on a run directory that holds this search continues it, as
    ``autoprox search --resume`` does: a larger ``iterations`` extends a finished run, and
    the session parameters (``workers``, ``cache_dir``, ``scheduler``, ``bench``) may differ
    from the run's. ``resume=True`` takes the run's recorded settings for every parameter
    not given.

    Without ``out``, each :meth:`fit` is a new search in a new temporary folder (``autoprox-run-...``), as a
    scikit-learn ``fit`` starts over: it does not continue the previous fit. ``run_dir_`` names that folder; to
    continue the search, give it as ``out`` (``search.set_params(out=search.run_dir_, iterations=80).fit()``) or
    open it with :meth:`from_run`. The run records this call (``autoprox.ProxySearch(...).fit()``, the
    parameters that differ from their defaults) as the command that made it, which ``show`` and ``report`` give.

    A proxy table (``bench="T.csv"``, first column ``id``) is searched with :func:`search_table`, the engine of
    ``autoprox search --bench T.csv``: ``ProxySearch`` refuses it, and a table search's run, in one line saying so.
    """

    def __init__(self, **params) -> None:
        """Every option of ``autoprox search`` as a keyword parameter (``inspect.signature(ProxySearch)``)."""
        self._given: set[str] = set()
        self._as_given: dict = {}
        self._params = option_values({}, "search")
        self.set_params(**params)

    # --------------------------------------------------------- estimator protocol
    def get_params(self, deep: bool = True) -> dict:
        """Every parameter's value (scikit-learn's protocol; ``deep`` is accepted and changes nothing): a parameter
        given is the object given (so that ``sklearn.base.clone`` rebuilds the search), the others their defaults;
        the attribute of that name (``search.targets``) is the value as checked and resolved."""
        return {**self._params, **self._as_given}

    def set_params(self, **params) -> "ProxySearch":
        """Set parameters by name; each is checked as on the command line (ConfigError for a bad one). A path may
        be a :class:`pathlib.Path` (``out=search.run_dir_``)."""
        texts = {name: _path_text(value) for name, value in params.items()}
        values = option_values({**{k: self._params[k] for k in self._given}, **texts}, "search")
        if not values["space_file"]:  # a space of a space file is known once fit() registers the file
            from autoprox.search.options import check_space

            for space in [values["space"]] if isinstance(values["space"], str) else values["space"] or ():
                check_space(space)
        self._params = values
        self._given |= set(params)
        self._as_given.update(params)
        return self

    def __getattr__(self, name: str):
        params = self.__dict__.get("_params")
        if params is not None and name in params:
            return params[name]
        if name in _FITTED and "run_dir_" not in self.__dict__:
            raise NotFittedError(f"this search is not fitted yet: {name} is set by fit(), or read a run with "
                                 "ProxySearch.from_run(PATH)")
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    def __repr__(self) -> str:
        shown = ", ".join(f"{o.name}={self._params[o.name]!r}" for o in options_for("search")
                          if self._params[o.name] != o.default)
        return f"ProxySearch({shown})"

    # ------------------------------------------------------------------ fitting
    def search_settings(self) -> SearchSettings:
        """The :class:`SearchSettings` these parameters describe (what ``config.json`` will record)."""
        if self._params["bench"] is None and self._params["space"] is None:
            raise ConfigError("give space='autoformer'|'pit' or bench=FILE")
        self._refuse_table()
        self._refuse_device()
        return settings_from_options(self._params)

    def _refuse_device(self) -> None:
        """ConfigError naming ``device=`` (not the command line's ``--device``) when this machine has no such
        device."""
        from autoprox.networks.statistics import resolve_device

        if self._params["device"] != "cpu":
            resolve_device(self._params["device"], option="device")

    def _refuse_table(self) -> None:
        """ConfigError when ``bench`` is a proxy table: ProxySearch searches genomes of ViT statistics, and a table
        is searched by :func:`search_table` (the engine of ``autoprox search --bench TABLE.csv``)."""
        from autoprox.data.proxy_tables import is_proxy_table

        benches = self._params["bench"]
        for bench in (benches if isinstance(benches, (list, tuple)) else [benches]):
            if bench is not None and is_proxy_table(bench):
                raise ConfigError(f"{bench} is a proxy table: ProxySearch searches genomes of ViT statistics; search "
                                  f"a table with autoprox.search_table({str(bench)!r}, target, out=...), what "
                                  "autoprox search --bench TABLE.csv runs")

    def fit(self) -> "ProxySearch":
        """Run the search into ``out``, or continue the one it holds (see Notes)."""
        from autoprox.core.parallel import make_executor
        from autoprox.search.engine import run_search
        from autoprox.search.settings import recorded_settings

        params = self._params
        self._refuse_table()
        self._refuse_device()
        if params["out"]:
            from autoprox.search.table_run import refuse_table_run

            refuse_table_run(params["out"], "ProxySearch continues searches of ViT statistics")
        out = Path(params["out"]) if params["out"] else Path(tempfile.mkdtemp(prefix="autoprox-run-"))
        run = RunDirectory(out)
        resume = bool(params["resume"]) or run.exists()
        if params["resume"] and not run.exists():
            raise RunDirError(f"resume=True needs out to hold a run; {out} holds none")
        reports = None
        if params["report"]:
            from autoprox.reports.html.report import CheckpointReports

            reports = CheckpointReports()
        with make_executor(params["scheduler"], params["workers"]) as executor:
            if resume:
                # resume=True: the parameters given must agree with the run, the others are the run's (as with
                # search --resume); else every parameter, defaults included, must describe the run's search
                given = self._given
                recorded = recorded_settings(out)[0]
                if not params["resume"]:
                    conflicts = self._other_search(recorded)
                    if conflicts:
                        raise RunDirError(f"{out} holds another search ({'; '.join(conflicts)}); choose another "
                                          "out, or leave those parameters out with resume=True")
                    given = {name for name in given if OPTIONS[name].session}
                if _as_list(params["bench"]) == list(recorded.benches):
                    # the run's own record (a bare name for a file of the benchmark folders): the run finds it,
                    # where a session bench is a path from here
                    given = given - {"bench"}
                resume_search(out, params, given, executor=executor, on_checkpoint=reports)
            else:
                run_search(self.search_settings(), out, quiet=params["quiet"], executor=executor,
                           on_checkpoint=reports, command=[f"autoprox.{self!r}.fit()"])
        if reports is not None:
            from autoprox.reports.html.report import write_report

            write_report(out, memo=reports.memo)
        return self._read(out)

    def _other_search(self, recorded: SearchSettings) -> list[str]:
        """How the search these parameters describe differs from a run's ``recorded`` settings, each as
        ``name VALUE (the run's)``: the settings compared as a new run would record them (the benchmark's
        default targets for targets left at their default), less the session ones and the total of iterations."""
        from autoprox.search.settings import settings_differences

        params = dict(self._params)
        if params["bench"] is None and params["space"] is None:  # neither given: the run's own benchmark
            params["bench"] = recorded.benches[0] if not recorded.multi_space else list(recorded.benches)
        settings = settings_from_options(params)
        resolved = new_context(settings, measured_on=None).settings
        return settings_differences(resolved.compared(), recorded.compared(), "the run has ")

    @classmethod
    def from_run(cls, path: str | Path) -> "ProxySearch":
        """The fitted search of an existing run directory (made by ``fit`` or ``autoprox search``)."""
        from autoprox.apps.folders import refuse_other_folder
        from autoprox.search.settings import recorded_settings
        from autoprox.search.table_run import refuse_table_run

        path = given_path(path, "from_run", RunDirError, "the run directory")
        refuse_table_run(path, "ProxySearch reads the runs of a search of ViT statistics")
        refuse_other_folder(path, "ProxySearch.from_run")
        settings, space = recorded_settings(path)
        values = options_from_settings(settings, space)
        values["bench"], values["space"] = _reopened_bench(values["bench"], space, settings.multi_space)
        values["out"] = str(path)
        defaults = option_values({}, "search")
        search = cls(**{k: v for k, v in values.items() if v != defaults[k]})
        return search._read(Path(path))

    def _read(self, out: Path) -> "ProxySearch":
        run = RunDirectory(out)
        report = run.best()
        if report is None:
            raise RunDirError(f"{out} has no {BEST} yet: the search has not reached its first report")
        if not isinstance(report.get("genome"), str):
            raise RunDirError(f"{run.file(BEST)}: not a {BEST} this autoprox wrote")
        search, test = report.get("search") or {}, report.get("test") or {}
        self.__dict__.pop("equations_", None)  # the cached table of the hall of fame read before
        self.report_ = report
        self.run_dir_ = out
        self.best_ = FoundProxy(report["genome"], search.get("jcm"),
                                {t: m.get("kendall") for t, m in (search.get("targets") or {}).items()},
                                test.get("jcm"), run_dir=str(out))
        self.hall_of_fame_ = [FoundProxy(e.genome, e.jcm, dict(e.kendall), complexity=e.complexity,
                                         run_dir=str(out))
                              for e in load_hall_of_fame(run).hall.entries]
        return self

    @cached_property
    def equations_(self):
        """The hall of fame as a table with complexity, formulas and search and test figures."""
        from autoprox.reports.equations import equation_table

        return equation_table(self.context(), self.hall_of_fame_)

    def context(self) -> SearchRun:
        """The run's context (:class:`~autoprox.search.searchrun.SearchRun`: benchmark, split, statistics), to score
        other proxies on it (a :class:`~autoprox.search.multispace.MultiRunContext` for a search over several
        spaces)."""
        return open_context(self.run_dir_)


def _path_text(value):
    """A parameter's value with each path (``os.PathLike``, alone or in a list) as its text, as options take it."""
    if isinstance(value, (list, tuple)):
        return type(value)(_path_text(v) for v in value)
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _reopened_bench(recorded, space: str, multi_space: bool) -> tuple:
    """The ``bench`` and ``space`` parameters of a run's recorded benchmark: the space's released file, which a
    run records by its bare name (not a path from here), is named by its space, as ``ProxySearch(space=...)`` made
    it; another benchmark is named as recorded."""
    from autoprox.data.benchmark import BENCH_FILE_NAMES

    if not multi_space and recorded is not None and recorded == BENCH_FILE_NAMES.get(space):
        return None, space
    return recorded, None if recorded else (space or None)


def search_table(bench: str | Path | None, target: str | list[str] | None = None, out: str | Path | None = None,
                 seed: int | None = None, iterations: int | None = None, quiet: bool = True,
                 resume: bool = False) -> dict:
    """``autoprox search --bench TABLE.csv``: a weighted formula fitted on the table's labelled rows (an empty
    ``target`` cell: unlabelled), written to the run directory ``out``; returns its ``best.json``
    (``score_rows(OUT, bench)`` ranks every row with it).

    Parameters
    ----------
    bench : path
        The proxy table (first column ``id``); with ``resume``, optional (the recorded one).
    target : str, or a list of one str, optional
        The accuracy column (default: the table's first).
    out : path, optional
        The run directory (default: a new temporary one); a folder holding a run is refused unless ``resume``.
    seed, iterations : int, optional
        The search's seed and iterations (default: the command line's), checked as ``--seed`` and ``--iterations``;
        with ``resume``, each one given must be the recorded one.
    quiet : bool
        No progress on stderr.
    resume : bool
        Continue the table search in ``out``, as ``search --resume --out OUT`` does: a stopped one to its end; a
        finished one's ``best.json`` is returned as it is, nothing computed or rewritten.
    """
    import tempfile

    from autoprox.search.options import OPTIONS
    from autoprox.search.table_run import is_table_run, resume_options, run_table_search

    call = _python_call("search_table", bench, target=target, out=out, seed=seed, iterations=iterations)
    targets = OPTIONS["targets"].value(target) or None
    iterations = OPTIONS["iterations"].value(iterations)
    seed = OPTIONS["seed"].value(seed) if seed is not None else None
    if bench is None and not resume:
        raise BenchmarkError("search_table needs bench, the proxy table to search (TABLE.csv)")
    if out is None:
        if resume:
            raise RunDirError("resume=True needs out, the run directory of the table search to continue")
        out = Path(tempfile.mkdtemp(prefix="autoprox-table-")) / "run"
    run = RunDirectory(given_path(out, "out", RunDirError, "the folder to write the search in"))
    if run.exists() and not resume:
        raise RunDirError(f"{run.path} already holds a run; continue it with search_table(..., resume=True), or "
                          "choose another out")
    if resume and run.exists() and not is_table_run(run.config()):
        raise RunDirError(f"{run.path} holds a search of ViT statistics, not of a table; continue it with "
                          f"ProxySearch.from_run({str(run.path)!r}).fit()")
    settings, given = resume_options(seed, iterations, resume)
    return run_table_search(bench, targets, out, settings, resume=resume, quiet=quiet, given=given, command=[call])


def _python_call(function: str, *args, **kwargs) -> str:
    """What a run made by ``function`` of this module records as the command that made it (``config.json``'s
    ``command``, one word: :func:`~autoprox.search.rundir.python_call`): ``autoprox.FUNCTION(...)`` with the
    arguments given, a path as its text, those left at None out."""
    words = [repr(_path_text(a)) for a in args] + [f"{name}={_path_text(value)!r}" for name, value in kwargs.items()
                                                   if value is not None]
    return f"autoprox.{function}({', '.join(words)})"


def resolve_proxy(text: str | Path) -> Proxy:
    """A proxy by name, as ``--proxy`` takes it: a built-in (``params``, ``zico``, ``autoprox_a``), a genome
    string, a rank formula, a proxy file (a run's ``best.json``), ``recommended:pit/joint``, or a run directory,
    which stands for its ``best.json``
    (:func:`autoprox.proxies.proxy.resolve_proxy`, with :func:`~autoprox.search.rundir.run_folder_proxy`)."""
    from autoprox.proxies.proxy import resolve_proxy as resolve_named

    return resolve_named(run_folder_proxy(str(text)))


def score_rows(proxy: str | Path, bench: str | Path) -> list[tuple[str, float]]:
    """``autoprox score`` on a proxy table: ``(id, score)`` for every row in the table's order (NaN where the proxy
    could not score a row: none of the columns it reads has a value there; said in a :class:`UserWarning`), the
    scores ``rank`` correlates. ``proxy``: anything ``rank`` takes (a column, a rank
    formula, a table search's ``best.json`` or its run directory). Where the table lacks columns the proxy reads,
    the line ``autoprox score`` prints of how it reads them is a :class:`UserWarning`."""
    import warnings

    from autoprox.data.proxy_tables import read_proxy_table
    from autoprox.proxies.table_scores import UNMEASURED, reading_note, table_scores, unscored_warning

    if proxy is None or bench is None:
        raise ConfigError(f"score_rows needs {'proxy' if proxy is None else 'bench'}: score_rows(PROXY, TABLE.csv)")
    table = read_proxy_table(bench, labels=False)  # scoring needs no labels, as for autoprox score
    text = str(proxy)
    resolved = text if text in table.proxies else resolve_proxy(text)
    scores = table_scores(resolved, table)
    note = reading_note(resolved, table)
    for line in (note, unscored_warning(table.ids, scores, UNMEASURED)):
        if line:
            warnings.warn(line, UserWarning, stacklevel=2)
    return [(ident, float(value)) for ident, value in zip(table.ids, scores)]


__all__ = ["FoundProxy", "ProxySearch", "resolve_proxy", "score_rows", "search_table"]
