"""How to compute the spread statistics: hooks in the batched pass, against the alternatives.

On one AutoFormer-Ti network of the shared benchmark (default: the first, 192 wide), batch
8, single-threaded, the best of ``--repeats`` runs of: the plain pass (the eight
statistics); the pass with ``spread=True`` (the eight and S1g..S4g, autoprox's way: per-sample
weight gradients from hooks); per-sample backward passes in a loop and
``torch.func.vmap(grad)`` (the per-sample gradients of the qkv, proj and fc1 weights only).
Prints the seconds and the largest relative difference of S1g/S2g/S3g to the loop's.
Usage: python benchmarks/bench_spread.py [--arch 0] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch
from torch.func import functional_call, grad, vmap

from autoprox.data.benchmark import default_bench_path, load_benchmark
from autoprox.networks.models import build_model
from autoprox.networks.runtime import block_statistics, find_blocks
from autoprox.networks.statistics import InputSpec, derived_seed, make_batch


def best_seconds(function, repeats):
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    arch = load_benchmark(default_bench_path("autoformer")).archs[args.arch]
    print(arch)
    model = build_model(arch, num_classes=100, seed=derived_seed(0, "model")).train()
    images, labels = make_batch(InputSpec(), 100, 0)
    blocks = find_blocks(model)
    paths = {"S1g": "attn.qkv.weight", "S2g": "attn.proj.weight", "S3g": "mlp.fc1.weight"}
    names = [f"{block}.{path}" for block, _ in blocks for path in paths.values()]

    def loop():
        params = dict(model.named_parameters())
        per_sample = {name: [] for name in names}
        for i in range(images.shape[0]):
            model.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(images[i:i + 1]), labels[i:i + 1]).backward()
            for name in names:
                per_sample[name].append(params[name].grad.detach().clone())
        return {name: torch.stack(values).std(dim=0, correction=0) for name, values in per_sample.items()}

    def vectorised():
        params = {k: v.detach() for k, v in model.named_parameters()}
        wanted = {name: params[name] for name in names}
        rest = {k: v for k, v in params.items() if k not in wanted}

        def one_loss(weights, x, y):
            out = functional_call(model, ({**rest, **weights}, dict(model.named_buffers())), (x.unsqueeze(0),))
            return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

        grads = vmap(grad(one_loss), in_dims=(None, 0, 0))(wanted, images, labels)
        return {name: value.std(dim=0, correction=0) for name, value in grads.items()}

    plain_s, _ = best_seconds(lambda: block_statistics(model, images, labels, train=None), args.repeats)
    hooks_s, hooks = best_seconds(lambda: block_statistics(model, images, labels, train=None, spread=True),
                                  args.repeats)
    loop_s, looped = best_seconds(loop, args.repeats)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # functorch's "no batching rule" notices for attention
        vmap_s, vmapped = best_seconds(vectorised, args.repeats)
    hooked = {f"{block}.{path}": stats[stat] for (block, _), stats in zip(blocks, hooks)
              for stat, path in paths.items()}

    def worst(found):
        return max(float((found[n] - looped[n]).abs().max() / looped[n].abs().max()) for n in names)

    print(f"plain pass (the eight):              {plain_s:.3f} s")
    print(f"pass with spread=True (hooks):       {hooks_s:.3f} s  (+{hooks_s - plain_s:.3f} s)")
    print(f"per-sample backward loop (spread):   {loop_s:.3f} s  (on top of the plain pass)")
    print(f"torch.func vmap(grad) (spread):      {vmap_s:.3f} s  (on top of the plain pass)")
    print(f"max relative difference to the loop: hooks {worst(hooked):.1e}, vmap {worst(vmapped):.1e}")


if __name__ == "__main__":
    main()
