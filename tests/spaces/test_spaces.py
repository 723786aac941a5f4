"""Search-space records, validation, exact counts and the sampler (no networks built)."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from autoprox.spaces.architectures import (
    SPACES,
    arch_key,
    arch_to_config,
    count_macs,
    count_params,
    detect_space,
    param_range,
    parse_arch,
    sample_arch,
    transformer_widths,
)
from autoprox.core.errors import ArchitectureError

from tests.conftest import BENCH_DIR

BENCH = BENCH_DIR

# spaces.md's table: (config, parameters, MACs), 100-class head.
TABLE = [
    ({"hidden_dim": 192, "depth": 12,
      "mlp_ratio": [3.5, 4.0, 3.5, 4.0, 3.5, 3.5, 4.0, 3.5, 4.0, 4.0, 4.0, 3.5],
      "num_heads": [4, 4, 3, 4, 3, 3, 4, 4, 3, 3, 3, 4]}, 5_321_956, 1_209_937_152),
    ({"hidden_dim": 240, "depth": 14,
      "mlp_ratio": [4.0, 3.5, 3.5, 4.0, 4.0, 4.0, 4.0, 3.5, 3.5, 3.5, 3.5, 3.5, 4.0, 4.0],
      "num_heads": [3, 3, 3, 4, 4, 3, 3, 3, 4, 3, 3, 4, 3, 4]}, 9_573_100, 2_123_846_400),
    ({"hidden_dim": 240, "depth": 13,
      "mlp_ratio": [3.5, 3.5, 4.0, 3.5, 4.0, 4.0, 3.5, 3.5, 3.5, 3.5, 4.0, 3.5, 3.5],
      "num_heads": [3, 4, 3, 4, 4, 4, 4, 4, 3, 3, 3, 3, 4]}, 8_763_340, 1_946_357_280),
    ({"base_dim": 16, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]}, 893_828, 267_613_760),
    ({"base_dim": 32, "mlp_ratio": 4, "depth": [1, 6, 6], "num_heads": [2, 8, 8]}, 9_736_804, 1_432_989_440),
    ({"base_dim": 24, "mlp_ratio": 2, "depth": [2, 8, 4], "num_heads": [2, 2, 2]}, 348_052, 219_717_168),
]

BENCH_RANGES = {"autoformer": (5_284_996, 9_746_260), "pit": (156_612, 29_472_420)}

AF_OK = TABLE[0][0]
PIT_OK = TABLE[3][0]


def _with(cfg: dict, **changes) -> dict:
    return {**cfg, **changes}


# --- counts --------------------------------------------------------------------
@pytest.mark.parametrize("cfg,params,macs", TABLE)
def test_table_params_and_macs(cfg, params, macs):
    arch = parse_arch(cfg)
    assert count_params(arch) == params
    assert count_macs(arch) == macs


def test_head_size_enters_counts():
    arch = parse_arch(PIT_OK)
    d2 = 16 * 4
    assert count_params(arch, num_classes=10) == 893_828 - 90 * (d2 + 1)
    assert count_macs(arch, num_classes=10) == 267_613_760 - 90 * d2


@pytest.mark.parametrize("space", SPACES)
def test_every_benchmark_entry(space):
    torch = pytest.importorskip("torch")
    entries = torch.load(BENCH / f"gt_{space}.pth", weights_only=True)
    assert len(entries) == 100
    counts = []
    for e in entries:
        assert detect_space(e["arch"]) == space
        arch = parse_arch(e["arch"])
        assert arch.space == space
        assert parse_arch(e["arch"], space=space) == arch
        assert arch_to_config(arch) == e["arch"]  # round trip to the benchmark form
        counts.append(count_params(arch))
    lo, hi = BENCH_RANGES[space]
    assert min(counts) == lo and max(counts) == hi
    feas_lo, feas_hi = param_range(space)
    assert feas_lo <= lo and hi <= feas_hi


def test_param_range_extremes():
    assert param_range("autoformer") == (5_100_196, 9_977_140)
    assert param_range("pit") == (113_892, 35_632_740)
    # the extremes are the extreme choices: no sampled arch falls outside
    rng = random.Random(1)
    for space in SPACES:
        lo, hi = param_range(space)
        assert all(lo <= count_params(sample_arch(space, rng)) <= hi for _ in range(200))


def test_transformer_widths():
    af = parse_arch(AF_OK)
    widths = transformer_widths(af)
    assert len(widths) == 12
    assert widths[0] == (192, 4, 672) and widths[1] == (192, 4, 768) and widths[2] == (192, 3, 672)
    pit = parse_arch(PIT_OK)
    widths = transformer_widths(pit)
    assert widths == [(32, 2, 192)] * 2 + [(64, 4, 384)] * 8 + [(64, 4, 384)] * 4
    assert transformer_widths(parse_arch(_with(AF_OK, hidden_dim=216)))[0] == (216, 4, 756)


# --- parsing and serialisation -----------------------------------------------------
def test_parse_normalises_types():
    cfg = _with(AF_OK, mlp_ratio=[4] * 12, num_heads=tuple(AF_OK["num_heads"]))
    arch = parse_arch(cfg)
    config = arch_to_config(arch)
    assert config["mlp_ratio"] == [4.0] * 12 and all(type(r) is float for r in config["mlp_ratio"])
    same = parse_arch(_with(AF_OK, mlp_ratio=(4.0,) * 12, num_heads=list(AF_OK["num_heads"])))
    assert same == arch and hash(same) == hash(arch)
    pit = parse_arch(PIT_OK)
    assert pit == parse_arch({"base_dim": 16, "mlp_ratio": 6, "depth": (2, 8, 4), "num_heads": (2, 4, 4)})
    assert pit.space == "pit" and pit != parse_arch(_with(PIT_OK, mlp_ratio=4))
    assert parse_arch(pit) is pit


def test_arch_to_config_order_and_json():
    af = arch_to_config(parse_arch(AF_OK))
    assert list(af) == ["hidden_dim", "depth", "mlp_ratio", "num_heads"]
    pit = arch_to_config(parse_arch(PIT_OK))
    assert list(pit) == ["base_dim", "mlp_ratio", "depth", "num_heads"]
    assert json.loads(json.dumps(af)) == AF_OK


def test_arch_key_canonical():
    a = parse_arch(_with(AF_OK, mlp_ratio=[4] * 12))
    key = arch_key(a)
    assert key.startswith('{"depth":12,"hidden_dim":192,"mlp_ratio":[4.0,4.0,')
    assert " " not in key
    reordered = dict(reversed(list(arch_to_config(a).items())))
    assert arch_key(parse_arch(reordered)) == key
    assert arch_key(parse_arch(PIT_OK)) == '{"base_dim":16,"depth":[2,8,4],"mlp_ratio":6,"num_heads":[2,4,4]}'
    assert arch_key(parse_arch(AF_OK)) != arch_key(parse_arch(_with(AF_OK, hidden_dim=216)))


def test_detect_space():
    assert detect_space(AF_OK) == "autoformer" and detect_space(PIT_OK) == "pit"
    with pytest.raises(ArchitectureError, match="neither"):
        detect_space({"depth": 12})
    with pytest.raises(ArchitectureError, match="both"):
        detect_space({"hidden_dim": 192, "base_dim": 16})


# --- validation errors ---------------------------------------------------------------
BAD = [
    # (config, space, substring the message must contain)
    (_with(AF_OK, hidden=3), None, "unknown key 'hidden'"),
    ({k: v for k, v in AF_OK.items() if k != "depth"}, None, "missing key 'depth'"),
    ({"hidden": 192}, "autoformer", "unknown key 'hidden'"),
    (_with(AF_OK, hidden_dim=200), None, "hidden_dim=200 not in {192, 216, 240}"),
    (_with(AF_OK, depth=11), None, "depth=11 not in {12, 13, 14}"),
    (_with(AF_OK, num_heads=[4, 4, 3, 5] + [3] * 8), None, "num_heads[3]=5 not in {3, 4}"),
    (_with(AF_OK, mlp_ratio=[3.5] * 11), None, "mlp_ratio has 11 values but depth is 12"),
    (_with(AF_OK, mlp_ratio=[3.5] * 11 + [3.0]), None, "mlp_ratio[11]=3.0 not in {3.5, 4.0}"),
    (_with(AF_OK, hidden_dim=True), None, "hidden_dim must be an int"),
    (_with(AF_OK, hidden_dim=192.0), None, "hidden_dim must be an int"),
    (_with(AF_OK, num_heads="444"), None, "num_heads must be a list"),
    (_with(AF_OK, mlp_ratio=[True] * 12), None, "mlp_ratio[0] must be a number"),
    (_with(PIT_OK, num_heads=[4, 2, 2]), None, "num_heads must be non-decreasing, got [4, 2, 2]"),
    (_with(PIT_OK, depth=[2, 8]), None, "depth has 2 values, expected 3"),
    (_with(PIT_OK, depth=[2, 5, 4]), None, "depth[1]=5 not in {4, 6, 8}"),
    (_with(PIT_OK, base_dim=48), None, "base_dim=48 not in {16, 24, 32, 40}"),
    (_with(PIT_OK, mlp_ratio=3), None, "mlp_ratio=3 not in {2, 4, 6, 8}"),
    (_with(PIT_OK, num_heads=[2, 4, 16]), None, "num_heads[2]=16 not in {2, 4, 8}"),
    (PIT_OK, "autoformer", "looks like a pit arch"),
    (AF_OK, "vit", "unknown search space 'vit'"),
]


@pytest.mark.parametrize("cfg,space,msg", BAD)
def test_invalid_configs_raise_named_error(cfg, space, msg):
    with pytest.raises(ArchitectureError) as info:
        parse_arch(cfg, space=space)
    assert msg in str(info.value)
    assert str(info.value).startswith(("autoformer arch", "pit arch", "unknown search space"))
    assert isinstance(info.value, ValueError)


def test_records_of_the_built_in_spaces_are_validated_by_their_family():
    with pytest.raises(ArchitectureError, match=r"^pit arch: num_heads must be non-decreasing, got \[8, 4, 8\]$"):
        parse_arch({"base_dim": 16, "mlp_ratio": 2, "depth": [1, 4, 2], "num_heads": [8, 4, 8]})
    with pytest.raises(ArchitectureError, match=r"^autoformer arch: mlp_ratio has 12 values but depth is 13$"):
        parse_arch({"hidden_dim": 192, "depth": 13, "mlp_ratio": [3.5] * 12, "num_heads": [3] * 13})


# --- sampler ------------------------------------------------------------------------
@pytest.mark.parametrize("space", SPACES)
def test_sampler_seeded_and_uses_only_given_rng(space):
    random.seed(123)
    global_state = random.getstate()
    a = [sample_arch(space, random.Random(7)) for _ in range(3)]
    b = [sample_arch(space, random.Random(7)) for _ in range(3)]
    assert a == b
    rng1, rng2 = random.Random(7), random.Random(7)
    seq1 = [sample_arch(space, rng1) for _ in range(20)]
    seq2 = [sample_arch(space, rng2) for _ in range(20)]
    assert seq1 == seq2 and len(set(seq1)) > 15
    assert random.getstate() == global_state
    assert all(arch.space == space for arch in seq1)


def test_sampler_covers_every_choice():
    rng = random.Random(0)
    afs = [SimpleNamespace(**arch_to_config(sample_arch("autoformer", rng))) for _ in range(300)]
    assert {a.hidden_dim for a in afs} == {192, 216, 240}
    assert {a.depth for a in afs} == {12, 13, 14}
    assert {h for a in afs for h in a.num_heads} == {3, 4}
    assert {r for a in afs for r in a.mlp_ratio} == {3.5, 4.0}
    pits = [SimpleNamespace(**{k: tuple(v) if isinstance(v, list) else v
                               for k, v in arch_to_config(sample_arch("pit", rng)).items()}) for _ in range(600)]
    assert {p.base_dim for p in pits} == {16, 24, 32, 40}
    assert {p.mlp_ratio for p in pits} == {2, 4, 6, 8}
    assert len({p.num_heads for p in pits}) == 10  # all non-decreasing triples
    assert [{p.depth[s] for p in pits} for s in range(3)] == [{1, 2, 3}, {4, 6, 8}, {2, 4, 6}]


@pytest.mark.parametrize("space,lo,hi", [("autoformer", 6e6, 6.5e6), ("pit", 1_000_000, 2_000_000)])
def test_sampler_params_range(space, lo, hi):
    rng = random.Random(3)
    archs = [sample_arch(space, rng, params_range=(lo, hi)) for _ in range(20)]
    assert all(lo <= count_params(a) <= hi for a in archs)
    # inclusive bounds: a range of exactly one count is met
    target = count_params(archs[0])
    assert count_params(sample_arch(space, random.Random(0), params_range=(target, target), max_tries=100000)) == target


@pytest.mark.parametrize("space,rng_range,expected", [
    ("autoformer", (1e6, 2e6), "[5,100,196, 9,977,140]"),
    ("pit", (40e6, 50e6), "[113,892, 35,632,740]"),
    ("pit", (5e6, 1e6), "[113,892, 35,632,740]"),
])
def test_sampler_impossible_range(space, rng_range, expected):
    with pytest.raises(ArchitectureError) as info:
        sample_arch(space, random.Random(0), params_range=rng_range)
    assert expected in str(info.value) and space in str(info.value)


def test_sampler_gives_up_after_max_tries():
    # Feasible in principle but a single exact count is very unlikely in 5 draws.
    with pytest.raises(ArchitectureError, match="5 draws.*feasible range"):
        sample_arch("autoformer", random.Random(0), params_range=(9_977_140, 9_977_140), max_tries=5)


def test_sampler_rejects_unknown_space():
    with pytest.raises(ArchitectureError, match="unknown search space"):
        sample_arch("deit", random.Random(0))
