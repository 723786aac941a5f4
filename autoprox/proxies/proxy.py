"""Proxies by name: built-in architecture-level ones, the hand-crafted zoo, the published
Auto-Prox genomes, genome strings and proxy JSON files, and scoring a benchmark's
architectures with any of them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from autoprox.core.errors import ProxyError  # noqa: F401 (re-exported)
from autoprox.data.cache import StatisticsCache, StatsPlan, StatsRequest, build_cache
from autoprox.genome.tree import (
    GenomeError,
    InvalidProxy,
    genome_to_string,
    parse_genome,
    score_architecture,
    template_genes,
)
from autoprox.networks.zoo import (
    NO_TEACHER_NOTE,
    ZOO,
    ZooScoreCache,
    compute_raw_values,
    set_scores,
)
from autoprox.spaces.architectures import count_macs, count_params
from autoprox.spaces.descriptors import terminal_values

#: Built-in proxies that need only the architecture (100-class head, as the benchmark's README).
ARCHITECTURE_PROXIES: dict[str, Callable] = {
    "params": lambda arch: count_params(arch, num_classes=100),
    "flops": lambda arch: count_macs(arch, num_classes=100),
}

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
PUBLISHED_GENOMES: dict[str, str] = {"autoprox_a": AUTOPROX_A, "autoprox_p": AUTOPROX_P}
PUBLISHED_SOURCES = {
    "autoprox_a": "Auto-Prox (Wei et al. AAAI 2024) eq. 2, found on AutoFormer",
    "autoprox_p": "Auto-Prox (Wei et al. AAAI 2024) eq. 3, found on PiT",
}

#: Every built-in name, in the order of the ranking table.
BUILTIN_PROXIES: tuple[str, ...] = ("params", "flops", *ZOO, *PUBLISHED_GENOMES)


def builtin_names() -> list[str]:
    return list(BUILTIN_PROXIES)



@dataclass(frozen=True)
class Proxy:
    """A proxy ready to score architectures.

    ``genome`` is set for statistics-based proxies (a deap PrimitiveTree); ``zoo`` names a
    hand-crafted proxy of :mod:`autoprox.networks.zoo`; neither for ``params`` and ``flops``.
    """

    name: str
    genome: object = None  # a deap PrimitiveTree for statistics-based proxies
    provenance: Mapping = field(default_factory=dict)
    zoo: str | None = None
    note: str = ""

    @property
    def needs_statistics(self) -> bool:
        return self.genome is not None

    @property
    def kind(self) -> str:
        """``architecture``, ``genome`` or ``zoo``."""
        if self.genome is not None:
            return "genome"
        return "zoo" if self.zoo else "architecture"

    @property
    def source(self) -> str:
        if self.zoo:
            return ZOO[self.zoo].source
        if self.name in PUBLISHED_SOURCES:
            return PUBLISHED_SOURCES[self.name]
        if self.genome is not None:
            return str(self.provenance.get("file") or "genome string")
        return {"params": "parameter count", "flops": "multiply-accumulates"}.get(self.name, "")


def _known_names() -> str:
    return ", ".join(BUILTIN_PROXIES)


def resolve_proxy(text: str) -> Proxy:
    """A built-in name (``params``, ``flops``, a zoo proxy, ``autoprox_a``/``autoprox_p``), a path to a
    proxy JSON (such as a run's ``best.json``), or a genome string."""
    if text in ARCHITECTURE_PROXIES:
        return Proxy(text)
    if text in ZOO:
        return Proxy(text, zoo=text, note=NO_TEACHER_NOTE if ZOO[text].needs_teacher else "")
    if text in PUBLISHED_GENOMES:
        genome = PUBLISHED_GENOMES[text]
        return Proxy(text, parse_genome(genome), {"builtin": text, "genome": genome})
    path = Path(text)
    if text.endswith(".json") or path.is_file():
        if not path.is_file():
            raise ProxyError(f"proxy file not found: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ProxyError(f"{path}: not a JSON proxy file ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("genome"), str):
            raise ProxyError(f"{path}: no 'genome' string in this proxy file")
        try:
            tree = parse_genome(data["genome"])
        except GenomeError as exc:
            raise ProxyError(f"{path}: {exc}") from None
        return Proxy(genome_to_string(tree), tree, {"file": str(path), **{k: data[k] for k in ("run", "stats", "split") if k in data}})
    try:
        tree = parse_genome(text)
    except GenomeError as exc:
        raise ProxyError(
            f"unknown proxy {text!r}: not a built-in ({_known_names()}), "
            f"not a file, and not a genome ({exc})"
        ) from None
    return Proxy(genome_to_string(tree), tree)


def split_proxy_list(text: str) -> list[str]:
    """Split a comma list of proxies at top-level commas only (genome strings hold commas)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current.append(char)
    parts.append("".join(current).strip())
    return [p for p in parts if p]


def resolve_proxies(text: str) -> list[Proxy]:
    """``all`` (every built-in), or a comma list of anything :func:`resolve_proxy` takes.

    Duplicates are dropped (first one kept); ``all`` may appear inside a list.
    """
    names = split_proxy_list(text)
    if not names:
        raise ProxyError(f"no proxy given; known built-ins: all, {_known_names()}")
    proxies: list[Proxy] = []
    seen: set[str] = set()
    for name in names:
        for item in (BUILTIN_PROXIES if name == "all" else (name,)):
            proxy = resolve_proxy(item)
            if proxy.name not in seen:
                seen.add(proxy.name)
                proxies.append(proxy)
    return proxies


def seed_genome(text: str) -> str:
    """The genome string a search can start from for ``text``; ProxyError saying why not.

    Built-in published proxies (``autoprox_a``, ``autoprox_p``), genome strings and
    proxy files are accepted when they have the template's shape (the search mutates
    template genes); ``params``, ``flops`` and the zoo are refused with the reason.
    """
    proxy = resolve_proxy(text)
    if proxy.kind == "zoo":
        spec = ZOO[proxy.name]
        raise ProxyError(
            f"{proxy.name} cannot seed the search: it is a hand-crafted proxy ({spec.source}: {spec.definition}) "
            f"computed from its own network ({spec.passes or 'initialised weights'}), not an expression over the eight per-block "
            "statistics F1..F4g that genomes are built from")
    if proxy.kind == "architecture":
        raise ProxyError(f"{proxy.name} cannot seed the search: it is computed from the architecture alone, "
                         "not from the per-block statistics that genomes are built from")
    try:
        template_genes(proxy.genome)
    except GenomeError:
        raise ProxyError(f"{proxy.name} cannot seed the search: it does not have the template's shape "
                         "block_mean(to_mean_scalar(BINARY(U2(U1(Fa)), U4(U3(Fb))))) that the search mutates") from None
    return genome_to_string(proxy.genome)


def score_archs(proxy: Proxy, archs: Sequence, cache: StatisticsCache, plan: StatsPlan,
                workers: int = 1, progress: Callable[[int, int], None] | None = None,
                teacher=None) -> dict[int, np.ndarray]:
    """Scores of ``archs`` per class count (mean over the plan's seeds).

    Statistics come from the cache (computed in parallel where missing) and are read
    one architecture at a time, so memory stays flat. Zoo proxies are computed per seed
    on fresh networks (their raw values kept in the cache directory's ``zoo/`` part), and
    set-level ones (TVT) normalised over ``archs`` per seed before the mean. Raises
    InvalidProxy (naming the first failing architecture for a zoo proxy).
    """
    if proxy.kind == "architecture":
        values = np.array([ARCHITECTURE_PROXIES[proxy.name](a) for a in archs], dtype=np.float64)
        return {classes: values.copy() for classes in plan.class_counts}
    if proxy.kind == "zoo":
        return _score_zoo(proxy, archs, cache, plan, workers, progress, teacher)
    build_cache(cache, plan.requests(archs), workers=workers, progress=progress)
    from autoprox.networks.statistics import torch_threads

    # per class count, one row per seed; averaged as FitnessEvaluator does, to the last bit
    runs = {classes: np.zeros((len(plan.seeds), len(archs))) for classes in plan.class_counts}
    with torch_threads(1):
        for index, arch in enumerate(archs):
            terminals = terminal_values(arch)
            for row, seed in enumerate(plan.seeds):
                for classes in plan.class_counts:
                    stats = cache.get(StatsRequest(arch, plan.spec, seed, classes))
                    runs[classes][row, index] = score_architecture(proxy.genome, stats, terminals)
    return {classes: np.mean(values, axis=0) for classes, values in runs.items()}


def zoo_name(proxy: Proxy, teacher=None) -> str:
    """The zoo proxy actually computed: ``tvt`` without a teacher is ``tvt_l2``."""
    if proxy.zoo == "tvt" and teacher is None:
        return "tvt_l2"
    return proxy.zoo


def _score_zoo(proxy, archs, cache, plan, workers, progress, teacher) -> dict[int, np.ndarray]:
    name = zoo_name(proxy, teacher)
    score_cache = ZooScoreCache(cache.root)
    runs: dict[int, list[np.ndarray]] = {classes: [] for classes in plan.class_counts}
    for seed in plan.seeds:
        for classes in plan.class_counts:
            results = compute_raw_values([name], archs, plan.spec, seed, classes, teacher=teacher,
                                         workers=workers, score_cache=score_cache, progress=progress)[name]
            failed = [(i, r.error) for i, r in enumerate(results) if not r.ok]
            if failed:
                index, reason = failed[0]
                raise InvalidProxy(f"{proxy.name} failed on {len(failed)} of {len(archs)} architectures "
                                   f"(first: architecture {index}, seed {seed}: {reason})")
            runs[classes].append(set_scores(name, [r.raw for r in results]))
    return {classes: np.mean(values, axis=0) for classes, values in runs.items()}


__all__ = [
    "ARCHITECTURE_PROXIES", "AUTOPROX_A", "AUTOPROX_P", "BUILTIN_PROXIES", "InvalidProxy", "PUBLISHED_GENOMES", "Proxy",
    "ProxyError", "builtin_names", "resolve_proxies", "resolve_proxy", "score_archs", "seed_genome", "split_proxy_list",
    "zoo_name",
]
