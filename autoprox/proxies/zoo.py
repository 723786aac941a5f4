"""The proxy zoo: the hand-crafted zero-cost proxies ``autoprox rank`` knows, by name.

Each proxy is registered once, with :func:`register_zoo`, on the function that computes
its **raw value** for one architecture; the registration records its source (paper), a
one-line definition, its input convention (``batch``, ``ones`` or ``weights``, see
:mod:`autoprox.proxies.zoo_measures`, where the model-level functions are), the passes it
runs, whether it needs a teacher and, for a set-level proxy, how the raw values of the
ranked set become scores.

A raw-value function receives a :class:`ZooInputs`: the network built exactly as the
statistics code builds it (``build_model(arch, classes, seed=derived_seed(seed, "model"))``,
train mode, no dropout) and the batch of ``make_batch(spec, classes, seed)``, so that one
seed means one network and one batch everywhere in autoprox. Every value is computed
single-threaded (:func:`autoprox.networks.statistics.torch_threads`), so values do not
depend on the thread or worker count.

A proxy's raw value per architecture may need a **set-level** step (TVT min-max
normalises its two terms over the candidates being ranked): :func:`autoprox.proxies.zoo_scores.set_scores` turns
the raw values of the architectures being ranked into their scores, so the
normalisation is always over exactly the ranked set.

Raw values are kept in a score cache (:class:`autoprox.proxies.zoo_scores.ZooScoreCache`) beside the statistics cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Callable, NamedTuple, Sequence

import numpy as np

from autoprox.core.registry import Registry
from autoprox.genome.terminals import terminal_kinds
from autoprox.networks.statistics import (
    InputSpec,
    derived_seed,
    make_batch,
    resolve_device,
)

if TYPE_CHECKING:
    import torch
    from torch import nn


def _measures():
    """:mod:`autoprox.proxies.zoo_measures`, imported when a proxy is computed: it needs torch, and registering
    the zoo (which every command's options read) must not load it."""
    from autoprox.proxies import zoo_measures

    return zoo_measures


def _jacobian():
    """:mod:`autoprox.proxies.zoo_jacobian`, imported when a proxy is computed (see :func:`_measures`)."""
    from autoprox.proxies import zoo_jacobian

    return zoo_jacobian


#: Bump when any zoo proxy's definition or its input convention changes (score-cache key).
ZOO_VERSION = "zoo-v1"


# ---------------------------------------------------------------------- the registry


@dataclass
class ZooInputs:
    """What a raw-value function may use for one architecture, made on first use."""

    arch: object
    spec: InputSpec
    seed: int
    num_classes: int
    teacher: nn.Module | None = None

    @cached_property
    def model(self) -> nn.Module:
        """The network, built as the statistics code builds it, in train mode."""
        from autoprox.networks.models import build_model  # needs torch: see _measures

        model = build_model(self.arch, num_classes=self.num_classes, seed=derived_seed(self.seed, "model"))
        model.train()
        return model.to(self.device)

    @cached_property
    def device(self) -> torch.device:
        """Where the network and its inputs live (``spec.device``)."""
        return resolve_device(self.spec.device)

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The statistics minibatch (images, labels) of this seed."""
        images, labels = make_batch(self.spec, self.num_classes, self.seed)
        return images.to(self.device), labels.to(self.device)

    def ones(self) -> torch.Tensor:
        """SynFlow's input: one all-ones image."""
        images, _ = make_batch(InputSpec("ones", batch_size=1), self.num_classes, self.seed)
        return images.to(self.device)


@dataclass(frozen=True)
class ZooProxy:
    """One hand-crafted proxy of the zoo, as ``autoprox rank --proxy NAME`` knows it."""

    name: str
    source: str  # where it comes from (paper)
    definition: str  # one line
    input: str  # "batch", "ones" or "weights"
    passes: str  # what it runs: "forward/backward", "forward", ...; "" for none (initialised weights only)
    raw: Callable[[ZooInputs], object]  # the raw value of one architecture (a float, or a dict)
    needs_teacher: bool = False
    #: Set-level proxies only: the scores of a ranked set from its raw values (a min-max normalisation).
    combine: Callable[[Sequence], np.ndarray] | None = None
    #: The teacher-free proxy computed instead when no teacher is given (TVT: its student part).
    without_teacher: str | None = None

    @property
    def set_level(self) -> bool:
        """Whether scores need the whole ranked set (min-max normalisation)."""
        return self.combine is not None

    def set_scores(self, raws: Sequence) -> np.ndarray:
        """Scores of the ranked set from its raw values."""
        if self.combine is not None:
            return self.combine(raws)
        return np.asarray(raws, dtype=np.float64)

    def cacheable(self, teacher: nn.Module | None) -> bool:
        """Whether raw values may go to the score cache (no teacher is part of any key)."""
        return not (self.needs_teacher and teacher is not None)


#: Every zoo proxy by name, in registration order (the order of the ranking table). The built-in
#: proxies of every kind share its name space (:mod:`autoprox.proxies.scorers`, :mod:`autoprox.proxies.proxy`).
ZOO: Registry[str, ZooProxy] = Registry("zoo proxy", describe=lambda entry: entry.definition)


def register_zoo(name: str, *, source: str, definition: str, input: str, passes: str, needs_teacher: bool = False,
                 combine: Callable[[Sequence], np.ndarray] | None = None, without_teacher: str | None = None):
    """Register the decorated raw-value function as the zoo proxy ``name``.

    ``combine`` makes the proxy set-level: it turns the raw values of the ranked set into
    scores. The registered :class:`ZooProxy` is also the function's ``zoo_proxy`` attribute.
    """
    if input not in ("batch", "ones", "weights"):
        raise ValueError(f"zoo proxy {name}: unknown input convention {input!r}")

    def decorate(function: Callable[[ZooInputs], object]) -> Callable[[ZooInputs], object]:
        entry = ZOO.add(name, ZooProxy(name, source, definition, input, passes, function, needs_teacher, combine,
                                       without_teacher))
        function.zoo_proxy = entry
        return function

    return decorate


def _tvt_scores(raws: Sequence) -> np.ndarray:
    """TVT's score over the ranked set: both terms with a teacher, the student's alone without."""
    capability = [r["capability"] for r in raws]
    distances = [r.get("distance") for r in raws]
    return _measures().tvt_combine(capability, distances if all(d is not None for d in distances) else None)


def _tvt_student_scores(raws: Sequence) -> np.ndarray:
    """TVT's student-capability term over the ranked set."""
    return _measures().tvt_combine([r["capability"] for r in raws], None)


@register_zoo("snip", source="SNIP, Lee et al. ICLR 2019", definition="sum |dL/dw * w| over Linear/Conv2d weights",
              input="batch", passes="forward/backward")
def _snip(inputs: ZooInputs) -> float:
    return _measures().snip(inputs.model, *inputs.batch())


@register_zoo("grasp", source="GraSP, Wang et al. ICLR 2020",
              definition="sum -w * (H dL/dw) over Linear/Conv2d weights", input="batch",
              passes="forward + double backward")
def _grasp(inputs: ZooInputs) -> float:
    return _measures().grasp(inputs.model, *inputs.batch())


@register_zoo("synflow", source="SynFlow, Tanaka et al. NeurIPS 2020",
              definition="sum |dR/dw * w|, R = 1^T f(1) with |parameters|", input="ones",
              passes="forward/backward (float64)")
def _synflow(inputs: ZooInputs) -> float:
    return _measures().synflow(inputs.model, inputs.ones())


@register_zoo("grad_norm", source="Grad-norm, Abdelfattah et al. ICLR 2021", definition="sum over layers of ||dL/dW||_2",
              input="batch", passes="forward/backward")
def _grad_norm(inputs: ZooInputs) -> float:
    return _measures().grad_norm(inputs.model, *inputs.batch())


@register_zoo("fisher", source="Fisher, Theis et al. 2018 (Abdelfattah et al. 2021)",
              definition="sum over layer outputs and channels of 0.5 mean_images (sum_positions z dL/dz)^2",
              input="batch", passes="forward/backward")
def _fisher(inputs: ZooInputs) -> float:
    return _measures().fisher(inputs.model, *inputs.batch())


@register_zoo("plain", source="Plain, Mozer & Smolensky 1988 (Abdelfattah et al. 2021)",
              definition="sum dL/dw * w over Linear/Conv2d weights", input="batch", passes="forward/backward")
def _plain(inputs: ZooInputs) -> float:
    return _measures().plain(inputs.model, *inputs.batch())


@register_zoo("nwot", source="NASWOT, Mellor et al. ICML 2021",
              definition="log det of the kernel of MLP pre-activation sign codes", input="batch", passes="forward")
def _nwot(inputs: ZooInputs) -> float:
    return _measures().nwot(inputs.model, inputs.batch()[0])


@register_zoo("zico", source="ZiCo, Li et al. ICLR 2023",
              definition="sum over layers of log sum mean|g| / std(g), 2 gradient samples", input="batch",
              passes="2 forward/backward on half batches")
def _zico(inputs: ZooInputs) -> float:
    return _measures().zico(inputs.model, *inputs.batch())


@register_zoo("te_nas", source="TE-NAS, Chen et al. ICLR 2021 (NTK term only)",
              definition="-cond(NTK), NTK = J J^T over the batch", input="batch", passes="one forward/backward per image")
def _te_nas(inputs: ZooInputs) -> float:
    return _measures().te_nas(inputs.model, inputs.batch()[0])


@register_zoo("dss", source="TF-TAS, Zhou et al. CVPR 2022",
              definition="sum nuc(dR/dW) nuc(W) over qkv, proj + sum |dR/dW * W| over fc1, fc2", input="ones",
              passes="forward/backward (float64)")
def _dss(inputs: ZooInputs) -> float:
    return _measures().dss(inputs.model, inputs.ones())


@register_zoo("tvt", source="TVT, Wei et al. 2023",
              definition="2 f(M_s) - 3 f(M_t), f = min-max over the ranked set (needs a teacher)", input="batch",
              passes="forward", needs_teacher=True, combine=_tvt_scores, without_teacher="tvt_l2")
def _tvt(inputs: ZooInputs) -> dict:
    measures = _measures()
    capability = measures.student_capability(inputs.model)
    if inputs.teacher is None:
        return {"capability": capability}
    images, _ = inputs.batch()
    teacher_maps = measures.teacher_features(inputs.teacher, images)
    distance = measures.teacher_distance(measures.student_features(inputs.model, images), teacher_maps)
    return {"capability": capability, "distance": distance}


@register_zoo("tvt_l2", source="TVT's student-capability term, Wei et al. 2023",
              definition="2 f(M_s), M_s = sum over blocks of ||W_block||_2", input="weights", passes="",
              combine=_tvt_student_scores)
def _tvt_l2(inputs: ZooInputs) -> dict:
    return {"capability": _measures().student_capability(inputs.model)}


# The four proxies of NAS-Bench-Suite-Zero (Krishnakumar et al. NeurIPS 2022) the others leave out.


@register_zoo("jacov", source="JacCov, Mellor et al. 2020 (v1 of NASWOT)",
              definition="-sum(log(v + k) + 1/(v + k)), v the eigenvalues of the correlations of the images' "
                         "input Jacobians, k = 1e-5", input="batch", passes="forward/backward to the input")
def _jacov(inputs: ZooInputs) -> float:
    return _jacobian().jacov(inputs.model, inputs.batch()[0])


@register_zoo("l2_norm", source="L2-norm, Krishnakumar et al. NeurIPS 2022 (NAS-Bench-Suite-Zero)",
              definition="sum over Linear/Conv2d weights of ||W||_2", input="weights", passes="")
def _l2_norm(inputs: ZooInputs) -> float:
    return _measures().l2_norm(inputs.model)


@register_zoo("zen", source="Zen-NAS, Lin et al. ICCV 2021",
              definition="log mean_images sum |f(x) - f(x + 0.01 eps)|, f the last block's tokens, N(0, 1) "
                         "weights; + sum over BatchNorm of log sqrt(mean running var) (0: no BatchNorm in ViTs)", input="batch",
              passes="2 forwards")
def _zen(inputs: ZooInputs) -> float:
    import torch  # here, not at the top: see _measures

    generator = torch.Generator().manual_seed(derived_seed(inputs.seed, "zen"))
    return _jacobian().zen(inputs.model, inputs.batch()[0], generator)


@register_zoo("epe_nas", source="EPE-NAS, Lopes et al. ICANN 2021",
              definition="sum over the batch's labels of |sum log(|C| + k)|, C the correlations of that label's "
                         "input Jacobians", input="batch", passes="forward/backward to the input")
def _epe_nas(inputs: ZooInputs) -> float:
    images, labels = inputs.batch()
    jacobian = _jacobian()
    jacobian.label_groups(labels.cpu().numpy())  # no label with two images: fail before the network is built
    return jacobian.epe_nas(inputs.model, images, labels)


# ------------------------------------------------------------- zoo proxies as genome terminals


class ZooTerminal(NamedTuple):
    """A zoo proxy a genome may read as a scalar terminal: its raw value on the architecture's network
    (``transform`` ``raw``), or its natural logarithm (``log``, for a value spanning tens of orders of
    magnitude: it ranks the same and stays finite in float32); ``terminal_set`` is the terminal set that
    holds it (:data:`ZOO_TERMINAL_SETS`)."""

    proxy: str
    transform: str
    terminal_set: str = "zoo"


#: The transforms a zoo terminal may apply to its proxy's raw value.
TERMINAL_TRANSFORMS = ("raw", "log")
#: The terminal sets zoo terminals are held in: ``zoo``, the proxies a search with ``--terminals zoo`` draws
#: (one pass or two of the network each), and ``zoo_rest``, the rest of the zoo's scalar proxies (GraSP's
#: second-order pass costs five times the others), which the ``ridge`` part of ``cv-pick-ridge`` reads with
#: them and a search draws only where ``--terminals`` names the set.
ZOO_TERMINAL_SETS = ("zoo", "zoo_rest")
#: Every name a zoo terminal has begins so (``Z_snip``, ``Z_log_synflow``): the SymPy side knows them by it.
ZOO_TERMINAL_PREFIX = "Z_"

#: The zoo terminals by name (``Z_snip`` -> ``ZooTerminal("snip", "raw", "zoo")``), in registration order: the
#: terminal sets of :data:`ZOO_TERMINAL_SETS` (:mod:`autoprox.proxies.zoo_scores` registers them in the genome
#: layer), whose terminals a search draws in this order; each is registered once with
#: :func:`register_zoo_terminal`.
ZOO_TERMINALS: Registry[str, ZooTerminal] = Registry("zoo terminal", same=lambda held, new: held == new)


def zoo_terminal_name(proxy: str, transform: str = "raw") -> str:
    """The terminal name genomes give the zoo proxy ``proxy`` read through ``transform``."""
    return ZOO_TERMINAL_PREFIX + ("log_" if transform == "log" else "") + proxy


def zoo_terminals_of(terminal_set: str) -> tuple[str, ...]:
    """The names of the zoo terminals the set ``terminal_set`` (one of :data:`ZOO_TERMINAL_SETS`) holds, in
    registration order."""
    return tuple(name for name, terminal in ZOO_TERMINALS.items() if terminal.terminal_set == terminal_set)


def register_zoo_terminal(proxy: str, transform: str = "raw", terminal_set: str = "zoo") -> str:
    """Let genomes read the registered zoo proxy ``proxy`` (through ``transform``) as a scalar terminal of the
    set ``terminal_set`` (one of :data:`ZOO_TERMINAL_SETS`); returns the terminal's name
    (:func:`zoo_terminal_name`). The same registration again is a no-op; a name another terminal set holds is
    refused (ValueError)."""
    ZOO.lookup(proxy)
    if transform not in TERMINAL_TRANSFORMS:
        raise ValueError(f"zoo terminal of {proxy}: transform must be one of {', '.join(TERMINAL_TRANSFORMS)}")
    if terminal_set not in ZOO_TERMINAL_SETS:
        raise ValueError(f"zoo terminal of {proxy}: terminal_set must be one of {', '.join(ZOO_TERMINAL_SETS)}")
    name = zoo_terminal_name(proxy, transform)
    if not name.isidentifier() or not name.isascii():
        raise ValueError(f"zoo terminal {name!r}: not a plain name a genome string can spell")
    if name not in ZOO_TERMINALS and name in terminal_kinds():
        raise ValueError(f"zoo terminal {name}: another terminal set has a terminal of that name")
    ZOO_TERMINALS.add(name, ZooTerminal(proxy, transform, terminal_set))
    return name


# The zoo terminals, in the order every search with ``--terminals zoo`` has drawn them (another order would
# draw other genomes from the same seed): SynFlow's, spanning tens of orders of magnitude, as its logarithm.
register_zoo_terminal("snip")
register_zoo_terminal("nwot")
register_zoo_terminal("zico")
register_zoo_terminal("synflow", "log")
register_zoo_terminal("grad_norm")
# The rest of the zoo's scalar proxies (a proxy table's columns), apart so that ``--terminals zoo`` draws as before.
register_zoo_terminal("grasp", terminal_set="zoo_rest")
register_zoo_terminal("fisher", terminal_set="zoo_rest")
register_zoo_terminal("plain", terminal_set="zoo_rest")
register_zoo_terminal("jacov", terminal_set="zoo_rest")
register_zoo_terminal("l2_norm", terminal_set="zoo_rest")
register_zoo_terminal("zen", terminal_set="zoo_rest")


__all__ = ["TERMINAL_TRANSFORMS", "ZOO", "ZOO_TERMINALS", "ZOO_TERMINAL_PREFIX", "ZOO_TERMINAL_SETS", "ZOO_VERSION",
           "ZooInputs", "ZooProxy", "ZooTerminal", "register_zoo", "register_zoo_terminal", "zoo_terminal_name",
           "zoo_terminals_of"]
