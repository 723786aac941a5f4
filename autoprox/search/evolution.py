"""The evolutionary proxy search of the Auto-Prox paper (Algorithm 1), elitism-preserving.

Each iteration draws a random sample of the population, takes its top-k by fitness
(a record's ``fitness``: the JCM in the paper's setting), picks a parent at random among
them and mutates it. The child joins only if ``fitness(child) - fitness(parent) >= margin``;
otherwise the parent is mutated again, up to ``retry_cap`` times, after which the
iteration adds nothing. When a child joins, the member with the lowest fitness leaves.
The population never holds two genomes with the same canonical form.

All randomness comes from the ``random.Random`` passed in; its state is part of the
checkpoint, so a resumed search continues exactly where it stopped.
"""

from __future__ import annotations

import math
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from autoprox.core.errors import ConfigError, RunDirError, SearchError
from autoprox.genome.kinds import genome_forms
from autoprox.core.errors import GenomeError
from autoprox.genome.space import GenomeSpace, SearchedSpace
from autoprox.genome.template import PAPER_SPACE
from autoprox.search.fitness import FitnessEvaluator, FitnessRecord
from autoprox.search.options import setting_field, setting_option


@dataclass(frozen=True)
class EvolutionConfig:
    """Algorithm 1's settings; the defaults are the paper's where it gives them.

    Each field but ``max_init_attempts`` is the setting ``evolution.NAME`` of a row of the option table, and takes
    its default from there (:func:`~autoprox.search.options.setting_field`).
    """

    population_size: int = setting_field("evolution.population_size")
    iterations: int = setting_field("evolution.iterations")
    sample_ratio: float = setting_field("evolution.sample_ratio")
    top_k: int = setting_field("evolution.top_k")
    margin: float = setting_field("evolution.margin")
    retry_cap: int = setting_field("evolution.retry_cap")
    gene_probability: float = setting_field("evolution.gene_probability")
    seed: int = setting_field("evolution.seed")
    #: Random genomes drawn at most for the initial population (no option: a safeguard).
    max_init_attempts: int = 5000
    #: Parsimony tie-break: at equal fitness the proxy with fewer nodes ranks higher.
    parsimony: bool = setting_field("evolution.parsimony")
    #: Stop after this many iterations without a better best fitness (None: run every iteration, the paper's).
    patience: int | None = setting_field("evolution.patience")
    #: After a stall (``patience``), start again from a new random population this many times at
    #: most (0: never, the paper's); the run's best proxy is the best over every population.
    restarts: int = setting_field("evolution.restarts")

    def __post_init__(self) -> None:
        # checked and bounded (MAX_POPULATION) by its option's own conversion, whichever path builds these settings:
        # the command line, ProxySearch, run_search given them by hand, a table or a rank-formula search
        population = setting_option("evolution.population_size")
        try:
            object.__setattr__(self, "population_size", population.convert(self.population_size))
        except ConfigError as exc:
            raise ConfigError(f"{population.name}: {exc}") from None
        if not 0 < self.sample_ratio <= 1:
            raise ConfigError("sample ratio must be in (0, 1]")
        if self.top_k < 1 or self.retry_cap < 1 or self.iterations < 0:
            raise ConfigError("top-k and retry cap must be positive, iterations not negative")
        if not 0 < self.gene_probability <= 1:
            raise ConfigError(f"gene probability must be in (0, 1], got {self.gene_probability}")
        if self.patience is not None and self.patience < 1:
            raise ConfigError(f"patience must be at least 1 iteration, got {self.patience}")
        if self.restarts < 0 or (self.restarts and self.patience is None):
            raise ConfigError(f"restarts must be at least 0 and need a patience (a stall to restart after); got "
                              f"restarts {self.restarts} with patience {self.patience}")
        if not math.isfinite(self.margin):
            raise ConfigError(f"margin must be a finite number, got {self.margin}: with it no child could ever join")


@dataclass
class EvolutionState:
    """Everything needed to continue a search: population, RNG state, counters."""

    iteration: int
    population: list[FitnessRecord]
    rng_state: list
    evaluations: int = 0
    invalid: int = 0
    elapsed: float = 0.0
    #: Restarts made so far, and the best member of each population left at a restart.
    restarts: int = 0
    elites: list[FitnessRecord] = field(default_factory=list)

    def to_json(self) -> dict:
        """The checkpoint; the restart fields only once a restart happened (older checkpoints read alike)."""
        data = {
            "iteration": self.iteration,
            "population": [m.to_json() for m in self.population],
            "rng_state": self.rng_state,
            "evaluations": self.evaluations,
            "invalid": self.invalid,
            "elapsed": self.elapsed,
        }
        if self.restarts:
            data["restarts"] = self.restarts
            data["elites"] = [m.to_json() for m in self.elites]
        return data

    @classmethod
    def from_json(cls, data: Any) -> "EvolutionState":
        """The state a ``checkpoint.json`` holds; RunDirError saying what is wrong (the caller names the file)."""
        try:
            if not isinstance(data, Mapping):
                raise RunDirError("not an object")
            if not isinstance(data["population"], list) or not data["population"]:
                raise RunDirError("no population")
            state = cls(
                iteration=_count(data["iteration"], "iteration"),
                population=[fitness_record(m) for m in data["population"]],
                rng_state=data["rng_state"],
                evaluations=_count(data["evaluations"], "evaluations"),
                invalid=_count(data["invalid"], "invalid"),
                elapsed=float(data["elapsed"]),
                restarts=_count(data.get("restarts", 0), "restarts"),
                elites=[fitness_record(m) for m in data.get("elites", [])],
            )
            if not all(m.valid for m in state.population + state.elites):
                raise RunDirError("an invalid genome in the population")
            rng_from_json(state.rng_state)
        except RunDirError as exc:
            raise RunDirError(f"not a checkpoint this autoprox can read ({exc})") from None
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as exc:
            raise RunDirError(f"not a checkpoint this autoprox can read ({type(exc).__name__}: {exc})") from None
        return state

    def best(self, parsimony: bool = False) -> FitnessRecord:
        """The best member of the current population."""
        return max(self.population, key=lambda m: rank_key(m, parsimony))

    def overall_best(self, parsimony: bool = False) -> FitnessRecord:
        """The best over the current population and those left at restarts (the run's result)."""
        return max(self.elites + self.population, key=lambda m: rank_key(m, parsimony))


def stalled(best_jcms: Sequence[float], patience: int | None) -> bool:
    """Whether the last ``patience`` iterations brought no better best fitness.

    ``best_jcms`` holds the population's best fitness after each iteration (the ``best_jcm`` of
    ``log.jsonl``), so a resumed run decides as an uninterrupted one does.
    """
    if patience is None or len(best_jcms) <= patience:
        return False
    return max(best_jcms[-patience:]) <= best_jcms[-patience - 1]
def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RunDirError(f"{name} is not a count: {value!r}"[:120])
    return value


def fitness_record(data: Any) -> FitnessRecord:
    """An evaluation record read from a run file (``evaluations.jsonl``, a checkpoint's population), checked:
    RunDirError saying what is wrong. Its genome is parsed, never evaluated."""
    if not isinstance(data, Mapping):
        raise RunDirError("an evaluation record must be an object")
    try:
        record = FitnessRecord.from_json({k: v for k, v in data.items() if k != "iteration"})
    except (TypeError, ValueError, AttributeError) as exc:
        raise RunDirError(f"malformed evaluation record ({type(exc).__name__}: {exc})"[:200]) from None
    if not (isinstance(record.genome, str) and isinstance(record.canonical, str) and isinstance(record.valid, bool)):
        raise RunDirError("an evaluation record needs a genome and a canonical string and a valid flag")
    if record.valid:
        scores = [record.fitness, record.jcm, *record.kendall.values()]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores) \
                or not math.isfinite(record.fitness) or not math.isfinite(record.jcm) \
                or not all(isinstance(t, str) for t in record.kendall):
            raise RunDirError(f"evaluation record of {record.genome[:60]} has no finite fitness, JCM and Kendall taus")
        try:
            genome_forms(record.genome)
        except GenomeError as exc:
            raise RunDirError(f"evaluation record holds a bad genome ({exc})") from None
    return record


def complexity(record: FitnessRecord) -> int:
    """Nodes of the record's canonical genome (each token of the canonical string is one node)."""
    return len(re.findall(r"[A-Za-z_][A-Za-z0-9_.]*", record.canonical))


def rank_key(record: FitnessRecord, parsimony: bool = False) -> tuple:
    """Sort key, larger is better: the fitness, then (with parsimony) fewer nodes."""
    return (record.fitness, -complexity(record)) if parsimony else (record.fitness,)


def rng_state_to_json(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def rng_from_json(state: list) -> random.Random:
    rng = random.Random()
    rng.setstate((state[0], tuple(state[1]), state[2]))
    return rng


#: Called with every fresh evaluation: (record, iteration it happened in).
EvaluationHook = Callable[[FitnessRecord, int], None]


def _evaluate_reported(evaluator: FitnessEvaluator, tree, on_evaluation: EvaluationHook | None,
                       iteration: int) -> tuple[FitnessRecord, bool]:
    """``tree``'s record and whether it was computed now rather than read from the evaluator's memo; one computed now
    is reported to ``on_evaluation`` as made in ``iteration``."""
    before = evaluator.evaluations
    record = evaluator.evaluate(tree)
    fresh = evaluator.evaluations > before
    if fresh and on_evaluation:
        on_evaluation(record, iteration)
    return record, fresh


_TOKEN = re.compile(r"[a-z][a-z0-9_]*")


def _own_operators(space: GenomeSpace | SearchedSpace) -> set[str]:
    """The operators of a user's own (registered, not the paper's) that ``space`` draws from."""
    from autoprox.primitives import PAPER_OPERATORS

    operators = getattr(space, "operators", None) or ()
    return {op for op in operators if op not in PAPER_OPERATORS}


def _invalid_cause(invalid: int, own_invalid: Mapping[str, int], own_reasons: Mapping[str, int]) -> str:
    """What the message of a first population that could not be filled blames: the operators of the user's
    own that the invalid draws used (how many each, the commonest reason), else the statistics and targets."""
    if not own_invalid:
        return "check the statistics and targets"
    counts = ", ".join(f"{op!r} in {n}" for op, n in sorted(own_invalid.items(), key=lambda item: -item[1]))
    reason = max(own_reasons, key=own_reasons.get)
    return (f"{invalid} draws were invalid, with operators of your own: {counts} (most often {reason!r}); "
            "check those operators (autoprox.primitives.make_primitive), then the statistics and targets")


def initial_population(evaluator: FitnessEvaluator, config: EvolutionConfig, rng: random.Random,
                       seeds: list[str] | None = None, on_evaluation: EvaluationHook | None = None,
                       progress: Callable[[int, int], None] | None = None,
                       space: GenomeSpace | SearchedSpace = PAPER_SPACE, iteration: int = 0
                       ) -> tuple[list[FitnessRecord], int, int]:
    """Fill a population with distinct valid genomes (``seeds`` first, then random ones).

    Fresh evaluations are reported to ``on_evaluation`` as made in ``iteration`` (0: the
    initial population; a restart's iteration otherwise). Returns (population, fresh
    evaluations, invalid count). ``space``, of any kind, is searched bound to ``config``
    (:meth:`~autoprox.genome.space.SearchedSpace.bound`).
    """
    searched = space.bound(config)
    population: list[FitnessRecord] = []
    seen: set[str] = set()
    evaluations = invalid = 0
    own = _own_operators(space)
    own_invalid: dict[str, int] = {}
    own_reasons: dict[str, int] = {}

    def consider(tree) -> None:
        nonlocal evaluations, invalid
        record, fresh = _evaluate_reported(evaluator, tree, on_evaluation, iteration)
        evaluations += fresh
        if not record.valid:
            invalid += 1
            used = own & set(_TOKEN.findall(record.genome))
            for op in used:
                own_invalid[op] = own_invalid.get(op, 0) + 1
            if used:
                own_reasons[record.reason] = own_reasons.get(record.reason, 0) + 1
        elif record.canonical not in seen:
            seen.add(record.canonical)
            population.append(record)
            if progress:
                progress(len(population), config.population_size)

    for text in seeds or []:
        tree = searched.parse(text)
        if not searched.contains(tree):
            raise GenomeError(f"seed proxy {text} uses an aggregation or input outside this search's genome space")
        consider(tree)
    attempts = 0
    while len(population) < config.population_size:
        if attempts >= config.max_init_attempts:
            found = f"only {len(population)} valid distinct genomes after {attempts} random draws"
            if len(population) >= EvolutionConfig.population_size:  # enough for a default search: the size asked is
                raise SearchError(f"population {config.population_size}: {found} ({invalid} invalid); give a "
                                  f"smaller population (default {EvolutionConfig.population_size})")
            raise SearchError(f"{found}; " + _invalid_cause(invalid, own_invalid, own_reasons))
        attempts += 1
        consider(searched.random_genome(rng))
    return population, evaluations, invalid


def evolve_step(state: EvolutionState, evaluator: FitnessEvaluator, config: EvolutionConfig,
                rng: random.Random, on_evaluation: EvaluationHook | None = None,
                space: GenomeSpace | SearchedSpace = PAPER_SPACE) -> dict:
    """One iteration of Algorithm 1 on ``state`` (modified in place); returns its log record. ``space``, of any
    kind, is searched bound to ``config`` (:meth:`~autoprox.genome.space.SearchedSpace.bound`)."""
    start = time.perf_counter()
    searched = space.bound(config)
    iteration = state.iteration + 1
    population = state.population
    sample_size = max(1, round(config.sample_ratio * len(population)))
    sample = rng.sample(population, sample_size)
    top = sorted(sample, key=lambda m: rank_key(m, config.parsimony), reverse=True)[: config.top_k]
    parent = rng.choice(top)
    parent_tree = searched.parse(parent.genome)
    members = {m.canonical for m in population}
    fresh = invalid = attempts = 0
    accepted: FitnessRecord | None = None
    partners = [searched.parse(m.genome) for m in top if m is not parent] if searched.uses_partners else []
    while attempts < config.retry_cap:
        attempts += 1
        child_tree = searched.vary(parent_tree, rng, partners)
        child, computed = _evaluate_reported(evaluator, child_tree, on_evaluation, iteration)
        fresh += computed
        if not child.valid:
            invalid += 1
            continue
        if child.canonical in members:
            continue
        if child.fitness - parent.fitness >= config.margin:
            accepted = child
            break
    if accepted is not None:
        population.append(accepted)
        worst = min(range(len(population)), key=lambda i: rank_key(population[i], config.parsimony))
        population.pop(worst)
    state.iteration = iteration
    state.evaluations += fresh
    state.invalid += invalid
    state.elapsed += time.perf_counter() - start
    state.rng_state = rng_state_to_json(rng)
    best = state.best(config.parsimony)
    values = [m.fitness for m in population]
    # The log's *_jcm fields hold the fitness (the JCM in the paper's setting), as they always did.
    return {
        "iteration": iteration,
        "best_jcm": best.fitness,
        "mean_jcm": sum(values) / len(values),
        "best_kendall": best.kendall,
        "best_genome": best.genome,
        "parent_jcm": parent.fitness,
        "child_jcm": accepted.fitness if accepted else None,
        "accepted": accepted is not None,
        "attempts": attempts,
        "evaluations": fresh,
        "invalid": invalid,
        "total_evaluations": state.evaluations,
        "elapsed": round(state.elapsed, 3),
    }


def restart_step(state: EvolutionState, evaluator: FitnessEvaluator, config: EvolutionConfig,
                 rng: random.Random, on_evaluation: EvaluationHook | None = None,
                 space: GenomeSpace | SearchedSpace = PAPER_SPACE) -> dict:
    """A restart, as one iteration: the population's best is kept aside (``state.elites``) and a new
    random population (no seed proxies) drawn from ``rng`` replaces it. Returns its log record
    (``restart`` says which one; ``best_jcm`` is the new population's)."""
    start = time.perf_counter()
    iteration = state.iteration + 1
    state.elites.append(state.best(config.parsimony))
    population, fresh, invalid = initial_population(evaluator, config, rng, None, on_evaluation, space=space,
                                                    iteration=iteration)
    state.population = population
    state.iteration = iteration
    state.restarts += 1
    state.evaluations += fresh
    state.invalid += invalid
    state.elapsed += time.perf_counter() - start
    state.rng_state = rng_state_to_json(rng)
    best = state.best(config.parsimony)
    return {
        "iteration": iteration, "restart": state.restarts, "best_jcm": best.fitness,
        "mean_jcm": sum(m.fitness for m in population) / len(population), "best_kendall": best.kendall,
        "best_genome": best.genome, "parent_jcm": None, "child_jcm": None, "accepted": False, "attempts": 0,
        "evaluations": fresh, "invalid": invalid, "total_evaluations": state.evaluations,
        "elapsed": round(state.elapsed, 3),
    }


def since_restart(log: Sequence[Mapping]) -> list[Mapping]:
    """The rows of ``log.jsonl`` since the last restart (its row included), or all of them."""
    starts = [i for i, row in enumerate(log) if row.get("restart")]
    return list(log[starts[-1]:]) if starts else list(log)
