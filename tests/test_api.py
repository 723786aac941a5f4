"""The Python API: ProxySearch fits a run, reads it back with from_run, and its proxies score models."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from autoprox.api import FoundProxy, ProxySearch
import autoprox
from autoprox.core.errors import (
    ArchitectureError,
    AutoproxError,
    BenchmarkError,
    ConfigError,
    ModelError,
    NotFittedError,
    ProxyError,
    RunDirError,
)
from autoprox.genome.tree import score_architecture
from autoprox.networks.models import build_model
from autoprox.networks.statistics import (
    InputSpec,
    compute_statistics,
    derived_seed,
    make_batch,
)
from autoprox.proxies.proxy import AUTOPROX_A
from autoprox.reports.simplify import aggregate_text
from autoprox.search.engine import run_search
from tests.commands import run_cli
from tests.conftest import REPO, benchmark_jsonl
from tests.search.test_table_search_inputs import searched  # noqa: F401 (a fixture: a finished table search)


@pytest.fixture(scope="module")
def fitted(af_small_file, session_cache, tmp_path_factory):
    out = tmp_path_factory.mktemp("api") / "run"
    search = ProxySearch(bench=str(af_small_file), targets=("c100_kd", "flower_kd"), iterations=3, population=4,
                         out=str(out), batch_size=2, cache_dir=str(session_cache.root), workers=1,
                         search_fraction=0.75, retry_cap=3)
    return search.fit()


@pytest.mark.slow
def test_fit_gives_the_best_proxy_and_the_hall_of_fame(fitted):
    assert fitted.run_dir_.joinpath("best.json").is_file()
    assert fitted.best_.genome == fitted.report_["genome"]
    assert math.isfinite(fitted.best_.jcm) and fitted.best_.test_jcm == fitted.report_["test"]["jcm"]
    assert fitted.hall_of_fame_ and fitted.hall_of_fame_[0].jcm >= fitted.hall_of_fame_[-1].jcm
    top = fitted.hall_of_fame_[0]
    # the readable text is the block expression inside the genome's aggregation, as `show` prints it
    aggregation = top.genome.split("(", 1)[0]
    assert top.text == aggregate_text(aggregation, top.sympy) or top.formula.outer
    assert top.text.startswith("1/L * sum_l ( " if aggregation == "block_mean" else "")
    assert isinstance(top.latex, str) and top.latex
    assert top.sympy.free_symbols  # the per-block expression reads statistics


@pytest.mark.slow
def test_from_run_reads_the_same_search(fitted):
    again = ProxySearch.from_run(fitted.run_dir_)
    assert again.best_ == fitted.best_
    assert [p.genome for p in again.hall_of_fame_] == [p.genome for p in fitted.hall_of_fame_]
    recorded = fitted.run_dir_.joinpath("config.json").read_text()
    assert again.search_settings().to_json() == json.loads(recorded)["settings"]


@pytest.mark.slow
def test_fit_is_the_same_search_as_the_engine(fitted, tmp_path):
    """The API adds nothing of its own: run_search with its settings makes the same proxy."""
    report = run_search(fitted.search_settings(), tmp_path / "engine", quiet=True)
    assert report["genome"] == fitted.best_.genome
    assert report["test"]["jcm"] == fitted.best_.test_jcm


def test_a_found_proxy_scores_a_model_as_the_engine_scores_its_architecture(af_small):
    arch = af_small.archs[0]
    spec, seed = InputSpec("gaussian", batch_size=2), 0
    expected = score_architecture(FoundProxy(AUTOPROX_A).tree, compute_statistics(arch, spec, seed, 100))
    model = build_model(arch, num_classes=100, seed=derived_seed(seed, "model"))
    model.train()
    images, labels = make_batch(spec, 100, seed)
    torch.set_num_threads(1)
    assert FoundProxy(AUTOPROX_A).score(model, images, labels) == pytest.approx(expected, rel=1e-6)


def test_a_found_proxy_scores_a_frozen_model_and_reads_spread_terminals(af_small):
    """A fine-tuning setup's frozen weights (was: AttributeError on a None .grad) and a genome of spread
    terminals (was: KeyError 'S1g', the pass collected no spread) both give the engine's score."""
    from autoprox.networks.models import transformer_blocks

    arch = af_small.archs[0]
    spec, seed = InputSpec("gaussian", batch_size=2), 0
    images, labels = make_batch(spec, 100, seed)
    torch.set_num_threads(1)
    stats = compute_statistics(arch, spec, seed, 100, spread=True)
    for genome in (AUTOPROX_A, "block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(S1g), l1_norm(S4g))))"):
        proxy = FoundProxy(genome)
        model = build_model(arch, num_classes=100, seed=derived_seed(seed, "model"))
        transformer_blocks(model)[0].attn.qkv.weight.requires_grad_(False)
        assert proxy.score(model, images, labels) == pytest.approx(score_architecture(proxy.tree, stats), rel=1e-5)
        assert not transformer_blocks(model)[0].attn.qkv.weight.requires_grad


def test_a_model_that_is_not_a_vit_is_bad_input_not_a_bug():
    """A torch model without timm's transformer blocks raised a bare ValueError, which the command line and a
    caller of the API take for a bug; it is a ModelError (an AutoproxError), and still a ValueError."""
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    with pytest.raises(ModelError, match=r"^Sequential has no transformer block with attn\.qkv") as info:
        FoundProxy(AUTOPROX_A).score(model, torch.randn(2, 3, 4), torch.tensor([0, 1]))
    assert isinstance(info.value, AutoproxError) and isinstance(info.value, ValueError)


def test_torch_source_is_a_standalone_module():
    source = FoundProxy(AUTOPROX_A).torch_source()
    assert "def score(" in source and "import autoprox" not in source


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ConfigError, match="give space"):
        ProxySearch().search_settings()
    with pytest.raises(ConfigError, match="unknown option 'colour'"):
        ProxySearch(space="pit", colour="blue")
    with pytest.raises(ConfigError, match="unknown option 'population_size' \\(did you mean 'population'\\?\\)"):
        ProxySearch(space="pit", population_size=10)
    with pytest.raises(ConfigError, match="population: expected at least 2, got 1"):
        ProxySearch(space="pit", population=1)
    with pytest.raises(ConfigError, match="margin: expected a finite number"):
        ProxySearch(space="pit").set_params(margin=float("nan"))
    # an unknown space at once, as the docstring says (it was refused only by fit())
    with pytest.raises(ConfigError, match="^unknown space 'nope'; known: "):
        ProxySearch(space="nope")
    with pytest.raises(ConfigError, match="^unknown space 'nope'"):
        ProxySearch(space="pit").set_params(space=["pit", "nope"])


def test_a_found_proxy_with_architecture_terminals_reads_them_from_the_model(af_small):
    """runs/autoformer-best reads architecture terminals: the model's own descriptors give the engine's score."""
    from autoprox.spaces.descriptors import terminal_values

    genome = json.loads((REPO / "runs" / "autoformer-best" / "best.json").read_text())["genome"]
    proxy = FoundProxy(genome)
    assert any(node.name.startswith("A_") for node in proxy.tree)
    arch = af_small.archs[1]
    spec, seed = InputSpec("gaussian", batch_size=2), 0
    expected = score_architecture(proxy.tree, compute_statistics(arch, spec, seed, 100), terminal_values(arch))
    model = build_model(arch, num_classes=100, seed=derived_seed(seed, "model"))
    images, labels = make_batch(spec, 100, seed)
    torch.set_num_threads(1)
    assert proxy.score(model, images, labels) == pytest.approx(expected, rel=1e-5)


def test_every_table_option_is_a_cli_option_and_an_api_parameter_with_the_same_default():
    """One option table: argparse's search options and ProxySearch's parameters are the same names and defaults."""
    import argparse

    from autoprox.cli.main import build_parser
    from autoprox.search.options import options_for

    parser = build_parser()
    search = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["search"]
    cli = {a.dest: a.default for a in search._actions if a.dest != "help"}
    table = {o.name: o.default for o in options_for("search")}
    api = ProxySearch().get_params()
    assert set(cli) == set(table) == set(api)
    for name, default in table.items():
        assert api[name] == default, name
        assert (list(cli[name]) if isinstance(cli[name], list) else cli[name]) == (
            list(default) if isinstance(default, tuple) and isinstance(cli[name], list) else default), name


@pytest.mark.parametrize("command", ["rank", "evaluate"])
def test_rank_and_evaluate_options_are_their_tables_and_nothing_else(command):
    """rank's and evaluate's own options come from their tables (autoprox.cli.command_options) with the same
    default, help, choices, metavar and requirement; with the search table's (evaluate: every search option; rank:
    the statistics group) they are every option the command has."""
    import argparse

    from autoprox.cli.main import build_parser
    from autoprox.cli.command_options import command_options
    from autoprox.search.options import SEARCH_OPTIONS, options_for

    parser = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    own = {o.name: o for o in command_options(command)}
    shared = options_for(command) if command == "evaluate" else [o for o in SEARCH_OPTIONS if o.group == "statistics"]
    assert set(actions) == set(own) | {o.name for o in shared} and not set(own) & {o.name for o in shared}
    for name, option in own.items():
        action = actions[name]
        assert action.option_strings == [option.flag_name] and action.help == option.help_text, name
        assert action.default == (list(option.default) if option.repeat else option.default), name
        assert action.required == option.required and action.metavar == option.metavar, name
        assert tuple(action.choices) == option.choices if option.choices else action.choices is None, name
        assert isinstance(action, argparse._StoreTrueAction) == option.flag, name
    # values go through the table's checks: a bad one is argparse's usage error naming the option
    line = {"rank": ["rank", "--proxy", "params", "--seeds", "0,1", "--targets", "c100_kd,flower_kd"],
            "evaluate": ["evaluate", "--space", "pit", "--folds", "3", "--zoo-baselines", "snip,zico"]}[command]
    args = build_parser().parse_args(line)
    assert (args.seeds, args.targets) == ((0, 1), ("c100_kd", "flower_kd")) if command == "rank" else \
        (args.folds, args.zoo_baselines) == (3, ("snip", "zico"))
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(line[:1] + (["--proxy", "params"] if command == "rank" else []) + ["--split-seed" if
                                  command == "rank" else "--folds", "x"])
    assert exit_info.value.code == 2


def test_api_values_are_checked_and_resolved_as_the_cli_does():
    """spread_terminals, seed proxies by name and comma strings give the settings the command line gives."""
    from autoprox.cli.main import build_parser
    from autoprox.cli.options import search_settings

    line = ["search", "--space", "pit", "--spread-terminals", "--seed-proxies", "autoprox_p", "--targets",
            "c100_kd,flower_kd", "--weights", "c100_kd=2", "--aggregation", "mean,sum"]
    from_cli = search_settings(build_parser().parse_args(line))
    from_api = ProxySearch(space="pit", spread_terminals=True, seed_proxies=["autoprox_p"],
                           targets=["c100_kd", "flower_kd"], weights={"c100_kd": 2},
                           aggregation=["mean", "sum"]).search_settings()
    assert from_api == from_cli
    assert from_api.seed_proxies[0].startswith("block_mean(") and from_api.genome_space.spread_terminals


def test_an_empty_targets_list_is_the_default_targets_as_the_empty_tuple_get_params_gives():
    """``targets=[]`` was refused as an empty list while ``targets=()``, the default get_params gives back, meant the
    benchmark's default targets; a list and a tuple are one to every list parameter, and an empty comma string is
    still refused."""
    default = ProxySearch(space="pit")
    for empty in ([], ()):
        search = ProxySearch(space="pit", targets=empty)
        assert search.targets == () and repr(search) == "ProxySearch(space='pit')"
        assert search.search_settings() == default.search_settings()
    with pytest.raises(ConfigError, match="^targets: an empty list"):
        ProxySearch(space="pit", targets="")
    with pytest.raises(ConfigError, match="^aggregation: an empty list"):  # a default that is not empty
        ProxySearch(space="pit", aggregation=[])


def test_params_round_trip_and_repr_names_what_differs():
    search = ProxySearch(space="pit", iterations=5, cv_folds=3)
    again = ProxySearch(**search.get_params())
    assert again.get_params() == search.get_params()
    assert repr(search) == "ProxySearch(space='pit', iterations=5, cv_folds=3)"
    assert search.set_params(seed=4) is search and search.seed == 4 and search.iterations == 5
    # a path may be a Path, as run_dir_ is (out=run_dir_ continues a search): it was "out: expected a string"
    assert search.set_params(out=Path("runs") / "a", cache_dir=Path("c")).out == str(Path("runs") / "a")
    assert ProxySearch(bench=[Path("a.jsonl"), "b.jsonl"]).bench == ("a.jsonl", "b.jsonl")


@pytest.mark.slow
def test_fit_extends_a_finished_run_and_takes_other_session_settings(fitted, tmp_path):
    """fit() on a finished run with more iterations and other workers continues it, as --resume does."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(fitted.run_dir_, copy)
    params = {**ProxySearch.from_run(copy).get_params(), "iterations": 5, "workers": 2, "quiet": True}
    extended = ProxySearch(**params).fit()
    checkpoint = json.loads((copy / "checkpoint.json").read_text())
    assert checkpoint["iteration"] == 5
    assert extended.best_.jcm >= fitted.best_.jcm
    with pytest.raises(Exception, match="holds another search"):
        ProxySearch(**{**params, "seed": 9}).fit()


@pytest.mark.slow
def test_a_found_proxy_scores_architecture_configs_and_a_benchmark(fitted, af_small):
    """score_architectures gives the run's own scores for configs and for a benchmark file."""
    from autoprox.spaces.architectures import arch_to_config

    context = fitted.context()
    expected = context.score(fitted.best_.proxy, "test")[100]
    configs = [arch_to_config(a) for a in context.archs("test")]
    assert np.allclose(fitted.best_.score_architectures(configs), expected, rtol=0, atol=0)
    assert len(fitted.best_.score_architectures(context.bench.source)) \
        == len(context.bench)


@pytest.mark.slow
def test_equations_table_holds_search_and_test_figures(fitted, tmp_path):
    table = fitted.equations_
    assert len(table) == len(fitted.hall_of_fame_)
    first = table[0]
    assert first["genome"] == fitted.hall_of_fame_[0].genome and first["search_jcm"] == fitted.hall_of_fame_[0].jcm
    test = fitted.context().evaluate(fitted.hall_of_fame_[0].proxy, "test")
    assert first["test_jcm"] == pytest.approx(test["jcm"])
    csv_text = table.to_csv(tmp_path / "eq.csv")
    assert (tmp_path / "eq.csv").read_text() == csv_text and csv_text.startswith("rank,complexity,formula,genome")
    markdown = table.to_markdown()
    assert markdown.splitlines()[0].startswith("| rank | complexity | formula | search_jcm")
    assert len(markdown.splitlines()) == len(table) + 2


def test_the_main_names_are_importable_from_the_package():
    import autoprox

    assert autoprox.ProxySearch is ProxySearch
    from autoprox import Proxy, resolve_proxy

    assert isinstance(resolve_proxy("params"), Proxy)


@pytest.mark.slow
def test_set_params_continues_a_search_left_at_its_default_targets(af_small_file, session_cache, tmp_path):
    """Issue 32, bug 2: the README's ``search.set_params(iterations=80).fit()`` raised "holds another search
    (--targets none (the run has c100_kd,...))" when the targets were left at their default (the benchmark's)."""
    search = ProxySearch(bench=str(af_small_file), iterations=1, population=4, out=str(tmp_path / "run"),
                         batch_size=2, cache_dir=str(session_cache.root), workers=1, search_fraction=0.75,
                         retry_cap=3, quiet=True).fit()
    recorded = json.loads((tmp_path / "run" / "config.json").read_text())["settings"]
    assert search.targets == () and len(recorded["targets"]) >= 2  # the default: every target the file has
    search.set_params(iterations=2).fit()
    assert json.loads((tmp_path / "run" / "checkpoint.json").read_text())["iteration"] == 2
    assert search.best_.jcm is not None
    # another search in the same folder is still refused, naming what differs as the settings name it
    with pytest.raises(Exception, match=r"holds another search \(evolution.seed 9 \(the run has 0\)\)"):
        search.set_params(seed=9).fit()
    with pytest.raises(Exception, match=r"holds another search \(targets c100_kd \(the run has c100_kd,"):
        search.set_params(seed=0, targets="c100_kd").fit()


@pytest.mark.slow
def test_from_run_continues_a_search_of_a_space_released_file(af_small, session_cache, tmp_path, monkeypatch):
    """A run of ``space=...`` records its released file by its bare name: ``from_run(RUN).set_params(...).fit()``
    raised "benchmark file not found: gt_autoformer.pth" (the bare name taken as a path, the space dropped), where
    ``search --resume`` continues it. A second ``fit`` also left ``equations_`` at the first fit's hall of fame."""
    import torch

    from autoprox.data.benchmark import BENCH_DIR_ENV, BENCH_FILE_NAMES
    from autoprox.spaces.architectures import arch_to_config, parse_arch

    released = tmp_path / "bench"
    released.mkdir()
    entries = torch.load(REPO / "autoprox" / "resources" / "vit-bench-101" / BENCH_FILE_NAMES["autoformer"],
                         weights_only=True)
    small = [arch_to_config(a) for a in af_small.archs]
    torch.save([e for e in entries if arch_to_config(parse_arch(e["arch"])) in small],
               released / BENCH_FILE_NAMES["autoformer"])
    monkeypatch.setenv(BENCH_DIR_ENV, str(released))
    run = tmp_path / "run"
    first = ProxySearch(space="autoformer", iterations=1, population=4, out=str(run), batch_size=2,
                        cache_dir=str(session_cache.root), workers=1, search_fraction=0.75, retry_cap=3,
                        quiet=True).fit()
    assert json.loads((run / "config.json").read_text())["settings"]["bench"] == BENCH_FILE_NAMES["autoformer"]
    table = first.equations_
    again = ProxySearch.from_run(run)
    assert again.space == "autoformer" and again.bench is None
    again.set_params(iterations=3).fit()
    assert json.loads((run / "checkpoint.json").read_text())["iteration"] == 3
    # the first object, fitted again, reads the extended run: its hall of fame and its equations alike
    first.set_params(iterations=4).fit()
    equations = first.equations_
    assert [equations[i]["genome"] for i in range(len(equations))] == [p.genome for p in first.hall_of_fame_]
    assert first.equations_ is not table
    # the parameters of a read run give the same search again (the recorded bare name is the run's own)
    ProxySearch(**{**ProxySearch.from_run(run).get_params(), "iterations": 5}).fit()
    assert json.loads((run / "checkpoint.json").read_text())["iteration"] == 5


def test_scikit_learn_clones_a_search():
    """sklearn.base.clone raised "the constructor either does not set or modifies parameter weights": get_params
    gave the checked copies, not the objects given."""
    base = pytest.importorskip("sklearn.base")
    search = ProxySearch(space="pit", iterations=3, weights={"c100_kd": 2}, targets=["c100_kd", "flower_kd"])
    copy = base.clone(search)
    assert copy is not search and copy.get_params() == search.get_params() and repr(copy) == repr(search)
    assert copy.weights == {"c100_kd": 2.0} and copy.targets == ("c100_kd", "flower_kd")
    assert copy.search_settings() == search.search_settings()


def test_a_run_directory_is_a_proxy_as_on_the_command_line(searched, tmp_path):
    """score_rows(RUN, T) and resolve_proxy(RUN) said "unknown proxy 'RUN'", where score and rank --proxy RUN read
    RUN/best.json; a folder without one is named in one line."""
    import autoprox
    from autoprox.api import score_rows
    from autoprox.core.errors import ProxyError

    run, table = searched
    assert score_rows(run, table) == score_rows(run / "best.json", table)
    assert score_rows(str(run), str(table)) == score_rows(run / "best.json", table)
    assert autoprox.resolve_proxy(run).provenance == autoprox.resolve_proxy(run / "best.json").provenance
    assert autoprox.resolve_proxy("params").name == "params"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProxyError, match=r"^\S*empty: a folder without best.json; give a run directory"):
        autoprox.resolve_proxy(tmp_path / "empty")


def test_search_table_checks_its_arguments_in_one_line_and_resumes_a_run(searched, tmp_path):
    """search_table(T, ['val_acc']) raised "unhashable type: 'list'", iterations='5' a TypeError, 2.5 was recorded
    as 2.5, score_rows(P, None) raised a TypeError, and an existing out said "resume it with --resume", which
    Python could not do: resume=True continues the run as search --resume does."""
    import dataclasses

    from autoprox.api import score_rows, search_table
    from autoprox.core.errors import BenchmarkError, RunDirError
    from autoprox.search.table_run import run_table_search
    from tests.search.test_table_search_inputs import SMALL

    run, table = searched
    listed = search_table(table, ["val_acc"], out=tmp_path / "listed", iterations=SMALL.iterations)
    texts = search_table(str(table), "val_acc", out=tmp_path / "texts", iterations=str(SMALL.iterations))
    assert listed["formula"] == texts["formula"] and listed["target"] == "val_acc"
    for bad, line in (({"iterations": 2.5}, "iterations: expected an integer, got 2.5"),
                      ({"iterations": -1}, "iterations: expected at least 0, got -1"),
                      ({"iterations": 10 ** 7}, "iterations: expected at most 1,000,000, got 10,000,000"),
                      ({"seed": 1.5}, "seed: expected an integer, got 1.5")):
        with pytest.raises(ConfigError, match=f"^{line}$"):
            search_table(table, "val_acc", out=tmp_path / "bad", **bad)
    with pytest.raises(BenchmarkError, match="one target at a time"):
        search_table(table, ["val_acc", "other"], out=tmp_path / "bad")
    with pytest.raises(BenchmarkError, match="^search_table needs bench"):
        search_table(None, "val_acc", out=tmp_path / "bad")
    with pytest.raises(ConfigError, match=r"^score_rows needs bench"):
        score_rows("params", None)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(RunDirError, match=r"already holds a run; continue it with search_table\(\.\.\., "
                                          r"resume=True\), or choose another out$"):
        search_table(table, "val_acc", out=run)
    # a stopped run, continued from Python, ends as the uninterrupted one
    settings = dataclasses.replace(SMALL, iterations=3)
    whole = run_table_search(table, ["val_acc"], tmp_path / "whole", settings, quiet=True)
    run_table_search(table, ["val_acc"], tmp_path / "cut", settings, quiet=True, stop_after=1)
    assert search_table(None, out=tmp_path / "cut", resume=True)["formula"] == whole["formula"]
    with pytest.raises(ConfigError, match="these options differ: --iterations 7 "):  # as search --resume refuses it
        search_table(None, out=tmp_path / "cut", resume=True, iterations=7)
    with pytest.raises(RunDirError, match="resume=True needs out"):
        search_table(table, resume=True)


def test_score_rows_warns_where_score_notes_columns_read_as_no_information(searched, tmp_path):
    """score_rows was silent where autoprox score prints "T lacks jacov: read as no information": the same line
    is a UserWarning, and a table with every column gives none."""
    import warnings

    from autoprox.api import score_rows
    from tests.search.test_table_search_inputs import write_table

    run, table = searched
    lacking = write_table(tmp_path / "lacking.csv", columns=("params", "flops", "nwot"), seed=1)
    with pytest.warns(UserWarning, match=r"lacking.csv lacks jacov: read as no information") as caught:
        scores = score_rows(run, lacking)
    assert len(caught) == 1 and len(scores) == 30
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        labelled = score_rows(run, table)
    # unlabelled candidates (the target column left empty) are scored as autoprox score scores them
    lines = table.read_text().splitlines()
    unlabelled = tmp_path / "candidates.csv"
    unlabelled.write_text("\n".join([lines[0], *(",".join([row.split(",")[0], "", *row.split(",")[2:]])
                                                  for row in lines[1:])]) + "\n")
    assert score_rows(run, unlabelled) == labelled


@pytest.mark.slow
def test_a_fitted_run_records_and_shows_its_python_call_not_the_host_command_line(fitted, tmp_path):
    """A run made from Python recorded the host program's command line (``pytest -q``, ``ipykernel_launcher.py
    -f ...``) as its "made by"; it records the call (the estimator's parameters that differ from their defaults),
    and show and report say it is one."""
    from autoprox.reports.html.report import render_report
    from autoprox.reports.show import show_run
    from tests.report_html import parse_report

    call = f"autoprox.{fitted!r}.fit()"
    assert call.startswith("autoprox.ProxySearch(bench=") and "iterations=3" in call
    assert json.loads((fitted.run_dir_ / "config.json").read_text())["command"] == [call]
    assert f"\nmade by: {call} (from Python)\n" in show_run(fitted.run_dir_, simplify=False)
    document = render_report(fitted.run_dir_, simplify=False)
    assert parse_report(document).texts["made-by"] == call and "(from Python)" in document
    # a run that cannot be resumed says to run its call again with another out (not --out, a command line's)
    import shutil

    from autoprox.core.errors import RunDirError

    copy = Path(shutil.copytree(fitted.run_dir_, tmp_path / "copy"))
    (copy / "evaluations.jsonl").unlink()
    with pytest.raises(RunDirError, match=r"run its command \(config.json\) again with another out$"):
        ProxySearch.from_run(copy).fit()


def test_search_table_records_and_shows_its_python_call(searched, tmp_path):
    """search_table recorded no command at all ("command": null); it records its call, as given."""
    from autoprox.api import search_table
    from autoprox.reports.table_run import show_table_run, table_report_html
    from tests.search.test_table_search_inputs import SMALL

    _, table = searched
    out = tmp_path / "run"
    search_table(table, "val_acc", out=out, iterations=SMALL.iterations)
    call = f"autoprox.search_table({str(table)!r}, target='val_acc', out={str(out)!r}, iterations={SMALL.iterations})"
    assert json.loads((out / "config.json").read_text())["command"] == [call]
    assert show_table_run(out).splitlines()[1] == f"made by: {call} (from Python)"
    assert f'id="made-by">made by: {call.replace(chr(39), "&#x27;")} (from Python)</p>' in \
        table_report_html(out, tmp_path / "report.html").read_text()


@pytest.mark.slow
def test_a_fit_without_out_is_a_new_search_in_a_new_temporary_folder_continued_by_giving_it(
        af_small_file, session_cache):
    """A fit without out starts over in a new temporary folder (scikit-learn's fit); run_dir_ names it, and giving
    it as out continues that search, as the class docstring and the manual say."""
    import shutil

    from autoprox.search.rundir import RunDirectory

    search = ProxySearch(bench=str(af_small_file), targets="c100_kd", iterations=1, population=2, batch_size=2,
                         cache_dir=str(session_cache.root), workers=1, search_fraction=0.75, quiet=True)
    first = search.fit().run_dir_
    try:
        second = search.fit().run_dir_
        assert first != second and first.name.startswith("autoprox-run-") and second.name.startswith("autoprox-run-")
        assert len(RunDirectory(second).log()) == 1
        continued = search.set_params(out=second, iterations=2).fit()
        assert continued.run_dir_ == second and [r["iteration"] for r in RunDirectory(second).log()] == [1, 2]
    finally:
        for folder in {first, search.run_dir_}:
            shutil.rmtree(folder, ignore_errors=True)


def test_a_none_in_proxysearchs_signature_is_an_option_whose_help_says_its_default():
    """adv5 F-doc-1: the manual said the signature shows the command line's defaults; where a default depends on
    other settings it shows None. The manual names those parameters, and each one's help says its default."""
    import inspect
    import re

    from autoprox.search.options import OPTIONS
    from tests.conftest import REPO

    shown_none = {name for name, p in inspect.signature(ProxySearch).parameters.items() if p.default is None}
    manual = " ".join((REPO / "docs" / "manual.md").read_text().split())
    sentence = manual[manual.index("In the signature, an option whose default depends"):]
    sentence = sentence[:sentence.index("give it or `bench`).") + 20]
    assert "shows `None`, which means \"the option's default\"" in sentence and "autoprox search --help" in sentence
    named = set(re.findall(r"`(\w+)`", sentence[:sentence.index("shows `None`")]))
    assert named - {"resume"} == shown_none
    assert "(`space` has none: give it or `bench`)" in manual
    for name in shown_none - {"space"}:
        text = OPTIONS[name].help
        text = text() if callable(text) else text
        assert "default" in text, name


# A newcomer's wrong inputs, each refused in one line by an AutoproxError where it used to be a TypeError or an
# AttributeError from inside pathlib or the statistics cache: a number or None where a path goes, an architecture
# that is no config, a search read before it is fitted.

TABLE = REPO / "examples" / "timm_imagenet.csv"


@pytest.mark.parametrize("call, error, message", [
    (lambda: autoprox.load_benchmark(None), BenchmarkError, "load_benchmark: expected a path (a str or an "
                                                            "os.PathLike), got NoneType None"),
    (lambda: autoprox.load_benchmark(5), BenchmarkError, "load_benchmark: expected a path"),
    (lambda: autoprox.score_rows("params", 5), BenchmarkError, "the proxy table: expected a path"),
    (lambda: autoprox.score_rows("params", [str(TABLE)]), BenchmarkError, "got list"),
    (lambda: autoprox.search_table(5, "top1"), BenchmarkError, "the proxy table: expected a path"),
    (lambda: autoprox.search_table(TABLE, "top1", out=5), RunDirError, "out: expected a path"),
    (lambda: ProxySearch.from_run(None), RunDirError, "from_run: expected a path"),
    (lambda: autoprox.load_benchmark(""), BenchmarkError, "load_benchmark: the path is empty; give the benchmark file"),
    (lambda: autoprox.load_benchmark("  "), BenchmarkError, "load_benchmark: the path is empty"),
    (lambda: autoprox.score_rows("params", ""), BenchmarkError, "the proxy table: the path is empty; give its file"),
    (lambda: autoprox.search_table(TABLE, "top1", out=""), RunDirError, "out: the path is empty; give the folder "
                                                                        "to write the search in"),
    (lambda: ProxySearch.from_run(""), RunDirError, "from_run: the path is empty; give the run directory"),
], ids=["load_benchmark-None", "load_benchmark-int", "score_rows-int", "score_rows-list", "search_table-int",
        "search_table-out", "from_run-None", "load_benchmark-empty", "load_benchmark-blank", "score_rows-empty",
        "search_table-out-empty", "from_run-empty"])
def test_what_is_no_path_is_refused_in_one_line(call, error, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written, here or anywhere
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_load_benchmark_of_a_space_name_names_its_released_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchmarkError, match=r"^no file pit; 'pit' is a space: its released benchmark is "
                                             r"load_benchmark\(default_bench_path\('pit'\)\)"):
        autoprox.load_benchmark("pit")


@pytest.mark.parametrize("archs, error, message", [
    (None, ConfigError, "archs: expected architecture configs, a benchmark file or a space's name, got NoneType"),
    (5, ConfigError, "got int"),
    ([5], ArchitectureError, "arch config must be a mapping, got int"),
])
def test_score_architectures_refuses_what_is_no_architecture(archs, error, message):
    with pytest.raises(error, match=message):
        FoundProxy(AUTOPROX_A).score_architectures(archs)


def test_a_search_read_before_it_is_fitted_says_so():
    """``best_`` said only ``ProxySearch has no attribute 'best_'``; ``equations_`` said it in its own words."""
    search = ProxySearch()
    for name in ("best_", "hall_of_fame_", "run_dir_", "equations_"):
        with pytest.raises(NotFittedError, match=rf"^this search is not fitted yet: {name} is set by fit\(\)"):
            getattr(search, name)
    assert not hasattr(search, "best_")  # still an AttributeError, as scikit-learn's NotFittedError
    with pytest.raises(AttributeError, match="has no attribute 'nosuch_'") as info:
        search.nosuch_
    assert not isinstance(info.value, AutoproxError)


def test_build_vit_refuses_a_seed_that_is_no_integer():
    with pytest.raises(ArchitectureError, match=r"^seed: expected an integer or None, got 'x'$"):
        autoprox.build_vit(REPO / "runs" / "vit-pit-reference-seed0", seed="x")


def test_a_found_proxy_refuses_a_pass_it_cannot_make_in_one_line(af_small):
    """Each used to fail inside torch (an AttributeError, a TypeError, an IndexError 'Target 500 is out of bounds')
    or, for NaN images, as the proxy's own 'NaN or inf'."""
    torch.manual_seed(0)
    model = build_model(af_small.archs[0], num_classes=10, seed=0)
    images, labels = torch.randn(2, 3, 224, 224), torch.tensor([0, 9])
    proxy = FoundProxy(AUTOPROX_A)
    cases = [
        (("model", images, labels), "model: expected a torch.nn.Module, got str"),
        ((model, images.numpy(), labels), "inputs: expected a tensor of at least one sample, the batch first, got "
                                          "ndarray"),
        ((model, images[:0], labels[:0]), "inputs: expected a tensor of at least one sample, the batch first, got "
                                          "(0, 3, 224, 224)"),
        ((model, torch.full_like(images, float("nan")), labels), "inputs: they hold NaN or inf"),
        ((model, images, [0, 9]), "targets: expected a tensor of one class index (or one row of class "
                                  "probabilities) per input, 2 in all, got list"),
        ((model, images, torch.tensor([0, 1, 2])), "2 in all, got (3,)"),
        ((model, images, torch.tensor([0, 10])), "targets: class indices must lie in 0..9 (the model has 10 "
                                                 "outputs), got 0..10"),
        ((model, images, torch.tensor([0, 1], dtype=torch.int32)), "targets: expected class indices, one torch.long "
                                                                   "per input, got torch.int32"),
        # said "expected class indices, one torch.long per input, got torch.int64 of shape (2, 1)": the shape is wrong
        ((model, images, labels[:, None]), "targets: expected class indices, one per input (shape (2,)), got shape "
                                           "(2, 1)"),
        ((model, images, torch.tensor([0.0, 1.0])), "targets: class probabilities must have the outputs' shape "
                                                    "(2, 10), got (2,)"),
    ]
    for args, message in cases:
        with pytest.raises(ModelError) as info:
            proxy.score(*args)
        assert message in str(info.value), (message, str(info.value))
    assert proxy.score(model, images, labels) == pytest.approx(proxy.score(model, images, labels))  # still scores
    soft = torch.softmax(torch.randn(2, 10), dim=1)  # class probabilities, which cross-entropy takes
    assert torch.isfinite(torch.tensor(proxy.score(model, images, soft)))


@pytest.mark.parametrize("given, message", [
    (dict(descriptors=5), "descriptors: expected a mapping of descriptor name to value, got int"),
    (dict(descriptors={"params": float("nan")}), "descriptor 'params' must be a positive finite number, got nan"),
    (dict(descriptors={"nosuch": 1}), "unknown descriptor 'nosuch'; known: params, macs"),
    (dict(head_classes=0), "head_classes: expected a positive integer or None, got 0"),
    (dict(head_classes="x"), "head_classes: expected a positive integer or None, got 'x'"),
])
def test_descriptors_and_head_classes_a_pass_cannot_use_are_model_errors(given, message):
    """``descriptors=5`` and ``head_classes='x'`` were a TypeError from inside the pass, ``head_classes=0`` was taken
    (a head of no class counted), and a bad descriptor was a bare ValueError."""
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    with pytest.raises(ModelError) as info:
        FoundProxy("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(F1g), A_log_params)))").score(
            model, torch.randn(2, 3, 4), torch.tensor([0, 1]), **given)
    assert message in str(info.value)


def test_score_architectures_checks_workers_and_a_search_of_a_folder_says_it_is_one(tmp_path):
    """``workers=0`` or ``-1`` was taken silently; ``ProxySearch(bench=FOLDER).fit()`` said the benchmark was
    ``not found`` in a list of places, the folder among them."""
    with pytest.raises(ConfigError, match=r"^workers: expected at least 1, got 0$"):
        FoundProxy(AUTOPROX_A).score_architectures([{"base_dim": 16}], workers=0)
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    with pytest.raises(BenchmarkError, match=rf"^{folder}: a directory, not a benchmark file; give the file itself$"):
        ProxySearch(bench=str(folder), out=str(tmp_path / "run")).fit()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("given, error, message", [
    (dict(aggregation="nosuch"), ConfigError, "aggregation 'nosuch' is unknown: the aggregations over blocks are "
                                              "mean, sum, wmean, std (one, a comma list, or gene"),
    (dict(aggregation="mean,block_nosuch"), ConfigError, "aggregation 'block_nosuch' is unknown"),
    (dict(operators="nosuch"), ConfigError, "operators: operator 'nosuch' is not registered here"),
    (dict(operators=["add", "element_wise_sum"]), ConfigError, "the operators are paper (the paper's) or of no_op, "),
    (dict(operators="element_wise_abs"), ConfigError, "operators: 'element_wise_abs': operators need at least one "
                                                      "unary and one binary operation"),
    (dict(input="nosuch"), ConfigError, "input: unknown input kind 'nosuch'; use gaussian, ones or images:DIR"),
    (dict(seed_proxies="zz"), ProxyError, "seed_proxies: unknown proxy 'zz': not a built-in"),
    (dict(seed_proxies="autoprox_a,snip"), ProxyError, "seed_proxies: snip cannot seed the search"),
])
def test_a_bad_genome_input_or_seed_names_the_parameter_and_the_value_as_typed(given, error, message, tmp_path):
    """``aggregation='nosuch'`` said ``unknown aggregation 'block_nosuch'``, a name nobody typed; ``operators``,
    ``input`` and ``seed_proxies`` named the bad value but not the parameter it came from."""
    with pytest.raises(error) as info:
        ProxySearch(space="pit", population=4, iterations=1, out=str(tmp_path / "run"), **given).fit()
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("folder, what, reader", [
    ("protocol/autoformer-default-patience30", "a protocol that autoprox evaluate wrote (protocol.json",
     "autoprox report {} reads it"),
    ("vit-pit-reference-seed0", "a ViT search that autoprox vit-search wrote (vit_search.json",
     "its best architectures are in {}/top.json"),
], ids=["protocol", "vit-search"])
def test_from_run_of_a_folder_another_command_wrote_says_what_it_is_and_what_reads_it(folder, what, reader):
    """``ProxySearch.from_run`` of a protocol or a ViT search said only ``not a run directory (no config.json)``,
    where ``show`` and ``select`` named the folder and its reader (the one table, ``autoprox.apps.folders``)."""
    path = REPO / "runs" / folder
    with pytest.raises(RunDirError) as info:
        ProxySearch.from_run(path)
    said = str(info.value)
    assert said.startswith(f"ProxySearch.from_run reads a run directory, and {path} is {what}, no config.json)")
    assert reader.format(path) in said and "\n" not in said


@pytest.mark.parametrize("name", ["params", "nwot"])
def test_a_proxy_by_name_scores_architectures_as_the_score_command_does(name, pit_small, tmp_path_factory, capsys):
    """``resolve_proxy(NAME)`` had no simple way to score: ``Proxy.score(archs, None, None)`` raised an AttributeError
    from inside. ``score_architectures`` is the one path (a found proxy's scores through it) and gives, on PiT
    architectures, the scores ``autoprox score`` writes, each computed in a cache of its own."""
    from autoprox.spaces.architectures import arch_to_config

    bench = pit_small.subset([0, 1, 2])
    path = benchmark_jsonl(bench, tmp_path_factory, "pit3.jsonl")
    out = tmp_path_factory.mktemp("scores") / "scores.csv"
    code, _, err = run_cli(capsys, "score", "--proxy", name, "--bench", path, "--out", out,
                           "--cache-dir", tmp_path_factory.mktemp("cli-cache"))
    assert code == 0, err
    with out.open(newline="") as handle:
        written = {row["id"]: float(row["score"]) for row in csv.DictReader(handle)}
    proxy = autoprox.resolve_proxy(name)
    cache = str(tmp_path_factory.mktemp("api-cache"))
    configs = [arch_to_config(arch) for arch in bench.archs]
    for given in (configs, str(path), bench):
        scores = proxy.score_architectures(given, cache_dir=cache)
        expected = [written[json.dumps(config, sort_keys=True)] for config in configs]
        np.testing.assert_allclose(scores, expected, rtol=1e-6)
    assert len(set(expected)) == 3  # three architectures told apart, not one value thrice
    with pytest.raises(ConfigError) as info:
        proxy.score(bench.archs, None, None)
    assert str(info.value).startswith("score: cache is None: give a StatisticsCache, or score with the command "
                                      "line's cache and plan: proxy.score_architectures(archs)")
