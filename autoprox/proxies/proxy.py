"""Proxies by name: built-in architecture-level ones, the hand-crafted zoo, the published
Auto-Prox genomes, genome strings and proxy JSON files, and scoring architectures with any
of them through one path (:meth:`Proxy.score`, over :mod:`autoprox.proxies.scorers`), behind the
interface every proxy kind shares (:class:`autoprox.proxies.scoring.ScoringProxy`)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.atomic import read_json_file
from autoprox.core.errors import ConfigError, GenomeError, ProxyError
from autoprox.core.registry import LiveNames, Registry
from autoprox.data.cache import StatisticsCache, StatsPlan
from autoprox.genome.rank_formula import MISSING_COLUMN_SCORING, RankFormula, parse_formula
from autoprox.genome.weighted import WEIGHTED_FORMULA_FORMAT, WeightedFormula
from autoprox.genome.tree import InvalidProxy, genome_to_string, parse_genome
from autoprox.genome.space import GENOME_KINDS, TEMPLATE
from autoprox.networks.statistics import InputSpec
from autoprox.proxies.zoo import ZOO
from autoprox.proxies.zoo_scores import NO_TEACHER_NOTE, RawResult
from autoprox.proxies.recommended import is_recommended_name, resolve_recommended
from autoprox.proxies.proxy_input import (BARE_WORD, PROXY_FILE_FORMATS, check_recorded_split, existing_file,
                                          formula_problem, refuse_missing_proxy_path, refuse_unknown_format,
                                          register_proxy_file_format, split_proxy_list)
from autoprox.proxies.scoring import (
    Outcome,
    ProgressFn,
    architectures_given,
    candidate_outcomes,
    check_cache_and_plan,
    scoring_inputs,
)
from autoprox.proxies.scorers import (
    ARCHITECTURE_PROXIES,
    HEAD_CLASSES,
    Scorer,
    mean_over_seeds,
    scorer_for,
)


@dataclass(frozen=True)
class PublishedGenome:
    """A proxy published as a formula, written as a genome of this project's template."""

    name: str
    genome: str
    source: str


#: The published proxies by name, in registration order.
PUBLISHED: Registry[str, PublishedGenome] = Registry("published genome", describe=lambda entry: entry.source,
                                                     shares_names_with=ZOO)


def register_published_genome(name: str, genome: str, source: str) -> PublishedGenome:
    """Register ``genome`` (checked by parsing it) as the built-in proxy ``name``."""
    PUBLISHED.check_free(name)
    parse_genome(genome)
    return PUBLISHED.add(name, PublishedGenome(name, genome, source))


#: The published Auto-Prox proxies (AAAI 2024, equations 2 and 3) as genomes of this
#: project's template, so they run through exactly the evaluator a discovered genome does.
#:
#: AutoProxA = |dL/dtheta_l| + 1/(n + eps) sum_i sigmoid(dL/dtheta_k)_i, theta_l the qkv weight
#: (F1g), theta_k the MLP weight (F3g: fc1, the MLP weight the statistics hold). Branch a is
#: element_wise_abs then no_op, branch b sigmoid then element_wise_normalized_sum (the
#: paper's 1/(n + eps) sum, a scalar); element_wise_sum broadcasts that scalar over |F1g| and
#: to_mean_scalar reduces: mean|F1g| + mean sigmoid(F3g), per block, averaged over blocks.
#:
#: AutoProxP = ||sigmoid(theta_l)||_F - log(exp(||theta_k||) / sum_i exp(||theta_k||)), theta_l
#: the qkv weight (F1), theta_k fc1 (F3). Reading chosen: ||theta_k|| is the element-wise
#: absolute value (the bars of eq. 2's |dL/dtheta_l|), so the second term is minus the log
#: softmax of |F3| along one dimension (our logsoftmax: each row, i.e. one hidden unit's
#: incoming weights), reduced by to_mean_scalar. This fills the template exactly: two unary
#: ops per branch (sigmoid, frobenius_norm | element_wise_abs, logsoftmax) and
#: element_wise_difference. Rejected readings: ||theta_k|| as a norm makes the softmax of
#: identical values 1/n and the term log n, a width count independent of the weights (and in
#: the genome space the log softmax of a scalar is 0); no_op instead of the absolute value
#: leaves one unary slot unexplained (rank it with ``--proxy`` and the genome string
#: ``...logsoftmax(no_op(F3))...`` to compare).
AUTOPROX_A = ("block_mean(to_mean_scalar(element_wise_sum(no_op(element_wise_abs(F1g)), "
              "element_wise_normalized_sum(sigmoid(F3g)))))")
AUTOPROX_P = ("block_mean(to_mean_scalar(element_wise_difference(frobenius_norm(sigmoid(F1)), "
              "logsoftmax(element_wise_abs(F3)))))")
register_published_genome("autoprox_a", AUTOPROX_A, "Auto-Prox (Wei et al. AAAI 2024) eq. 2, found on AutoFormer")
register_published_genome("autoprox_p", AUTOPROX_P, "Auto-Prox (Wei et al. AAAI 2024) eq. 3, found on PiT")

#: Every built-in name, in the order of the ranking table.
BUILTIN_PROXIES: Sequence[str] = LiveNames(lambda: (*ARCHITECTURE_PROXIES, *ZOO, *PUBLISHED))


@dataclass(frozen=True)
class Proxy:
    """A proxy ready to score architectures.

    ``genome`` is set for statistics-based proxies (a deap PrimitiveTree); ``zoo`` names a
    hand-crafted proxy of :data:`autoprox.proxies.zoo.ZOO`; neither for an architecture
    proxy (``params``, ``flops``: :data:`autoprox.proxies.scorers.ARCHITECTURE_PROXIES`).
    How it scores is its :attr:`scorer`'s.
    """

    name: str
    genome: object = None  # a deap PrimitiveTree for statistics-based proxies
    provenance: Mapping = field(default_factory=dict)
    zoo: str | None = None
    note: str = ""
    #: A rank formula over proxy columns (:mod:`autoprox.genome.rank_formula`), and what it does with a
    #: column a space lacks (``refuse`` or ``neutral``).
    formula: RankFormula | None = None
    missing: str = "refuse"

    @cached_property
    def scorer(self) -> Scorer:
        """How this proxy turns architectures into raw values and scores."""
        try:
            return scorer_for(self.name, self.genome, self.zoo, self.formula, self.missing)
        except KeyError as exc:
            if self.formula is not None:
                raise ProxyError(f"{self.name} reads proxy column {exc.args[0]!r}, which autoprox cannot compute on "
                                 f"networks (it computes {', '.join((*ARCHITECTURE_PROXIES, *ZOO))}); score it on a "
                                 "proxy table that has the column") from None
            raise ProxyError(f"unknown proxy {self.zoo or self.name!r}; known built-ins: {_known_names()}") from None

    @property
    def needs_statistics(self) -> bool:
        return self.scorer.needs_statistics

    @property
    def kind(self) -> str:
        """``architecture``, ``genome`` or ``zoo`` (a label for tables)."""
        return self.scorer.kind

    @property
    def set_level(self) -> bool:
        """Whether its scores need the whole ranked set (TVT's min-max normalisation)."""
        return self.scorer.set_level

    @property
    def source(self) -> str:
        if self.genome is not None:
            published = PUBLISHED.get(self.name)
            return published.source if published else str(self.provenance.get("file") or "genome string")
        return self.scorer.source

    def computed_as(self, teacher=None) -> str:
        """The name of the proxy actually computed: without a teacher, a zoo proxy that needs
        one is replaced by its teacher-free part (``tvt`` -> ``tvt_l2``)."""
        return self.scorer.computed_as(teacher) or self.name

    def raw_values(self, archs: Sequence, spec: InputSpec, seed: int, num_classes: int, cache: StatisticsCache,
                   *, workers: int = 1, progress: Callable[[int, int], None] | None = None, teacher=None,
                   keep_statistics: bool = True, head_classes: int = HEAD_CLASSES) -> list[RawResult]:
        """One raw value (or failure reason) per architecture for one statistics seed and class
        count: the core every scoring path shares (:meth:`Scorer.raw_values`).

        ``head_classes``: the classifier head architecture proxies count with (the
        engine's 100; ``vit-search --classes C`` uses C). ``keep_statistics`` false:
        genomes' statistics are computed and dropped instead of cached.
        """
        return self.scorer.raw_values(archs, spec, seed, num_classes, cache, workers=workers, progress=progress,
                                      teacher=teacher, keep_statistics=keep_statistics, head_classes=head_classes)

    def set_scores(self, raws: Sequence) -> np.ndarray:
        """Scores of a ranked set from one seed's raw values (set-level proxies normalise over it)."""
        return self.scorer.set_scores(raws)

    def score(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, workers: int = 1,
              progress: Callable[[int, int], None] | None = None, teacher=None) -> dict[int, np.ndarray]:
        """Scores of ``archs`` per class count of ``plan`` (the mean over its seeds).

        Statistics come from the cache (computed in parallel where missing) and are read
        one architecture at a time, so memory stays flat. Zoo proxies are computed per seed
        on fresh networks (their raw values kept in the cache directory's ``zoo/`` part),
        and set-level ones (TVT) normalised over ``archs`` per seed before the mean.
        Architecture proxies count a 100-class head whatever the class count. Raises
        InvalidProxy naming the first failing architecture, and ConfigError (one line) when ``cache`` or
        ``plan`` is missing: :meth:`score_architectures` scores with the default ones.
        """
        scorer = self.scorer  # an unknown proxy is named before what it was given
        check_cache_and_plan(cache, plan)
        reported = scorer.prepare(archs, cache, plan, workers=workers, progress=progress)
        per_key = {}
        for seed, classes in plan.keys():
            results = self.raw_values(archs, plan.spec, seed, classes, cache, workers=workers,
                                      progress=None if reported else progress, teacher=teacher)
            failed = [(i, r.error) for i, r in enumerate(results) if not r.ok]
            if failed:
                index, reason = failed[0]
                raise InvalidProxy(f"{self.name} failed on {len(failed)} of {len(archs)} architectures "
                                   f"(first: architecture {index}, seed {seed}: {reason})")
            per_key[seed, classes] = self.set_scores([r.raw for r in results])
        return mean_over_seeds(per_key)

    # ---- the scoring interface every proxy kind shares (autoprox.proxies.scoring.ScoringProxy)

    @property
    def targets(self) -> tuple[str, ...]:
        """Empty: a proxy has no members of its own per target, it scores every target alike."""
        return ()

    def scoring_plan(self, plan: StatsPlan) -> StatsPlan:
        """``plan`` itself: a proxy is scored with the statistics it is given."""
        return plan

    def target_scores(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, targets: Sequence[str],
                      workers: int = 1, progress: ProgressFn | None = None,
                      teacher=None) -> dict[str, np.ndarray]:
        """Scores of ``archs`` per target: :meth:`score` at each target's class count of ``plan`` (computed
        once per class count); ConfigError naming a target ``plan`` has no class count for, or what the call lacks
        (:func:`~autoprox.proxies.scoring.check_cache_and_plan`)."""
        check_cache_and_plan(cache, plan)
        unknown = [t for t in targets if t not in plan.target_classes]
        if unknown:
            raise ConfigError(f"{self.name}: the statistics plan has no class count for target {unknown[0]!r}; "
                              f"it has: {', '.join(plan.target_classes)}")
        per_classes = self.score(archs, cache, plan, workers=workers, progress=progress, teacher=teacher)
        return {t: per_classes[plan.target_classes[t]] for t in targets}

    def scores(self, archs: Sequence, cache: StatisticsCache, plan: StatsPlan, target: str | None = None,
               workers: int = 1, progress: ProgressFn | None = None, teacher=None) -> np.ndarray:
        """One score per architecture: :meth:`score` at ``target``'s class count of ``plan``, or at the plan's
        first (smallest) class count when ``plan`` does not map ``target`` (None)."""
        per_classes = self.score(archs, cache, plan, workers=workers, progress=progress, teacher=teacher)
        return per_classes[plan.target_classes.get(target, plan.class_counts[0])]

    def candidate_scores(self, archs: Sequence, spec: InputSpec, seeds: Sequence[int], cache: StatisticsCache,
                         target: str | None = None, *, workers: int = 1, keep_statistics: bool = True,
                         head_classes: int = HEAD_CLASSES, teacher=None) -> list[Outcome]:
        """(score, seconds, error) of each architecture, failures kept and never stopping the others (the ViT
        search's form): :meth:`raw_values` per seed with statistics and head of ``head_classes`` classes, the
        mean over seeds, or a set-level proxy's raw value per seed (its set is the whole candidate list).
        ``target`` is not read: a proxy scores every target alike."""
        runs = [self.raw_values(archs, spec, seed, head_classes, cache, workers=workers, teacher=teacher,
                                keep_statistics=keep_statistics, head_classes=head_classes) for seed in seeds]
        return candidate_outcomes(runs, self.set_level)

    def score_architectures(self, archs, workers: int = 1, cache_dir: str | None = None, progress: bool = False,
                            *, cache: StatisticsCache | None = None, plan: StatsPlan | None = None,
                            target: str | None = None) -> np.ndarray:
        """Scores of architectures, computed as ``autoprox score`` and a search compute them (:meth:`score`,
        statistics cached); a run's found proxy (``best_.score_architectures``) scores through this, and an
        ensemble's :meth:`~autoprox.proxies.ensemble.EnsembleProxy.score_architectures` takes the same arguments.

        Parameters
        ----------
        archs : sequence of dict, Benchmark or str
            Architecture configs (``{"base_dim": 32, ...}``, any registered space's), a
            :class:`~autoprox.data.benchmark.Benchmark`, or a benchmark: a space name with a packaged file
            (``"pit"``) or a benchmark file's path.
        workers : int
            Processes computing missing statistics.
        cache_dir : str, optional
            The statistics cache (default ``$AUTOPROX_CACHE`` or ``~/.cache/autoprox``); not with ``cache``.
        progress : bool
            Show a progress line on stderr while statistics are computed.
        cache, plan : StatisticsCache, StatsPlan, optional
            The cache and the statistics plan (a run's); default the command line's: a gaussian minibatch of 8,
            statistics seed 0, a 100-class head.
        target : str, optional
            The target whose class count of ``plan`` scores (a proxy scores every target alike otherwise).

        Returns
        -------
        numpy.ndarray
            One score per architecture, in the order given (``target``'s class count's, else the 100-class
            statistics', else the plan's first).
        """
        from autoprox.core.progress import Progress

        parsed, cache, plan = scoring_inputs(archs, workers, cache_dir, cache, plan)
        scores = self.score(parsed, cache, plan, workers=workers,
                            progress=Progress("statistics") if progress else None)
        if target in plan.target_classes:
            return scores[plan.target_classes[target]]
        return scores[100] if 100 in scores else next(iter(scores.values()))


def _known_names() -> str:
    return ", ".join((*ARCHITECTURE_PROXIES, *ZOO, *PUBLISHED))


def resolve_proxy(text: str) -> Proxy:
    """A built-in name (``params``, ``flops``, a zoo proxy, ``autoprox_a``/``autoprox_p``), a path to a
    proxy JSON (such as a run's ``best.json``, or a file of a :data:`PROXY_FILE_FORMATS` format such as
    an ensemble, which gives that format's proxy), or a genome string."""
    if text in ARCHITECTURE_PROXIES:
        return Proxy(text)
    if text in ZOO:
        return Proxy(text, zoo=text, note=NO_TEACHER_NOTE if ZOO[text].needs_teacher else "")
    if text in PUBLISHED:
        genome = PUBLISHED[text].genome
        return Proxy(text, parse_genome(genome), {"builtin": text, "genome": genome})
    if is_recommended_name(text):
        return _recommended_proxy(text)
    path = existing_file(text)
    if path is None and text.endswith(".json"):
        raise ProxyError(f"proxy file not found: {text}")
    if path is not None:
        data = read_json_file(path, "a JSON proxy file", ProxyError)
        if isinstance(data, dict) and isinstance(data.get("format"), str) and data["format"] in PROXY_FILE_FORMATS:
            return PROXY_FILE_FORMATS[data["format"]](path, data)
        if isinstance(data, dict) and "format" in data:
            refuse_unknown_format(path, data["format"])
        if not isinstance(data, dict) or not isinstance(data.get("genome"), str):
            raise ProxyError(f"{path}: no 'genome' string in this proxy file")
        if data.get("split") is not None:
            check_recorded_split(path, data["split"])
        try:
            tree = parse_genome(data["genome"])
        except GenomeError as exc:
            raise ProxyError(f"{path}: {exc}") from None
        return Proxy(genome_to_string(tree), tree, {"file": str(path), **{k: data[k] for k in ("run", "space", "stats", "split") if k in data}})
    try:  # a genome of the statistics never parses as a rank formula: its leaves are no transformed columns
        formula = parse_formula(text)
    except GenomeError:
        pass
    else:
        return Proxy(str(formula), formula=formula)
    try:
        tree = parse_genome(text)
    except GenomeError as exc:
        if BARE_WORD.fullmatch(text):  # a mistyped name: the genome's list of every token would bury the line
            close = difflib.get_close_matches(text, [*ARCHITECTURE_PROXIES, *ZOO, *PUBLISHED], n=1)
            raise ProxyError(f"unknown proxy {text!r}: not a built-in ({_known_names()}), a file, a rank formula or "
                             f"a genome token" + (f"; did you mean {close[0]!r}?" if close else "")) from None
        refuse_missing_proxy_path(text)  # a mistyped path: said so, not parsed as a genome
        problem = formula_problem(text)
        if problem is not None:  # meant as a rank formula: its problem, not the genome's list of every token
            raise ProxyError(f"unknown proxy {text!r}: not a rank formula: {problem}") from None
        # a call or an expression is meant as a genome: its problem first, where a terminal shows it whole
        raise ProxyError(f"unknown proxy {text!r}: not a genome ({exc}); nor a built-in ({_known_names()}) or a "
                         "file") from None
    return Proxy(genome_to_string(tree), tree)


#: The ``format`` of a rank-formula proxy file.
RANK_FORMULA_FORMAT = "autoprox-rank-formula/1"


@register_proxy_file_format(RANK_FORMULA_FORMAT)
def _read_rank_formula_file(path: Path, data: Mapping) -> Proxy:
    """A rank-formula proxy file: ``{"format": ..., "formula": TEXT, "missing": "neutral"|"refuse", ...}``."""
    text, missing = data.get("formula"), data.get("missing", "refuse")
    if not isinstance(text, str) or missing not in MISSING_COLUMN_SCORING:
        raise ProxyError(f"{path}: a rank-formula file needs a 'formula' string and 'missing' "
                         f"{' or '.join(MISSING_COLUMN_SCORING)}")
    try:
        formula = parse_formula(text)
    except GenomeError as exc:
        raise ProxyError(f"{path}: {exc}") from None
    provenance = {"file": str(path), **{k: data[k] for k in ("chosen_by", "protocol", "note") if k in data}}
    return Proxy(str(formula), provenance=provenance, formula=formula, missing=missing)


@register_proxy_file_format(WEIGHTED_FORMULA_FORMAT)
def _read_weighted_formula_file(path: Path, data: Mapping) -> Proxy:
    """A weighted-formula proxy file (a table search's ``best.json``): ``{"format": ..., "formula": {...}}``."""
    if not isinstance(data.get("formula"), Mapping):
        raise ProxyError(f"{path}: a weighted-formula file needs a 'formula' object (its columns, terms and weights, "
                         "as a table search's best.json holds)")
    try:
        formula = WeightedFormula.from_json(data.get("formula"))
    except GenomeError as exc:
        raise ProxyError(f"{path}: {exc}") from None
    provenance = {"file": str(path), **{k: data[k] for k in ("run", "target", "table") if k in data}}
    return Proxy(str(path), provenance=provenance, formula=formula, missing="neutral")


def _recommended_proxy(text: str):
    """The proxy a ``recommended:SPACE/TARGET`` name stands for (:mod:`autoprox.proxies.recommended`): its
    manifest entry's file, cut to the entry's ``target`` when the file is a per-target ensemble."""
    path, entry = resolve_recommended(text)
    proxy = resolve_proxy(str(path))
    target = entry.get("target")
    if target is not None and getattr(proxy, "targets", ()):
        proxy = proxy.for_target(target)
    # A genome keeps its genome string as its name (commands read the genome from it); an ensemble and a
    # rank formula are named.
    return replace(proxy, name=text) if getattr(proxy, "kind", "") in ("ensemble", "rank formula") else proxy


def resolve_proxies(text: str) -> list[Proxy]:
    """``all`` (every built-in), or a comma list of anything :func:`resolve_proxy` takes.

    Duplicates are dropped (first one kept), with a warning naming each; ``all`` may appear inside a list.
    """
    import warnings

    names = split_proxy_list(text)
    if not names:
        raise ProxyError(f"no proxy given; known built-ins: all, {_known_names()}")
    proxies: list[Proxy] = []
    seen: set[str] = set()
    dropped: list[str] = []
    for name in names:
        for item in ((*ARCHITECTURE_PROXIES, *ZOO, *PUBLISHED) if name == "all" else (name,)):
            proxy = resolve_proxy(item)
            if proxy.name not in seen:
                seen.add(proxy.name)
                proxies.append(proxy)
            elif proxy.name not in dropped:
                dropped.append(proxy.name)
    if dropped:
        warnings.warn(repeated_proxies_warning(dropped), stacklevel=2)
    return proxies


def repeated_proxies_warning(names: Sequence[str]) -> str:
    """The warning of a proxy list that names ``names`` more than once (each is scored once)."""
    return f"the proxy list names {', '.join(names)} more than once; each is kept once"


def seed_genome(text: str, kind: str = TEMPLATE) -> str:
    """The genome string a search of genome ``kind`` can start from for ``text``; ProxyError saying why not.

    Built-in published proxies (``autoprox_a``, ``autoprox_p``), genome strings and
    proxy files are accepted when the kind can start from their tree
    (:meth:`~autoprox.genome.space.GenomeKind.check_seed`: the template's shape for ``template``, whose search
    mutates template genes; any tree for ``free``, whose search checks it is within its genome space);
    ``params``, ``flops`` and the zoo are refused with the reason.
    """
    genome_kind = GENOME_KINDS.lookup(kind)
    proxy = resolve_proxy(text)
    if proxy.genome is None:
        raise ProxyError(f"{proxy.name} cannot seed the search: it is {proxy.scorer.nature} "
                         "that genomes are built from")
    try:
        genome_kind.check_seed(proxy.genome)
    except GenomeError as exc:
        raise ProxyError(f"{proxy.name} cannot seed the search: {exc}") from None
    return genome_to_string(proxy.genome)


def score_archs(proxy: Proxy, archs: Sequence, cache: StatisticsCache, plan: StatsPlan,
                workers: int = 1, progress: Callable[[int, int], None] | None = None,
                teacher=None) -> dict[int, np.ndarray]:
    """Scores of ``archs`` per class count (mean over the plan's seeds): :meth:`Proxy.score`."""
    return proxy.score(archs, cache, plan, workers=workers, progress=progress, teacher=teacher)


__all__ = [
    "AUTOPROX_A",
    "AUTOPROX_P",
    "BUILTIN_PROXIES",
    "PUBLISHED",
    "RANK_FORMULA_FORMAT",
    "Proxy",
    "PublishedGenome",
    "architectures_given",
    "register_published_genome",
    "repeated_proxies_warning",
    "resolve_proxies",
    "resolve_proxy",
    "score_archs",
    "seed_genome",
]
