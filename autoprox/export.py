"""Export a proxy as one standalone Python module that depends on torch only.

The module holds, copied verbatim, the source of the primitives the genome uses
(``Primitive.source``) and what they need (``primitives.export_preamble()``), the
genome written as nested calls of those functions, and::

    score(model, inputs, targets, loss_fn=None, train=True) -> float

which registers hooks, runs one forward/backward pass, collects the eight
statistics per transformer block exactly as :mod:`autoprox.statistics` does (F4
and F4g are the MLP hidden activation, the output of ``mlp.act``, and its
gradient, each averaged over the batch) and applies the formula, averaged over
blocks. Blocks are found by the timm naming that both of this project's spaces
follow: a module with ``attn.qkv``, ``attn.proj``, ``mlp.fc1`` and ``mlp.act``
(or, without ``act``, the input of ``mlp.fc2``); a model without one is refused
with a clear error. The docstring carries the readable formula and the proxy's
provenance (run, JCM, date).

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
from autoprox.atomic import atomic_write_text
from autoprox.genome import genome_to_string, op_name, parse_genome
from autoprox.simplify import LEGEND, Formula
from autoprox.statistics import STAT_DESCRIPTIONS, STAT_NAMES


class ExportError(ValueError):
    """A proxy that cannot be exported, or an output that cannot be written."""


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


def _docstring(genome: str, formula: Formula, info: ExportInfo, date: str) -> str:
    lines = [
        f"Zero-cost proxy for Vision Transformers, exported by autoprox {__version__} on {date}.",
        "",
        "Formula (higher scores rank an architecture higher):",
        "",
    ]
    lines += ["    score = " + _doc_safe(line) for line in [formula.text]]
    lines += [""]
    lines += textwrap.wrap(_doc_safe(LEGEND), 88)
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
        "",
        "The model's transformer blocks are found by the timm naming: a module with",
        "attn.qkv, attn.proj, mlp.fc1 and mlp.act (or mlp.fc2). Per block:",
        "",
    ]
    from autoprox.simplify import SYMBOL_NAMES

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


def block_statistics(model, inputs, targets, loss_fn=None, train=True):
    """The eight statistics of every block after one forward/backward pass."""
    blocks = find_blocks(model)
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
            loss = loss_fn(model(inputs), targets)
            loss.backward()
    finally:
        for handle in handles:
            handle.remove()
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
    return stats


def block_score(s):
    """The proxy on one block's statistics ``s`` (a 0-d tensor)."""
    return __BLOCK_SCORE__


def score_statistics(stats):
    """The proxy's score from per-block statistics: the mean of the blocks' values."""
    values = []
    for index, block in enumerate(stats):
        value = block_score(block)
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            raise InvalidResult(f"block {index}: the value is not a scalar")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidResult(f"block {index}: the value is NaN or inf")
        values.append(number)
    return sum(values) / len(values)


def score(model, inputs, targets, loss_fn=None, train=True) -> float:
    """The proxy's score of ``model`` from one minibatch (higher ranks higher).

    ``loss_fn(outputs, targets)`` defaults to cross-entropy. Raises InvalidResult
    when the proxy is NaN or inf on this model, NoTransformerBlocks when the model
    has no block to read.
    """
    return score_statistics(block_statistics(model, inputs, targets, loss_fn, train))
'''


def export_source(genome, formula: Formula, info: ExportInfo | None = None, date: str | None = None) -> str:
    """The text of the standalone module for ``genome`` (a string or a parsed tree)."""
    from primitives import PRIMITIVES, export_preamble

    tree = genome if isinstance(genome, gp.PrimitiveTree) else parse_genome(genome)
    if op_name(tree[0].name) != "block_mean":
        raise ExportError(f"only block_mean genomes can be exported so far, not {op_name(tree[0].name)}")
    from autoprox.genome import uses_arch_terminals

    if uses_arch_terminals(tree):
        raise ExportError("genomes with architecture-level terminals (A_...) cannot be exported so far")
    genome_text = genome_to_string(tree)
    info = info or ExportInfo()
    date = date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    call, _ = _call_source(tree, 1)
    docstring = _docstring(genome_text, formula, info, date)
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
        _RUNTIME.replace("__BLOCK_SCORE__", call),
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
    from autoprox.halloffame import load_hall_of_fame
    from autoprox.proxies import ProxyError, resolve_proxy
    from autoprox.rundir import RunDirError, RunDirectory, read_json

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
    from autoprox.simplify import DEFAULT_TIMEOUT, readable_formula, statistics_for_check

    out = Path(out)
    if out.is_dir():
        raise ExportError(f"cannot write {out}: it is a directory")
    genome, info, config = resolve_export_source(source, rank)
    tree = parse_genome(genome)
    check = statistics_for_check(config, info.space) if simplify else None
    formula = readable_formula(tree, check, timeout or DEFAULT_TIMEOUT, simplify)
    return write_export(out, export_source(tree, formula, info)), formula
