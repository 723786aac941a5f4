"""Every list of names a user is shown is read from its registry (issue 42): a zoo proxy and an objective
registered here, in a test, are in the command line's help and choices, in the genome terminals and in the
SymPy names, and gone again once withdrawn.

Adding a zoo proxy is its function and one registration (``register_zoo``; ``register_zoo_terminal`` lets
genomes read it); adding an objective is one class (``@register_objective``, its ``form``, ``summary`` and
``scopes``) in the one registry of objectives: one over targets is a ``search --fitness``, one over spaces an
``evaluate --objective``, one over both is both.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
import pytest
import sympy

from autoprox.apps.rank_search import RankSearchSettings
from autoprox.cli.main import main
from autoprox.core.errors import ConfigError
from autoprox.genome.space import GenomeSpace
from autoprox.genome.terminals import TERMINAL_SETS
from autoprox.genome.tree import parse_genome
from autoprox.proxies import zoo
from autoprox.proxies.proxy import BUILTIN_PROXIES
from autoprox.reports import formula_check, sympy_worker
from autoprox.reports.simplify import SYMBOLS, readable_formula
from autoprox.search.objectives import (
    OBJECTIVES,
    JointCorrelation,
    objective_kinds,
    parse_fitness,
    register_objective,
    space_objective,
    usage,
)
from tests.conftest import REPO

ZOO_NAME = "test_qkv_width"
TERMINAL = "Z_test_qkv_width"
GENOME = f"block_mean(to_mean_scalar(element_wise_product(element_wise_abs(F1), {TERMINAL})))"


def _help(capsys, *command: str) -> str:
    """``autoprox COMMAND --help`` as printed, its whitespace collapsed (argparse wraps the lines)."""
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return " ".join(capsys.readouterr().out.split())


@pytest.fixture
def zoo_proxy():
    """A zoo proxy of this test, registered as a proxy and as a genome terminal, withdrawn after."""
    zoo.register_zoo(ZOO_NAME, source="a test", definition="the qkv input width", input="weights", passes="")(
        lambda inputs: float(inputs.model.blocks[0].attn.qkv.in_features))
    try:
        yield zoo.register_zoo_terminal(ZOO_NAME)
    finally:
        zoo.ZOO_TERMINALS.unregister(TERMINAL)
        zoo.ZOO.unregister(ZOO_NAME)


def test_a_zoo_proxy_registered_in_a_test_is_in_the_help_the_terminals_and_the_sympy_names(zoo_proxy, capsys):
    assert zoo_proxy == TERMINAL
    # the command line: rank --proxy's built-ins, search --terminals' zoo set
    assert ZOO_NAME in BUILTIN_PROXIES and f"{ZOO_NAME}, autoprox_a" in _help(capsys, "rank")
    assert f"Z_grad_norm, {TERMINAL})" in _help(capsys, "search")
    # the terminals: the zoo set, a space that reads it, the genome parser
    assert TERMINAL_SETS["zoo"].names[-1] == TERMINAL and TERMINAL in GenomeSpace(terminals=("stats", "zoo")).inputs
    assert TERMINAL not in GenomeSpace().inputs
    assert parse_genome(GENOME)[-1].name == TERMINAL
    # the SymPy names: the formula's symbol, and what the SymPy process takes back
    assert TERMINAL in formula_check.ZOO_SYMBOL_NAMES and TERMINAL in formula_check.SCALAR_SYMBOL_NAMES
    assert SYMBOLS[TERMINAL] == sympy.Symbol(TERMINAL, real=True)
    formula = readable_formula(GENOME, simplify=False)
    assert TERMINAL in {s.name for s in formula.original.free_symbols} and TERMINAL in formula.text
    assert sympy_worker.from_data(sympy_worker.to_data(formula.original)) == formula.original


def test_a_withdrawn_zoo_proxy_is_gone_from_every_list(capsys):
    with zoo.ZOO.registered(ZOO_NAME, replace(zoo.ZOO["snip"], name=ZOO_NAME)):
        with zoo.ZOO_TERMINALS.registered(TERMINAL, zoo.ZooTerminal(ZOO_NAME, "raw")):
            assert TERMINAL in TERMINAL_SETS["zoo"].names and TERMINAL in SYMBOLS
    assert ZOO_NAME not in BUILTIN_PROXIES and TERMINAL not in TERMINAL_SETS["zoo"].names
    assert TERMINAL not in SYMBOLS and TERMINAL not in formula_check.ZOO_SYMBOL_NAMES
    assert ZOO_NAME not in _help(capsys, "rank") and TERMINAL not in _help(capsys, "search")


def test_a_zoo_terminal_is_named_for_its_proxy_and_refused_for_an_unknown_one():
    assert zoo.zoo_terminal_name("synflow", "log") == "Z_log_synflow"
    assert zoo.register_zoo_terminal("snip") == "Z_snip"  # the same registration again: a no-op
    assert list(zoo.ZOO_TERMINALS) == ["Z_snip", "Z_nwot", "Z_zico", "Z_log_synflow", "Z_grad_norm", "Z_grasp",
                                       "Z_fisher", "Z_plain", "Z_jacov", "Z_l2_norm", "Z_zen"]
    with pytest.raises(ConfigError, match="unknown zoo proxy"):
        zoo.register_zoo_terminal("no_such_proxy")
    with pytest.raises(ValueError, match="terminal_set must be one of zoo, zoo_rest"):
        zoo.register_zoo_terminal("snip", terminal_set="stats")
    with pytest.raises(ValueError, match="transform"):
        zoo.register_zoo_terminal("snip", "sqrt")


@pytest.fixture
def objective():
    """A search objective of this test: one class."""

    @register_objective("test_twice_jcm")
    @dataclass(frozen=True)
    class TwiceJcm(JointCorrelation):
        """Twice the JCM (ranks genomes as the JCM does)."""

        summary: ClassVar[str] = "twice the JCM, a test's"

        @property
        def name(self) -> str:
            return "test_twice_jcm"

    try:
        yield TwiceJcm
    finally:
        OBJECTIVES.unregister("test_twice_jcm")


def test_a_search_objective_registered_in_a_test_is_in_the_help_and_the_messages(objective, capsys):
    assert "or test_twice_jcm (twice the JCM, a test's); BASE is" in _help(capsys, "search")
    assert "test_twice_jcm" in _help(capsys, "evaluate")
    assert "combined:BASE[:W] or test_twice_jcm with BASE" in usage()
    assert isinstance(parse_fitness("test_twice_jcm"), objective)
    with pytest.raises(ConfigError, match="test_twice_jcm"):
        parse_fitness("no_such_fitness")


def test_a_withdrawn_search_objective_is_gone_from_the_help(capsys):
    assert "test_twice_jcm" not in _help(capsys, "search") and "test_twice_jcm" not in usage()
    assert "jcm (the paper's), partial:BASE (per target, partial Kendall given BASE), or combined:BASE[:W]" \
        in _help(capsys, "search")


@pytest.fixture
def median_objective():
    """An objective of this test over targets and over spaces: one class."""

    @register_objective("test_median")
    @dataclass(frozen=True)
    class Median(JointCorrelation):
        """The JCM as a search's fitness; over spaces, the median of the per-space figures."""

        summary: ClassVar[str] = "the median Kendall, a test's"
        scopes: ClassVar[frozenset[str]] = frozenset({"targets", "spaces"})

        @property
        def name(self) -> str:
            return "test_median"

        def over(self, figures):
            return float(np.median(list(figures)))

    try:
        yield Median
    finally:
        OBJECTIVES.unregister("test_median")


def test_one_objective_class_is_in_both_the_fitness_and_the_n_space_objective_help_and_choices(median_objective,
                                                                                                 capsys):
    from autoprox.cli.command_options import EVALUATE_OPTIONS
    from autoprox.cli.main import build_parser

    assert "or test_median (the median Kendall, a test's); BASE is" in _help(capsys, "search")
    assert isinstance(parse_fitness("test_median"), median_objective)
    text = _help(capsys, "evaluate")
    assert "--objective {mean,worst,margin,test_median}" in text
    assert "test_median (the median Kendall, a test's)" in text
    option = next(o for o in EVALUATE_OPTIONS if o.name == "objective")
    assert "test_median" in option.choices and option.value("test_median") == "test_median"
    args = build_parser().parse_args(["evaluate", "--leave-space-out", "--rank-formulas", "--objective",
                                      "test_median"])
    assert args.objective == "test_median"
    RankSearchSettings(objective="test_median").check()
    assert space_objective("test_median").over([1.0, 5.0, 2.0]) == 2.0


def test_there_is_one_registry_of_objectives_and_each_scope_reads_it():
    """One ``OBJECTIVES`` in the package (issue 42: the N-space protocol kept a second); ``--fitness`` takes its
    kinds over targets, ``--objective`` those over spaces, and neither takes the other's."""
    import re

    defined = [path.relative_to(REPO).as_posix() for path in sorted((REPO / "autoprox").rglob("*.py"))
               if re.search(r"^OBJECTIVES\b.*=", path.read_text(encoding="utf-8"), re.M)]
    assert defined == ["autoprox/search/objectives.py"]
    assert objective_kinds("targets")[:3] == ["jcm", "partial", "combined"]
    assert objective_kinds("spaces") == ["mean", "worst", "margin"]
    with pytest.raises(ConfigError, match="unknown fitness 'worst'"):
        parse_fitness("worst")
    with pytest.raises(ConfigError, match="unknown objective 'jcm'; use mean, worst or margin"):
        RankSearchSettings(objective="jcm").check()


def test_a_withdrawn_n_space_objective_is_refused_again(capsys):
    from autoprox.cli.command_options import EVALUATE_OPTIONS

    assert "--objective {mean,worst,margin}" in _help(capsys, "evaluate")
    with pytest.raises(ConfigError, match="expected one of mean, worst, margin"):
        next(o for o in EVALUATE_OPTIONS if o.name == "objective").value("test_median")


def test_no_module_imports_the_proxies_for_a_side_effect():
    """The zoo terminal set is registered where the zoo's terminals are computed; every module that needs it
    imports by name what it uses, and has it, imported alone in a fresh interpreter."""
    found = subprocess.run(["git", "grep", "-n", "import autoprox.proxies  # noqa", "--", "autoprox", "tests",
                            ":(exclude)tests/cli/test_registered_names.py"],
                           cwd=REPO, capture_output=True, text=True).stdout
    assert found == ""
    modules = ("autoprox.search.options", "autoprox.search.shards", "autoprox.api", "autoprox.cli.main",
               "autoprox.reports.simplify", "autoprox.reports.export")
    probes = {module: subprocess.Popen(  # side by side: each is a fresh interpreter importing torch
        [sys.executable, "-c", f"import {module}\nfrom autoprox.genome.terminals import TERMINAL_SETS\n"
                               "print(sorted(TERMINAL_SETS))"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={"PYTHONPATH": str(REPO), "PATH": ""})
        for module in modules}
    for module, probe in probes.items():
        stdout, stderr = probe.communicate(timeout=300)
        assert probe.returncode == 0 and "'zoo'" in stdout, (module, stderr[-2000:])


def test_a_selection_rule_and_a_few_label_method_registered_in_a_test_are_in_evaluate_s_help(capsys):
    """``evaluate --help`` lists the selection rules (``--selection``, each with what it does) and the few-label
    methods (``--methods``) from their registries: a hand-written list left ``cv-pick-wide`` out once."""
    from autoprox.apps.protocols.few_labels import FEW_LABEL_METHODS, register_few_label_method
    from autoprox.apps.selection import SELECTIONS, register_selection, select_best

    register_selection("test-rule", "the run's best proxy, under a test's name")(select_best)
    register_few_label_method("test-method", lambda columns, labels, seed: columns["params"], "params, for a test")
    try:
        text = _help(capsys, "evaluate")
        assert "test-rule (the run's best proxy, under a test's name)" in text
        assert "cv-pick-ridge (cv-pick with the coarse descriptor, ridge" in text
        assert "the methods compared (default all: size, best-column, ridge, forest, engine, test-method)" in text
    finally:
        SELECTIONS.unregister("test-rule")
        FEW_LABEL_METHODS.unregister("test-method")
    text = _help(capsys, "evaluate")
    assert "test-rule" not in text and "test-method" not in text
    assert "best (its best search fitness, the default)" in text  # the function registered again kept its own


def test_an_aggregation_registered_in_a_test_is_in_search_s_help_and_in_what_gene_stands_for(capsys):
    """``--aggregation``'s help and the ``gene`` refusal list the aggregations registered now, each with its note,
    and count them: a hand-written "mean, sum, wmean, std ... all four" would leave a fifth out."""
    from autoprox.genome.aggregations import AGGREGATION_REGISTRY, register_aggregation
    from autoprox.search.conversions import aggregation

    def block_test_max(values):
        """The largest of the blocks' values."""
        return max(values)

    before = "over blocks: mean (the paper), sum, wmean (depth-weighted mean), std, a comma list, or gene (all four"
    assert before in _help(capsys, "search")
    register_aggregation(note="a test")(block_test_max)
    try:
        assert ("std, test_max (a test), a comma list, or gene (all five, chosen by evolution)"
                in _help(capsys, "search"))
        with pytest.raises(ConfigError, match=r"gene stands alone \(all five, .*: give gene or a comma list of "
                                              r"mean, sum, wmean, std, test_max"):
            aggregation("gene,test_max")
    finally:
        AGGREGATION_REGISTRY.unregister("block_test_max")
    assert before in _help(capsys, "search") and "test_max" not in _help(capsys, "search")


def test_a_rank_formula_transform_registered_in_a_test_is_in_rank_s_proxy_help(capsys):
    """``rank --proxy``'s help names the rank-formula transforms registered now, then the grammar's words."""
    from autoprox.genome.rank_formula import TRANSFORMS, register_transform

    listed = "r, lr, z, over33, over67, under33, under67"
    assert f"a rank formula over columns ({listed}, lrsum, first:" in _help(capsys, "rank")
    register_transform("testrank", lambda values: values - values.mean(), "centred, for a test")
    try:
        assert f"a rank formula over columns ({listed}, testrank, lrsum, first:" in _help(capsys, "rank")
    finally:
        TRANSFORMS.unregister("testrank")
    assert "testrank" not in _help(capsys, "rank")
