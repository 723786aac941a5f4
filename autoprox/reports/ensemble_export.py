"""Export an ensemble proxy (:mod:`autoprox.proxies.ensemble`) as one standalone module (torch only).

The module holds what a genome's export holds (:mod:`autoprox.reports.export`: the
primitives' source, the runtime that reads a model, the aggregations), once, and for each
distinct genome member its formula as ``genome_K(stats, values)``. One forward/backward pass
(:func:`collect` of the runtime) gives every genome member its per-block statistics and
every descriptor member (and blend feature, ``params``/``flops`` member) its value, read
from the model as the genome export reads architecture-level terminals. The members'
references are literal lists; the score is the weighted sum of the members' quantiles,
computed as :func:`autoprox.proxies.ensemble.quantile` does::

    scores(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100) -> {target: float}
    score(model, inputs, targets, target=None, ...) -> float

Zoo members are refused (their code is not a formula over the runtime's statistics).
Every value written into the source is a token checked against the primitive table or a
literal made by ``repr`` of numbers and checked names.
"""

from __future__ import annotations

import datetime as _dt

from autoprox.core.errors import ExportError
from autoprox.genome.aggregations import AGGREGATION_REGISTRY
from autoprox.genome.tree import genome_to_string, op_name
from autoprox.networks.names import DESCRIPTOR_NAMES, SPREAD_NAMES
from autoprox.networks.statistics import STAT_NAMES
from autoprox.proxies.ensemble import JOINT, EnsembleProxy
from autoprox.proxies.proxy import resolve_proxy
from autoprox.proxies.scorers import ARCHITECTURE_PROXIES
from autoprox.reports.export import (
    call_source,
    doc_safe,
    assemble_module,
    runtime_source,
    used_descriptors,
    used_primitives,
    used_statistics,
)

#: Architecture proxies as the runtime's descriptors.
_ARCHITECTURE_DESCRIPTORS = {"params": "params", "flops": "macs"}

_ENSEMBLE_FUNCTIONS = '''
def quantile(reference, value):
    """The member's contribution: ``value``'s empirical quantile against its sorted ``reference``,
    interpolated between reference values, with bounded tanh tails outside them (strictly increasing)."""
    n = len(reference)
    points = sorted(set(reference))
    levels = [sum(1 for r in reference if r <= p) / n for p in points]
    width = (points[-1] - points[0]) or 1.0
    if value < points[0]:
        return levels[0] * (1.0 + math.tanh((value - points[0]) / width))
    if value > points[-1]:
        return 1.0 + math.tanh((value - points[-1]) / width) / n
    for k in range(1, len(points)):
        if value <= points[k]:
            low, high = points[k - 1], points[k]
            return levels[k - 1] + (levels[k] - levels[k - 1]) * (value - low) / (high - low)
    return levels[-1]


def _feature(name, values):
    return math.log(values[name[4:]]) if name.startswith("log_") else float(values[name])


def member_raw(member, stats, values):
    """A member's raw value from the pass's statistics and descriptor values."""
    kind = member["kind"]
    if kind == "genome":
        return GENOMES[member["genome"]](stats, values)
    if kind == "descriptor":
        return float(values[member["descriptor"]])
    blend = member["blend"]
    return sum((_feature(f, values) - c) / s * w
               for f, c, s, w in zip(blend["features"], blend["center"], blend["scale"], blend["coef"]))


def scores(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100):
    """The ensemble's score of ``model`` per target (``"*"`` for a joint ensemble), from one
    minibatch: one forward/backward pass, each member's raw value, its quantile against its
    reference, weighted and summed. ``loss_fn``, ``train``, ``descriptors`` and ``head_classes``
    as in a genome's exported ``score``; the statistics' class count is the model's own head
    (the references were scored with CLASSES classes)."""
    stats, values = collect(model, inputs, targets, loss_fn, train, descriptors, head_classes, DESCRIPTORS,
                            spread=any(name in SPREAD_NAMES for name in STATISTICS), needs=STATISTICS)
    raw = {}
    out = {}
    for target, members in MEMBERS.items():
        total = 0.0
        for index, member in enumerate(members):
            key = repr(sorted((k, v) for k, v in member.items() if k not in ("weight", "reference")))
            if key not in raw:
                raw[key] = member_raw(member, stats, values)
            if member["weight"] > 0:
                total += member["weight"] * quantile(member["reference"], raw[key])
        out[target] = total
    return out


def score(model, inputs, targets, target=None, loss_fn=None, train=True, descriptors=None, head_classes=100):
    """The ensemble's score of ``model`` for ``target`` (None: the joint members)."""
    key = "*" if "*" in MEMBERS else target
    if key not in MEMBERS:
        raise ValueError(f"name a target of this ensemble: {', '.join(MEMBERS)}")
    return scores(model, inputs, targets, loss_fn, train, descriptors, head_classes)[key]
'''


def _genome_function(index: int, tree) -> tuple[str, tuple[str, ...], str]:
    """(source of ``genome_K`` and its block function, the descriptors it reads, its aggregation)."""
    aggregation = op_name(tree[0].name)
    if aggregation not in AGGREGATION_REGISTRY:
        raise ExportError(f"unknown aggregation over blocks {aggregation!r}")
    terminals, descriptors = used_descriptors(tree)
    call, _ = call_source(tree, 1)
    source = (f"def block_score_{index}(s):\n    return {call}\n\n\n"
              f"def genome_{index}(stats, values):\n"
              f"    \"\"\"{doc_safe(genome_to_string(tree))}\"\"\"\n"
              f"    terminals = {terminals!r}\n"
              f"    return score_blocks(stats, block_score_{index}, {aggregation}, terminals,\n"
              f"                        terminal_tensors(terminals, values) if terminals else None)")
    return source, descriptors, aggregation


def ensemble_export_source(ensemble: EnsembleProxy, date: str | None = None) -> str:
    """The text of the standalone module scoring models with ``ensemble``; ExportError for a zoo member."""
    from autoprox.primitives import PRIMITIVES, export_preamble

    trees, functions, needed, aggregations, primitive_names, classes = {}, [], set(), [], set(), set()
    members, statistics = {}, set()
    for key, items in ensemble.members.items():
        rows = []
        for item in items:
            row = {"weight": float(item.weight), "reference": [float(r) for r in item.reference]}
            if item.kind == "descriptor":
                row |= {"kind": "descriptor", "descriptor": str(item.value)}
                needed.add(str(item.value))
            elif item.kind == "blend":
                choice = item.value
                row |= {"kind": "blend", "blend": {"features": [str(f) for f in choice["features"]],
                                                   **{k: [float(v) for v in choice[k]]
                                                      for k in ("center", "scale", "coef")}}}
                needed.update(f.removeprefix("log_") for f in choice["features"])
            elif item.value in ARCHITECTURE_PROXIES:
                name = _ARCHITECTURE_DESCRIPTORS.get(item.value)
                if name is None:
                    raise ExportError(f"{ensemble.source}: architecture proxy {item.value!r} cannot be exported")
                row |= {"kind": "descriptor", "descriptor": name}
                needed.add(name)
            else:
                proxy = resolve_proxy(item.value)
                if proxy.genome is None:
                    raise ExportError(f"{ensemble.source}: member {item.value!r} is a hand-crafted zoo proxy; its code "
                                      "is not a formula over the runtime's statistics and is not exported")
                text = genome_to_string(proxy.genome)
                if text not in trees:
                    trees[text] = len(trees)
                    source, descriptors, aggregation = _genome_function(trees[text], proxy.genome)
                    functions.append(source)
                    needed.update(descriptors)
                    aggregations.append(aggregation)
                    primitive_names.update(used_primitives(proxy.genome))
                    statistics.update(used_statistics(proxy.genome))
                row |= {"kind": "genome", "genome": trees[text]}
                classes.add(item.classes)
            rows.append(row)
        members[key] = rows
    unknown = sorted(needed - set(DESCRIPTOR_NAMES))
    if unknown:
        raise ExportError(f"{ensemble.source}: descriptor {unknown[0]!r} cannot be read from a model")
    date = date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
    kind = "joint" if JOINT in members else "per target: " + ", ".join(members)
    doc = (f"Ensemble proxy {doc_safe(ensemble.name)} ({kind}), exported by autoprox on {date}.\n\n"
           "Depends on torch only. scores(model, inputs, targets) -> {target: float};\n"
           "score(model, inputs, targets, target=None) -> float. Each member's raw value (a genome's\n"
           "score, a descriptor, a descriptor blend) is turned into its quantile against the member's\n"
           "reference scores and weighted; see autoprox.proxies.ensemble.")
    parts = [
        f'"""{doc}\n"""\n',
        "from __future__ import annotations\n",
        "import math\nimport warnings\n",
        export_preamble(),
        *(PRIMITIVES[name].source for name in PRIMITIVES if name in primitive_names),
        *(AGGREGATION_REGISTRY[name].source.strip("\n") for name in dict.fromkeys(aggregations)),
        f"#: The descriptors read from the model.\nDESCRIPTORS = {tuple(d for d in DESCRIPTOR_NAMES if d in needed)!r}",
        f"#: The per-block statistics the genome members read.\n"
        f"STATISTICS = {tuple(n for n in (*STAT_NAMES, *SPREAD_NAMES) if n in statistics)!r}",
        f"#: The statistics' class count the genome members' references were scored with.\n"
        f"CLASSES = {sorted(classes)!r}",
        f"#: Members per target ('*': every target): kind, weight, sorted reference and what they read.\n"
        f"MEMBERS = {members!r}",
        runtime_source(),
        *functions,
        f"GENOMES = [{', '.join(f'genome_{i}' for i in range(len(trees)))}]",
        _ENSEMBLE_FUNCTIONS,
    ]
    return assemble_module(parts, "ensemble")


__all__ = ["ensemble_export_source"]
