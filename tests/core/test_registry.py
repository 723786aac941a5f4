"""One registry mechanism for every kind registered by name (issue 33).

Every kind, registered after import through its public decorator or function, is listed and
used like a built-in entry, and removed again after the test; a taken name is refused with
one error class in one message form, also across the kinds that share the proxies' name space.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Callable, NamedTuple

import numpy as np
import pytest
import torch
from torch import nn

from autoprox.apps import rank_search
from autoprox.apps.selection import SELECTIONS, register_selection, selection
from autoprox.core.errors import ConfigError, GenomeError, RegistryError
from autoprox.core.registry import LiveNames, Registry
from autoprox.data.extras import EXTRA_SETS, check_extras, register_extra_set
from autoprox.genome.aggregations import AGGREGATION_REGISTRY, register_aggregation
from autoprox.genome.rank_formula import (
    GRAMMAR_WORDS,
    OPERATORS,
    TRANSFORMS,
    parse_formula,
    register_operator,
    register_transform,
)
from autoprox.genome.terminals import SCALAR, TERMINAL_SETS, TerminalSet, check_terminals, register_terminal_set
from autoprox.genome.space import AGGREGATIONS, GenomeSpace
from autoprox.genome.tree import parse_genome, score_architecture
from autoprox.proxies import zoo
from autoprox.proxies import zoo_scores
from autoprox.networks.models import MODEL_BUILDERS, build_model, register_builder
from autoprox.networks.statistics import STAT_NAMES, InputSpec
from autoprox.primitives import PRIMITIVES, UNARY, make_primitive, register_primitive, unregister_primitive
from autoprox.proxies.baselines import BASELINES, descriptor_scores, fit_params, register_baseline
from autoprox.proxies.proxy import (
    AUTOPROX_A,
    BUILTIN_PROXIES,
    PROXY_FILE_FORMATS,
    PUBLISHED,
    register_proxy_file_format,
    register_published_genome,
    resolve_proxy,
)
from autoprox.proxies.scorers import ARCHITECTURE_PROXIES, register_architecture_proxy
from autoprox.search.evaluators import EVALUATIONS, EVALUATORS, ExactEvaluator, evaluator_class, register_evaluator
from autoprox.search.objectives import (
    OBJECTIVES,
    JointCorrelation,
    SpaceAggregate,
    parse_fitness,
    register_objective,
    space_objective,
)
from autoprox.search.options import OPTIONS
from autoprox.spaces.architectures import count_params
from autoprox.spaces.family import FamilyArch, FamilySpace
from autoprox.spaces.registry import REGISTRY as SPACES
from autoprox.spaces.registry import get_space, register_space


def element_wise_test_cube(x):
    return x * x * x


def block_test_max(values):
    """The largest of the blocks' values."""
    return max(values)


def _blocks(*levels: float) -> list[dict[str, torch.Tensor]]:
    return [{name: torch.full((4, 4), level) for name in STAT_NAMES} for level in levels]


def _tiny_arch():
    return get_space("autoformer").draw(random.Random(0))


class Kind(NamedTuple):
    """One kind: its registry, how a new entry is registered and used, how its name is forgotten,
    and how one of its built-in names is registered again."""

    registry: Registry | object
    name: object
    register: Callable[[], object]
    use: Callable[[object], None]
    forget: Callable[[], None]
    again: Callable[[], object]
    taken: object


# ------------------------------------------------------------------ each kind: register and use
def _space_register():
    return register_space(FamilySpace({**get_space("autoformer").definition, "name": "test-registry-space"}))


def _space_use(_):
    space = get_space("test-registry-space")
    assert "test-registry-space" in SPACES.names()
    assert count_params(space.draw(random.Random(1))) > 0


def _primitive_register():
    return register_primitive(make_primitive("element_wise_test_cube", element_wise_test_cube, lambda x: x ** 3))


def _primitive_use(_):
    assert "element_wise_test_cube" in UNARY  # the live view by arity
    tree = parse_genome("block_mean(to_mean_scalar(element_wise_test_cube(F1)))")
    assert score_architecture(tree, _blocks(2.0, 3.0), {}) == pytest.approx((8 + 27) / 2)


def _aggregation_register():
    return register_aggregation()(block_test_max)


def _aggregation_use(_):
    assert "block_test_max" in AGGREGATIONS  # read live: registered after import
    tree = parse_genome("block_test_max(to_mean_scalar(element_wise_abs(F1)))")
    assert score_architecture(tree, _blocks(2.0, -5.0, 3.0), {}) == pytest.approx(5.0)
    GenomeSpace(aggregations=("block_mean", "block_test_max"))  # a search space may name it


def _terminal_set_register():
    return register_terminal_set(TerminalSet("test_registry", ("Z_test_registry",), SCALAR, "a constant",
                                             lambda arch, num_classes: {"Z_test_registry": 2.0}))


def _terminal_set_use(_):
    assert check_terminals(["stats", "test_registry"]) == ("stats", "test_registry")
    tree = parse_genome("block_mean(element_wise_sum(to_mean_scalar(F1), Z_test_registry))")
    assert score_architecture(tree, _blocks(1.0), {"Z_test_registry": 2.0}) == pytest.approx(3.0)


def _extra_set_register():
    return register_extra_set("test_registry", ("S_test",), "test-v1")


def _extra_set_use(_):
    assert check_extras(["test_registry", "spread"]) == ("test_registry", "spread")


@dataclasses.dataclass(frozen=True)
class _Doubled(JointCorrelation):
    @property
    def name(self) -> str:
        return "test_doubled"


def _objective_register():
    return register_objective("test_doubled")(_Doubled)


def _objective_use(_):
    assert isinstance(parse_fitness("test_doubled"), _Doubled)


class _Evaluator(ExactEvaluator):
    pass


def _evaluator_register():
    return register_evaluator("test_registry")(_Evaluator)


def _evaluator_use(_):
    assert evaluator_class("test_registry") is _Evaluator and _Evaluator.kind == "test_registry"
    # a strategy on held statistics is one --evaluation may name, with no second list to add it to
    assert EVALUATIONS[-1] == "test_registry" and OPTIONS["evaluation"].value("test_registry") == "test_registry"


def _zoo_register():
    return zoo.register_zoo("test_registry_width", source="a test", definition="the qkv input width",
                            input="weights", passes="")(
        lambda inputs: float(inputs.model.blocks[0].attn.qkv.in_features))


def _zoo_use(_):
    arch = _tiny_arch()
    assert "test_registry_width" in BUILTIN_PROXIES and resolve_proxy("test_registry_width").kind == "zoo"
    assert zoo_scores.raw_value("test_registry_width", arch, InputSpec("gaussian", batch_size=2), 0, 10) == \
        float(build_model(arch, 10).blocks[0].attn.qkv.in_features)


def _architecture_register():
    return register_architecture_proxy("test_registry_depth", "twice the parameter count")(
        lambda arch, num_classes=100: 2 * count_params(arch, num_classes=num_classes))


def _architecture_use(_):
    arch = _tiny_arch()
    proxy = resolve_proxy("test_registry_depth")
    assert proxy.kind == "architecture" and "test_registry_depth" in BUILTIN_PROXIES
    assert ARCHITECTURE_PROXIES["test_registry_depth"].function(arch, 100) == 2 * count_params(arch)


def _published_register():
    return register_published_genome("test_registry_published", AUTOPROX_A, "a test")


def _published_use(_):
    proxy = resolve_proxy("test_registry_published")
    assert proxy.kind == "genome" and proxy.genome is not None and "test_registry_published" in BUILTIN_PROXIES


def _format_register():
    return register_proxy_file_format("test-registry/1")(lambda path, data: resolve_proxy(data["proxy"]))


def _format_use(_):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "proxy.json"
        path.write_text(json.dumps({"format": "test-registry/1", "proxy": "flops"}))
        assert resolve_proxy(str(path)).name == "flops"


def _baseline_register():
    return register_baseline("test_registry", descriptor_scores, "the parameter count again")(fit_params)


def _baseline_use(_):
    assert parse_fitness("partial:test_registry").base == "test_registry"  # an objective's base may name it


def _selection_register():
    return register_selection("test-registry")(lambda run_dir: resolve_proxy("params"))


def _selection_use(_):
    assert selection("test-registry")("unused").name == "params"


def _transform_register():
    return register_transform("test_neg_rank", lambda values: -TRANSFORMS["r"][0](values), "minus the rank")


def _transform_use(_):
    scores = parse_formula("test_neg_rank(params)").score({"params": np.array([1.0, 5.0, 3.0])})
    assert np.argsort(scores).tolist() == [1, 2, 0]


def _operator_register():
    return register_operator("test_twice", 1, lambda a: 2 * a, "2 a")


def _operator_use(_):
    formula = parse_formula("test_twice(r(params))")
    columns = {"params": np.array([1.0, 5.0, 3.0])}
    assert formula.score(columns) == pytest.approx(2 * parse_formula("r(params)").score(columns))


@dataclasses.dataclass(frozen=True)
class _Median(SpaceAggregate):
    def over(self, figures):
        return float(np.median(list(figures)))


def _space_objective_register():
    return register_objective("test_median")(_Median)


def _space_objective_use(_):
    rank_search.RankSearchSettings(objective="test_median").check()
    assert space_objective("test_median").over([1.0, 5.0, 2.0]) == 2.0


@dataclasses.dataclass(frozen=True)
class _TinyArch(FamilyArch):
    pass


def _builder_register():
    return register_builder(_TinyArch)(lambda arch, num_classes: nn.Linear(1, num_classes))


def _builder_use(_):
    arch = _tiny_arch()
    tiny = _TinyArch(**{field.name: getattr(arch, field.name) for field in dataclasses.fields(arch)})
    model = build_model(tiny, num_classes=7)
    assert isinstance(model, nn.Linear) and model.out_features == 7


def _def_block_mean():
    def block_mean(values):
        """Another mean."""
        return 0.0

    return register_aggregation()(block_mean)


@dataclasses.dataclass(frozen=True)
class _OtherJcm(JointCorrelation):
    pass


class _OtherExact(ExactEvaluator):
    pass


KINDS = {
    "search space": Kind(SPACES, "test-registry-space", _space_register, _space_use,
                         lambda: SPACES.unregister("test-registry-space"),
                         lambda: register_space(FamilySpace({**get_space("autoformer").definition, "name": "pit"})),
                         "pit"),
    "primitive": Kind(PRIMITIVES, "element_wise_test_cube", _primitive_register, _primitive_use,
                      lambda: unregister_primitive("element_wise_test_cube"),
                      lambda: register_primitive(make_primitive("sigmoid", element_wise_test_cube, lambda x: x ** 3)),
                      "sigmoid"),
    "aggregation": Kind(AGGREGATION_REGISTRY, "block_test_max", _aggregation_register, _aggregation_use,
                        lambda: AGGREGATION_REGISTRY.unregister("block_test_max"), _def_block_mean, "block_mean"),
    "terminal set": Kind(TERMINAL_SETS, "test_registry", _terminal_set_register, _terminal_set_use,
                         lambda: TERMINAL_SETS.unregister("test_registry"),
                         lambda: register_terminal_set(TerminalSet("arch", ("Z_other",), SCALAR, "again",
                                                                   lambda arch, num_classes: {"Z_other": 1.0})),
                         "arch"),
    "extra statistics set": Kind(EXTRA_SETS, "test_registry", _extra_set_register, _extra_set_use,
                                 lambda: EXTRA_SETS.unregister("test_registry"),
                                 lambda: register_extra_set("spread", ("S_other",), "v2"), "spread"),
    "objective": Kind(OBJECTIVES, "test_doubled", _objective_register, _objective_use,
                      lambda: OBJECTIVES.unregister("test_doubled"), lambda: register_objective("jcm")(_OtherJcm),
                      "jcm"),
    "evaluation": Kind(EVALUATORS, "test_registry", _evaluator_register, _evaluator_use,
                       lambda: EVALUATORS.unregister("test_registry"),
                       lambda: register_evaluator("exact")(_OtherExact), "exact"),
    "zoo proxy": Kind(zoo.ZOO, "test_registry_width", _zoo_register, _zoo_use,
                      lambda: zoo.ZOO.unregister("test_registry_width"),
                      lambda: zoo.register_zoo("snip", source="", definition="", input="batch", passes="")(
                          lambda inputs: 0.0), "snip"),
    "architecture proxy": Kind(ARCHITECTURE_PROXIES, "test_registry_depth", _architecture_register,
                               _architecture_use, lambda: ARCHITECTURE_PROXIES.unregister("test_registry_depth"),
                               lambda: register_architecture_proxy("params", "again")(lambda arch, num_classes=100: 0),
                               "params"),
    "published genome": Kind(PUBLISHED, "test_registry_published", _published_register, _published_use,
                             lambda: PUBLISHED.unregister("test_registry_published"),
                             lambda: register_published_genome("autoprox_a", AUTOPROX_A, "again"), "autoprox_a"),
    "proxy file format": Kind(PROXY_FILE_FORMATS, "test-registry/1", _format_register, _format_use,
                              lambda: PROXY_FILE_FORMATS.unregister("test-registry/1"),
                              lambda: register_proxy_file_format("autoprox-ensemble/1")(lambda path, data: None),
                              "autoprox-ensemble/1"),
    "baseline": Kind(BASELINES, "test_registry", _baseline_register, _baseline_use,
                     lambda: BASELINES.unregister("test_registry"),
                     lambda: register_baseline("params", descriptor_scores, "again")(lambda columns, acc: {}),
                     "params"),
    "selection": Kind(SELECTIONS, "test-registry", _selection_register, _selection_use,
                      lambda: SELECTIONS.unregister("test-registry"),
                      lambda: register_selection("best")(lambda run_dir: None), "best"),
    "rank-formula transform": Kind(TRANSFORMS, "test_neg_rank", _transform_register, _transform_use,
                                   lambda: TRANSFORMS.unregister("test_neg_rank"),
                                   lambda: register_transform("lr", np.negative, "again"), "lr"),
    "rank-formula operator": Kind(OPERATORS, "test_twice", _operator_register, _operator_use,
                                  lambda: OPERATORS.unregister("test_twice"),
                                  lambda: register_operator("add", 2, np.subtract, "again"), "add"),
    "objective over spaces": Kind(OBJECTIVES, "test_median", _space_objective_register, _space_objective_use,
                                  lambda: OBJECTIVES.unregister("test_median"),
                                  lambda: register_objective("worst")(_Median), "worst"),
    "model builder": Kind(MODEL_BUILDERS, _TinyArch, _builder_register, _builder_use,
                          lambda: MODEL_BUILDERS.unregister(_TinyArch),
                          lambda: register_builder(FamilyArch)(lambda arch, num_classes: None), FamilyArch),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_entry_registered_after_import_is_listed_and_used(kind):
    entry = KINDS[kind]
    assert entry.name not in entry.registry.names()
    try:
        entry.register()
        assert entry.registry.names()[-1] == entry.name  # in registration order, after the built-in ones
        entry.use(entry.name)
    finally:
        entry.forget()
    assert entry.name not in entry.registry.names()


def _refusal(kind: str, name: object, holder: str) -> str:
    label = name.__qualname__ if isinstance(name, type) else repr(name)
    article = "an" if holder[0].lower() in "aeiou" else "a"
    return f"cannot register {kind} {label}: {article} {holder} of that name is already registered; give this " \
        "one another name"


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_taken_name_is_refused_with_one_error_in_one_form_for_every_kind(kind):
    entry = KINDS[kind]
    store = SPACES._spaces if entry.registry is SPACES else entry.registry  # the search spaces' Registry
    held = store[entry.taken]
    with pytest.raises(RegistryError) as refused:
        entry.again()
    assert type(refused.value) is RegistryError and isinstance(refused.value, ConfigError)
    assert str(refused.value) == _refusal(store.kind, entry.taken, store.kind)
    assert store[entry.taken] is held  # no silent overwrite


@pytest.mark.parametrize("register, name, kind, holder", [
    (lambda: zoo.register_zoo("params", source="", definition="", input="batch", passes="")(lambda inputs: 0.0),
     "params", "zoo proxy", "architecture proxy"),
    (lambda: zoo.register_zoo("autoprox_p", source="", definition="", input="batch", passes="")(lambda inputs: 0.0),
     "autoprox_p", "zoo proxy", "published genome"),
    (lambda: register_architecture_proxy("zico", "again")(lambda arch, num_classes=100: 0),
     "zico", "architecture proxy", "zoo proxy"),
    (lambda: register_architecture_proxy("autoprox_a", "again")(lambda arch, num_classes=100: 0),
     "autoprox_a", "architecture proxy", "published genome"),
    (lambda: register_published_genome("snip", AUTOPROX_A, "again"), "snip", "published genome", "zoo proxy"),
    (lambda: register_published_genome("flops", AUTOPROX_A, "again"), "flops", "published genome",
     "architecture proxy"),
    (lambda: register_operator("lr", 1, np.negative, "again"), "lr", "rank-formula operator", "rank-formula transform"),
    (lambda: register_transform("max", np.negative, "again"), "max", "rank-formula transform", "rank-formula operator"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_a_shared_name_space_is_checked_from_every_side(register, name, kind, holder):
    before = tuple(BUILTIN_PROXIES), OPERATORS.names(), TRANSFORMS.names()
    with pytest.raises(RegistryError) as refused:
        register()
    assert str(refused.value) == _refusal(kind, name, holder)
    assert (tuple(BUILTIN_PROXIES), OPERATORS.names(), TRANSFORMS.names()) == before


@pytest.mark.parametrize("word", GRAMMAR_WORDS)
def test_a_word_of_the_rank_formula_grammar_is_refused_as_a_name_saying_so(word):
    for register in (lambda: register_transform(word, np.negative, "again"),
                     lambda: register_operator(word, 1, np.negative, "again")):
        with pytest.raises(ConfigError) as refused:
            register()
        assert str(refused.value) == (f"rank-formula name {word!r} is a word of the grammar "
                                      f"({', '.join(GRAMMAR_WORDS)}); give it another name")
    with pytest.raises(ConfigError, match=r"'Max' is not a plain lower-case name \(a letter, then lower-case"):
        register_transform("Max", np.negative, "again")
    assert word not in TRANSFORMS and word not in OPERATORS and "Max" not in TRANSFORMS


# ------------------------------------------------------------------------------- the class
def test_the_registry_lists_describes_finds_and_forgets():
    registry: Registry[str, object] = Registry("widget", unknown=GenomeError)

    def knob():
        """Turns.

        More text."""

    registry.add("knob", knob)
    registry.register("lever")(type("Lever", (), {"description": "pulls"}))
    assert registry.names() == ["knob", "lever"] and list(registry) == ["knob", "lever"] and len(registry) == 2
    assert "knob" in registry and "dial" not in registry and [] not in registry  # an unhashable name is absent
    assert registry.describe() == [("knob", "Turns."), ("lever", "pulls")]
    assert registry.lookup("knob") is knob and registry.get("dial") is None
    with pytest.raises(GenomeError, match=r"^unknown widget 'dial'; known: knob, lever$"):
        registry.lookup("dial")
    assert registry.add("knob", knob) is knob  # the same entry again is a no-op
    with pytest.raises(RegistryError, match=r"^cannot register widget 'knob': a widget of that name is already "):
        registry.add("knob", lambda: None)
    with registry.registered("dial", len) as held:
        assert held is len and registry.names() == ["knob", "lever", "dial"]
    assert registry.names() == ["knob", "lever"]
    assert registry.unregister("lever") is not None and registry.unregister("lever") is None
    assert registry.names() == ["knob"]


def test_a_view_and_live_names_follow_the_registry():
    registry: Registry[str, int] = Registry("number")
    odd = registry.where(lambda n: n % 2 == 1)
    names = LiveNames(registry.names)
    assert dict(odd) == {} and names == () and len(names) == 0
    registry.add("one", 1), registry.add("two", 2), registry.add("three", 3)
    assert dict(odd) == {"one": 1, "three": 3} and "two" not in odd and len(odd) == 2
    assert names == ("one", "two", "three") and names == ["one", "two", "three"] and names[-1] == "three"
    assert "two" in names and list(names) == registry.names()
    with pytest.raises(KeyError):
        odd["two"]


def test_no_registry_is_frozen_into_a_tuple_at_import():
    """Issue 33: ``AGGREGATIONS = tuple(AGGREGATION_REGISTRY)`` made an aggregation registered later an
    unknown token; the names a module exports are read live."""
    with AGGREGATION_REGISTRY.registered("block_test_max", AGGREGATION_REGISTRY["block_mean"]):
        assert AGGREGATIONS[-1] == "block_test_max"
    assert "block_test_max" not in AGGREGATIONS
    assert re.fullmatch(r"\(.*'autoprox_p'\)", repr(BUILTIN_PROXIES))


def test_the_version_moves_with_every_change_of_the_entries_and_not_with_a_no_op():
    """What is built from a registry (the primitive set, the kernel maps) is cached by its version: a name
    registered anew with another entry must move it, a no-op must not."""
    registry = Registry("thing")
    first, second = object(), object()
    start = registry.version
    registry.add("a", first)
    assert registry.version == start + 1
    registry.add("a", first)  # the same entry again: nothing changed
    assert registry.version == start + 1
    registry.unregister("a")
    registry.unregister("a")  # nothing to forget
    assert registry.version == start + 2
    with registry.registered("a", second):
        assert registry.version == start + 3
    assert registry.version == start + 4 and "a" not in registry
