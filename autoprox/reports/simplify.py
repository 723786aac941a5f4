"""Readable proxy formulas: a genome as a SymPy expression, simplified, checked, printed.

The expression is built from the genome's parsed tree, token by token, through the
primitive table (``Primitive.sympy`` of each node's typed form); no text is ever handed
to ``sympify``. How each operation and each aggregation over blocks prints (its SymPy
form in every typed form, the named function's text and LaTeX name) is the primitive
table's and the aggregation registry's; this module only prints and checks.

* The eight statistics are real symbols named for what they are:

  ====== =========== ============================================================
  F1     ``W_qkv``   attention qkv weight
  F1g    ``G_qkv``   its gradient
  F2     ``W_proj``  attention output projection weight
  F2g    ``G_proj``  its gradient
  F3     ``W_fc1``   MLP fc1 weight
  F3g    ``G_fc1``   its gradient
  F4     ``H_mlp``   MLP hidden activation after GELU (mean over the batch)
  F4g    ``G_H_mlp`` gradient of the loss w.r.t. it
  ====== =========== ============================================================

  A symbol stands for a whole matrix; element-wise operations act on it as on a
  number. Operations that look at the whole matrix are named functions: ``mean``,
  ``std``, ``frobenius``, ``l1``, ``sum_norm`` (reductions to a scalar) and
  ``minmax``, ``normalize``, ``softmax``, ``logsoftmax``, ``matmul``.
* Scalar forms follow the primitives' scalar definitions (``to_mean_scalar`` of a
  scalar is the scalar, ``frobenius_norm`` of one is its absolute value,
  ``softmax`` of one is 1, ``to_std_scalar`` of one is 0, ...). ``eps`` is 1e-9.
  A form that is always invalid (``matrix_multiplication`` of a scalar and a matrix)
  is NaN.
* The mean over blocks is written out: ``1/L * sum_{l=1..L} ( f )`` with ``f``
  computed from block ``l``'s statistics.

Simplification (:func:`autoprox.reports.sympy_worker.simplify_expression`: the mean pushed
through sums and scalar factors, ``sympy.simplify``) runs in a separate process
under a wall-clock timeout; on timeout the unsimplified formula is shown, and
said so. The simplified form replaces the original only when it has fewer nodes
and, evaluated numerically on real statistics, gives the same scores as the
original (relative error below 1e-6 in float64); otherwise the original is shown
with the reason. Architecture-level terminals (``A_params``, ``A_log_depth``, ...)
are positive (``A_log_...``: real) scalar symbols, the same in every block; the
check substitutes each architecture's values (:class:`CheckStatistics`).

Rank-preserving outer operations: the score is ``1/L * sum_l f_l``; when ``f`` is
``c * h + d`` with constants ``c > 0`` and ``d``, the score is ``c * (1/L * sum_l h_l) + d``,
a strictly increasing function of the mean of ``h``: Kendall tau cannot see ``c`` nor
``d``, and they are reported as such (a negative ``c`` reverses the ranking).
"""

from __future__ import annotations

import json
import math
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterator, Mapping
from typing import Iterable, Sequence

import sympy
from deap import gp
from sympy.printing.latex import LatexPrinter

from autoprox.core.errors import FormulaError
from autoprox.genome.aggregations import get_aggregation
from autoprox.genome.tree import form_name, genome_to_string, op_name, parse_genome
from autoprox.genome.space import AGGREGATIONS
from autoprox.networks.statistics import STAT_NAMES
from autoprox.networks.names import SPREAD_NAMES
from autoprox.reports import sympy_worker
from autoprox.reports.formula_check import SCALAR_SYMBOL_NAMES, SYMBOL_NAMES, check_equivalent
from autoprox.reports.sympy_worker import node_count
from autoprox.primitives import EPS, EPS_SYMBOL, NAMED_FUNCTIONS, PRIMITIVES



class _Symbols(Mapping):
    """Terminal -> its SymPy symbol: a statistic's named for what it is (``F1g`` -> ``G_qkv``), a scalar
    terminal's by its own name (the descriptors', and the zoo's as registered when it is read)."""

    def _names(self) -> dict[str, str]:
        return {**SYMBOL_NAMES, **{name: name for name in SCALAR_SYMBOL_NAMES}}

    def __getitem__(self, terminal: str) -> sympy.Symbol:
        return sympy_worker.make_symbol(self._names()[terminal])

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


SYMBOLS: Mapping[str, sympy.Symbol] = _Symbols()
LATEX_NAMES = {
    "F1": r"W^{\mathrm{qkv}}_{l}", "F1g": r"G^{\mathrm{qkv}}_{l}",
    "F2": r"W^{\mathrm{proj}}_{l}", "F2g": r"G^{\mathrm{proj}}_{l}",
    "F3": r"W^{\mathrm{fc1}}_{l}", "F3g": r"G^{\mathrm{fc1}}_{l}",
    "F4": r"H^{\mathrm{mlp}}_{l}", "F4g": r"G^{H,\mathrm{mlp}}_{l}",
    "S1g": r"S^{G,\mathrm{qkv}}_{l}", "S2g": r"S^{G,\mathrm{proj}}_{l}", "S3g": r"S^{G,\mathrm{fc1}}_{l}",
    "S4": r"S^{H,\mathrm{mlp}}_{l}", "S4g": r"S^{G_H,\mathrm{mlp}}_{l}",
}
DEFAULT_TIMEOUT = 10.0


# ------------------------------------------------------------------ genome -> SymPy


def _to_sympy(tree: gp.PrimitiveTree, position: int) -> tuple[sympy.Expr, int]:
    node = tree[position]
    if isinstance(node, gp.Terminal):
        return SYMBOLS[node.name], position + 1
    position += 1
    args = []
    for _ in range(node.arity):
        value, position = _to_sympy(tree, position)
        args.append(value)
    expr = PRIMITIVES[op_name(node.name)].sympy(*args, form=form_name(node.name))
    if isinstance(expr, sympy.Abs) and expr.args[0].is_extended_nonnegative:
        expr = expr.args[0]  # |norm| = norm (SymPy keeps the Abs of a nonnegative function)
    return expr, position


def genome_tree(genome) -> gp.PrimitiveTree:
    return genome if isinstance(genome, gp.PrimitiveTree) else parse_genome(genome)


def block_expression(genome) -> sympy.Expr:
    """The per-block expression ``f`` of a genome (below its aggregation over blocks)."""
    tree = genome_tree(genome)
    if op_name(tree[0].name) not in AGGREGATIONS:
        raise FormulaError(f"genome does not start with an aggregation over blocks: {genome_to_string(tree)}")
    expr, _ = _to_sympy(tree, 1)
    return expr


# ------------------------------------------------------------------------ printing

def expression_text(expr: sympy.Expr) -> str:
    """Plain text of a per-block expression (statistics without an index)."""
    return sympy.sstr(expr)


class _FormulaLatexPrinter(LatexPrinter):
    """SymPy's LaTeX printer, writing the primitives' named functions by their LaTeX name
    (SymPy would read ``sum_norm`` as ``sum`` with a subscript and ``l1`` as ``l_1``)."""

    def _hprint_Function(self, func: str) -> str:
        if func in NAMED_FUNCTIONS:
            return NAMED_FUNCTIONS[func].named.latex
        return super()._hprint_Function(func)


def expression_latex(expr: sympy.Expr) -> str:
    names = {SYMBOLS[stat]: LATEX_NAMES[stat] for stat in STAT_NAMES + SPREAD_NAMES}
    names[EPS_SYMBOL] = r"\epsilon"
    return _FormulaLatexPrinter({"symbol_names": names}).doprint(expr)


def aggregate_text(aggregation: str, expr: sympy.Expr) -> str:
    """The score in plain text: the per-block expression inside its aggregation over blocks."""
    return get_aggregation(aggregation).text(expression_text(expr))


def aggregate_latex(aggregation: str, expr: sympy.Expr) -> str:
    """The score in LaTeX: the per-block expression inside its aggregation over blocks."""
    return get_aggregation(aggregation).latex(expression_latex(expr))


LEGEND = ("L = number of transformer blocks, sum_l over blocks l = 1..L, each with its own statistics: "
          + ", ".join(f"{SYMBOL_NAMES[s]} = {s}" for s in STAT_NAMES) + "; eps = 1e-9")
#: Added to :data:`LEGEND` where a formula reads the spread statistics.
SPREAD_LEGEND = ("spread over the batch's samples (population standard deviation): "
                 + ", ".join(f"{SYMBOL_NAMES[s]} = {s}" for s in SPREAD_NAMES))


# -------------------------------------------------------- rank-preserving outer ops


@dataclass(frozen=True)
class OuterOperation:
    """An operation applied to the whole score (outside the mean over blocks)."""

    text: str
    rank_preserving: bool
    description: str


def _constant_value(expr: sympy.Expr) -> float:
    return float(expr.subs(EPS_SYMBOL, EPS).evalf())


def outer_operations(expr: sympy.Expr) -> tuple[list[OuterOperation], sympy.Expr]:
    """Constant offset and factor of a per-block expression: f = c*h + d -> ([ops], h)."""
    expanded = sympy_worker.expand_means(expr)
    symbols = set(SYMBOLS.values())
    offset, rest = expanded.as_independent(*symbols, as_Add=True)
    factor, core = rest.as_independent(*symbols, as_Add=False)
    operations = []
    try:
        factor_value = _constant_value(factor)
        offset_value = _constant_value(offset)
    except (TypeError, ValueError):
        return [], expr
    if not (math.isfinite(factor_value) and math.isfinite(offset_value)) or factor_value == 0:
        return [], expr
    if factor_value < 0:
        operations.append(OuterOperation("-", False, "negation: reverses the ranking (Kendall tau changes sign)"))
        factor = -factor
    if factor != 1:
        operations.append(OuterOperation(f"* {sympy.sstr(factor)}", True,
                                         "a positive factor: rank-preserving, Kendall tau cannot see it"))
    if offset != 0:
        operations.append(OuterOperation(f"+ {sympy.sstr(offset)}", True,
                                         "a constant added: rank-preserving, Kendall tau cannot see it"))
    return operations, core


# ------------------------------------------------------------- the separate process


class _SimplifierProcess:
    """``python -m autoprox.reports.sympy_worker``: expressions go out and come back as JSON lines.

    One process serves every expression of a call; when one runs past ``timeout``
    seconds the process is killed (and restarted for the next expression).
    """

    def __init__(self, timeout: float, startup_timeout: float = 120.0) -> None:
        self.timeout = timeout
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self.lines: queue.Queue | None = None

    def _start(self) -> None:
        package_root = str(Path(sympy_worker.__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        process = subprocess.Popen(
            [sys.executable, "-m", "autoprox.reports.sympy_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, encoding="utf-8", env=env,
        )
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        self.process, self.lines = process, lines
        reply = self._reply(self.startup_timeout)
        if reply is None or reply.get("status") != "ready":
            self._kill()
            raise TimeoutError("the simplification process did not start")

    def _reply(self, timeout: float) -> dict | None:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            return {"status": "error", "message": "the simplification process ended"}
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"status": "error", "message": "unreadable answer from the simplification process"}

    def _kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        self.process = self.lines = None

    def simplify(self, index: int, expr: sympy.Expr) -> tuple[str, object]:
        """("ok", expr), ("timeout", None) or ("error", message)."""
        if self.process is None:
            self._start()
        try:
            self.process.stdin.write(json.dumps({"id": index, "expr": sympy_worker.to_data(expr)}) + "\n")
            self.process.stdin.flush()
        except sympy_worker.Unsupported as exc:
            return "error", str(exc)
        except OSError as exc:
            self._kill()
            return "error", f"simplification process failed ({exc})"
        reply = self._reply(self.timeout)
        if reply is None:
            self._kill()
            return "timeout", None
        if reply.get("status") != "ok" or reply.get("id") != index:
            if reply.get("id") != index:
                self._kill()
            return "error", str(reply.get("message", "unexpected answer"))
        try:
            return "ok", sympy_worker.from_data(reply.get("expr"))
        except sympy_worker.Unsupported as exc:
            return "error", str(exc)

    def close(self) -> None:
        if self.process is None:
            return
        try:
            self.process.stdin.close()
            self.process.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()


# ----------------------------------------------------------------------- readable


@dataclass
class Formula:
    """A genome's readable formula."""

    genome: str
    aggregation: str
    original: sympy.Expr
    shown: sympy.Expr
    status: str  # simplified | original (not smaller) | timeout | check failed | unchecked | not simplified
    note: str = ""
    outer: list[OuterOperation] = field(default_factory=list)
    ranking_core: sympy.Expr | None = None

    @property
    def simplified(self) -> bool:
        return self.status == "simplified"

    @property
    def text(self) -> str:
        return aggregate_text(self.aggregation, self.shown)

    @property
    def latex(self) -> str:
        return aggregate_latex(self.aggregation, self.shown)

    @property
    def original_text(self) -> str:
        return aggregate_text(self.aggregation, self.original)

    def outer_text(self) -> str:
        """One line on the operations applied to the whole score ('' when there are none)."""
        if not self.outer:
            return ""
        parts = [f"'{op.text}' ({op.description})" for op in self.outer]
        core = aggregate_text(self.aggregation, self.ranking_core) if self.ranking_core is not None else ""
        preserving = all(op.rank_preserving for op in self.outer)
        tail = f"; it ranks architectures {'exactly as' if preserving else 'in reverse of'} {core}" if core else ""
        return "outside the mean over blocks: " + ", ".join(parts) + tail


def readable_formulas(genomes: Iterable, check_stats: Sequence[Sequence[dict]] | None = None,
                      timeout: float = DEFAULT_TIMEOUT, simplify: bool = True) -> list[Formula]:
    """Readable formulas of ``genomes`` (strings or trees), simplified where safe.

    ``check_stats`` are statistics of a few architectures (lists of per-block dicts)
    on which a simplified form must give the original's scores before it is shown.
    """
    formulas: list[Formula] = []
    worker = _SimplifierProcess(timeout) if simplify else None
    try:
        for index, genome in enumerate(genomes):
            tree = genome_tree(genome)
            original = block_expression(tree)
            aggregation = op_name(tree[0].name)
            formula = Formula(genome_to_string(tree), aggregation, original, original, "not simplified")
            outer, core = outer_operations(original)
            formula.outer, formula.ranking_core = outer, (core if outer else None)
            if worker is not None:
                _simplify_into(formula, worker, index, check_stats)
            formulas.append(formula)
    finally:
        if worker is not None:
            worker.close()
    return formulas


def _simplify_into(formula: Formula, worker: _SimplifierProcess, index: int,
                   check_stats: Sequence[Sequence[dict]] | None) -> None:
    try:
        status, value = worker.simplify(index, formula.original)
    except (OSError, TimeoutError) as exc:
        formula.status, formula.note = "not simplified", f"unsimplified: {exc}"
        return
    if status == "timeout":
        formula.status = "timeout"
        formula.note = f"simplification timed out after {worker.timeout:g} s: unsimplified formula shown"
        return
    if status != "ok":
        formula.status, formula.note = "not simplified", f"unsimplified: SymPy failed ({value})"
        return
    candidate = value
    if candidate == formula.original or node_count(candidate) >= node_count(formula.original):
        formula.status, formula.note = "original (not smaller)", ""
        return
    if not check_stats:
        formula.status = "unchecked"
        formula.note = "a simpler form exists but no statistics to check it on: unsimplified formula shown"
        return
    agrees, how = check_equivalent(formula.original, candidate, formula.aggregation, check_stats)
    if agrees:
        formula.shown, formula.status = candidate, "simplified"
        formula.note = f"simplified from {node_count(formula.original)} to {node_count(candidate)} nodes, {how}"
    elif agrees is None:
        formula.status, formula.note = "unchecked", f"unsimplified formula shown: {how}"
    else:
        formula.status, formula.note = "check failed", f"unsimplified formula shown: {how}"


def readable_formula(genome, check_stats=None, timeout: float = DEFAULT_TIMEOUT, simplify: bool = True) -> Formula:
    return readable_formulas([genome], check_stats, timeout, simplify)[0]
