"""Export a proxy as one standalone Python module that depends on torch only.

The module holds, copied verbatim, the source of the primitives the genome uses
(``Primitive.source``) and what they need (``primitives.export_preamble()``), the
genome written as nested calls of those functions, and::

    score(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100) -> float

which registers hooks, runs one forward/backward pass, collects the eight
statistics per transformer block exactly as :mod:`autoprox.networks.statistics` does (F4
and F4g are the MLP hidden activation, the output of ``mlp.act``, and its
gradient, each averaged over the batch), applies the formula to each block and
combines the blocks' values by the genome's aggregation, computed as
:func:`autoprox.genome.tree.aggregate` does (mean, sum, depth-weighted mean or standard
deviation, in the blocks' registration order). Blocks are found by the timm naming
that both of this project's spaces follow: a module with ``attn.qkv``,
``attn.proj``, ``mlp.fc1`` and ``mlp.act`` (or, without ``act``, the input of
``mlp.fc2``); a model without one is refused with a clear error. The docstring
carries the readable formula and the proxy's provenance (run, JCM, date).

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
import json
import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from deap import gp

from autoprox import __version__
from autoprox.core.atomic import atomic_write_text
from autoprox.core.errors import ExportError  # noqa: F401 (re-exported)
from autoprox.genome.tree import ARCH_TERMINALS, genome_to_string, op_name, parse_genome
from autoprox.networks.statistics import STAT_DESCRIPTIONS, STAT_NAMES
from autoprox.reports.simplify import LEGEND, Formula
from autoprox.spaces.descriptors import DESCRIPTORS, TERMINAL_PREFIX


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
        def clean(value):
            if isinstance(value, float):
                return value if math.isfinite(value) else None
            if isinstance(value, Mapping):
                return {str(k): clean(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [clean(v) for v in value]
            if value is None or isinstance(value, (bool, int, str)):
                return value
            return str(value)

        return clean({
            "source": self.source, "iteration": self.iteration, "search_jcm": self.search_jcm,
            "test_jcm": self.test_jcm, "search_kendall": dict(self.kendall), "stats": dict(self.stats),
            "space": self.space, "hall_of_fame_rank": self.rank, "source_written": self.written,
        })


def _doc_safe(text: object) -> str:
    """Printable ASCII without backslashes or double quotes, for the docstring."""
    return "".join(c if (" " <= c <= "~" and c not in "\\\"") else "?" for c in str(text))


def _call_source(tree: gp.PrimitiveTree, position: int) -> tuple[str, int]:
    node = tree[position]
    if isinstance(node, gp.Terminal):
        return f"s[{node.name!r}]", position + 1
    position += 1
    parts = []
    for _ in range(node.arity):
        text, position = _call_source(tree, position)
        parts.append(text)
    return f"{op_name(node.name)}({', '.join(parts)})", position


def used_primitives(tree: gp.PrimitiveTree) -> list[str]:
    """Names of the primitives a genome calls, in the primitive table's order."""
    from primitives import PRIMITIVES

    names = {op_name(node.name) for node in tree[1:] if isinstance(node, gp.Primitive)}
    return [name for name in PRIMITIVES if name in names]


def _fmt(value) -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:+.4f}"


def _docstring(genome: str, formula: Formula, info: ExportInfo, date: str, aggregation: str = "block_mean",
               terminals: tuple[str, ...] = ()) -> str:
    lines = [
        f"Zero-cost proxy for Vision Transformers, exported by autoprox {__version__} on {date}.",
        "",
        "Formula (higher scores rank an architecture higher):",
        "",
    ]
    lines += ["    score = " + _doc_safe(line) for line in [formula.text]]
    lines += [""]
    lines += textwrap.wrap(_doc_safe(LEGEND), 88)
    lines += [""] + textwrap.wrap(f"Over blocks ({aggregation}): {_AGGREGATE[aggregation][0]}", 88)
    if terminals:
        meanings = "; ".join(f"{t} = {'log of the ' if '_log_' in t else ''}"
                             f"{DESCRIPTORS[t[len(TERMINAL_PREFIX):].removeprefix('log_')]}" for t in terminals)
        lines += [""] + textwrap.wrap(f"Architecture-level terminals (the same value in every block): {meanings}. "
                                      "score() reads them from the model (see its docstring) or takes them as "
                                      "descriptors={...}.", 88)
    if formula.note:
        lines += [""] + textwrap.wrap("Formula: " + _doc_safe(formula.note), 88)
    if formula.outer:
        lines += [""] + textwrap.wrap(_doc_safe(formula.outer_text()), 88)
    lines += ["", "Genome:", "", "    " + _doc_safe(genome), "", "Provenance:", ""]
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
        spec = info.stats.get("input") or {}
        rows.append(("engine statistics", f"{spec.get('kind', '?')} input, batch {spec.get('batch_size', '?')}, "
                                          f"seeds {info.stats.get('seeds', '?')}"))
    lines += [f"    {name}: {_doc_safe(value)}" for name, value in rows if value is not None]
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
    from autoprox.reports.simplify import SYMBOL_NAMES

    lines += [f"    {name:<4}{SYMBOL_NAMES[name]:<9}{STAT_DESCRIPTIONS[name]}" for name in STAT_NAMES]
    lines += [
        "",
        "F4/F4g are the output of mlp.act and the loss gradient with respect to it, each",
        "averaged over the batch. The pass leaves the gradients in the model's .grad",
        "fields; train=True (as autoprox does) puts the model in training mode for the",
        "pass and restores each module's mode after. Depends on torch only.",
    ]
    return "\n".join(lines)


_RUNTIME = '''

class NoTransformerBlocks(ValueError):
    """A model without blocks following the timm naming."""


class UnknownDescriptors(ValueError):
    """An architecture descriptor this proxy needs that cannot be read from the model."""


def _linear_weight(module, path):
    for name in path:
        module = getattr(module, name, None)
    weight = getattr(module, "weight", None)
    return weight if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None


def find_blocks(model):
    """(name, block) of every transformer block of ``model``, in registration order.

    A block is a module with ``attn.qkv``, ``attn.proj`` and ``mlp.fc1`` (Linear
    layers) and ``mlp.act`` or ``mlp.fc2``: the naming of timm's ViTs.
    """
    blocks = []
    for name, module in model.named_modules():
        if any(_linear_weight(module, path) is None for path in (("attn", "qkv"), ("attn", "proj"), ("mlp", "fc1"))):
            continue
        mlp = module.mlp
        if not isinstance(getattr(mlp, "act", None), torch.nn.Module) and not isinstance(
                getattr(mlp, "fc2", None), torch.nn.Module):
            continue
        blocks.append((name, module))
    if not blocks:
        raise NoTransformerBlocks(
            f"{type(model).__name__} has no transformer block with attn.qkv, attn.proj, mlp.fc1 and "
            "mlp.act or mlp.fc2 (the timm naming): this proxy cannot read its statistics"
        )
    return blocks


# ----------------------------------------------------------- architecture descriptors

#: Every descriptor an architecture-level terminal can stand for (A_NAME and A_log_NAME).
DESCRIPTOR_NAMES = ("params", "macs", "depth", "width", "heads", "mlp_ratio")
_LAYERS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)


class _Meter:
    """Forward hooks that count, during a pass, what the descriptors need.

    ``macs``: for every Linear and convolution, (output elements) x (inputs per
    output), plus q @ k^T and attn @ v of every block (2 x tokens^2 x width per
    sequence, read from the input of attn.qkv); norms, activations, softmax and
    additions are free. ``last``: the last Linear called and its output, which is
    the classifier head when that output is the model's.
    """

    def __init__(self, model, blocks, macs, head):
        self.macs = 0
        self.last = None
        self.handles = []
        for module in model.modules():
            if macs and isinstance(module, _LAYERS):
                self.handles.append(module.register_forward_hook(self._count))
            if head and isinstance(module, torch.nn.Linear):
                self.handles.append(module.register_forward_hook(self._keep))
        if macs:
            for _, block in blocks:
                self.handles.append(block.attn.qkv.register_forward_pre_hook(self._attention))

    def _count(self, module, args, output):
        fan_in = module.in_features if isinstance(module, torch.nn.Linear) else module.weight[0].numel()
        self.macs += output.numel() * fan_in

    def _keep(self, module, args, output):
        self.last = (module, output)

    def _attention(self, module, args):
        tokens = args[0].shape[-2]
        sequences = args[0].numel() // (tokens * module.in_features)
        self.macs += sequences * 2 * tokens * tokens * module.in_features

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _given_descriptors(descriptors):
    given = {}
    for key, value in dict(descriptors or {}).items():
        name = key[2:] if isinstance(key, str) and key.startswith("A_") else key
        if name not in DESCRIPTOR_NAMES:
            raise ValueError(f"unknown descriptor {key!r}; known: {', '.join(DESCRIPTOR_NAMES)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"descriptor {key!r} must be a positive finite number, got {value!r}")
        given[name] = float(value)
    return given


def _batch_size(inputs, outputs):
    for value in (inputs, outputs):
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] > 0:
            return int(value.shape[0])
    raise UnknownDescriptors("cannot tell the batch size from the inputs or the outputs: "
                             "pass descriptors={'macs': ...}")


def _head(meter, outputs, head_classes):
    if meter.last is None or meter.last[1] is not outputs:
        raise UnknownDescriptors(
            f"the model's output is not the output of a Linear layer, so its classifier head cannot be "
            f"resized to {head_classes} classes: pass head_classes=None to count the model as it is, "
            f"or descriptors={{'params': ..., 'macs': ...}}")
    return meter.last[0]


def _descriptor_values(model, blocks, names, given, meter, inputs, outputs, head_classes):
    """The descriptors ``names``: ``given`` ones as given, the others read from the model."""
    values = {}
    widths = [block.attn.qkv.weight.shape[1] for _, block in blocks]
    depth = len(blocks)
    for name in names:
        if name in given:
            values[name] = given[name]
        elif name == "params":
            count = sum(p.numel() for p in model.parameters())
            if head_classes is not None:
                head = _head(meter, outputs, head_classes)
                count += (head_classes - head.out_features) * (head.in_features + (head.bias is not None))
            values[name] = float(count)
        elif name == "macs":
            total = meter.macs
            if head_classes is not None:
                head = _head(meter, outputs, head_classes)
                rows = meter.last[1].numel() // head.out_features
                total += rows * head.in_features * (head_classes - head.out_features)
            values[name] = total / _batch_size(inputs, outputs)
        elif name == "depth":
            values[name] = float(depth)
        elif name == "width":
            values[name] = sum(widths) / depth
        elif name == "heads":
            heads = []
            for (block_name, block), width in zip(blocks, widths):
                count = getattr(block.attn, "num_heads", None)
                if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
                    raise UnknownDescriptors(
                        f"block {block_name}: no attn.num_heads to read the number of heads from: "
                        "pass descriptors={'heads': ...}")
                heads.append(count)
            values[name] = sum(heads) / depth
        elif name == "mlp_ratio":
            hidden = [block.mlp.fc1.weight.shape[0] for _, block in blocks]
            values[name] = sum(h / d for h, d in zip(hidden, widths)) / depth
        else:
            raise ValueError(f"unknown descriptor {name!r}")
    return values


def _pass(model, inputs, targets, loss_fn, train, descriptors, head_classes, names):
    """One forward/backward pass: (per-block statistics, the descriptors ``names``)."""
    blocks = find_blocks(model)
    given = _given_descriptors(descriptors)
    missing = [name for name in names if name not in given]
    sized = head_classes is not None and any(name in missing for name in ("params", "macs"))
    meter = _Meter(model, blocks, "macs" in missing, sized) if missing else None
    loss_fn = loss_fn if loss_fn is not None else torch.nn.functional.cross_entropy
    hidden = [None] * len(blocks)

    def keep(index, value):
        if not isinstance(value, torch.Tensor) or not value.requires_grad:
            raise NoTransformerBlocks(f"block {blocks[index][0]}: the MLP hidden activation has no gradient")
        value.retain_grad()
        hidden[index] = value

    handles = []
    for index, (_, block) in enumerate(blocks):
        act = getattr(block.mlp, "act", None)
        if isinstance(act, torch.nn.Module):
            handles.append(act.register_forward_hook(lambda _m, _i, out, index=index: keep(index, out)))
        else:
            handles.append(block.mlp.fc2.register_forward_pre_hook(lambda _m, args, index=index: keep(index, args[0])))
    modes = {module: module.training for module in model.modules()}
    try:
        if train is not None:
            model.train(bool(train))
        model.zero_grad(set_to_none=True)
        with torch.enable_grad():
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
            loss.backward()
    finally:
        for handle in handles:
            handle.remove()
        if meter is not None:
            meter.remove()
        for module, mode in modes.items():
            module.training = mode
    stats = []
    for (name, block), act in zip(blocks, hidden):
        if act is None or act.grad is None:
            raise NoTransformerBlocks(f"block {name}: no MLP hidden activation or gradient was seen in the pass")
        stats.append({
            "F1": block.attn.qkv.weight.detach().clone(),
            "F1g": block.attn.qkv.weight.grad.detach().clone(),
            "F2": block.attn.proj.weight.detach().clone(),
            "F2g": block.attn.proj.weight.grad.detach().clone(),
            "F3": block.mlp.fc1.weight.detach().clone(),
            "F3g": block.mlp.fc1.weight.grad.detach().clone(),
            "F4": act.detach().mean(dim=0),
            "F4g": act.grad.detach().mean(dim=0),
        })
    values = _descriptor_values(model, blocks, names, given, meter, inputs, outputs, head_classes)
    return stats, values


def block_statistics(model, inputs, targets, loss_fn=None, train=True):
    """The eight statistics of every block after one forward/backward pass."""
    return _pass(model, inputs, targets, loss_fn, train, None, None, ())[0]


def architecture_descriptors(model, inputs, names=None, head_classes=100, descriptors=None):
    """Descriptors ``names`` (default: those this proxy reads) of ``model``, by one forward pass
    without gradients (MACs are those of one input like ``inputs``; see :func:`score`)."""
    names = tuple(DESCRIPTORS if names is None else names)
    for name in names:
        if name not in DESCRIPTOR_NAMES:
            raise ValueError(f"unknown descriptor {name!r}; known: {', '.join(DESCRIPTOR_NAMES)}")
    blocks = find_blocks(model)
    given = _given_descriptors(descriptors)
    missing = [name for name in names if name not in given]
    meter = _Meter(model, blocks, "macs" in missing,
                   head_classes is not None and any(name in missing for name in ("params", "macs")))
    try:
        with torch.no_grad():
            outputs = model(inputs)
    finally:
        meter.remove()
    return _descriptor_values(model, blocks, names, given, meter, inputs, outputs, head_classes)


def terminal_values(descriptors):
    """The architecture-level terminals this proxy reads (0-d float32 tensors, as the engine's)."""
    values = {}
    for terminal in ARCH_TERMINALS:
        name = terminal[len("A_log_"):] if terminal.startswith("A_log_") else terminal[len("A_"):]
        if name not in descriptors:
            raise UnknownDescriptors(f"no value for descriptor {name!r} (terminal {terminal})")
        value = float(descriptors[name])
        values[terminal] = torch.tensor(math.log(value) if terminal.startswith("A_log_") else value,
                                        dtype=torch.float32)
    return values


# ------------------------------------------------------------------------ the score


def block_score(s):
    """The proxy on one block's statistics ``s`` (a 0-d tensor)."""
    return __BLOCK_SCORE__


def aggregate(values):
    """__AGGREGATE_DOC__"""
__AGGREGATE_BODY__


def score_statistics(stats, terminals=None):
    """The proxy's score from per-block statistics (in block order) and, for a proxy that
    reads architecture-level terminals, their values (:func:`terminal_values`)."""
    if ARCH_TERMINALS and terminals is None:
        raise UnknownDescriptors(f"this proxy reads {', '.join(ARCH_TERMINALS)}: pass their values")
    values = []
    for index, block in enumerate(stats):
        try:
            value = block_score(dict(block, **terminals) if ARCH_TERMINALS else block)
        except RuntimeError as exc:  # torch's own shape errors: the engine's proxy is invalid there too
            raise InvalidResult(f"block {index}: {(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            raise InvalidResult(f"block {index}: the value is not a scalar")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidResult(f"block {index}: the value is NaN or inf")
        values.append(number)
    return aggregate(values)


def score(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100) -> float:
    """The proxy's score of ``model`` from one minibatch (higher ranks higher).

    ``loss_fn(outputs, targets)`` defaults to cross-entropy.

    __DESCRIPTOR_DOC__

    Raises InvalidResult when the proxy is NaN or inf on this model,
    NoTransformerBlocks when the model has no block to read, UnknownDescriptors when
    a descriptor the proxy needs can neither be read nor was given.
    """
    stats, values = _pass(model, inputs, targets, loss_fn, train, descriptors, head_classes, DESCRIPTORS)
    return score_statistics(stats, terminal_values(values) if ARCH_TERMINALS else None)
'''

#: How each aggregation over blocks is computed: exactly :func:`autoprox.genome.tree.aggregate`.
_AGGREGATE = {
    "block_mean": ("The mean of the blocks' values.",
                   "    return sum(values) / len(values)"),
    "block_sum": ("The sum of the blocks' values.",
                  "    return float(sum(values))"),
    "block_wmean": ("The depth-weighted mean: block l of L (registration order) weighs l.",
                    "    count = len(values)\n"
                    "    return sum((i + 1) * v for i, v in enumerate(values)) / (count * (count + 1) / 2)"),
    "block_std": ("The (population) standard deviation of the blocks' values.",
                  "    count = len(values)\n"
                  "    mean = sum(values) / count\n"
                  "    return math.sqrt(sum((v - mean) ** 2 for v in values) / count)"),
}

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


def export_source(genome, formula: Formula, info: ExportInfo | None = None, date: str | None = None) -> str:
    """The text of the standalone module for ``genome`` (a string or a parsed tree)."""
    from primitives import PRIMITIVES, export_preamble

    tree = genome if isinstance(genome, gp.PrimitiveTree) else parse_genome(genome)
    aggregation = op_name(tree[0].name)
    if aggregation not in _AGGREGATE:  # parse_genome admits no other; a hand-made tree might
        raise ExportError(f"unknown aggregation over blocks {aggregation!r}")
    terminals, descriptors = used_descriptors(tree)
    genome_text = genome_to_string(tree)
    info = info or ExportInfo()
    date = date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    call, _ = _call_source(tree, 1)
    docstring = _docstring(genome_text, formula, info, date, aggregation, terminals)
    doc, body = _AGGREGATE[aggregation]
    runtime = (_RUNTIME.replace("__BLOCK_SCORE__", call).replace("__AGGREGATE_DOC__", doc)
               .replace("__AGGREGATE_BODY__", body)
               .replace("__DESCRIPTOR_DOC__", _DESCRIPTOR_DOC if terminals else _DESCRIPTOR_DOC_NONE))
    parts = [
        f'"""{docstring}\n"""\n',
        "from __future__ import annotations\n",
        "import math\n",
        export_preamble(),
        *(PRIMITIVES[name].source for name in used_primitives(tree)),
        f"GENOME = {genome_text!r}",
        f"FORMULA = {formula.text!r}",
        f"FORMULA_LATEX = {formula.latex!r}",
        f"PROVENANCE = {info.to_literal()!r}",
        f"#: How the per-block values become the score (see aggregate).\nAGGREGATION = {aggregation!r}",
        f"#: The architecture-level terminals this proxy reads, and the descriptors behind them.\n"
        f"ARCH_TERMINALS = {terminals!r}\nDESCRIPTORS = {descriptors!r}",
        runtime,
    ]
    source = "\n\n\n".join(p.strip("\n") for p in parts) + "\n"
    try:
        ast.parse(source)
    except SyntaxError as exc:  # a bug here, never the user's input
        raise RuntimeError(f"generated proxy module does not parse: {exc}") from exc
    return source


def write_export(path: str | Path, source: str) -> Path:
    """Write the module atomically; ExportError when the path cannot be written."""
    path = Path(path)
    if path.is_dir():
        raise ExportError(f"cannot write {path}: it is a directory")
    try:
        atomic_write_text(path, source)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def _float(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def resolve_export_source(source: str, rank: int | None = None) -> tuple[str, ExportInfo, dict | None]:
    """(genome, provenance, run config or None) of a run directory, a proxy JSON or a genome string.

    A run directory gives the proxy its ``best.json`` holds, or with ``rank`` the
    hall of fame's entry of that rank (also the fallback, rank 1, while a run has
    no ``best.json`` yet).
    """
    from autoprox.proxies.proxy import ProxyError, resolve_proxy
    from autoprox.search.halloffame import load_hall_of_fame
    from autoprox.search.rundir import RunDirectory, RunDirError, read_json

    path = Path(source)
    if path.is_dir():
        run = RunDirectory(path)
        config = run.config()  # RunDirError when it is not a run
        best_path = run.file("best.json")
        if rank is None and best_path.is_file():
            best = read_json(best_path)
            if not isinstance(best.get("genome"), str):
                raise RunDirError(f"{best_path}: no 'genome' string")
            search = best.get("search") if isinstance(best.get("search"), dict) else {}
            test = best.get("test") if isinstance(best.get("test"), dict) else {}
            kendall = {t: _float(m.get("kendall")) for t, m in (search.get("targets") or {}).items()
                       if isinstance(m, dict)}
            info = ExportInfo(str(path), best.get("iteration") if isinstance(best.get("iteration"), int) else None,
                              _float(search.get("jcm")), _float(test.get("jcm")), kendall,
                              best.get("stats") if isinstance(best.get("stats"), dict) else {},
                              best.get("space") if isinstance(best.get("space"), str) else config.get("space"),
                              None, best.get("written") if isinstance(best.get("written"), str) else None)
            return best["genome"], info, config
        hall = load_hall_of_fame(run).hall
        rank = rank or 1
        if not 1 <= rank <= len(hall.entries):
            raise ExportError(f"{path}: the hall of fame has {len(hall.entries)} entries, no rank {rank}")
        entry = hall.entries[rank - 1]
        stats = config.get("stats") if isinstance(config.get("stats"), dict) else {}
        info = ExportInfo(str(path), entry.iteration, entry.jcm, None, dict(entry.kendall), stats,
                          config.get("space"), rank)
        return entry.genome, info, config
    if rank is not None:
        raise ExportError("--rank needs a run directory")
    proxy = resolve_proxy(source)
    if proxy.genome is None:
        raise ProxyError(f"{source} is a built-in proxy, not a genome: there is no formula to export")
    genome = genome_to_string(proxy.genome)
    info = ExportInfo(source=f"{proxy.name} (built-in)" if proxy.name != genome else "")
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        search = data.get("search") if isinstance(data.get("search"), dict) else {}
        test = data.get("test") if isinstance(data.get("test"), dict) else {}
        info = ExportInfo(
            str(data["run"]) if isinstance(data.get("run"), str) else str(path),
            data.get("iteration") if isinstance(data.get("iteration"), int) else None,
            _float(search.get("jcm")), _float(test.get("jcm")),
            {t: _float(m.get("kendall")) for t, m in (search.get("targets") or {}).items() if isinstance(m, dict)},
            data.get("stats") if isinstance(data.get("stats"), dict) else {},
            data.get("space") if isinstance(data.get("space"), str) else None,
            None, data.get("written") if isinstance(data.get("written"), str) else None,
        )
    return genome, info, None


def export_proxy(source: str, out: str | Path, rank: int | None = None, simplify: bool = True,
                 timeout: float | None = None) -> tuple[Path, Formula]:
    """Write the standalone module of ``source``'s proxy to ``out``; return its path and formula."""
    from autoprox.reports.simplify import (
        DEFAULT_TIMEOUT,
        readable_formula,
        statistics_for_check,
    )

    out = Path(out)
    if out.is_dir():
        raise ExportError(f"cannot write {out}: it is a directory")
    genome, info, config = resolve_export_source(source, rank)
    tree = parse_genome(genome)
    check = statistics_for_check(Path(source) if config is not None else None, info.space) if simplify else None
    formula = readable_formula(tree, check, timeout or DEFAULT_TIMEOUT, simplify)
    return write_export(out, export_source(tree, formula, info)), formula
