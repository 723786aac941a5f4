"""A default or a set of allowed values is defined once, where the code that uses it lives; the command line's
choices, its help and the other signatures read it there, so that they cannot drift apart."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest

from autoprox.apps.protocols import cross_space, summary
from autoprox.apps.rank_search import MISSING_POLICIES, RankSearchSettings
from autoprox.apps.ranking import FORMATS, format_table
from autoprox.apps.vitsearch import VitSearchSettings
from autoprox.cli import tables
from autoprox.core.errors import ConfigError, GenomeError
from autoprox.cli.command_options import DEFAULT_SPACE_OBJECTIVE, EVALUATE_OPTIONS, RANK_OPTIONS, command_options
from autoprox.data.benchmark import BENCH_FILE_NAMES
from autoprox.genome.space import DEFAULT_AGGREGATION, TREE_KINDS, GenomeSpace
from autoprox.search.objectives import DEFAULT_FOLD_MODE, FOLD_MODES, CrossValidated
from autoprox.search.options import OPTIONS
from autoprox.spaces.architectures import SPACES


def _option(options, name: str):
    return next(option for option in options if option.name == name)


def test_rank_format_choices_are_the_formats_format_table_writes(monkeypatch):
    from autoprox.apps import ranking

    assert _option(RANK_OPTIONS, "format").choices is FORMATS
    for fmt in FORMATS:
        monkeypatch.setattr(ranking, f"format_{fmt}", lambda table, fmt=fmt: fmt)
        assert format_table({}, fmt) == fmt
    with pytest.raises(ConfigError, match="unknown format 'html'; use markdown, csv, json"):
        format_table({}, "html")


def test_cv_mode_s_choices_and_default_are_cross_validation_s():
    assert OPTIONS["cv_mode"].choices is FOLD_MODES
    assert OPTIONS["cv_mode"].default == DEFAULT_FOLD_MODE == CrossValidated.mode


def test_the_aggregation_option_s_default_is_the_genome_space_s():
    assert "block_" + OPTIONS["aggregation"].default == DEFAULT_AGGREGATION


def test_the_genome_option_s_choices_are_the_genome_space_s_kinds():
    assert OPTIONS["genome"].choices is TREE_KINDS and OPTIONS["genome"].default == GenomeSpace().kind
    with pytest.raises(GenomeError, match="unknown genome kind 'typed'; use template or free"):
        GenomeSpace("typed")


def test_the_n_space_protocol_s_options_read_their_defaults_and_choices_where_they_are_used():
    assert DEFAULT_SPACE_OBJECTIVE == RankSearchSettings.objective
    missing = _option(EVALUATE_OPTIONS, "missing_columns")
    assert missing.choices is MISSING_POLICIES and f"({RankSearchSettings.missing}, the default)" in missing.help_text
    assert f"(default {cross_space.DEFAULT_SEEDS})" in _option(EVALUATE_OPTIONS, "seeds").help_text
    assert f"(default {summary.BOOTSTRAP_SAMPLES};" in _option(EVALUATE_OPTIONS, "bootstrap").help_text


def test_the_rank_formula_protocol_command_takes_its_defaults_from_their_homes(monkeypatch):
    """``evaluate --leave-space-out --rank-formulas`` without --seeds, --bootstrap, --objective or
    --missing-columns runs with the protocol's and the settings' own defaults (moved here, for the test)."""
    from autoprox.apps.protocols import space

    class Ran(Exception):
        pass

    def run_space_protocol(spaces, out, *, seeds, settings, samples, say):
        raise Ran(seeds, settings, samples)

    monkeypatch.setattr(tables, "table_spaces_given", lambda args: [])
    monkeypatch.setattr(space, "run_space_protocol", run_space_protocol)
    monkeypatch.setattr(cross_space, "DEFAULT_SEEDS", 3)
    monkeypatch.setattr(summary, "BOOTSTRAP_SAMPLES", 17)
    args = argparse.Namespace(seeds=None, objective=None, missing_columns=None, iterations=None, out="unused",
                              bootstrap=None, quiet=True)
    with pytest.raises(Ran) as ran:
        tables.run_space_protocol_command(args)
    assert ran.value.args == ((0, 1, 2), RankSearchSettings(), 17)


def test_vit_search_s_options_and_its_recorded_settings_share_their_defaults():
    options = {**OPTIONS, **{option.name: option for option in command_options("vit-search")}}
    fields = {field.name: field.default for field in dataclasses.fields(VitSearchSettings)}
    for name in ("samples", "classes", "top", "seed", "input", "batch_size", "stat_seeds", "cache_precision",
                 "workers"):
        assert options[name].default == fields[name], name
    for name in ("samples", "classes", "top", "seed"):
        assert f"(default {fields[name]})" in options[name].help_text, name


def test_the_n_space_protocol_s_functions_read_their_defaults_where_they_are_defined():
    from autoprox.apps import rank_search
    from autoprox.apps.protocols import space

    def default(function, name):
        return inspect.signature(function).parameters[name].default

    assert default(space.run_space_protocol, "seeds") == tuple(range(cross_space.DEFAULT_SEEDS))
    assert default(space.run_space_protocol, "samples") == summary.BOOTSTRAP_SAMPLES
    assert default(space.paired_interval, "samples") == summary.BOOTSTRAP_SAMPLES
    assert default(space.run_space_protocol, "settings") == RankSearchSettings()
    for searcher in (rank_search.best_single, rank_search.greedy_lrsum):
        assert default(searcher, "objective") == RankSearchSettings.objective, searcher.__name__


def test_vit_search_s_budget_default_is_the_paper_s_where_it_has_one_and_said_from_there(monkeypatch, capsys,
                                                                                         tmp_path):
    from autoprox.apps import vitsearch
    from autoprox.cli.main import main

    assert VitSearchSettings("pit", "params").budget == (2e6, 25e6)
    assert VitSearchSettings("autoformer", "params").budget == (4e6, 9e6)
    assert VitSearchSettings("autoformer-s", "params").budget == vitsearch.param_range("autoformer-s", 100)
    monkeypatch.setitem(vitsearch.PAPER_BUDGETS, "pit", (3.0, 11.5))
    assert VitSearchSettings("pit", "params").budget == (3e6, 11.5e6)
    help_text = next(o for o in command_options("vit-search") if o.name == "params").help_text
    assert "(default: the paper's, autoformer 4:9, pit 3:11.5;" in help_text
    # the command line's default budget is the same one (named when more samples are asked than it holds)
    out = tmp_path / "vit"
    assert main(["vit-search", "--space", "pit", "--proxy", "params", "--samples", "5000", "--out", str(out)]) == 2
    assert "distinct pit architectures (3M to 11.5M parameters)" in capsys.readouterr().err and not out.exists()


def test_the_released_benchmark_files_are_those_of_the_vit_bench_spaces():
    assert tuple(BENCH_FILE_NAMES) == SPACES
    assert BENCH_FILE_NAMES == {"autoformer": "gt_autoformer.pth", "pit": "gt_pit.pth"}
