"""Export a proxy as one standalone Python module that depends on torch only.

The module holds, copied verbatim, the source of the primitives the genome uses
(``Primitive.source``) and what they need (``autoprox.primitives.export_preamble()``), the
genome written as nested calls of those functions, and::

    score(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100) -> float

which registers hooks, runs one forward/backward pass, collects the eight
statistics per transformer block, applies the formula to each block and combines the
blocks' values by the genome's aggregation (mean, sum, depth-weighted mean or standard
deviation, in the blocks' registration order). Reading a model is the job of the runtime,
:mod:`autoprox.networks.runtime`, whose code is copied into the file below its imports:
it is the very collector the engine computes its statistics with, and it finds blocks by
the timm naming (a model without one is refused with a clear error, and blocks left out
are warned about). The aggregation is the registered function's source
(:mod:`autoprox.genome.aggregations`). The docstring carries the readable formula and
the proxy's provenance (run, JCM, date).

Architecture-level terminals (``A_params``, ``A_log_depth``, ...) are computed from
the model itself, in the same pass, as :mod:`autoprox.spaces.descriptors` computes them
from an architecture config: the parameter count and the multiply-accumulates
with a classifier head of ``head_classes`` (default 100, the engine's convention;
the head is the Linear layer whose output the model returns), MACs by forward hooks
(Linear and convolution layers plus the attention matmuls, ``count_macs``'s
convention, for one input like the ones given), depth, and the mean width, heads
and MLP ratio over blocks. ``descriptors={...}`` gives any of them explicitly, for
a model the introspection does not understand (an ``UnknownDescriptors`` error says
which one is missing otherwise). Only the descriptors the genome reads are computed.
Free-form trees (:mod:`autoprox.genome.free`) use the same primitives and typed forms
as template trees and export the same way.

Every value written into the generated source is either a token checked against
the primitive table or a Python literal made by ``repr``; text read from a file
goes into the docstring only after being reduced to printable ASCII.
"""

from __future__ import annotations

import ast
import datetime as _dt
import inspect
import math
import os
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from deap import gp

from autoprox import __version__
from autoprox.core.atomic import atomic_write_text, check_output_file, load_json, output_write
from autoprox.core.errors import ExportError, no_such_path
from autoprox.core.numbers import format_float
from autoprox.genome.aggregations import AGGREGATION_REGISTRY
from autoprox.genome.tree import (
    ARCH_TERMINALS,
    genome_computed_sets,
    genome_extras,
    genome_to_string,
    op_name,
    parse_genome,
    uses_spread_terminals,
)
from autoprox.networks.names import DESCRIPTOR_NAMES, SPREAD_NAMES
from autoprox.networks.statistics import SPREAD_DESCRIPTIONS, STAT_DESCRIPTIONS, STAT_NAMES
from autoprox.reports.simplify import LEGEND, SPREAD_LEGEND, Formula
from autoprox.spaces.descriptors import DESCRIPTORS, TERMINAL_PREFIX


#: How deep the provenance literal of an exported module may nest (what a search records nests 3 deep).
LITERAL_DEPTH = 8


@dataclass
class ExportInfo:
    """What the exported module says about where the proxy comes from."""

    source: str = ""  # the run directory or proxy file
    iteration: int | None = None
    search_jcm: float | None = None
    test_jcm: float | None = None
    kendall: Mapping[str, float] = field(default_factory=dict)
    stats: Mapping = field(default_factory=dict)
    space: str | None = None
    rank: int | None = None  # hall-of-fame rank, when exported from there
    written: str | None = None  # when the source file was written

    def to_literal(self) -> dict:
        """The provenance as a literal of plain values; anything nested :data:`LITERAL_DEPTH` deep (a hand edit of
        ``best.json``'s ``stats``: Python's parser refuses a literal nested 200 deep) is None."""
        def clean(value, depth=0):
            if isinstance(value, float):
                return value if math.isfinite(value) else None
            if isinstance(value, (Mapping, list, tuple)) and depth >= LITERAL_DEPTH:
                return None
            if isinstance(value, Mapping):
                return {str(k): clean(v, depth + 1) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v, depth + 1) for v in value]
            if value is None or isinstance(value, (bool, int, str)):
                return value
            return str(value)

        return clean({
            "source": self.source, "iteration": self.iteration, "search_jcm": self.search_jcm,
            "test_jcm": self.test_jcm, "search_kendall": dict(self.kendall), "stats": dict(self.stats),
            "space": self.space, "hall_of_fame_rank": self.rank, "source_written": self.written,
        })


def doc_safe(text: object) -> str:
    """Printable ASCII without backslashes or double quotes, for the docstring."""
    return "".join(c if (" " <= c <= "~" and c not in "\\\"") else "?" for c in str(text))


def call_source(tree: gp.PrimitiveTree, position: int) -> tuple[str, int]:
    """The Python source calling the subtree at ``position`` on the statistics ``s``, and
    the position after the subtree."""
    node = tree[position]
    if isinstance(node, gp.Terminal):
        return f"s[{node.name!r}]", position + 1
    position += 1
    parts = []
    for _ in range(node.arity):
        text, position = call_source(tree, position)
        parts.append(text)
    return f"{op_name(node.name)}({', '.join(parts)})", position


def used_primitives(tree: gp.PrimitiveTree) -> list[str]:
    """Names of the primitives a genome calls, in the primitive table's order."""
    from autoprox.primitives import PRIMITIVES

    names = {op_name(node.name) for node in tree[1:] if isinstance(node, gp.Primitive)}
    return [name for name in PRIMITIVES if name in names]


def _fmt(value) -> str:
    return format_float(value, digits=4)


def _docstring(genome: str, formula: Formula, info: ExportInfo, date: str, aggregation: str = "block_mean",
               terminals: tuple[str, ...] = (), spread: bool = False) -> str:
    lines = [
        f"Zero-cost proxy for Vision Transformers, exported by autoprox {__version__} on {date}.",
        "",
        "Formula (higher scores rank an architecture higher):",
        "",
    ]
    lines += ["    score = " + doc_safe(line) for line in [formula.text]]
    lines += [""]
    lines += textwrap.wrap(doc_safe(LEGEND + (f"; {SPREAD_LEGEND}" if spread else "")), 88)
    lines += [""] + textwrap.wrap(f"Over blocks ({aggregation}): {AGGREGATION_REGISTRY[aggregation].description}", 88)
    if terminals:
        meanings = "; ".join(f"{t} = {'log of the ' if '_log_' in t else ''}"
                             f"{DESCRIPTORS[t[len(TERMINAL_PREFIX):].removeprefix('log_')]}" for t in terminals)
        lines += [""] + textwrap.wrap(f"Architecture-level terminals (the same value in every block): {meanings}. "
                                      "score() reads them from the model (see its docstring) or takes them as "
                                      "descriptors={...}.", 88)
    if formula.note:
        lines += [""] + textwrap.wrap("Formula: " + doc_safe(formula.note), 88)
    if formula.outer:
        lines += [""] + textwrap.wrap(doc_safe(formula.outer_text()), 88)
    lines += ["", "Genome:", "", "    " + doc_safe(genome), "", "Provenance:", ""]
    rows = [
        ("source", info.source or "a genome string"),
        ("hall-of-fame rank", info.rank),
        ("iteration", info.iteration),
        ("space", info.space),
        ("search-split JCM", _fmt(info.search_jcm) if info.search_jcm is not None else None),
        ("test-split JCM", _fmt(info.test_jcm) if info.test_jcm is not None else None),
        ("search-split Kendall", ", ".join(f"{t} {_fmt(v)}" for t, v in info.kendall.items()) or None),
        ("written", info.written),
        ("exported", f"{date} (autoprox {__version__})"),
    ]
    if info.stats:
        spec = _mapping(info.stats.get("input"))
        rows.append(("engine statistics", f"{spec.get('kind', '?')} input, batch {spec.get('batch_size', '?')}, "
                                          f"seeds {info.stats.get('seeds', '?')}"))
    lines += [f"    {name}: {doc_safe(value)}" for name, value in rows if value is not None]
    lines += [
        "",
        "Usage::",
        "",
        "    import proxy  # this file",
        "    value = proxy.score(model, images, labels)  # one forward/backward pass",
        *(["    value = proxy.score(model, images, labels, descriptors={'params': 5.7e6})  # given, not read"]
          if terminals else []),
        "",
        "The model's transformer blocks are found by the timm naming: a module with",
        "attn.qkv, attn.proj, mlp.fc1 and mlp.act (or mlp.fc2). Per block:",
        "",
    ]
    from autoprox.reports.formula_check import SYMBOL_NAMES

    lines += [f"    {name:<4}{SYMBOL_NAMES[name]:<9}{STAT_DESCRIPTIONS[name]}" for name in STAT_NAMES]
    if spread:  # the spread statistics, read by hooks in the same pass (see collect)
        lines += [f"    {name:<4}{SYMBOL_NAMES[name]:<11}{SPREAD_DESCRIPTIONS[name]}" for name in SPREAD_NAMES]
    lines += [
        "",
        "F4/F4g are the output of mlp.act and the loss gradient with respect to it, each",
        "averaged over the batch. The pass leaves the gradients in the model's .grad",
        "fields; train=True (as autoprox does) puts the model in training mode for the",
        "pass and restores each module's mode after. Depends on torch only.",
    ]
    return "\n".join(lines)


def runtime_source() -> str:
    """The code of :mod:`autoprox.networks.runtime` below its docstring and imports, as copied
    into every exported file (which imports ``math`` and ``torch`` and defines
    ``InvalidResult`` itself), after the names it imports from :mod:`autoprox.networks.names` and
    :mod:`autoprox.core.errors` (``ModelError``, there a plain ``ValueError``: the file depends on torch only)."""
    from autoprox.networks import runtime  # here: it imports torch, which this module's other users need not

    names = (f"#: The spread statistics and the architecture descriptors the runtime reads.\n"
             f"SPREAD_NAMES = {SPREAD_NAMES!r}\nDESCRIPTOR_NAMES = {DESCRIPTOR_NAMES!r}\n\n\n"
             "class ModelError(ValueError):\n"
             '    """A model this proxy cannot read: no transformer blocks with timm\'s names, a descriptor it cannot\n'
             '    count, a statistic its forward pass does not give."""\n\n\n')
    text = inspect.getsource(runtime)
    body = ast.parse(text).body
    first = next(node for node in body[1:] if not isinstance(node, (ast.Import, ast.ImportFrom)))
    if any(isinstance(node, (ast.Import, ast.ImportFrom)) for node in body[body.index(first):]):
        raise RuntimeError("the runtime imports below its first definition: it cannot be copied")
    start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
    return names + "\n".join(text.splitlines()[start - 1:]).strip("\n")


#: The proxy's own functions, binding its formula to the runtime (``__NAME__`` are filled in).
_PROXY_FUNCTIONS = '''
def block_score(s):
    """The proxy on one block's statistics ``s`` (a 0-d tensor)."""
    return __BLOCK_SCORE__


__AGGREGATE_SOURCE__

#: How the per-block values become the score (AGGREGATION).
aggregate = __AGGREGATION__


def architecture_descriptors(model, inputs, names=None, head_classes=100, descriptors=None):
    """Descriptors ``names`` (default: those this proxy reads) of ``model``, by one forward pass
    without gradients (MACs are those of one input like ``inputs``; see :func:`score`)."""
    return read_descriptors(model, inputs, DESCRIPTORS if names is None else names, head_classes, descriptors)


def terminal_values(descriptors):
    """The architecture-level terminals this proxy reads (0-d float32 tensors, as the engine's)."""
    return terminal_tensors(ARCH_TERMINALS, descriptors)


def score_statistics(stats, terminals=None):
    """The proxy's score from per-block statistics (in block order) and, for a proxy that
    reads architecture-level terminals, their values (:func:`terminal_values`)."""
    return score_blocks(stats, block_score, aggregate, ARCH_TERMINALS, terminals)


def score(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100) -> float:
    """The proxy's score of ``model`` from one minibatch (higher ranks higher).

    ``loss_fn(outputs, targets)`` defaults to cross-entropy.

    __DESCRIPTOR_DOC__

    The weights the statistics (STATISTICS) come from get gradients whatever their
    ``requires_grad`` (a frozen one is unfrozen for the pass, then frozen again).

    Raises InvalidResult when the proxy is NaN or inf on this model,
    NoTransformerBlocks when the model has no block to read, MissingStatistic when a
    statistic the proxy reads cannot be had (a weight the model's forward does not use),
    UnknownDescriptors when a descriptor the proxy needs can neither be read nor was given.
    """
    stats, values = collect(model, inputs, targets, loss_fn, train, descriptors, head_classes, DESCRIPTORS__SPREAD__,
                            needs=STATISTICS)
    return score_statistics(stats, terminal_values(values) if ARCH_TERMINALS else None)
'''

_DESCRIPTOR_DOC_NONE = ("This proxy reads no architecture-level terminal: ``descriptors`` and\n"
                        "    ``head_classes`` are accepted and unused.")
_DESCRIPTOR_DOC = """The architecture-level terminals (ARCH_TERMINALS) are computed from
    the descriptors (DESCRIPTORS) of the model, read in the same pass as
    autoprox.spaces.descriptors computes them from an architecture config: params = the
    number of parameters (every nn.Parameter); macs = multiply-accumulates of one
    input like ``inputs`` (Linear and convolution layers, plus q @ k^T and attn @ v:
    2 x tokens^2 x width in each block; norms, activations and softmax are free);
    both with the classifier head (the Linear layer whose output the model returns)
    resized to ``head_classes`` outputs: the default 100 is the engine's convention
    (that of the search; ``autoprox vitsearch --classes C`` uses C; None counts the
    model's own head); depth = the number of blocks; width, heads and mlp_ratio = the mean over
    blocks of attn.qkv's input width, attn.num_heads and mlp.fc1's width / the block's
    width. ``descriptors={'params': ..., 'heads': ...}`` gives any of them (positive
    numbers, by name) for a model whose structure does not tell; the others are read."""


def used_descriptors(tree: gp.PrimitiveTree) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(architecture-level terminals, the descriptors behind them) a genome reads, in table order."""
    names = {node.name for node in tree if isinstance(node, gp.Terminal)}
    terminals = tuple(t for t in ARCH_TERMINALS if t in names)
    descriptors = tuple(d for d in DESCRIPTORS if f"{TERMINAL_PREFIX}{d}" in terminals
                        or f"{TERMINAL_PREFIX}log_{d}" in terminals)
    return terminals, descriptors


def used_statistics(tree: gp.PrimitiveTree) -> tuple[str, ...]:
    """The per-block statistics (F1 ... F4g and the spread ones) a genome reads, in table order."""
    names = {node.name for node in tree if isinstance(node, gp.Terminal)}
    return tuple(name for name in (*STAT_NAMES, *SPREAD_NAMES) if name in names)


def export_source(genome, formula: Formula, info: ExportInfo | None = None, date: str | None = None) -> str:
    """The text of the standalone module for ``genome`` (a string or a parsed tree)."""
    from autoprox.primitives import PRIMITIVES, export_preamble

    tree = genome if isinstance(genome, gp.PrimitiveTree) else parse_genome(genome)
    aggregation = op_name(tree[0].name)
    if aggregation not in AGGREGATION_REGISTRY:  # parse_genome admits no other; a hand-made tree might
        raise ExportError(f"unknown aggregation over blocks {aggregation!r}")
    computed = genome_computed_sets(tree)
    if computed:
        raise ExportError(f"{genome_to_string(tree)[:120]} reads {', '.join(computed)} terminals (zoo proxies' "
                          "values), which a standalone module cannot compute; score it with autoprox rank")
    terminals, descriptors = used_descriptors(tree)
    genome_text = genome_to_string(tree)
    info = info or ExportInfo()
    date = date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    call, _ = call_source(tree, 1)
    docstring = _docstring(genome_text, formula, info, date, aggregation, terminals, uses_spread_terminals(tree))
    functions = (_PROXY_FUNCTIONS.replace("__BLOCK_SCORE__", call)
                 .replace("__AGGREGATE_SOURCE__", AGGREGATION_REGISTRY[aggregation].source.strip("\n"))
                 .replace("__AGGREGATION__", aggregation)
                 .replace("__SPREAD__", ", spread=True" if uses_spread_terminals(tree) else "")
                 .replace("__DESCRIPTOR_DOC__", _DESCRIPTOR_DOC if terminals else _DESCRIPTOR_DOC_NONE))
    parts = [
        f'"""{docstring}\n"""\n',
        "from __future__ import annotations\n",
        "import math\nimport warnings\n",
        export_preamble(),
        *(PRIMITIVES[name].source for name in used_primitives(tree)),
        f"GENOME = {genome_text!r}",
        f"FORMULA = {formula.text!r}",
        f"FORMULA_LATEX = {formula.latex!r}",
        f"PROVENANCE = {info.to_literal()!r}",
        f"#: How the per-block values become the score (see aggregate).\nAGGREGATION = {aggregation!r}",
        f"#: The architecture-level terminals this proxy reads, and the descriptors behind them.\n"
        f"ARCH_TERMINALS = {terminals!r}\nDESCRIPTORS = {descriptors!r}",
        f"#: The per-block statistics this proxy reads.\nSTATISTICS = {used_statistics(tree)!r}",
        runtime_source(),
        functions,
    ]
    return assemble_module(parts, "proxy")


def assemble_module(parts: list[str], what: str) -> str:
    """The module made of ``parts`` (blank-line separated), checked to parse: a generated module
    that does not is a bug here, never the user's input (RuntimeError naming ``what``)."""
    source = "\n\n\n".join(p.strip("\n") for p in parts) + "\n"
    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise RuntimeError(f"generated {what} module does not parse: {exc}") from exc
    return source


#: The first line of every module ``export`` writes: how a re-run recognises its own file.
EXPORT_MARK = "# Written by `autoprox export`"


def is_exported_module(head: bytes, tail: bytes = b"") -> bool:
    """Whether a file beginning with ``head`` is a module ``export`` wrote: its first line is
    :data:`EXPORT_MARK`'s, or (a module exported before the mark) a docstring saying "exported by autoprox"."""
    first = head.split(b"\n", 1)[0]
    return first.startswith(EXPORT_MARK.encode()) or (first.startswith(b'"""') and b"exported by autoprox" in first)


def check_export_out(path: str | Path) -> Path:
    """ExportError (one line, nothing written) unless ``path`` can take a module: new, or one ``export`` wrote."""
    return check_output_file(path, "export", is_exported_module, "--out", ExportError)


def write_export(path: str | Path, source: str) -> Path:
    """Write the module atomically, under the line that marks it as ``export``'s (:data:`EXPORT_MARK`).

    Parameters
    ----------
    path : str or Path
        The module to write: a new file, or one ``export`` wrote before (any other file is refused).
    source : str
        The module's text.

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ExportError
        When the path cannot be written or holds a file ``export`` did not write; nothing is written then.
    """
    check_export_out(path)
    path = Path(path)
    if not source.startswith(EXPORT_MARK):
        source = (f"{EXPORT_MARK} (autoprox {__version__}); running it again replaces this file, "
                  "so edit a copy\n" + source)
    with output_write(path, ExportError):
        atomic_write_text(path, source)
    return path


def _probe(path: Path, test) -> bool:
    """``test(path)``, False where the text cannot be a path (a genome longer than a file name)."""
    try:
        return test(path)
    except (OSError, ValueError):
        return False


#: What ``export`` takes, for the line about a source that names nothing.
EXPORT_SOURCES = ("export takes a run directory, a proxy JSON such as a run's best.json, an ensemble JSON, "
                  "a recommended:SPACE/TARGET name or a genome string")


def _looks_like_path(text: str) -> bool:
    """Whether ``text`` was meant as a path: it names a folder (``/``, or ``\\`` on Windows) or a ``.json`` file."""
    return "/" in text or os.sep in text or text.endswith(".json")


def _float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mapping(value) -> dict:
    """``value`` when it is a JSON object, else an empty one: a hand-edited field of the wrong type is left out."""
    return value if isinstance(value, dict) else {}


def _provenance(best: dict, source: str, space: str | None) -> ExportInfo:
    """The provenance a genome file (a run's ``best.json``) gives an export; a field of the wrong type (a
    ``search.targets`` string, a ``stats.input`` number, as a hand edit leaves them) is left out, never read as
    what it is not (``space``: the run's space, where the file names none)."""
    search, test = _mapping(best.get("search")), _mapping(best.get("test"))
    kendall = {t: _float(m.get("kendall")) for t, m in _mapping(search.get("targets")).items() if isinstance(m, dict)}
    return ExportInfo(source, best.get("iteration") if isinstance(best.get("iteration"), int) else None,
                      _float(search.get("jcm")), _float(test.get("jcm")), kendall, _mapping(best.get("stats")),
                      best.get("space") if isinstance(best.get("space"), str) else space,
                      None, best.get("written") if isinstance(best.get("written"), str) else None)


def resolve_export_source(source: str, rank: int | None = None) -> tuple[str, ExportInfo, dict | None]:
    """(genome, provenance, run config or None) of a run directory, a proxy JSON or a genome string.

    A run directory gives the proxy its ``best.json`` holds, or with ``rank`` the
    hall of fame's entry of that rank (also the fallback, rank 1, while a run has
    no ``best.json`` yet, said in a warning).
    """
    from autoprox.proxies.proxy import resolve_proxy
    from autoprox.core.errors import ProxyError
    from autoprox.search.halloffame import load_hall_of_fame
    from autoprox.search.rundir import BEST, RunDirectory
    from autoprox.core.errors import RunDirError

    path = Path(source)
    if _probe(path, Path.is_dir):
        run = RunDirectory(path)
        config = run.config()  # RunDirError when it is not a run
        best = run.best() if rank is None else None
        if best is not None:
            if not isinstance(best.get("genome"), str):
                raise RunDirError(f"{run.file(BEST)}: no 'genome' string")
            return best["genome"], _provenance(best, str(path), config.get("space")), config
        hall = load_hall_of_fame(run).hall
        instead_of_best, rank = rank is None, rank or 1
        if not 1 <= rank <= len(hall.entries):
            raise ExportError(f"{path}: the hall of fame has {len(hall.entries)} entries, no rank {rank}")
        entry = hall.entries[rank - 1]
        if instead_of_best:
            warnings.warn(f"{path} has no {BEST}: exporting the hall of fame's first entry (iteration "
                          f"{entry.iteration}) instead; a search writes {BEST} when it ends or stops, and "
                          "--rank N exports another entry", stacklevel=2)
        stats = config.get("stats") if isinstance(config.get("stats"), dict) else {}
        info = ExportInfo(str(path), entry.iteration, entry.jcm, None, dict(entry.kendall), stats,
                          config.get("space"), rank)
        return entry.genome, info, config
    if rank is not None:
        raise ExportError(no_such_path(source, "--rank needs a run directory") or "--rank needs a run directory")
    try:
        proxy = resolve_proxy(source)
    except ProxyError:  # neither a proxy name nor a genome: a mistyped path is said to be one
        missing = no_such_path(source, EXPORT_SOURCES) if _looks_like_path(source) else None
        if missing:
            raise ExportError(missing) from None
        raise
    if getattr(proxy, "kind", "") == "ensemble":
        raise ExportError(f"{source} is an ensemble: export it with 'autoprox export {source} --out FILE' "
                          "(autoprox.reports.ensemble_export)")
    if proxy.genome is None and getattr(proxy, "kind", "") == "rank formula":
        raise ProxyError(f"{source} is a rank formula ({proxy.name}), not a genome: export writes a genome's "
                         "module of the statistics, and a rank formula has none")
    if proxy.genome is None:
        raise ProxyError(f"{source} is a built-in proxy, not a genome: there is no formula to export")
    genome = genome_to_string(proxy.genome)
    info = ExportInfo(source=f"{proxy.name} (built-in)" if proxy.name != genome else "")
    if _probe(path, Path.is_file):
        data = load_json(path.read_text(encoding="utf-8"))  # resolve_proxy has read it as a genome file
        info = _provenance(data, str(data["run"]) if isinstance(data.get("run"), str) else str(path), None)
    return genome, info, None


def export_proxy(source: str, out: str | Path, rank: int | None = None, simplify: bool = True,
                 timeout: float | None = None) -> tuple[Path, Formula]:
    """Write the standalone module of ``source``'s proxy to ``out``; return its path and formula."""
    from autoprox.reports.simplify import DEFAULT_TIMEOUT, readable_formula
    from autoprox.reports.formula_check import statistics_for_check

    check_export_out(out)  # before the formula's seconds are spent
    out = Path(out)
    genome, info, config = resolve_export_source(source, rank)
    tree = parse_genome(genome)
    check = statistics_for_check(Path(source) if config is not None else None, info.space,
                                 extras=genome_extras(tree)) if simplify else None
    formula = readable_formula(tree, check, timeout or DEFAULT_TIMEOUT, simplify)
    return write_export(out, export_source(tree, formula, info)), formula
