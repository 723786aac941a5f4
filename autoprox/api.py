"""The Python API, in the manner of gplearn's and PySR's estimators.

>>> from autoprox.api import ProxySearch
>>> search = ProxySearch(space="pit", iterations=50, out="runs/pit-notebook").fit()  # doctest: +SKIP
>>> search.best_.genome, search.best_.test_jcm                                         # doctest: +SKIP
>>> search.hall_of_fame_[0].sympy, search.hall_of_fame_[0].latex                      # doctest: +SKIP
>>> ProxySearch.from_run("runs/pit-best").best_.score(model, images, labels)           # doctest: +SKIP

A fitted search is a run directory (the same one ``autoprox search`` writes); every
attribute ending in ``_`` is read from it, so ``from_run`` gives the same object for a
run made from the command line. The command line and this API share every step.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Mapping, Sequence

from autoprox.core.errors import ConfigError, RunDirError
from autoprox.data.benchmark import default_bench_path
from autoprox.genome.tree import (
    AGGREGATIONS,
    GenomeSpace,
    parse_genome,
    score_architecture,
)
from autoprox.proxies.proxy import Proxy
from autoprox.search.context import RunContext
from autoprox.search.multispace import MultiRunContext, open_context
from autoprox.search.evolution import EvolutionConfig
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.rundir import RunDirectory, read_json
from autoprox.search.settings import SearchSettings


@dataclass(frozen=True)
class FoundProxy:
    """A discovered proxy: its genome, its figures, and its readable and runnable forms.

    ``jcm`` and ``kendall`` are search-split figures (what evolution saw); ``test_jcm``
    is the test split's when the run's ``best.json`` reports it.
    """

    genome: str
    jcm: float | None = None
    kendall: Mapping[str, float] = field(default_factory=dict)
    test_jcm: float | None = None
    complexity: int | None = None

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
        """
        from autoprox.networks.runtime import collect
        from autoprox.spaces.descriptors import TERMINAL_PREFIX

        names = sorted({node.name[len(TERMINAL_PREFIX):].removeprefix("log_") for node in self.tree
                        if node.name.startswith(TERMINAL_PREFIX)})
        stats, values = collect(model, images, labels, descriptors=descriptors, head_classes=head_classes,
                                names=tuple(names))
        terminals = {}
        for name, value in values.items():
            terminals[f"{TERMINAL_PREFIX}{name}"] = float(value)
            terminals[f"{TERMINAL_PREFIX}log_{name}"] = math.log(float(value))
        return float(score_architecture(self.tree, stats, terminals or None))


def _bench_files(space, bench) -> str | tuple[str, ...]:
    """The benchmark file of ``space``/``bench``, or the files of several (spaces first, then benchmarks)."""
    spaces = [] if space is None else [space] if isinstance(space, str) else list(space)
    files = [] if bench is None else [str(bench)] if isinstance(bench, (str, Path)) else [str(b) for b in bench]
    chosen = [str(default_bench_path(s)) for s in spaces] + files
    return chosen[0] if len(chosen) == 1 else tuple(chosen)


class ProxySearch:
    """A proxy search as an estimator: set it up, :meth:`fit` it, read the fitted attributes.

    Parameters
    ----------
    space : {"autoformer", "pit"} or sequence of them, optional
        Search space; picks the space's released benchmark file (found without flags). Several
        (``space=["autoformer", "pit"]``): one search over all of them, its fitness the JCM over
        every (benchmark, target) pair (``bench_weights={"pit": 2}`` weighs a benchmark).
    bench : str or sequence of str, optional
        A benchmark file instead of ``space`` (several: as several spaces).
    targets : sequence of str
        Targets of the joint correlation metric (default: the KD columns plus imagenet_super).
    iterations, population, seed : int
        Evolution length, population size and seed (the paper's 200, 20, 0).
    genome : {"template", "free"}
        The paper's template trees or free-form typed trees.
    aggregation : str or sequence of str
        Over blocks: ``"mean"`` (the paper), ``"sum"``, ``"wmean"``, ``"std"``, several, or ``"gene"`` (all).
    arch_terminals : bool
        Let genomes use architecture-level scalars (parameter count, depth, ...).
    cv_folds : int
        Cross-validated fitness over this many folds of the search split (0: none).
    parsimony : bool
        At equal JCM the smaller proxy ranks higher.
    out : str, optional
        Run directory (default: a new temporary directory); must be new or empty.
    **settings
        Any other field of :class:`autoprox.search.settings.SearchSettings` (``batch_size``,
        ``workers``, ``cache_dir``, ``split_seed``, ``weights``, ...) or of
        :class:`autoprox.search.evolution.EvolutionConfig` (``margin``, ``retry_cap``, ...).

    Attributes
    ----------
    best_ : FoundProxy
        The best proxy, with its search- and test-split figures (``best.json``).
    hall_of_fame_ : list of FoundProxy
        The best distinct proxies seen, best first.
    run_dir_ : pathlib.Path
        The run directory.
    report_ : dict
        The content of ``best.json``.
    """

    def __init__(self, space: str | None = None, bench: str | None = None, targets: Sequence[str] = (),
                 iterations: int = 200, population: int = 20, seed: int = 0, genome: str = "template",
                 aggregation: str | Sequence[str] = "mean", arch_terminals: bool = False, cv_folds: int = 0,
                 parsimony: bool = False, out: str | None = None, quiet: bool = True, **settings) -> None:
        self.space, self.bench, self.targets = space, bench, tuple(targets)
        self.iterations, self.population, self.seed = iterations, population, seed
        self.genome, self.aggregation, self.arch_terminals = genome, aggregation, arch_terminals
        self.cv_folds, self.parsimony, self.out, self.quiet = cv_folds, parsimony, out, quiet
        self.settings = dict(settings)

    def search_settings(self) -> SearchSettings:
        """The :class:`SearchSettings` these parameters describe (what ``config.json`` will record)."""
        if self.bench is None and self.space is None:
            raise ConfigError("give space='autoformer'|'pit' or bench=FILE")
        evolution_fields = set(EvolutionConfig.__dataclass_fields__)
        extra_evolution = {k: v for k, v in self.settings.items() if k in evolution_fields}
        extra_settings = {k: v for k, v in self.settings.items() if k not in evolution_fields}
        unknown = set(extra_settings) - set(SearchSettings.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown search setting(s): {', '.join(sorted(unknown))}")
        evolution = EvolutionConfig(population_size=self.population, iterations=self.iterations, seed=self.seed,
                                    parsimony=self.parsimony, **extra_evolution)
        names = [self.aggregation] if isinstance(self.aggregation, str) else list(self.aggregation)
        if names == ["gene"]:
            names = list(AGGREGATIONS)
        names = [n if n.startswith("block_") else f"block_{n}" for n in names]
        space = GenomeSpace(self.genome, tuple(names), self.arch_terminals)
        bench = _bench_files(self.space, self.bench)
        return SearchSettings(bench=bench, targets=self.targets, evolution=evolution, genome=space.to_json(),
                              cv_folds=self.cv_folds, **extra_settings)

    def fit(self) -> "ProxySearch":
        """Run the search into :attr:`out` (resuming it when it already holds this search, stopped)."""
        from autoprox.search.engine import run_search

        out = Path(self.out) if self.out else Path(tempfile.mkdtemp(prefix="autoprox-run-"))
        run = RunDirectory(out)
        if run.exists():
            recorded = run.config()["settings"]
            settings = self.search_settings()
            wanted = (MultiRunContext if settings.multi_space else RunContext).from_settings(settings).settings.to_json()
            if recorded != wanted:
                raise RunDirError(f"{out} holds another search; choose another out")
            run_search(None, out, resume=True, quiet=self.quiet)
        else:
            run_search(self.search_settings(), out, quiet=self.quiet)
        return self._read(out)

    @classmethod
    def from_run(cls, path: str | Path) -> "ProxySearch":
        """The fitted search of an existing run directory (made by ``fit`` or ``autoprox search``)."""
        run = RunDirectory(path)
        recorded = SearchSettings.from_json(run.config()["settings"])
        space = recorded.genome_space
        evolution = recorded.evolution
        own = {"bench", "targets", "evolution", "genome", "cv_folds"}
        extra = {k: getattr(recorded, k) for k in SearchSettings.__dataclass_fields__ if k not in own}
        extra |= {k: getattr(evolution, k) for k in EvolutionConfig.__dataclass_fields__
                  if k not in ("population_size", "iterations", "seed", "parsimony")}
        search = cls(bench=recorded.bench, targets=recorded.targets, iterations=evolution.iterations,
                     population=evolution.population_size, seed=evolution.seed, genome=space.kind,
                     aggregation=list(space.aggregations), arch_terminals=space.arch_terminals,
                     cv_folds=recorded.cv_folds, parsimony=evolution.parsimony, out=str(path), **extra)
        return search._read(Path(path))

    def _read(self, out: Path) -> "ProxySearch":
        run = RunDirectory(out)
        best_path = run.file("best.json")
        if not best_path.is_file():
            raise RunDirError(f"{out} has no best.json yet: the search has not reached its first report")
        report = read_json(best_path)
        if not isinstance(report, dict) or not isinstance(report.get("genome"), str):
            raise RunDirError(f"{best_path}: not a best.json this autoprox wrote")
        search, test = report.get("search") or {}, report.get("test") or {}
        self.report_ = report
        self.run_dir_ = out
        self.best_ = FoundProxy(report["genome"], search.get("jcm"),
                                {t: m.get("kendall") for t, m in (search.get("targets") or {}).items()},
                                test.get("jcm"))
        self.hall_of_fame_ = [FoundProxy(e.genome, e.jcm, dict(e.kendall), complexity=e.complexity)
                              for e in load_hall_of_fame(run).hall.entries]
        return self

    def context(self) -> RunContext:
        """The run's :class:`RunContext` (benchmark, split, statistics), to score other proxies on it."""
        return open_context(self.run_dir_)

    def __repr__(self) -> str:
        fitted = f", fitted: {self.best_.genome}" if hasattr(self, "best_") else ""
        return f"ProxySearch(space={self.space!r}, bench={self.bench!r}, iterations={self.iterations}{fitted})"


__all__ = ["FoundProxy", "ProxySearch"]
