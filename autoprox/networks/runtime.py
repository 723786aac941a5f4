"""Reading a proxy's inputs from any PyTorch ViT: the eight per-block statistics and the
architecture descriptors, by one pass with hooks.

This module is the runtime of exported proxies and the engine's own statistics collector
(:func:`autoprox.networks.statistics.statistics_of_model` calls :func:`block_statistics`).
It depends on torch and :mod:`math` only (``InvalidResult`` is the primitives' exception,
whose source every exported file carries, and :data:`SPREAD_NAMES` and :data:`DESCRIPTOR_NAMES` are
:mod:`autoprox.networks.names`', which the export writes above this code): ``autoprox export`` copies this module's code,
below its imports, verbatim into the exported file, which then defines the proxy's own
``block_score`` and ``aggregate`` and binds them to the generic functions here
(:func:`score_blocks`, :func:`collect`, ...). Module-level names here must therefore not
collide with a primitive's or an aggregation's name (a test checks it).

Blocks are found by the timm naming that both of this project's spaces follow: a module
with ``attn.qkv``, ``attn.proj``, ``mlp.fc1`` (Linear layers) and ``mlp.act`` (or, without
``act``, the input of ``mlp.fc2`` is read as the hidden activation). Per block:

====== ==============================================================
F1     attn.qkv weight;  F1g its gradient
F2     attn.proj weight; F2g its gradient
F3     mlp.fc1 weight;   F3g its gradient
F4     the output of mlp.act (tokens x hidden), mean over the batch
F4g    the gradient of the loss with respect to it (same reduction)
====== ==============================================================

With ``spread=True`` the same pass also gives, per block, the spread over the batch's
samples (population standard deviation over the batch) of the per-sample tensor whose
batch mean is the statistic of the same number (:data:`SPREAD_NAMES`):

====== ==============================================================
S1g    of the per-sample gradient of attn.qkv's weight (shape of F1g)
S2g    of the per-sample gradient of attn.proj's weight (shape of F2g)
S3g    of the per-sample gradient of mlp.fc1's weight (shape of F3g)
S4     of the output of mlp.act (tokens x hidden, shape of F4)
S4g    of the gradient of the loss with respect to it (shape of F4g)
====== ==============================================================

A Linear layer's weight gradient is a sum over the batch of per-sample contributions
``c_i = dy_i^T x_i`` (``x_i``, ``dy_i``: sample i's input and output gradient, every
other dimension summed over), read by hooks in the one batched pass; the per-sample
gradient is ``B c_i`` (for the batch-mean cross-entropy, the gradient of sample i's own
loss), whose batch mean is the weight's gradient. Exact where samples do not interact
(no batch normalisation), as in both of this project's spaces and timm's ViTs.

Multiply-accumulates are counted by forward hooks (:class:`MacMeter`) with the
convention of :func:`autoprox.spaces.architectures.count_macs`: Linear and convolution
layers cost (output elements) x (inputs per output), q @ k^T and attn @ v of every block
2 x tokens^2 x width per sequence; norms, activations, softmax and additions are free.
"""

from __future__ import annotations

import math
import warnings

import torch

from autoprox.core.errors import ModelError
from autoprox.networks.names import DESCRIPTOR_NAMES, SPREAD_NAMES
from autoprox.primitives.binary import InvalidResult


class NoTransformerBlocks(ModelError):
    """A model without blocks following the timm naming."""


class UnknownDescriptors(ModelError):
    """An architecture descriptor this proxy needs that cannot be read from the model."""


class MissingStatistic(ModelError):
    """A statistic this proxy reads that the model's pass does not give (a weight its forward does not use)."""


#: The weights the statistics read (F1 and F1g from attn.qkv's, ...).
_WEIGHT_LAYERS = {"F1": ("attn", "qkv"), "F2": ("attn", "proj"), "F3": ("mlp", "fc1")}
_SPREAD_LAYERS = {f"S{stat[1:]}g": path for stat, path in _WEIGHT_LAYERS.items()}


def batch_spread(values):
    """The population standard deviation over the first (batch) dimension, by two passes
    (mean, then mean squared deviation): on one CPU thread about fifty times faster than
    ``torch.std(dim=0)``, whose reduction over the outer dimension is slow."""
    deviation = values - values.mean(dim=0)
    return deviation.mul_(deviation).mean(dim=0).sqrt_()


class SampleSpread:
    """Hooks on Linear layers giving the batch spread of each one's per-sample weight gradient.

    For each call of a layer, its input ``x`` (batch first) is kept by a forward hook and
    its output's gradient ``dy`` read by a tensor hook during the backward pass; sample i's
    contribution to the weight gradient is ``dy_i^T x_i`` (summed over calls). Once a
    layer's last call is back-propagated, :attr:`spreads` holds the population standard
    deviation over samples of ``B`` times the contributions (``B``: the batch size), and
    the contributions are dropped (one layer's ``B x out x in`` held at a time). A call
    whose input does not lead with the batch's ``batch`` samples is named in :attr:`problem`.
    """

    def __init__(self, layers, batch):
        self.layers, self.batch, self.problem = list(layers), batch, ""
        self.spreads = [None] * len(self.layers)
        self._inputs = [[] for _ in self.layers]
        self._sums = [None] * len(self.layers)
        self.handles = [layer.register_forward_hook(lambda _m, args, out, index=index: self._seen(index, args, out))
                        for index, layer in enumerate(self.layers)]

    def _seen(self, index, args, output):
        if not isinstance(output, torch.Tensor) or not output.requires_grad:
            return
        if args[0].dim() < 2 or args[0].shape[0] != self.batch:
            self.problem = (f"a {tuple(self.layers[index].weight.shape)} Linear layer was called on an input of shape "
                            f"{tuple(args[0].shape)}, not {self.batch} samples first")
            return
        self._inputs[index].append(args[0].detach())
        output.register_hook(lambda grad, index=index, call=len(self._inputs[index]) - 1:
                             self._gradient(index, call, grad))

    def _gradient(self, index, call, grad):
        inputs = self._inputs[index][call]
        self._inputs[index][call] = None
        batch = inputs.shape[0]
        part = torch.einsum("bko,bki->boi", grad.reshape(batch, -1, grad.shape[-1]),
                            inputs.reshape(batch, -1, inputs.shape[-1]))
        self._sums[index] = part if self._sums[index] is None else self._sums[index] + part
        if all(value is None for value in self._inputs[index]):
            self.spreads[index] = batch_spread(self._sums[index] * batch)
            self._sums[index] = None

    def remove(self):
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _linear_weight(module, path):
    for name in path:
        module = getattr(module, name, None)
    weight = getattr(module, "weight", None)
    return weight if isinstance(weight, torch.Tensor) and weight.dim() == 2 else None


def _linear_module(module, path):
    for name in path:
        module = getattr(module, name)
    return module


def _is_block(module):
    if any(_linear_weight(module, path) is None for path in (("attn", "qkv"), ("attn", "proj"), ("mlp", "fc1"))):
        return False
    mlp = module.mlp
    return isinstance(getattr(mlp, "act", None), torch.nn.Module) or isinstance(
        getattr(mlp, "fc2", None), torch.nn.Module)


def find_blocks(model):
    """(name, block) of every transformer block of ``model``, in registration order.

    A block is a module with ``attn.qkv``, ``attn.proj`` and ``mlp.fc1`` (Linear
    layers) and ``mlp.act`` or ``mlp.fc2``: the naming of timm's ViTs. Modules that
    have an ``attn`` and an ``mlp`` but not these layers (ConViT's gated attention,
    with ``qk`` and ``v``, for one) are left out, with a warning saying how many.
    """
    blocks, skipped = [], []
    for name, module in model.named_modules():
        if _is_block(module):
            blocks.append((name, module))
        elif all(isinstance(getattr(module, part, None), torch.nn.Module) for part in ("attn", "mlp")):
            skipped.append(name)
    if not blocks:
        raise NoTransformerBlocks(
            f"{type(model).__name__} has no transformer block with attn.qkv, attn.proj, mlp.fc1 and "
            "mlp.act or mlp.fc2 (the timm naming): this proxy cannot read its statistics"
        )
    if skipped:
        warnings.warn(
            f"{type(model).__name__}: found {len(blocks)} of {len(blocks) + len(skipped)} transformer blocks; "
            f"{len(skipped)} with attn and mlp but without attn.qkv, attn.proj, mlp.fc1 and mlp.act or mlp.fc2 "
            f"(first: {skipped[0] or 'the model itself'}) are left out of the score", stacklevel=2)
    return blocks


# ----------------------------------------------------------- architecture descriptors

_LAYERS = (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)


class MacMeter:
    """Forward hooks that count, during a pass, what the descriptors need.

    ``macs``: for every Linear and convolution, (output elements) x (inputs per
    output), plus q @ k^T and attn @ v of every block (2 x tokens^2 x width per
    sequence, read from the input of attn.qkv); norms, activations, softmax and
    additions are free. ``last``: the last Linear called and its output, which is
    the classifier head when that output is the model's. Use it as a context manager,
    or call :meth:`remove` after the pass.
    """

    def __init__(self, model, blocks, macs=True, head=True):
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

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


def _given_descriptors(descriptors, head_classes=None):
    """The descriptors given by name (ModelError for one that is unknown or no positive finite number), after
    checking ``head_classes`` (None, or a positive integer)."""
    if head_classes is not None and (isinstance(head_classes, bool) or not isinstance(head_classes, int)
                                     or head_classes < 1):
        raise ModelError(f"head_classes: expected a positive integer or None, got {head_classes!r}")
    if descriptors is not None and not hasattr(descriptors, "items"):
        raise ModelError(f"descriptors: expected a mapping of descriptor name to value, got {type(descriptors).__name__}")
    given = {}
    for key, value in dict(descriptors or {}).items():
        name = key[2:] if isinstance(key, str) and key.startswith("A_") else key
        if name not in DESCRIPTOR_NAMES:
            raise ModelError(f"unknown descriptor {key!r}; known: {', '.join(DESCRIPTOR_NAMES)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ModelError(f"descriptor {key!r} must be a positive finite number, got {value!r}")
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


def _enable_weight_gradients(blocks):
    """Make the weights the statistics read require gradients; the ones that did not, to be restored after."""
    enabled = []
    for _, block in blocks:
        for path in _WEIGHT_LAYERS.values():
            weight = _linear_weight(block, path)
            if weight.is_leaf and not weight.requires_grad and all(weight is not w for w in enabled):
                weight.requires_grad_(True)
                enabled.append(weight)
    return enabled


def _missing(needs, name):
    """Whether statistic ``name`` may be left out of a block's statistics (``needs``: see :func:`collect`)."""
    return needs is not None and name not in needs


def collect(model, inputs, targets, loss_fn=None, train=True, descriptors=None, head_classes=100, names=(),
            spread=False, needs=None):
    """One forward/backward pass: (per-block statistics, the descriptors ``names``).

    ``loss_fn(outputs, targets)`` defaults to cross-entropy. ``train`` True or False puts
    the model in that mode for the pass (each module's mode is restored after); None
    leaves the modes as they are. ``descriptors`` gives descriptors by name instead of
    reading them; ``head_classes`` is the classifier head's size params and macs are
    counted with (None: the model's own). The pass leaves the gradients in ``.grad``.
    ``spread``: each block's statistics also hold :data:`SPREAD_NAMES` (see the module
    docstring), from the same pass.

    The weights the statistics read get gradients whatever their ``requires_grad`` (a
    frozen weight is made to require one for the pass, then frozen again, its ``.grad``
    None as before). A statistic the pass cannot give (a weight the forward does not use)
    raises :class:`MissingStatistic` naming the block and the weight when it is in
    ``needs`` (the statistics a proxy reads; None: all of them), and is left out of the
    block's statistics otherwise.
    """
    if not isinstance(model, torch.nn.Module):
        raise ModelError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    check_inputs(inputs, targets if loss_fn is None else None)
    given = _given_descriptors(descriptors, head_classes)
    blocks = find_blocks(model)
    enabled = _enable_weight_gradients(blocks)
    try:
        return _collect(model, blocks, inputs, targets, loss_fn, train, given, head_classes, names, spread, needs)
    finally:
        for weight in enabled:
            weight.requires_grad_(False)
            weight.grad = None


def check_inputs(inputs, targets=None):
    """ModelError (one line) unless ``inputs`` is a tensor of at least one sample (the batch first), with no NaN or
    inf, and ``targets`` (unless None: a loss of the caller's own) a tensor of one row per sample."""
    if not isinstance(inputs, torch.Tensor) or inputs.dim() < 1 or inputs.shape[0] < 1:
        shown = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
        raise ModelError(f"inputs: expected a tensor of at least one sample, the batch first, got {shown}")
    if inputs.is_floating_point() and not bool(torch.isfinite(inputs).all()):
        raise ModelError("inputs: they hold NaN or inf, which no statistic survives")
    if targets is not None and (not isinstance(targets, torch.Tensor) or targets.dim() < 1
                                or targets.shape[0] != inputs.shape[0]):
        shown = tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__
        raise ModelError(f"targets: expected a tensor of one class index (or one row of class probabilities) per "
                         f"input, {inputs.shape[0]} in all, got {shown}")


def check_targets(outputs, targets):
    """ModelError (one line) unless ``targets`` are what the default cross-entropy takes of ``outputs``
    (batch, classes): class indices (torch.long) in range, or class probabilities of the outputs' shape."""
    if not isinstance(outputs, torch.Tensor) or outputs.dim() != 2:
        return  # a model of outputs of its own: the loss says what it needs
    classes = outputs.shape[1]
    if targets.is_floating_point():
        if targets.shape != outputs.shape:
            raise ModelError(f"targets: class probabilities must have the outputs' shape {tuple(outputs.shape)}, "
                             f"got {tuple(targets.shape)}")
    elif targets.dtype != torch.long:
        raise ModelError(f"targets: expected class indices, one torch.long per input, got {targets.dtype}")
    elif targets.dim() != 1:
        raise ModelError(f"targets: expected class indices, one per input (shape ({outputs.shape[0]},)), got shape "
                         f"{tuple(targets.shape)}")
    elif len(targets) and (int(targets.min()) < 0 or int(targets.max()) >= classes):
        raise ModelError(f"targets: class indices must lie in 0..{classes - 1} (the model has {classes} outputs), "
                         f"got {int(targets.min())}..{int(targets.max())}")


def _collect(model, blocks, inputs, targets, loss_fn, train, given, head_classes, names, spread, needs):
    missing = [name for name in names if name not in given]
    sized = head_classes is not None and any(name in missing for name in ("params", "macs"))
    meter = MacMeter(model, blocks, "macs" in missing, sized) if missing else None
    loss_fn = loss_fn if loss_fn is not None else torch.nn.functional.cross_entropy
    hidden = [None] * len(blocks)

    def keep(index, value):
        if isinstance(value, torch.Tensor):
            if value.requires_grad:
                value.retain_grad()
            hidden[index] = value

    handles = []
    for index, (_, block) in enumerate(blocks):
        act = getattr(block.mlp, "act", None)
        if isinstance(act, torch.nn.Module):
            handles.append(act.register_forward_hook(lambda _m, _i, out, index=index: keep(index, out)))
        else:
            handles.append(block.mlp.fc2.register_forward_pre_hook(lambda _m, args, index=index: keep(index, args[0])))
    sampled = None
    if spread:
        layers = [_linear_module(block, _SPREAD_LAYERS[stat]) for _, block in blocks for stat in _SPREAD_LAYERS]
        for layer in layers:
            if not isinstance(layer, torch.nn.Linear):
                raise NoTransformerBlocks(f"{type(layer).__name__} is not a torch.nn.Linear: the spread of its "
                                          "per-sample weight gradient cannot be read")
        sampled = SampleSpread(layers, inputs.shape[0] if isinstance(inputs, torch.Tensor) and inputs.dim() else -1)
    modes = {module: module.training for module in model.modules()}
    try:
        if train is not None:
            model.train(bool(train))
        model.zero_grad(set_to_none=True)
        with torch.enable_grad():
            outputs = model(inputs)
            if loss_fn is torch.nn.functional.cross_entropy:
                check_targets(outputs, targets)
            loss = loss_fn(outputs, targets)
            loss.backward()
    finally:
        for handle in handles:
            handle.remove()
        if meter is not None:
            meter.remove()
        if sampled is not None:
            sampled.remove()
        for module, mode in modes.items():
            module.training = mode
    stats = [_block_stats(name, block, act, needs) for (name, block), act in zip(blocks, hidden)]
    if spread:
        _add_spreads(stats, blocks, hidden, sampled, needs)
    values = _descriptor_values(model, blocks, names, given, meter, inputs, outputs, head_classes)
    return stats, values


def _block_stats(name, block, act, needs):
    """The eight statistics of one block after the pass, less those it cannot give and ``needs`` lacks."""
    stats = {}
    for stat, path in _WEIGHT_LAYERS.items():
        weight = _linear_weight(block, path)
        stats[stat] = weight.detach().clone()
        if weight.grad is not None:
            stats[f"{stat}g"] = weight.grad.detach().clone()
        elif not _missing(needs, f"{stat}g"):
            raise MissingStatistic(_weight_problem(name, path, f"{stat}g"))
    for stat, value in (("F4", act), ("F4g", None if act is None else act.grad)):
        if value is not None:
            stats[stat] = value.detach().mean(dim=0)
        elif not _missing(needs, stat):
            raise MissingStatistic(_hidden_problem(name, block, act, stat))
    return stats


def _weight_name(block_name, path):
    return ".".join((block_name, *path, "weight") if block_name else (*path, "weight"))


def _weight_problem(name, path, stat):
    return (f"{_weight_name(name, path)} has no gradient after the pass (the model's forward does not use it, or it "
            f"is not a leaf tensor, as a parametrized weight is), so this proxy's {stat} cannot be read")


def _hidden_problem(name, block, act, stat):
    where = "mlp.act's output" if isinstance(getattr(block.mlp, "act", None), torch.nn.Module) else "mlp.fc2's input"
    what = ("was not seen in the pass" if act is None
            else "has no gradient after the pass (the loss does not depend on it)")
    return (f"block {name or 'the model itself'}: the MLP hidden activation ({where}) {what}, "
            f"so this proxy's {stat} cannot be read")


def _add_spreads(stats, blocks, hidden, sampled, needs=None):
    """Put :data:`SPREAD_NAMES` into each block's statistics (``sampled``: the blocks' layers in order),
    less those the pass cannot give and ``needs`` lacks (see :func:`collect`)."""
    if sampled.problem:
        raise NoTransformerBlocks(f"the per-sample spread cannot be read: {sampled.problem}")
    layers_per_block = len(_SPREAD_LAYERS)
    for index, ((name, block), act, block_stats) in enumerate(zip(blocks, hidden, stats)):
        for offset, stat in enumerate(_SPREAD_LAYERS):
            value = sampled.spreads[index * layers_per_block + offset]
            if value is not None:
                block_stats[stat] = value
            elif not _missing(needs, stat):
                raise MissingStatistic(_weight_problem(name, _SPREAD_LAYERS[stat], stat))
        for stat, value in (("S4", act), ("S4g", None if act is None else act.grad)):
            if value is not None:
                block_stats[stat] = batch_spread(value.detach())
            elif not _missing(needs, stat):
                raise MissingStatistic(_hidden_problem(name, block, act, stat))


def block_statistics(model, inputs, targets, loss_fn=None, train=True, spread=False):
    """The eight statistics of every block after one forward/backward pass, and with ``spread``
    the spread statistics too (see :func:`collect`)."""
    return collect(model, inputs, targets, loss_fn, train, spread=spread)[0]


def read_descriptors(model, inputs, names=DESCRIPTOR_NAMES, head_classes=100, descriptors=None):
    """Descriptors ``names`` of ``model``, by one forward pass without gradients (MACs are
    those of one input like ``inputs``; ``head_classes`` and ``descriptors`` as in :func:`collect`)."""
    names = tuple(names)
    for name in names:
        if name not in DESCRIPTOR_NAMES:
            raise ModelError(f"unknown descriptor {name!r}; known: {', '.join(DESCRIPTOR_NAMES)}")
    given = _given_descriptors(descriptors, head_classes)
    blocks = find_blocks(model)
    missing = [name for name in names if name not in given]
    sized = head_classes is not None and any(name in missing for name in ("params", "macs"))
    with MacMeter(model, blocks, "macs" in missing, sized) as meter, torch.no_grad():
        outputs = model(inputs)
    return _descriptor_values(model, blocks, names, given, meter, inputs, outputs, head_classes)


def terminal_tensors(arch_terminals, descriptors):
    """The architecture-level terminals ``arch_terminals`` (``A_params``, ``A_log_depth``, ...)
    from descriptor values, as 0-d float32 tensors (as the engine's)."""
    values = {}
    for terminal in arch_terminals:
        name = terminal[len("A_log_"):] if terminal.startswith("A_log_") else terminal[len("A_"):]
        if name not in descriptors:
            raise UnknownDescriptors(f"no value for descriptor {name!r} (terminal {terminal})")
        value = float(descriptors[name])
        values[terminal] = torch.tensor(math.log(value) if terminal.startswith("A_log_") else value,
                                        dtype=torch.float32)
    return values


def score_blocks(stats, block_score, aggregate, arch_terminals=(), terminals=None):
    """A proxy's score from per-block statistics (in block order): ``block_score`` of each
    block (with ``terminals``, the values of ``arch_terminals``, in every block), combined
    by ``aggregate``. Raises InvalidResult when a block's value is not a finite scalar."""
    if arch_terminals and terminals is None:
        raise UnknownDescriptors(f"this proxy reads {', '.join(arch_terminals)}: pass their values")
    values = []
    for index, block in enumerate(stats):
        try:
            value = block_score(dict(block, **terminals) if arch_terminals else block)
        except RuntimeError as exc:  # torch's own shape errors: the engine's proxy is invalid there too
            raise InvalidResult(f"block {index}: {(str(exc).splitlines() or [type(exc).__name__])[0]}") from None
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            raise InvalidResult(f"block {index}: the value is not a scalar")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidResult(f"block {index}: the value is NaN or inf")
        values.append(number)
    return aggregate(values)
