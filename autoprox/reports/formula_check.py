"""The numeric check of a simplified formula: both forms evaluated on real statistics.

A simplified per-block expression is kept only where it gives the original's score
(to :data:`CHECK_RTOL`) on the statistics of a few real architectures
(:func:`statistics_for_check`): :func:`evaluate` computes an expression on one block's
statistics with the primitives themselves, :func:`expression_score` aggregates it over
blocks, :func:`check_equivalent` compares two expressions.
"""

from __future__ import annotations

import math
import warnings
from typing import Sequence

import sympy
from sympy.core.function import AppliedUndef

from autoprox.genome.space import AGGREGATIONS
from autoprox.networks.names import SPREAD_NAMES
from autoprox.networks.statistics import STAT_NAMES
from autoprox.core.registry import LiveNames
from autoprox.primitives import EPS, EPS_SYMBOL, NAMED_FUNCTIONS, PRIMITIVES
from autoprox.proxies.zoo_scores import ZOO_TERMINALS
from autoprox.reports import sympy_worker

#: Statistic -> the SymPy symbol's name.
SYMBOL_NAMES = dict(zip(STAT_NAMES + SPREAD_NAMES, sympy_worker.STAT_SYMBOL_NAMES + sympy_worker.SPREAD_SYMBOL_NAMES))
#: The SymPy symbol's name -> the statistic it stands for.
STATISTIC_OF_SYMBOL = {name: stat for stat, name in SYMBOL_NAMES.items()}
#: The zoo terminals' symbols (``Z_snip``, ...), named as the terminals are: those of every zoo terminal set, read
#: live from the zoo's registry (:data:`autoprox.proxies.zoo.ZOO_TERMINALS`).
ZOO_SYMBOL_NAMES = LiveNames(ZOO_TERMINALS.names)
#: Every scalar terminal's symbol (the descriptors', then the zoo's): one value per architecture.
SCALAR_SYMBOL_NAMES = LiveNames(lambda: (*sympy_worker.ARCH_SYMBOL_NAMES, *ZOO_SYMBOL_NAMES))
#: Relative tolerance within which the two forms' scores must agree.
CHECK_RTOL = 1e-6


class Unevaluable(ValueError):
    """A SymPy expression with a node the numeric evaluator does not know."""


class CheckStatistics(list):
    """One architecture's per-block statistics (a list of dicts, as the engine's) and, in
    ``terminals``, its architecture-level terminal values
    (:func:`autoprox.spaces.descriptors.terminal_values`), with which formulas that read them
    are checked."""

    def __init__(self, blocks=(), terminals=None):
        super().__init__(blocks)
        self.terminals = dict(terminals) if terminals is not None else None


_ELEMENTWISE = {
    sympy.exp: "exp", sympy.log: "log", sympy.tanh: "tanh", sympy.Abs: "abs", sympy.sign: "sign",
    sympy.sinh: "sinh", sympy.cosh: "cosh", sympy.atan: "atan",
}


def evaluate(expr: sympy.Basic, block: dict, terminals=None):
    """Evaluate a per-block expression on one block's statistics (torch tensors).

    Named functions are the primitives themselves; sums and products follow the
    primitives' shape rules. Architecture-level symbols (``A_params``, ...) take
    their values from ``terminals`` (name -> number). Raises Unevaluable for a node
    it does not know or a terminal without a value, and ``autoprox.primitives.InvalidResult``
    for a shape mismatch.
    """
    import torch

    dtype = next(iter(block.values())).dtype
    if isinstance(expr, sympy.Symbol):
        if expr == EPS_SYMBOL:
            return torch.tensor(EPS, dtype=dtype)
        if sympy_worker.is_scalar_symbol(expr.name):
            if not terminals or expr.name not in terminals:
                raise Unevaluable(f"no value for the architecture-level terminal {expr.name}")
            return torch.tensor(float(terminals[expr.name]), dtype=dtype)
        if expr.name not in STATISTIC_OF_SYMBOL:
            raise Unevaluable(f"no statistic for symbol {expr.name}")
        return block[STATISTIC_OF_SYMBOL[expr.name]]
    if expr is sympy.nan:
        return torch.tensor(float("nan"), dtype=dtype)
    if expr.is_Number or expr.is_NumberSymbol:
        return torch.tensor(float(expr), dtype=dtype)
    args = [evaluate(arg, block, terminals) for arg in expr.args]
    if isinstance(expr, sympy.Add):
        value = args[0]
        for arg in args[1:]:
            value = PRIMITIVES["element_wise_sum"](value, arg)
        return value
    if isinstance(expr, sympy.Mul):
        value = args[0]
        for arg in args[1:]:
            value = PRIMITIVES["element_wise_product"](value, arg)
        return value
    if isinstance(expr, sympy.Pow):
        base, exponent = args
        if exponent.dim() > 0 and base.dim() > 0 and base.shape != exponent.shape:
            raise Unevaluable("power of matrices of different shapes")
        return torch.pow(base, exponent)
    if isinstance(expr, (sympy.Max, sympy.Min)):
        combine = torch.maximum if isinstance(expr, sympy.Max) else torch.minimum
        value = args[0]
        for arg in args[1:]:
            value = combine(value, arg)
        return value
    if expr.func in _ELEMENTWISE:
        return getattr(torch, _ELEMENTWISE[expr.func])(*args)
    if isinstance(expr, AppliedUndef) and expr.func.__name__ in NAMED_FUNCTIONS:
        return NAMED_FUNCTIONS[expr.func.__name__](*args)
    raise Unevaluable(f"cannot evaluate {type(expr).__name__}")


def expression_score(expr: sympy.Expr, aggregation: str, stats: Sequence[dict], dtype=None,
                     terminals=None) -> float:
    """The architecture's score from a per-block expression (in float64 unless ``dtype``; NaN when not finite).

    ``terminals``: the architecture-level terminal values, by default those ``stats``
    carries (a :class:`CheckStatistics`).
    """
    import torch

    from autoprox.networks.statistics import torch_threads

    dtype = dtype or torch.float64
    if terminals is None:
        terminals = getattr(stats, "terminals", None)
    values = []
    with torch_threads(1):  # as the engine: small tensors, and no fight over the cores
        for block in stats:
            converted = {name: tensor.to(dtype) for name, tensor in block.items()}
            value = evaluate(expr, converted, terminals)
            if not isinstance(value, torch.Tensor) or value.dim() != 0:
                raise Unevaluable("a block's value is not a scalar")
            values.append(float(value))
    from autoprox.genome.tree import aggregate

    if aggregation not in AGGREGATIONS:
        raise Unevaluable(f"unknown aggregation {aggregation}")
    score = aggregate(aggregation, values)
    return score if math.isfinite(score) else math.nan


def check_equivalent(original: sympy.Expr, candidate: sympy.Expr, aggregation: str,
                     check_stats: Sequence[Sequence[dict]]) -> tuple[bool | None, str]:
    """Compare two per-block expressions on real statistics.

    (True, how) when they agree wherever the original is finite on at least one
    architecture; (False, why) on a disagreement; (None, why) when nothing could be checked.
    """
    from autoprox.primitives import InvalidResult

    checked, unevaluable = 0, None
    for stats in check_stats:
        try:
            expected = expression_score(original, aggregation, stats)
        except Unevaluable as exc:
            unevaluable = str(exc)
            continue
        except (InvalidResult, RuntimeError):
            continue
        if math.isnan(expected):
            continue
        try:
            got = expression_score(candidate, aggregation, stats)
        except Unevaluable as exc:
            return None, f"the simplified form cannot be evaluated ({exc})"
        except (InvalidResult, RuntimeError) as exc:
            return False, f"the simplified form fails where the original does not ({exc})"
        if math.isnan(got) or abs(got - expected) > CHECK_RTOL * max(abs(got), abs(expected)):
            return False, f"the simplified form gives {got!r} where the original gives {expected!r}"
        checked += 1
    if not checked:
        if unevaluable is not None:
            return None, f"the original formula cannot be evaluated on the statistics given ({unevaluable})"
        return None, "no statistics on which the original formula is finite"
    return True, f"checked on {checked} architecture(s)"


def statistics_for_check(run=None, space: str | None = None, count: int = 3, extras=()) -> list:
    """Real statistics to check simplified formulas on.

    A run directory ``run``: the cached statistics of its first ``count`` search
    architectures (only those already in its cache: nothing is computed). Failing
    that, statistics of ``count`` seeded random architectures of ``space`` (default
    AutoFormer), computed here with a batch of 2. Each is a :class:`CheckStatistics`
    carrying its architecture's terminal values (``A_params``, ... as the engine
    computes them; seeded stand-ins for the zoo's, :func:`check_terminal_values`), so that
    formulas with scalar terminals are checked too.
    ``extras``: extra statistics sets (:mod:`autoprox.data.extras`) the formulas read.
    """
    import random

    from autoprox.core.errors import AutoproxError
    from autoprox.data.cache import StatsRequest
    from autoprox.networks.statistics import InputSpec, compute_statistics
    from autoprox.search.multispace import open_context
    from autoprox.spaces.architectures import SPACES, sample_arch

    found = []
    if run is not None:
        try:
            context = open_context(run)
            context = getattr(context, "parts", (context,))[0]  # a multi-space run: its first benchmark's
        except AutoproxError as exc:  # the check goes on with sampled architectures; say why
            warnings.warn(f"checking formulas on sampled architectures: {exc}", stacklevel=2)
        else:
            plan = context.plan.with_extras(extras)
            for arch in context.archs("search")[:count]:
                stats = context.cache.load(StatsRequest(arch, plan.spec, plan.seeds[0], plan.class_counts[0],
                                                        plan.extras))
                if stats is not None:
                    found.append(CheckStatistics(stats, check_terminal_values(arch, len(found))))
            space = space or context.bench.space
    if found:
        return found
    space = space if space in SPACES else SPACES[0]
    spec = InputSpec("gaussian", batch_size=2)
    archs = [sample_arch(space, random.Random(seed)) for seed in range(count)]
    return [CheckStatistics(compute_statistics(arch, spec, seed, 100, **{extra: True for extra in extras}),
                            check_terminal_values(arch, seed))
            for seed, arch in enumerate(archs)]


def check_terminal_values(arch, index: int) -> dict[str, float]:
    """The scalar terminal values a formula is checked with on ``arch``: its architecture's own
    (:func:`autoprox.spaces.descriptors.terminal_values`), and for the zoo's terminals seeded stand-ins
    between 0.5 and 50 (the check is of the algebra, and a zoo value costs network passes)."""
    import random

    from autoprox.spaces.descriptors import terminal_values

    rng = random.Random(f"zoo-check-{index}")
    return {**terminal_values(arch), **{name: rng.uniform(0.5, 50.0) for name in ZOO_SYMBOL_NAMES}}


__all__ = ["CHECK_RTOL", "SCALAR_SYMBOL_NAMES", "STATISTIC_OF_SYMBOL", "SYMBOL_NAMES", "ZOO_SYMBOL_NAMES",
           "CheckStatistics", "Unevaluable", "check_equivalent", "check_terminal_values", "evaluate",
           "expression_score", "statistics_for_check"]
