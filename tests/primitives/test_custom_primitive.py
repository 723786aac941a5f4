"""A primitive of your own is one registered record: searched, exported and recorded by name,
refused where it is not registered, and without effect on default searches."""

from __future__ import annotations

import importlib.util
import json

import pytest
import sympy
import torch

from autoprox.api import FoundProxy
from autoprox.core.errors import AutoproxError
from autoprox.genome.tree import parse_genome, score_architecture
from autoprox.genome.space import GenomeSpace
from autoprox.networks.models import build_model
from autoprox.networks.statistics import InputSpec, compute_statistics, derived_seed, make_batch
from autoprox.search.engine import run_search
from autoprox.search.options import option_values
from autoprox.search.settings import settings_from_options
from autoprox.primitives import PAPER_OPERATORS, PRIMITIVES, make_primitive, register_primitive, unregister_primitive
from tests.conftest import REPO


def element_wise_softsign(x):
    return x / (1 + torch.abs(x))


@pytest.fixture
def softsign():
    record = register_primitive(make_primitive("element_wise_softsign", element_wise_softsign,
                                               lambda x: x / (1 + sympy.Abs(x))))
    yield record
    unregister_primitive(record.name)


def _settings(bench, cache, **extra):
    values = option_values({"bench": str(bench), "targets": ("c100_kd", "flower_kd"), "iterations": 2,
                            "population": 4, "retry_cap": 3, "batch_size": 2, "workers": 1,
                            "cache_dir": str(cache.root), "search_fraction": 0.75, "quiet": True, **extra})
    return settings_from_options(values)


@pytest.mark.slow
def test_a_registered_primitive_is_searched_recorded_and_exported(softsign, af_small_file, session_cache, tmp_path,
                                                                  af_small):
    out = tmp_path / "run"
    settings = _settings(af_small_file, session_cache, operators=("element_wise_softsign", "element_wise_sum"))
    report = run_search(settings, out, quiet=True)
    assert report["genome"].count("element_wise_softsign") == 4  # every unary gene is the only unary operator
    recorded = json.loads((out / "config.json").read_text())["settings"]["genome"]
    assert recorded["operators"] == ["element_wise_softsign", "element_wise_sum"]

    from autoprox.reports.export import export_proxy

    path, _ = export_proxy(str(out), tmp_path / "proxy.py", simplify=False)
    text = path.read_text()
    assert "def element_wise_softsign(x):" in text and "import autoprox" not in text
    spec = importlib.util.spec_from_file_location("exported_softsign", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    arch = af_small.archs[0]
    spec_in = InputSpec("gaussian", batch_size=2)
    expected = score_architecture(parse_genome(report["genome"]), compute_statistics(arch, spec_in, 0, 100))
    model = build_model(arch, num_classes=100, seed=derived_seed(0, "model"))
    images, labels = make_batch(spec_in, 100, 0)
    torch.set_num_threads(1)
    assert module.score(model, images, labels) == pytest.approx(float(expected), rel=1e-5)
    assert "element_wise_softsign" not in FoundProxy(report["genome"]).text  # its SymPy form is written out


@pytest.mark.slow
def test_a_run_with_a_primitive_not_registered_is_refused_on_resume_and_export(af_small_file, session_cache,
                                                                               tmp_path):
    record = register_primitive(make_primitive("element_wise_softsign", element_wise_softsign,
                                               lambda x: x / (1 + sympy.Abs(x))))
    out = tmp_path / "run"
    try:
        settings = _settings(af_small_file, session_cache, iterations=1,
                             operators=("element_wise_softsign", "element_wise_sum"))
        run_search(settings, out, quiet=True)
    finally:
        unregister_primitive(record.name)
    with pytest.raises(AutoproxError, match="element_wise_softsign.*not registered"):
        run_search(None, out, resume=True, quiet=True, session={"iterations": 2})
    from autoprox.reports.export import export_proxy

    with pytest.raises(AutoproxError, match="register"):
        export_proxy(str(out), tmp_path / "proxy.py", simplify=False)


@pytest.mark.slow
def test_registering_a_primitive_changes_no_default_search(af_small_file, session_cache, tmp_path):
    """The paper's operators stay the default: the same genomes, in the same order, with or without it."""
    before = run_search(_settings(af_small_file, session_cache), tmp_path / "before", quiet=True)
    record = register_primitive(make_primitive("element_wise_softsign", element_wise_softsign,
                                               lambda x: x / (1 + sympy.Abs(x))))
    try:
        assert "element_wise_softsign" in PRIMITIVES
        after = run_search(_settings(af_small_file, session_cache), tmp_path / "after", quiet=True)
        free = run_search(_settings(af_small_file, session_cache, genome="free"), tmp_path / "free", quiet=True)
    finally:
        unregister_primitive(record.name)
    free_before = run_search(_settings(af_small_file, session_cache, genome="free"), tmp_path / "free0", quiet=True)
    genomes = [json.loads(line)["genome"] for line in (tmp_path / "before" / "evaluations.jsonl").open()]
    assert genomes == [json.loads(line)["genome"] for line in (tmp_path / "after" / "evaluations.jsonl").open()]
    assert before["genome"] == after["genome"] and free["genome"] == free_before["genome"]
    assert "operators" not in json.loads((tmp_path / "after" / "config.json").read_text())[
        "settings"]["genome"]


def test_bad_primitives_and_operator_sets_are_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_primitive(make_primitive("sigmoid", element_wise_softsign, lambda x: x))
    with pytest.raises(ValueError, match="source cannot be read"):
        make_primitive("my_lambda", lambda x: x, lambda x: x)
    with pytest.raises(ValueError, match="lower case"):
        make_primitive("Bad Name", element_wise_softsign, lambda x: x)
    with pytest.raises(AutoproxError, match="not registered"):
        GenomeSpace(operators=("element_wise_nothing", "element_wise_sum"))
    with pytest.raises(AutoproxError, match="at least one unary and one binary"):
        GenomeSpace(operators=("sigmoid",))
    assert GenomeSpace().unary_operators + GenomeSpace().binary_operators == PAPER_OPERATORS


def test_the_paper_operators_are_a_written_out_list_of_table_14():
    """Not whatever the table holds at import: its 24 unary and 4 binary ops by name, in paper order."""
    import inspect

    from autoprox.primitives import PAPER_BINARY, PAPER_UNARY, table

    assert [PRIMITIVES[name].op_id for name in PAPER_UNARY] == [f"UOP{i:02d}" for i in range(24)]
    assert [PRIMITIVES[name].op_id for name in PAPER_BINARY] == [f"BOP{i:02d}" for i in range(1, 5)]
    assert PAPER_OPERATORS == PAPER_UNARY + PAPER_BINARY and len(table.forms()) == 56
    source = inspect.getsource(table)
    assert "PAPER_UNARY: tuple[str, ...] = (\n" in source and '"to_std_scalar",' in source


def test_config_json_records_the_operators_and_a_run_without_them_used_the_papers(softsign, tmp_path):
    """A search records its operator set beside its settings; the settings (and their digest, which earlier
    runs' checkpoints hold) leave the paper's default unrecorded as before. A committed run has no record and
    opens with the paper's set; a record naming other operators is the run's operator set."""
    from autoprox.search.context import config_header
    from autoprox.search.settings import SearchSettings, recorded_settings, settings_of_config

    settings = SearchSettings(bench="gt_autoformer.pth")
    header = config_header(settings, "autoformer", command=["autoprox"])
    assert header["operators"] == list(PAPER_OPERATORS) and "element_wise_softsign" in PRIMITIVES
    assert "operators" not in header["settings"]["genome"]
    assert settings_of_config(header).genome_space == settings.genome_space
    mine = SearchSettings(bench="gt_autoformer.pth", genome=GenomeSpace(operators=("element_wise_softsign",
                                                                                   "element_wise_sum")).to_json())
    assert config_header(mine, "autoformer")["operators"] == ["element_wise_softsign", "element_wise_sum"]
    other = dict(header, operators=["element_wise_softsign", "element_wise_product"])
    assert settings_of_config(other).genome_space.operators == ("element_wise_softsign", "element_wise_product")
    for run in ("pit-reference", "autoformer-reference"):
        config = json.loads((REPO / "runs" / run / "config.json").read_text())
        assert "operators" not in config and "operators" not in config["settings"].get("genome", {})
        space = recorded_settings(REPO / "runs" / run)[0].genome_space
        assert space.unary_operators + space.binary_operators == PAPER_OPERATORS


def test_paper_is_a_reserved_name_and_a_cell_run_again_registers_nothing_new():
    from autoprox.core.errors import RegistryError

    def paper(x):
        return x * 0

    with pytest.raises(RegistryError, match="'paper' cannot name a primitive: an operator list reads it"):
        make_primitive("paper", paper, lambda x: x * 0)
    first = register_primitive(make_primitive("element_wise_softsign", element_wise_softsign,
                                              lambda x: x / (1 + sympy.Abs(x))))
    try:
        again = make_primitive("element_wise_softsign", element_wise_softsign, lambda x: x / (1 + sympy.Abs(x)))
        assert register_primitive(again) is first  # the same definition: a notebook cell run again

        def element_wise_softsign2(x):
            return x / (2 + torch.abs(x))

        other = make_primitive("element_wise_softsign", element_wise_softsign2, lambda x: x / (2 + sympy.Abs(x)),
                               source="def element_wise_softsign(x):\n    return x / (2 + torch.abs(x))\n")
        with pytest.raises(RegistryError, match=r"another definition .* unregister_primitive\('element_wise_softsign'\)"):
            register_primitive(other)
        unregister_primitive("element_wise_softsign")
        register_primitive(other)
        tree = parse_genome("to_mean_scalar(element_wise_softsign(F1))")
        block = {"F1": torch.full((2, 2), 2.0)}
        assert score_architecture(tree, [block]) == pytest.approx(0.5)  # the new definition, not a cached one
    finally:
        unregister_primitive("element_wise_softsign")


def test_a_cell_run_again_with_another_captured_constant_is_another_definition():
    """Two functions of one source text that capture different values (a cell re-run after a constant its SymPy
    form leaves out changed, such as an epsilon) were judged the same definition, and the old one kept running."""
    from autoprox.core.errors import RegistryError

    def shifted_by(epsilon):
        def element_wise_shifted(x):
            return x + epsilon
        return element_wise_shifted

    source = "def element_wise_shifted(x):\n    return x + epsilon\n"
    register_primitive(make_primitive("element_wise_shifted", shifted_by(1e-9), lambda x: x, source=source))
    try:
        register_primitive(make_primitive("element_wise_shifted", shifted_by(1e-9), lambda x: x, source=source))
        other = make_primitive("element_wise_shifted", shifted_by(2e-9), lambda x: x, source=source)
        with pytest.raises(RegistryError, match="another definition"):
            register_primitive(other)
    finally:
        unregister_primitive("element_wise_shifted")


def large_to_vector(x):  # fine on make_primitive's sample matrices, not on a block's statistics
    return x.sum(dim=0) if x.numel() > 10000 else x * 1.0


def large_raises(x):
    if x.numel() > 10000:
        raise KeyError("a large matrix")
    return x * 1.0


def always_nan(x):
    return x * float("nan")


@pytest.fixture(scope="module")
def pit12_file(pit_small, tmp_path_factory):
    from tests.conftest import benchmark_jsonl

    return benchmark_jsonl(pit_small, tmp_path_factory, "pit12.jsonl")


@pytest.mark.parametrize("function", [large_to_vector, large_raises])
def test_an_op_that_raises_or_gives_the_wrong_shape_in_a_search_makes_its_genome_invalid_on_both_paths(
        function, pit12_file, session_cache, tmp_path):
    record = register_primitive(make_primitive(function.__name__, function, lambda x: x))
    try:
        runs = {}
        for evaluation in ("counted", "exact"):
            settings = _settings(pit12_file, session_cache, iterations=1, targets=("c100_kd",), evaluation=evaluation,
                                 operators=(record.name, "element_wise_sum", "element_wise_difference"))
            run_search(settings, tmp_path / evaluation, quiet=True)
            runs[evaluation] = [json.loads(line) for line in (tmp_path / evaluation / "evaluations.jsonl").open()]
    finally:
        unregister_primitive(record.name)
    validity = {e: [(r["genome"], r["valid"]) for r in records] for e, records in runs.items()}
    assert validity["counted"] == validity["exact"]
    reasons = [r.get("reason", "") for r in runs["exact"] if not r["valid"]]
    assert any(record.name in reason for reason in reasons)


def test_a_first_population_that_cannot_be_filled_names_the_operators_of_your_own(pit12_file, session_cache,
                                                                                  tmp_path):
    from autoprox.core.errors import SearchError

    record = register_primitive(make_primitive("always_nan", always_nan, lambda x: x * sympy.nan))
    try:
        settings = _settings(pit12_file, session_cache, iterations=1, targets=("c100_kd",),
                             operators=("always_nan", "element_wise_sum"))
        with pytest.raises(SearchError, match=r"5000 draws were invalid, with operators of your own: 'always_nan' in 5000 "
                                              r"\(most often 'invalid: NaN or inf'\); check those operators"):
            run_search(settings, tmp_path / "run", quiet=True)
    finally:
        unregister_primitive(record.name)
