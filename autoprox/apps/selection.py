"""How the proxy of a finished search is chosen: its best search fitness, a rule that
prefers proxies whose figures hold across parts of the search data, or an ensemble
(:class:`~autoprox.proxies.ensemble.EnsembleProxy`) built on the search part.

Every rule reads the run directory only (``best.json``, ``hall_of_fame.json`` and, through
:class:`~autoprox.search.context.RunContext`, the run's search part and statistics): a rule
never sees the run's test part, so the evaluation protocol can score its choice there.

Rules are registered with :func:`register_selection`; the protocol (``autoprox evaluate
--selection NAME``) and the recommended proxies use them by name.
"""

from __future__ import annotations

import warnings
from functools import partial
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.correlation import correlate, jcm
from autoprox.core.errors import ConfigError, GenomeError, RunDirError, no_such_path
from autoprox.core.registry import Registry
from autoprox.genome.terminals import terminals_of
from autoprox.genome.tree import InvalidProxy, parse_genome
from autoprox.proxies.baselines import (
    blend_features,
    blend_scores,
    choose_baselines,
    fit_rank_blend,
)
from autoprox.proxies.ensemble import JOINT, EnsembleProxy, Member, member, quantile
from autoprox.proxies.proxy import Proxy, resolve_proxy
from autoprox.proxies.weighted_fit import label_ranks, ridge_loo
from autoprox.proxies.zoo import ZOO_TERMINAL_SETS
from autoprox.proxies.zoo_scores import zoo_terminal_set
from autoprox.search.context import RunContext
from autoprox.search.fitness import make_folds
from autoprox.search.halloffame import load_hall_of_fame
from autoprox.search.rundir import BEST, HALL_OF_FAME, RunDirectory
from autoprox.search.table_run import refuse_table_run
from autoprox.spaces.descriptors import descriptor_columns

#: What a selection returns: a proxy, or an ensemble of proxies and descriptor blends.
Selected = Proxy | EnsembleProxy

#: Selection name -> function(run directory) -> Proxy or EnsembleProxy.
SELECTIONS: Registry[str, Callable[[Path], Selected]] = Registry("selection", unknown=ConfigError)

#: Hall-of-fame entries a rule considers (the best distinct proxies by search fitness).
CANDIDATES = 10
#: Folds of the search part over which a rule measures how a proxy's figures hold.
INNER_FOLDS = 5


def register_selection(name: str, description: str | None = None):
    """Register the decorated function (run directory -> :class:`Proxy`) as selection ``name``; ``description``,
    what ``evaluate --help`` says of it (default: the first line of the function's docstring)."""

    def decorate(function: Callable[[Path], Selected]):
        entry = function
        if description is not None:  # on a wrapper: the function may be registered again under another name
            entry = partial(function)
            entry.description = description
        SELECTIONS.add(name, entry)
        return function

    return decorate


def selection_help() -> str:
    """Every registered rule with what it does, as ``evaluate --help`` shows them: read from the registry."""
    return ", ".join(f"{name} ({text})" if text else name for name, text in SELECTIONS.describe())


def selection(name: str) -> Callable[[Path], Selected]:
    """The rule registered as ``name``; ConfigError naming the known ones otherwise."""
    return SELECTIONS.lookup(name)


@register_selection("best", "its best search fitness, the default")
def select_best(run_dir: Path) -> Proxy:
    """The run's ``best.json`` genome: the best search-part fitness (the paper's choice)."""
    run = RunDirectory(run_dir)
    genome = run.best_genome()
    try:
        return Proxy(genome, parse_genome(genome))
    except GenomeError as exc:
        raise RunDirError(f"{run.file(BEST)}: {exc}") from None


def inner_fold_jcms(proxy: Proxy, context: RunContext, folds: int = INNER_FOLDS) -> list[float]:
    """The proxy's JCM on each of ``folds`` disjoint parts of the run's search part (seeded by the
    run's split seed); NaN where it is undefined. Raises InvalidProxy."""
    scores = context.score(proxy, "search", workers=1)
    search = context.indices("search")
    jcms = []
    for fold in make_folds(len(search), min(folds, len(search) // 3 or 1) if len(search) >= 6 else 2,
                           context.settings.split_seed):
        part = {classes: values[fold] for classes, values in scores.items()}
        accuracies = {t: values[fold] for t, values in context.accuracies("search").items()}
        from autoprox.proxies.figures import figures

        jcms.append(figures(part, accuracies, list(context.targets), context.plan.target_classes,
                            context.settings.weights)["jcm"])
    return jcms


def lower_bound(jcms: list[float]) -> float:
    """Mean minus standard deviation of fold JCMs (-inf when any is undefined)."""
    values = np.asarray(jcms, dtype=np.float64)
    if values.size == 0 or np.isnan(values).any():
        return float("-inf")
    return float(values.mean() - values.std(ddof=1)) if values.size > 1 else float(values[0])


def _hall_entries(run: RunDirectory, rule: str) -> list:
    """The hall of fame's entries for ``rule``: a file that had to be rebuilt is named in a warning,
    and one unreadable with nothing to rebuild it from stops the rule (RunDirError)."""
    loaded = load_hall_of_fame(run)
    if loaded.note and HALL_OF_FAME in loaded.note and "unreadable" in loaded.note and not loaded.hall.entries:
        raise RunDirError(f"{run.file(HALL_OF_FAME)}: {loaded.note.split('; ')[0]}, and no evaluations to rebuild "
                          f"it from; --selection {rule} chooses among the hall of fame: restore the file, or use "
                          "--selection best")
    if loaded.note:
        warnings.warn(f"{run.path}: {loaded.note}", stacklevel=3)
    return loaded.hall.entries


@register_selection("cv-lcb", f"among the hall of fame's best {CANDIDATES}, the highest mean minus sd of JCM over "
                                      f"{INNER_FOLDS} parts of the search part")
def select_cv_lower_bound(run_dir: Path, candidates: int = CANDIDATES, folds: int = INNER_FOLDS) -> Proxy:
    """Among the hall of fame's best ``candidates``, the proxy with the highest mean minus sd of
    its JCM over ``folds`` parts of the search part: a proxy that ranks every part well is preferred
    to one that ranks some parts very well. Ties go to the better search fitness."""
    run = RunDirectory(run_dir)
    entries = _hall_entries(run, "cv-lcb")[:candidates]
    if not entries:
        return select_best(run_dir)
    context = RunContext.open(run)
    best, best_bound = None, float("-inf")
    for entry in entries:
        proxy = Proxy(entry.genome, parse_genome(entry.genome))
        try:
            bound = lower_bound(inner_fold_jcms(proxy, context, folds))
        except InvalidProxy:
            continue
        if best is None or bound > best_bound:
            best, best_bound = proxy, bound
    return best if best is not None else select_best(run_dir)


# ------------------------------------------------------------------ ensembles

#: Hall-of-fame proxies ``hof-average`` rank-averages.
HOF_MEMBERS = 5
#: ``cv-pick``'s candidates: each a ``+``-joined list of ``best`` (the run's best proxy), ``blend``
#: (the descriptor blend fitted on the part at hand), ``coarse`` (the coarse descriptor that ranks
#: the part at hand best), ``ridge`` (ridge on the ranks of the architecture and zoo terminals,
#: :func:`ridge_columns`) or a built-in proxy (``zico``), averaged with equal weights. The default
#: is what the protocol measured to help (docs/manual.md).
CV_PICK_CANDIDATES = ("best", "blend", "best+blend")
#: The spread of a quantile of distinct values (uniform on (0, 1]): what a ``ridge`` part is scaled to, so that
#: it weighs in an average as much as a member's quantile does.
QUANTILE_SD = 12 ** -0.5


def ridge_columns() -> tuple[str, ...]:
    """The columns of the ``ridge`` part, read from the terminal sets: each architecture terminal but the
    logarithms (a rank is the same on a column and its logarithm) and each zoo terminal of every zoo set
    (``zoo`` and ``zoo_rest``: the zoo's scalar proxies, computed on the run's input), the columns a proxy
    table's ridge reads."""
    zoo_terminal_set()  # both zoo sets registered
    arch = [name for name in terminals_of(["arch"]) if "_log_" not in name]
    return (*arch, *terminals_of(ZOO_TERMINAL_SETS))


#: The primitive a negative ridge coefficient's member is wrapped in (``-x``).
NEGATE = "element_wise_revert("
#: How often the ``ridge`` part turns the columns the fit weighs negatively and fits again.
RIDGE_TURNS = 3


@dataclass(frozen=True)
class RidgeFit:
    """The ``ridge`` part fitted on some architectures: per column its terminal, its sign (-1 where the member
    reads it negated), its weight (the coefficient's size, scaled so that the fitted scores spread as a
    quantile does) and its raw reference (its values there, times its sign)."""

    columns: tuple[str, ...]
    signs: tuple[float, ...]
    weights: tuple[float, ...]
    references: tuple[np.ndarray, ...]

    @property
    def genomes(self) -> tuple[str, ...]:
        """Each member's genome: the terminal, or its negation (:data:`NEGATE`) where its sign is -1."""
        return tuple(column if sign > 0 else f"{NEGATE}{column})" for column, sign in zip(self.columns, self.signs))

    def scores(self, raw: Sequence[np.ndarray]) -> np.ndarray:
        """The part's score of architectures whose column values (the terminals', not negated) are ``raw``."""
        total = np.zeros(len(raw[0]) if raw else 0)
        for sign, weight, reference, values in zip(self.signs, self.weights, self.references, raw):
            total = total + weight * quantile(reference, sign * np.asarray(values, dtype=np.float64))
        return total


def _plan_json(context: RunContext) -> dict:
    return {"input": context.plan.spec.to_json(), "seeds": list(context.plan.seeds)}


def _provenance(run_dir: Path, rule: str, **more) -> dict:
    return {"run": str(run_dir), "selection": rule, **more}


def _valid_scores(values: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(values))) and np.ptp(values) > 0


def usable_scores(scores: Mapping[int, np.ndarray]) -> bool:
    """Whether a genome's raw scores (per class count) are finite and not constant at every class
    count: what a member of a rank-average ensemble needs on its reference part."""
    return all(_valid_scores(v) for v in scores.values())


def genome_average(name: str, context: RunContext, chosen: Sequence[tuple[str, Mapping[int, np.ndarray]]],
                   provenance: dict) -> EnsembleProxy:
    """The equal-weight quantile average of ``chosen`` genomes, each with its raw scores on the
    reference part per class count. Joint when every target shares one statistics class count,
    else one member list per target of the same genomes at that target's class count."""
    weight = 1.0 / len(chosen)

    def members(classes: int) -> tuple[Member, ...]:
        return tuple(member("proxy", genome, scores[classes], weight, classes) for genome, scores in chosen)

    plan = context.plan
    by_key = ({JOINT: members(plan.class_counts[0])} if len(plan.class_counts) == 1
              else {t: members(plan.target_classes[t]) for t in context.targets})
    return EnsembleProxy(name, by_key, _plan_json(context), provenance)


@register_selection("hof-average", f"an ensemble: rank average of the hall of fame's best {HOF_MEMBERS} distinct "
                                           "proxies")
def select_hof_average(run_dir: Path, count: int = HOF_MEMBERS) -> Selected:
    """Equal-weight rank average (quantiles against the search part) of the hall of fame's best
    ``count`` distinct proxies that are valid on the whole search part (finite, not constant,
    and not ranking it exactly as an earlier member). Joint when every target shares one
    statistics class count, else one member list per target of the same proxies."""
    run = RunDirectory(run_dir)
    context = RunContext.open(run)
    chosen: list[tuple[str, Mapping[int, np.ndarray]]] = []
    for entry in _hall_entries(run, "hof-average"):
        if len(chosen) == count:
            break
        try:
            scores = context.score(Proxy(entry.genome, parse_genome(entry.genome)), "search", workers=1)
        except InvalidProxy:
            continue
        if not usable_scores(scores):
            continue
        if any(all(np.array_equal(np.argsort(v, kind="stable"), np.argsort(o[c], kind="stable"))
                   for c, v in scores.items()) for _, o in chosen):
            continue
        chosen.append((entry.genome, scores))
    if not chosen:
        return select_best(run_dir)
    return genome_average(f"hof-average-{len(chosen)}", context, chosen,
                          _provenance(run_dir, "hof-average", genomes=[g for g, _ in chosen]))


class SearchPartScores:
    """Raw scores on a run's search part of the candidates' parts, per target (each computed once)."""

    def __init__(self, run_dir: Path, context: RunContext):
        self.run_dir, self.context = run_dir, context
        self.columns = descriptor_columns(context.archs("search"))
        self.features = blend_features(self.columns)
        self.accuracies = context.accuracies("search")
        self._proxies: dict[str, Mapping[int, np.ndarray]] = {}
        self.best = select_best(run_dir)

    def proxy_text(self, part: str) -> str:
        return self.best.name if part == "best" else part

    def raw(self, part: str, target: str, workers: int | None = 1) -> np.ndarray:
        """Raw scores of ``best`` or a built-in proxy on the whole search part for ``target`` (``workers``: how
        many compute what is not cached, None for the run's)."""
        text = self.proxy_text(part)
        if text not in self._proxies:
            proxy = self.best if part == "best" else resolve_proxy(part)
            if not isinstance(proxy, Proxy) or proxy.provenance.get("file"):
                raise ConfigError(f"cv-pick candidate part {part!r} must be best, blend, coarse, ridge or a built-in "
                                  "proxy")
            self._proxies[text] = self.context.score(proxy, "search", workers=workers)
        return self._proxies[text][self.context.plan.target_classes[target]]

    def ridge(self, target: str, train: Sequence[int]) -> tuple[RidgeFit, list[np.ndarray]]:
        """The ``ridge`` part fitted on ``train`` (positions in the search part): ridge on the columns'
        quantiles among ``train`` against the accuracies' ranks, the penalty by leave-one-out; a column
        with a non-finite value on the search part, or constant on ``train``, is left out. Each column
        enters as itself or negated, as its member will read it (with ties, a negated column's quantile is
        not one minus the column's): oriented first by the sign of its rank correlation with the
        accuracies, then turned wherever the fit gives it a negative weight, and fitted again (at most
        :data:`RIDGE_TURNS` times; a column still negative then is left out). Also gives every member
        column's values on the whole search part."""
        train = list(train)
        kept, raw = [], []
        for column in ridge_columns():
            try:  # the run's workers: a zoo column not yet cached is a pass of each network
                values = np.asarray(self.raw(column, target, workers=None), dtype=np.float64)
            except InvalidProxy:
                continue
            if np.all(np.isfinite(values)) and np.ptp(values[train]) > 0:
                kept.append(column)
                raw.append(values)
        if not kept:
            raise InvalidProxy("no architecture or zoo terminal is finite and varies on the search part")
        ranks = label_ranks(self.accuracies[target][train])
        signs = np.array([1.0 if np.corrcoef(label_ranks(v[train]), ranks)[0, 1] >= 0 else -1.0 for v in raw])
        for _ in range(RIDGE_TURNS + 1):
            features = np.column_stack([quantile(sign * v[train], sign * v[train]) for sign, v in zip(signs, raw)])
            model = ridge_loo(features, ranks)
            if not np.any(model.weights < 0):
                break
            signs = np.where(model.weights < 0, -signs, signs)
        live = [i for i, w in enumerate(model.weights) if w > 0]
        if not live:
            raise InvalidProxy("the ridge part has no column with a weight on the search part")
        columns, kept_signs = tuple(kept[i] for i in live), tuple(float(signs[i]) for i in live)
        references = tuple(np.sort(signs[i] * raw[i][train]) for i in live)
        weights = [float(model.weights[i]) for i in live]
        spread = float(np.std(RidgeFit(columns, kept_signs, tuple(weights), references).scores(
            [raw[i][train] for i in live])))
        if not spread > 0:
            raise InvalidProxy("the ridge part is constant on the search part")
        fit = RidgeFit(columns, kept_signs, tuple(w * QUANTILE_SD / spread for w in weights), references)
        return fit, [raw[i] for i in live]

    def fitted(self, part: str, target: str, train: Sequence[int], test: Sequence[int] | None):
        """(raw scores on ``train``, raw scores on ``test``, the member's value): ``blend`` and ``ridge`` fitted
        and ``coarse`` chosen on ``train`` only. A ``ridge`` part's scores are already on a quantile's scale."""
        if part == "ridge":
            fit, raw = self.ridge(target, train)
            return (fit.scores([v[list(train)] for v in raw]),
                    None if test is None else fit.scores([v[list(test)] for v in raw]), fit)
        if part == "coarse":
            descriptor = choose_baselines(self.columns, self.accuracies, train, [target],
                                          ["coarse"])["coarse"][target]["descriptor"]
            values = np.asarray(self.columns[descriptor], dtype=np.float64)
            return values[list(train)], None if test is None else values[list(test)], descriptor
        if part == "blend":
            choice = fit_rank_blend(self.features[list(train)], self.accuracies[target][list(train)])
            rows = {name: values[list(train)] for name, values in self.columns.items()}
            test_scores = None
            if test is not None:
                test_scores = blend_scores(choice, {name: values[list(test)] for name, values in self.columns.items()})
            return blend_scores(choice, rows), test_scores, choice
        values = self.raw(part, target)
        return values[list(train)], None if test is None else values[list(test)], self.proxy_text(part)


def _parts(candidate: str) -> list[str]:
    parts = [p.strip() for p in candidate.split("+") if p.strip()]
    if not parts:
        raise ConfigError(f"empty cv-pick candidate {candidate!r}")
    return parts


def inner_fold_kendalls(scores: SearchPartScores, candidate: str, target: str, folds: Sequence[Sequence[int]],
                        given: Mapping[str, Sequence[np.ndarray]] | None = None) -> list[float]:
    """Kendall on each inner fold of the search part of ``candidate`` fitted on the other folds
    (blend and references); NaN where undefined.

    ``given``: for a part named in it, its raw scores on the whole search part for each inner fold in turn,
    used instead of the part's own (say, ``best`` from a search run again on each inner training part, which
    ``benchmarks/cv_pick_nested.py`` measures).
    """
    parts = _parts(candidate)
    given = given or {}
    size = len(scores.accuracies[target])
    kendalls = []
    for index, fold in enumerate(folds):
        train = [i for i in range(size) if i not in set(fold)]
        total = np.zeros(len(fold))
        for part in parts:
            if part in given:
                values = np.asarray(given[part][index])
                train_raw, test_raw = values[train], values[list(fold)]
            else:
                train_raw, test_raw, _ = scores.fitted(part, target, train, fold)
            total = total + (test_raw if part == "ridge" else quantile(train_raw, test_raw)) / len(parts)
        kendalls.append(correlate(total, scores.accuracies[target][list(fold)])["kendall"])
    return kendalls


def inner_mean(kendalls: Sequence[float]) -> float:
    """A candidate's figure for ``cv-pick``: the mean of its inner-fold Kendalls, -inf when any is undefined."""
    finite = [v for v in kendalls if v is not None and np.isfinite(v)]
    return float(np.mean(finite)) if len(finite) == len(kendalls) else float("-inf")


def search_part_folds(context: RunContext, folds: int = INNER_FOLDS) -> list[list[int]]:
    """``folds`` inner folds of the run's search part (positions in it), seeded by its split seed;
    fewer when the part is small, so that each holds at least three architectures."""
    size = len(context.indices("search"))
    return make_folds(size, max(2, min(folds, size // 3)), context.settings.split_seed)


def select_cv_pick(run_dir: Path, candidates: Sequence[str] = CV_PICK_CANDIDATES, folds: int = INNER_FOLDS,
                   joint: bool = False, name: str = "cv-pick") -> EnsembleProxy:
    """Per target, the candidate with the best mean Kendall over ``folds`` inner folds of the search
    part (seeded by the run's split seed; blends fitted on each inner training part alone), refitted
    on the whole search part. Ties go to the earlier candidate. Reads nothing of the test part.

    ``joint``: one candidate for every target, the one with the best inner-fold JCM (the targets'
    mean Kendalls weighted as the run's fitness weights them); a blend is still fitted per target.
    The protocol compares the two rules (``cv-pick`` and ``cv-pick-joint``) on its outer folds,
    which is how choosing per target against jointly is itself decided by held-out figures.
    ``name``: the rule's name, recorded in the ensemble and its provenance.
    """
    run = RunDirectory(run_dir)
    context = RunContext.open(run)
    scores = SearchPartScores(Path(run_dir), context)
    size = len(context.indices("search"))
    inner = search_part_folds(context, folds)
    by_target, chosen, table = {}, {}, {}
    for target in context.targets:
        means = {}
        for candidate in candidates:
            try:
                values = inner_fold_kendalls(scores, candidate, target, inner)
            except InvalidProxy:
                values = [float("nan")]
            means[candidate] = inner_mean(values)
        chosen[target] = max(candidates, key=lambda c: means[c])  # max keeps the first of equal ones
        table[target] = means
    more = {}
    if joint:
        inner_jcm = {c: jcm({t: table[t][c] for t in context.targets}, context.settings.weights)
                     for c in candidates}
        pick = max(candidates, key=lambda c: inner_jcm[c])
        chosen = {target: pick for target in context.targets}
        more = {"inner_jcm": inner_jcm}
    for target in context.targets:
        parts = _parts(chosen[target])
        members = []
        classes = context.plan.target_classes[target]
        for part in parts:
            raw, _, value = scores.fitted(part, target, range(size), None)
            if part == "ridge":
                members += [member("proxy", genome, reference, weight / len(parts), classes)
                            for genome, weight, reference in zip(value.genomes, value.weights, value.references)]
                continue
            kind = {"blend": "blend", "coarse": "descriptor"}.get(part, "proxy")
            members.append(member(kind, value, raw, 1.0 / len(parts), classes))
        by_target[target] = tuple(members)
    return EnsembleProxy(name, by_target, _plan_json(context),
                         _provenance(run_dir, name, candidates=list(candidates), chosen=chosen,
                                     inner_kendall=table, **more))


def _register_cv_pick(name: str, description: str, **options) -> None:
    """Register :func:`select_cv_pick` with ``options`` as selection ``name`` (the name it records)."""
    register_selection(name, description)(partial(select_cv_pick, name=name, **options))


#: ``cv-pick-coarse``'s candidates with ZiCo alone and averaged with the proxy and with the blend.
CV_PICK_WIDE_CANDIDATES = (*CV_PICK_CANDIDATES, "coarse", "zico", "best+zico", "blend+zico")
register_selection("cv-pick", "per target, the best of the proxy, the descriptor blend and their average by "
                   f"{INNER_FOLDS}-fold cross-validation on the search part")(select_cv_pick)
_register_cv_pick("cv-pick-joint", "cv-pick's candidates, one of them for every target, by inner-fold JCM", joint=True)
_register_cv_pick("cv-pick-zico", "cv-pick with zico and proxy+blend+zico as candidates too",
                  candidates=(*CV_PICK_CANDIDATES, "zico", "best+blend+zico"))
_register_cv_pick("cv-pick-coarse", "cv-pick with the coarse descriptor chosen on each inner training part as a "
                  "candidate too", candidates=(*CV_PICK_CANDIDATES, "coarse"))
_register_cv_pick("cv-pick-wide", "cv-pick with the coarse descriptor, zico, proxy+zico and blend+zico as candidates "
                  "too", candidates=CV_PICK_WIDE_CANDIDATES)
_register_cv_pick("cv-pick-ridge", "cv-pick with the coarse descriptor, ridge on the ranks of the architecture and "
                  "zoo terminals, and proxy+ridge as candidates too",
                  candidates=(*CV_PICK_CANDIDATES, "coarse", "ridge", "best+ridge"))




def selected_for_target(selected: Selected, target: str) -> Selected:
    """The proxy ``selected`` uses for ``target``, as one that scores every target alike (a per-target
    ensemble's members for ``target``, :meth:`EnsembleProxy.for_target`); a genome is returned as it is."""
    return selected.for_target(target) if isinstance(selected, EnsembleProxy) else selected


def write_selection(run_dir: str | Path, rule: str, out: str | Path, target: str | None = None) -> tuple[Path, Selected]:
    """Choose a finished run's proxy with selection ``rule`` and write it to ``out`` as a proxy file
    that ``rank``, ``export`` and ``vit-search`` read: an ensemble file, or for a single genome a
    proxy JSON (``{"genome": ...}``), either recording the run's split as its ``best.json`` does (so
    ``rank`` defaults to the test split). ``target``: keep only what the rule chose for that target.
    An existing ``out`` is refused (RunDirError), never overwritten."""
    from autoprox.core.atomic import atomic_write_json, refuse_empty_path

    refuse_empty_path(out, "--out", ConfigError)
    out, run_dir = Path(out), Path(run_dir)
    if out.exists():
        raise RunDirError(f"{out} already exists; choose another --out (nothing was overwritten)")
    missing = no_such_path(run_dir, "give a finished run directory")
    if missing:
        raise RunDirError(missing)
    refuse_table_run(run_dir, "select works on the runs of a search of ViT statistics")
    best = RunDirectory(run_dir).best(missing_ok=False)
    if not best.get("finished"):
        raise RunDirError(f"{run_dir}: its search has not finished (continue it with autoprox search --resume)")
    targets = best.get("targets", [])
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise RunDirError(f"{RunDirectory(run_dir).file(BEST)}: 'targets' is not a list of target names")
    if target is not None and target not in targets:
        raise ConfigError(f"--target {target!r} is not one of the run's targets: {', '.join(targets)}")
    selected = selection(rule)(run_dir)
    if target is not None:
        selected = selected_for_target(selected, target)
    # every rule fits on the run's search part alone, so the file records the run's split as best.json
    # does: rank's default is then the test split, as for the run itself, not figures that include the
    # architectures the proxy was chosen on
    split = {"split": best["split"]} if best.get("split") is not None else {}
    if isinstance(selected, EnsembleProxy):
        selected = replace(selected, provenance={**selected.provenance, **split})
        return selected.save(out), selected
    # the run read here, as an ensemble's provenance records it: rank finds its benchmark there (best.json's
    # own "run" is where the search ran, which a copied run no longer is)
    atomic_write_json(out, {"genome": selected.name, "run": str(run_dir), "selection": rule,
                            "stats": best.get("stats"), **split, **({"target": target} if target else {})})
    return out, selected

__all__ = ["CANDIDATES", "CV_PICK_CANDIDATES", "HOF_MEMBERS", "INNER_FOLDS", "SELECTIONS", "RidgeFit", "SearchPartScores",
           "Selected", "genome_average", "inner_fold_jcms", "inner_fold_kendalls", "inner_mean", "lower_bound", "register_selection",
           "ridge_columns", "search_part_folds", "selection_help", "select_best",
           "select_cv_lower_bound", "select_cv_pick", "select_hof_average",
           "selected_for_target", "selection", "usable_scores", "write_selection"]
