"""The eight per-block statistics: shapes, values checked against an independent pass, inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autoprox.networks import statistics
from autoprox.networks.models import build_model, transformer_blocks
from autoprox.networks.statistics import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    STAT_NAMES,
    InputSpec,
    compute_statistics,
    derived_seed,
    make_batch,
    stats_fingerprint,
)
from autoprox.core.errors import InputSpecError
from autoprox.spaces.architectures import arch_to_config, transformer_widths
from autoprox.spaces.registry import get_space

SEED = 5
CLASSES = 10


@pytest.fixture
def one_thread():
    """Run the independent reference pass single-threaded, like compute_statistics."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def _expected_tokens(arch) -> list[int]:
    config = arch_to_config(arch)
    if arch.space == "autoformer":
        return [197] * config["depth"]
    tokens = []
    for side, depth in zip(get_space("pit").map_sides(), config["depth"]):
        tokens += [1 + side * side] * depth
    return tokens


def _reference(arch, spec: InputSpec, seed: int, classes: int):
    """The statistics computed here, without statistics_of_model: own hooks, autograd.grad."""
    model = build_model(arch, num_classes=classes, seed=derived_seed(seed, "model"))
    images, labels = make_batch(spec, classes, seed)
    blocks = transformer_blocks(model)
    acts = []
    handles = [b.mlp.act.register_forward_hook(lambda _m, _i, out: acts.append(out)) for b in blocks]
    try:
        loss = F.cross_entropy(model(images), labels)
    finally:
        for h in handles:
            h.remove()
    weights = [p for b in blocks for p in (b.attn.qkv.weight, b.attn.proj.weight, b.mlp.fc1.weight)]
    grads = torch.autograd.grad(loss, weights + acts)
    wgrads, agrads = grads[: len(weights)], grads[len(weights):]
    out = []
    for i, b in enumerate(blocks):
        out.append({
            "F1": b.attn.qkv.weight.detach(), "F1g": wgrads[3 * i],
            "F2": b.attn.proj.weight.detach(), "F2g": wgrads[3 * i + 1],
            "F3": b.mlp.fc1.weight.detach(), "F3g": wgrads[3 * i + 2],
            "F4": acts[i].detach().mean(dim=0), "F4g": agrads[i].mean(dim=0),
        })
    return out


@pytest.fixture(scope="module")
def af_arch(af_small):
    return af_small.archs[0]


@pytest.fixture(scope="module")
def pit_arch(pit_small):
    return pit_small.archs[0]


@pytest.fixture(scope="module")
def af_stats(af_arch, small_spec):
    return compute_statistics(af_arch, small_spec, SEED, CLASSES)


@pytest.fixture(scope="module")
def pit_stats(pit_arch, small_spec):
    return compute_statistics(pit_arch, small_spec, SEED, CLASSES)


@pytest.mark.parametrize("which", ["af", "pit"])
def test_one_dict_per_block_with_the_right_shapes(which, af_arch, pit_arch, af_stats, pit_stats):
    arch, stats = (af_arch, af_stats) if which == "af" else (pit_arch, pit_stats)
    depth = len(transformer_widths(arch))
    assert len(stats) == depth
    widths = transformer_widths(arch)
    tokens = _expected_tokens(arch)
    if which == "pit":
        assert sorted(set(tokens)) == [1 + 7 * 7, 1 + 14 * 14, 1 + 27 * 27]
        assert {d for d, _, _ in widths} == {arch_to_config(arch)["base_dim"] * h for h in arch_to_config(arch)["num_heads"]}
    for block, (d, _heads, h), n in zip(stats, widths, tokens):
        assert tuple(block) == STAT_NAMES  # F1, F1g, ..., F4g in order
        assert block["F1"].shape == block["F1g"].shape == (3 * d, d)
        assert block["F2"].shape == block["F2g"].shape == (d, d)
        assert block["F3"].shape == block["F3g"].shape == (h, d)
        assert block["F4"].shape == block["F4g"].shape == (n, h)
        for name in STAT_NAMES:
            assert block[name].dtype == torch.float32
            assert not block[name].requires_grad
            assert torch.isfinite(block[name]).all(), name
            assert block[name].abs().max() > 0, name


@pytest.mark.parametrize("which", ["af", "pit"])
def test_values_match_an_independent_pass(which, af_arch, pit_arch, af_stats, pit_stats, small_spec, one_thread):
    arch, stats = (af_arch, af_stats) if which == "af" else (pit_arch, pit_stats)
    reference = _reference(arch, small_spec, SEED, CLASSES)
    assert len(reference) == len(stats)
    for index, (mine, theirs) in enumerate(zip(stats, reference)):
        for name in ("F1", "F2", "F3"):  # weights: exactly the model's
            assert torch.equal(mine[name], theirs[name]), (index, name)
        for name in ("F1g", "F2g", "F3g", "F4", "F4g"):
            torch.testing.assert_close(mine[name], theirs[name], rtol=1e-5, atol=1e-12 * float(theirs[name].abs().max()),
                                       msg=f"block {index} {name}")


def test_f4_is_the_batch_mean_of_the_gelu_output(pit_arch, small_spec, one_thread):
    """F4 averages over the batch: neither a single sample nor the sum."""
    model = build_model(pit_arch, num_classes=CLASSES, seed=derived_seed(SEED, "model"))
    images, _ = make_batch(small_spec, CLASSES, SEED)
    first = transformer_blocks(model)[0]
    seen, pre = [], []
    handles = [first.mlp.act.register_forward_hook(lambda _m, _i, out: seen.append(out.detach())),
               first.mlp.fc1.register_forward_hook(lambda _m, _i, out: pre.append(out.detach()))]
    with torch.no_grad():
        model(images)
    for handle in handles:
        handle.remove()
    (gelu,), (fc1_out,) = seen, pre
    assert gelu.shape[0] == small_spec.batch_size
    assert torch.equal(gelu, F.gelu(fc1_out))  # the hooked module is the GELU after fc1
    f4 = compute_statistics(pit_arch, small_spec, SEED, CLASSES)[0]["F4"]
    torch.testing.assert_close(f4, gelu.mean(dim=0), rtol=1e-6, atol=1e-7)
    assert not torch.allclose(f4, gelu[0], atol=1e-3)
    assert (f4 >= -0.17).all()  # GELU's minimum is about -0.17: this is after the activation


def test_gradients_are_not_zero_and_differ_from_weights(af_stats):
    block = af_stats[0]
    for w, g in (("F1", "F1g"), ("F2", "F2g"), ("F3", "F3g")):
        assert not torch.allclose(block[w], block[g])
        assert block[g].abs().max() < block[w].abs().max()  # gradients are small at init


def test_same_seed_same_statistics_other_seed_other(pit_arch, pit_stats, small_spec):
    again = compute_statistics(pit_arch, small_spec, SEED, CLASSES)
    assert stats_fingerprint(again) == stats_fingerprint(pit_stats)
    for a, b in zip(again, pit_stats):
        for name in STAT_NAMES:
            assert torch.equal(a[name], b[name])
    other = compute_statistics(pit_arch, small_spec, SEED + 1, CLASSES)
    assert stats_fingerprint(other) != stats_fingerprint(pit_stats)
    assert not torch.equal(other[0]["F1"], pit_stats[0]["F1"])  # another initialisation
    assert not torch.equal(other[0]["F4"], pit_stats[0]["F4"])


def test_derived_seeds_are_independent_and_stable():
    assert derived_seed(0, "model") == derived_seed(0, "model")
    assert len({derived_seed(0, "model"), derived_seed(0, "batch"), derived_seed(1, "model")}) == 3


def test_global_rng_and_threads_untouched(pit_arch, small_spec):
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(1234)
        state = torch.get_rng_state()
        np_state = np.random.get_state()[1].copy()
        compute_statistics(pit_arch, small_spec, SEED, CLASSES)
        compute_statistics(pit_arch, InputSpec("ones", 1), SEED, CLASSES)
        assert torch.equal(torch.get_rng_state(), state)
        assert np.array_equal(np.random.get_state()[1], np_state)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous_threads)


# --- the minibatch ----------------------------------------------------------------
def test_gaussian_batch():
    spec = InputSpec("gaussian", batch_size=3)
    images, labels = make_batch(spec, 7, seed=2)
    assert images.shape == (3, 3, 224, 224) and images.dtype == torch.float32
    assert abs(float(images.mean())) < 0.01 and abs(float(images.std()) - 1) < 0.01
    again, again_labels = make_batch(spec, 7, seed=2)
    assert torch.equal(images, again) and torch.equal(labels, again_labels)
    assert not torch.equal(images, make_batch(spec, 7, seed=3)[0])


def test_ones_input_is_all_ones(pit_arch):
    spec = InputSpec.parse("ones", batch_size=2)
    images, labels = make_batch(spec, CLASSES, SEED)
    assert images.shape == (2, 3, 224, 224)
    assert torch.equal(images, torch.ones_like(images))
    stats = compute_statistics(pit_arch, spec, SEED, CLASSES)
    assert len(stats) == sum(pit_arch.depths)
    # images equal, so the gaussian statistics must differ from these
    gaussian = compute_statistics(pit_arch, InputSpec("gaussian", 2), SEED, CLASSES)
    assert torch.equal(stats[0]["F1"], gaussian[0]["F1"])  # same initialisation
    assert not torch.allclose(stats[0]["F4"], gaussian[0]["F4"])


@pytest.mark.parametrize("classes", [1, 4, 100, 1000])
def test_labels_within_range(classes):
    _, labels = make_batch(InputSpec("gaussian", batch_size=64), classes, seed=0)
    assert labels.dtype == torch.int64 and labels.shape == (64,)
    assert int(labels.min()) >= 0 and int(labels.max()) < classes
    if classes >= 100:
        assert len(set(labels.tolist())) > 30  # spread over the classes, not constant


COLOURS = [(255, 0, 0), (0, 128, 255), (40, 200, 90)]


@pytest.fixture
def image_dir(tmp_path):
    pil = pytest.importorskip("PIL.Image")
    folder = tmp_path / "imgs"
    (folder / "sub").mkdir(parents=True)
    for i, colour in enumerate(COLOURS):
        target = folder / ("sub" if i == 2 else ".") / f"img{i}.png"
        pil.new("RGB", (9 + i, 7), colour).save(target)
    (folder / "notes.txt").write_text("not an image")
    return folder


def _normalised(colour):
    return torch.tensor([(c / 255 - m) / s for c, m, s in zip(colour, IMAGENET_MEAN, IMAGENET_STD)])


def test_images_input(image_dir, pit_arch):
    spec = InputSpec.parse(f"images:{image_dir}", batch_size=5)  # more than the 3 images: repeats
    assert spec.kind == "images" and spec.image_dir == str(image_dir)
    images, labels = make_batch(spec, CLASSES, SEED)
    assert images.shape == (5, 3, 224, 224)
    expected = [_normalised(c) for c in COLOURS]
    found = []
    for image in images:
        pixel = image[:, 100, 100]
        assert torch.allclose(image, pixel.view(3, 1, 1).expand_as(image), atol=1e-5)  # solid colour
        matches = [k for k, e in enumerate(expected) if torch.allclose(pixel, e, atol=1e-5)]
        assert len(matches) == 1
        found.append(matches[0])
    assert sorted(set(found)) == [0, 1, 2]  # every image used before any repeats
    assert found[3:] == found[:2]  # then repeated in the same order
    again, _ = make_batch(spec, CLASSES, SEED)
    assert torch.equal(images, again)
    assert int(labels.max()) < CLASSES

    stats = compute_statistics(pit_arch, InputSpec("images", 2, str(image_dir)), SEED, CLASSES)
    assert len(stats) == sum(pit_arch.depths)
    assert all(torch.isfinite(b["F4g"]).all() for b in stats)

    # the cache key's description follows the images' content
    digest = spec.describe()["images_sha256"]
    assert spec.describe() == {"kind": "images", "batch_size": 5, "images_sha256": digest}
    pil = pytest.importorskip("PIL.Image")
    pil.new("RGB", (9, 7), (1, 2, 3)).save(image_dir / "img0.png")
    assert spec.describe()["images_sha256"] != digest


def test_images_input_errors(tmp_path):
    with pytest.raises(InputSpecError, match="image folder not found"):
        make_batch(InputSpec.parse(f"images:{tmp_path / 'missing'}", 2), CLASSES, SEED)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "readme.txt").write_text("no images here")
    (empty / "fake.png").mkdir()  # a folder named like an image is not an image
    with pytest.raises(InputSpecError, match="no images"):
        make_batch(InputSpec.parse(f"images:{empty}", 2), CLASSES, SEED)
    with pytest.raises(InputSpecError, match="no images"):
        InputSpec("images", 2, str(empty)).describe()
    with pytest.raises(InputSpecError, match="needs a folder"):
        InputSpec.parse("images:", 2)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.png").write_bytes(b"not a png at all")
    with pytest.raises(InputSpecError, match="cannot read image .*x.png"):
        make_batch(InputSpec.parse(f"images:{broken}", 1), CLASSES, SEED)


def test_input_spec_validation():
    with pytest.raises(InputSpecError, match="unknown input kind 'noise'"):
        InputSpec.parse("noise")
    with pytest.raises(InputSpecError, match="batch size"):
        InputSpec("gaussian", batch_size=0)
    with pytest.raises(InputSpecError, match="image folder goes with"):
        InputSpec("gaussian", 2, "/tmp")
    with pytest.raises(InputSpecError, match="image folder goes with"):
        InputSpec("images", 2)
    assert InputSpec.parse("gaussian", 4) == InputSpec("gaussian", 4)
    assert InputSpec("ones", 3).describe() == {"kind": "ones", "batch_size": 3}


def test_describe_statistics(pit_arch, pit_stats):
    shapes = statistics.describe_statistics(pit_stats)
    assert set(shapes) == set(STAT_NAMES)
    d, _, h = transformer_widths(pit_arch)[0]
    assert shapes["F1"][0] == [3 * d, d] and shapes["F4"][0] == [1 + 27 * 27, h]
    assert shapes["F4"][-1][0] == 1 + 7 * 7


@pytest.mark.skipif(torch.backends.mps.is_available(), reason="this machine has MPS")
def test_a_device_this_machine_lacks_is_refused_before_any_progress_and_named_as_each_side_takes_it(capsys, tmp_path,
                                                                                                   af_small_file):
    """``cache build --device mps`` drew a progress line before its error; ``ProxySearch(device=...)`` named the
    command line's ``--device`` in a Python error."""
    from autoprox.api import ProxySearch
    from autoprox.core.errors import ConfigError
    from tests.commands import one_error_line, run_cli

    code, _, err = run_cli(capsys, "cache", "build", "--bench", af_small_file, "--device", "mps", "--cache-dir",
                           tmp_path / "c")
    assert code == 2 and "--device mps: Apple's MPS" in one_error_line(err)
    assert "statistics" not in err and not (tmp_path / "c").exists()
    with pytest.raises(ConfigError, match=r"^device='mps': Apple's MPS backend is not available on this machine; "
                                          r"use device='cpu'$"):
        ProxySearch(bench=str(af_small_file), device="mps", out=str(tmp_path / "r")).fit()
    assert not (tmp_path / "r").exists()
