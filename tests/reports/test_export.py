"""Export: a standalone torch-only module whose score equals the engine's, in a fresh interpreter."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autoprox.cli.main import main
from autoprox.genome.tree import parse_genome, score_architecture
from autoprox.genome.template import template_genes
from autoprox.core.errors import GenomeError
from autoprox.genome.space import AGGREGATIONS, GenomeSpace
from autoprox.networks.statistics import InputSpec, compute_statistics, torch_threads
from autoprox.reports.export import ExportInfo, export_source, write_export
from autoprox.reports.simplify import readable_formula
from autoprox.spaces.architectures import arch_to_config
from autoprox.spaces.descriptors import DESCRIPTORS, describe, terminal_values
from tests.conftest import REPO

PUBLISHED = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
             "element_wise_sqrt(sigmoid(F4g)))))")
PROXIES = {
    "published": PUBLISHED,
    # AutoProxA's shape (eq. 2): |dL/dW_qkv| + normalised sum of sigmoid(dL/dW_fc1)
    "autoprox_a_like": ("block_mean(to_mean_scalar(element_wise_sum(element_wise_abs(F1g), "
                        "element_wise_normalized_sum(sigmoid(F3g)))))"),
    "matmul_softmax": "block_mean(to_mean_scalar(matrix_multiplication(softmax(F2), element_wise_tanh(F2g))))",
    "activations": ("block_mean(to_mean_scalar(element_wise_product(min_max_normalize(F4), "
                    "element_wise_abs(F4g))))"),
    "scalar_forms": ("block_mean(element_wise_difference(frobenius_norm(normalize(F3)), "
                     "element_wise_log(l1_norm(F1g))))"),
    # every aggregation over blocks (autoprox.genome.space.AGGREGATIONS)
    "block_sum": ("block_sum(to_mean_scalar(element_wise_product(element_wise_abs(element_wise_revert(F2)), "
                  "to_std_scalar(logsoftmax(F4)))))"),
    "block_wmean": ("block_wmean(to_mean_scalar(element_wise_sum(element_wise_abs(F1g), "
                    "element_wise_normalized_sum(sigmoid(F3g)))))"),
    "block_std": "block_std(frobenius_norm(F1g))",
    # every architecture-level terminal, read from the model
    "every_descriptor": ("block_wmean(element_wise_sum(element_wise_sum(element_wise_sum(A_log_params, "
                         "A_log_macs), element_wise_sum(A_depth, A_width)), element_wise_sum(element_wise_sum("
                         "A_heads, A_mlp_ratio), element_wise_product(element_wise_sum(A_log_depth, element_wise_sum(A_log_width, "
                         "element_wise_sum(A_log_heads, A_log_mlp_ratio))), element_wise_product(element_wise_sum("
                         "A_macs, A_params), to_mean_scalar(F1g))))))"),
}
#: Issue-6 genomes of the committed runs (their best.json): free trees and a template with a terminal.
RUN_GENOMES = {
    # runs/pit-best (= runs/ablation/pit-free-gene-arch-cv): a free tree
    "pit_best_free": ("block_sum(frobenius_norm(element_wise_sqrt(element_wise_exp(element_wise_swish("
                      "element_wise_sum(element_wise_sum(A_log_width, F2g), A_log_params))))))"),
    # runs/ablation/autoformer-free-gene-arch-cv: a free tree
    "autoformer_free": ("block_sum(element_wise_product(element_wise_sum(element_wise_sum(A_log_heads, "
                        "to_std_scalar(min_max_normalize(F1))), A_depth), A_params))"),
    # runs/ablation/autoformer-gene-arch-cv: a template
    "autoformer_gene_arch": ("block_sum(to_mean_scalar(element_wise_sum(frobenius_norm(normalize(F4)), "
                             "l1_norm(no_op(A_width)))))"),
    # runs/ablation/pit-gene-arch-cv: scalar forms only (matrix_multiplication.s)
    "pit_gene_arch": ("block_mean(to_mean_scalar(matrix_multiplication(element_wise_pow("
                      "element_wise_normalized_sum(A_log_params)), "
                      "element_wise_swish(element_wise_abslog(A_width)))))"),
}
PROXIES.update(RUN_GENOMES)
SEED = 0
SPEC = InputSpec("gaussian", batch_size=2)

CHILD = textwrap.dedent('''
    import importlib.abc, importlib.util, json, sys

    FORBIDDEN = ("autoprox", "primitives", "deap", "sympy", "scipy", "joblib")  # torch itself may load numpy

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in FORBIDDEN:
                raise ImportError(f"the exported proxy imported {name}")
            return None

    job = json.loads(sys.argv[1])
    sys.meta_path.insert(0, Refuse())
    modules = {}
    for name, path in job["files"].items():
        spec = importlib.util.spec_from_file_location(f"proxy_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in FORBIDDEN)
    sys.meta_path.pop(0)

    import torch
    torch.set_num_threads(1)
    from autoprox.networks.models import build_model
    from autoprox.networks.statistics import InputSpec, derived_seed, make_batch

    scores = {}
    for arch_name, config in job["archs"].items():
        for name, module in modules.items():
            model = build_model(config, num_classes=100, seed=derived_seed(job["seed"], "model"))
            images, labels = make_batch(InputSpec("gaussian", job["batch"]), 100, job["seed"])
            try:
                scores[f"{arch_name}/{name}"] = module.score(model, images, labels)
            except ValueError as exc:  # InvalidResult: a proxy invalid on the other space's architecture
                scores[f"{arch_name}/{name}"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"scores": scores, "leaked": leaked}))
''')


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("exported")
    files = {}
    for name, genome in PROXIES.items():
        formula = readable_formula(genome, simplify=False)
        info = ExportInfo(source="runs/example", iteration=7, search_jcm=0.4321, kendall={"c100_kd": 0.5})
        files[name] = write_export(folder / f"{name}.py", export_source(genome, formula, info))
    return files


@pytest.fixture(scope="module")
def archs(af_small, pit_small):
    return {"autoformer": af_small.archs[3], "pit": pit_small.archs[2]}


@pytest.mark.slow
def test_exported_modules_reproduce_the_engine_in_a_fresh_interpreter(exported, archs):
    job = {"files": {n: str(p) for n, p in exported.items()}, "seed": SEED, "batch": SPEC.batch_size,
           "archs": {n: arch_to_config(a) for n, a in archs.items()}}
    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["leaked"] == [], "an exported module imported more than torch"
    checked = 0
    for arch_name, arch in archs.items():
        stats = compute_statistics(arch, SPEC, SEED, 100)  # fresh float32 statistics, not the float16 cache
        for name, genome in PROXIES.items():
            with torch_threads(1):
                engine = score_architecture(parse_genome(genome), stats, terminal_values(arch))
            got = answer["scores"][f"{arch_name}/{name}"]
            assert abs(got - engine) <= 1e-5 * abs(engine), (arch_name, name, got, engine)
            checked += 1
    assert checked == 2 * len(PROXIES)


def test_exported_module_imports_torch_only_and_documents_the_proxy(exported):
    source = exported["published"].read_text()
    tree = ast.parse(source)
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module.split(".")[0])
    assert imported == {"__future__", "math", "warnings", "torch"}
    doc = ast.get_docstring(tree)
    assert "score = 1/L * sum_l ( mean(frobenius(minmax(W_proj)) + 1/sqrt(1 + exp(-G_H_mlp))) )" in doc
    assert "source: runs/example" in doc and "search-split JCM: +0.4321" in doc and "exported: " in doc
    assert PUBLISHED in doc
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"score", "find_blocks", "block_statistics", "frobenius_norm", "min_max_normalize", "sigmoid",
            "element_wise_sqrt", "element_wise_sum", "to_mean_scalar"} <= defined
    assert "matrix_multiplication" not in defined, "only the primitives the genome uses are copied"


def _load(path):
    spec = importlib.util.spec_from_file_location(f"exported_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Attn(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return self.proj(weights @ v)


class _Mlp(torch.nn.Module):
    def __init__(self, dim, with_act):
        super().__init__()
        self.fc1 = torch.nn.Linear(dim, 2 * dim)
        if with_act:
            self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(2 * dim, dim)
        self.with_act = with_act

    def forward(self, x):
        hidden = self.fc1(x)
        hidden = self.act(hidden) if self.with_act else torch.nn.functional.gelu(hidden)
        return self.fc2(hidden)


class _TinyViT(torch.nn.Module):
    """A timm-named toy ViT: blocks[i].attn.qkv/proj, blocks[i].mlp.fc1/(act)/fc2."""

    def __init__(self, with_act, dim=8, depth=2):
        super().__init__()
        self.embed = torch.nn.Linear(4, dim)
        self.blocks = torch.nn.ModuleList()
        for _ in range(depth):
            block = torch.nn.Module()
            block.attn, block.mlp = _Attn(dim), _Mlp(dim, with_act)
            self.blocks.append(block)
        self.head = torch.nn.Linear(dim, 3)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = x + block.attn(x)
            x = x + block.mlp(x)
        return self.head(x.mean(dim=1))


def test_blocks_are_found_by_timm_names_with_or_without_mlp_act(exported):
    module = _load(exported["activations"])
    torch.manual_seed(0)
    with_act = _TinyViT(with_act=True)
    without_act = _TinyViT(with_act=False)
    without_act.load_state_dict(with_act.state_dict())
    inputs, targets = torch.randn(2, 5, 4), torch.tensor([0, 2])
    assert [n for n, _ in module.find_blocks(with_act)] == ["blocks.0", "blocks.1"]
    a = module.score(with_act, inputs, targets)
    b = module.score(without_act, inputs, targets)  # the hidden activation read as mlp.fc2's input
    assert a == pytest.approx(b, rel=1e-6)
    with_act.eval()
    module.score(with_act, inputs, targets)
    assert not with_act.training, "the model's mode is restored"
    stats = module.block_statistics(with_act, inputs, targets)
    assert stats[0]["F4"].shape == (5, 16) and stats[0]["F1"].shape == (24, 8)


class _NoAttentionViT(_TinyViT):
    """Blocks with timm's names whose forward skips attention: attn.qkv's weight gets no gradient."""

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = x + block.mlp(x)
        return self.head(x.mean(dim=1))


def test_a_frozen_model_is_scored_as_a_trainable_one_and_left_frozen(exported):
    """A fine-tuning setup freezes weights; the proxy still reads their gradients (was: AttributeError)."""
    module = _load(exported["autoprox_a_like"])  # reads F1g and F3g
    assert module.STATISTICS == ("F1g", "F3g")
    torch.manual_seed(0)
    model = _TinyViT(with_act=True)
    inputs, targets = torch.randn(2, 5, 4), torch.tensor([0, 2])
    expected = module.score(model, inputs, targets)
    model.blocks[0].attn.qkv.weight.requires_grad_(False)
    assert module.score(model, inputs, targets) == pytest.approx(expected, rel=1e-5)
    model.requires_grad_(False)
    assert module.score(model, inputs, targets) == pytest.approx(expected, rel=1e-5)
    assert not any(p.requires_grad or p.grad is not None for p in model.parameters())


def test_a_weight_the_forward_does_not_use_fails_only_a_proxy_that_reads_its_gradient(exported):
    torch.manual_seed(0)
    model, inputs, targets = _NoAttentionViT(with_act=True), torch.randn(2, 5, 4), torch.tensor([0, 2])
    assert math.isfinite(_load(exported["published"]).score(model, inputs, targets))  # F2 and F4g
    module = _load(exported["autoprox_a_like"])
    with pytest.raises(module.MissingStatistic, match=r"^blocks\.0\.attn\.qkv\.weight has no gradient .* F1g "):
        module.score(model, inputs, targets)


def test_a_model_without_transformer_blocks_is_refused_clearly(exported):
    module = _load(exported["published"])
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    with pytest.raises(module.NoTransformerBlocks, match=r"attn\.qkv, attn\.proj, mlp\.fc1"):
        module.score(model, torch.randn(2, 3, 4), torch.tensor([0, 1]))
    # the file defines the error classes autoprox's own runtime takes from autoprox.core.errors
    assert issubclass(module.NoTransformerBlocks, module.ModelError) and issubclass(module.ModelError, ValueError)


def test_the_cases_cover_every_aggregation_terminal_and_free_trees():
    from autoprox.genome.free import check_tree
    from autoprox.genome.tree import ARCH_TERMINALS, op_name

    trees = {name: parse_genome(genome) for name, genome in PROXIES.items()}
    assert {op_name(tree[0].name) for tree in trees.values()} == set(AGGREGATIONS)
    assert {n.name for tree in trees.values() for n in tree} >= set(ARCH_TERMINALS)
    free_space = GenomeSpace("free", AGGREGATIONS, arch_terminals=True)
    for name in ("pit_best_free", "autoformer_free"):
        check_tree(trees[name], free_space)  # a well-typed free tree of the issue-6 space ...
        with pytest.raises(GenomeError, match="not a template"):
            template_genes(trees[name])  # ... that no template can express
    committed = {"pit_best_free": "pit-best", "autoformer_free": "ablation/autoformer-free-gene-arch-cv",
                 "autoformer_gene_arch": "ablation/autoformer-gene-arch-cv",
                 "pit_gene_arch": "ablation/pit-gene-arch-cv"}
    for name, run in committed.items():
        best = RUNS / run / "best.json"
        if best.is_file():
            assert json.loads(best.read_text())["genome"] == RUN_GENOMES[name]


def test_exported_module_documents_its_aggregation_and_terminals(exported):
    module = _load(exported["every_descriptor"])
    assert module.AGGREGATION == "block_wmean"
    assert set(module.DESCRIPTORS) == set(module.DESCRIPTOR_NAMES) == set(DESCRIPTORS)
    assert len(module.ARCH_TERMINALS) == 12
    doc = module.__doc__
    assert "Over blocks (block_wmean): The depth-weighted mean" in doc
    assert "A_log_params = log of the parameter count (100-class head)" in doc
    plain = _load(exported["published"])
    assert plain.ARCH_TERMINALS == () and plain.DESCRIPTORS == () and plain.AGGREGATION == "block_mean"
    assert "Architecture-level terminals" not in plain.__doc__


@pytest.mark.slow
def test_descriptors_read_from_the_models_equal_the_engines(exported, af_small, pit_small):
    """Parameters, MACs, depth, width, heads and MLP ratio of real models, read by the exported
    module, equal autoprox.spaces.descriptors' values from the configs, to the last bit."""
    from autoprox.networks.models import build_model

    module = _load(exported["every_descriptor"])
    images = torch.randn(1, 3, 224, 224)
    checked = 0
    with torch_threads(1):
        for bench in (af_small, pit_small):
            for arch in bench.archs:
                model = build_model(arch, num_classes=100, seed=0)
                values = module.architecture_descriptors(model, images)
                assert values == describe(arch), arch
                tensors = module.terminal_values(values)
                assert {k: v.item() for k, v in tensors.items()} == {
                    k: torch.tensor(v, dtype=torch.float32).item() for k, v in terminal_values(arch).items()}
                checked += 1
            # another head: resized to the engine's 100 classes by default, counted as it is with None
            arch = bench.archs[0]
            model = build_model(arch, num_classes=10, seed=0)
            assert module.architecture_descriptors(model, torch.randn(2, 3, 224, 224)) == describe(arch)
            assert module.architecture_descriptors(model, images, head_classes=None) == describe(arch, 10)
    assert checked == len(af_small.archs) + len(pit_small.archs)


@pytest.mark.slow
def test_descriptors_can_be_given_when_the_model_does_not_tell(exported, af_small):
    from autoprox.networks.models import build_model

    module = _load(exported["every_descriptor"])
    torch.manual_seed(0)
    tiny = _TinyViT(with_act=True)  # its attention has no num_heads
    inputs, targets = torch.randn(2, 5, 4), torch.tensor([0, 2])
    with pytest.raises(module.UnknownDescriptors, match=r"attn\.num_heads.*descriptors=\{'heads'"):
        module.score(tiny, inputs, targets)
    value = module.score(tiny, inputs, targets, descriptors={"heads": 2})
    read = module.architecture_descriptors(tiny, inputs, descriptors={"heads": 2})
    assert read["heads"] == 2.0 and read["depth"] == 2.0 and read["width"] == 8.0 and read["mlp_ratio"] == 2.0
    # 4->8 embed, per block qkv/proj/fc1/fc2 and 2 x 5^2 x 8 for the attention; a 100-class head on one row
    assert read["macs"] == 5 * 4 * 8 + 2 * (5 * (8 * 24 + 8 * 8 + 8 * 16 + 16 * 8) + 2 * 25 * 8) + 8 * 100
    assert read["params"] == sum(p.numel() for p in tiny.parameters()) + (100 - 3) * (8 + 1)
    stats = module.block_statistics(tiny, inputs, targets)
    assert value == module.score_statistics(stats, module.terminal_values(read))
    with pytest.raises(module.UnknownDescriptors, match="pass their values"):
        module.score_statistics(stats)

    class Doubled(torch.nn.Module):  # its output is not a Linear layer's: the head cannot be resized
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return 2 * self.inner(x)

    with pytest.raises(module.UnknownDescriptors, match="head_classes=None"):
        module.score(Doubled(tiny), inputs, targets, descriptors={"heads": 2})
    module.score(Doubled(tiny), inputs, targets, descriptors={"heads": 2}, head_classes=None)
    for bad in ({"heads": 0}, {"heads": float("nan")}, {"layers": 3}, {"A_log_params": 1.0}):
        with pytest.raises(ValueError):
            module.score(tiny, inputs, targets, descriptors=bad)

    arch = af_small.archs[0]  # given values replace what is read; the engine's values change nothing
    from autoprox.networks.statistics import derived_seed, make_batch

    images, labels = make_batch(SPEC, 100, SEED)
    model = build_model(arch, num_classes=100, seed=derived_seed(SEED, "model"))
    with torch_threads(1):
        assert module.score(model, images, labels) == module.score(model, images, labels, descriptors=describe(arch))


def run_cli(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_export_cli_from_a_proxy_json_and_its_errors(capsys, tmp_path):
    proxy = tmp_path / "proxy.json"
    proxy.write_text(json.dumps({"genome": PUBLISHED, "run": "runs/somewhere", "search": {"jcm": 0.25}}))
    out = tmp_path / "out" / "proxy.py"
    code, text, err = run_cli(capsys, "export", str(proxy), "--out", str(out), "--no-simplify")
    assert code == 0, err
    assert "wrote" in text and out.is_file()
    doc = ast.get_docstring(ast.parse(out.read_text()))
    assert "source: runs/somewhere" in doc and "search-split JCM: +0.2500" in doc

    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"genome": "block_mean(to_mean_scalar(fancy_op(F1)))"}))
    code, _, err = run_cli(capsys, "export", str(unknown), "--out", str(tmp_path / "x.py"))
    assert code == 2 and err.startswith("autoprox: error:") and "fancy_op" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "x.py").exists()

    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code, _, err = run_cli(capsys, "export", str(proxy), "--out", str(blocker / "proxy.py"), "--no-simplify")
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys, "export", str(proxy), "--out", str(tmp_path), "--no-simplify")
    assert code == 2 and "is a directory" in err

    code, _, err = run_cli(capsys, "export", str(tmp_path / "out"), "--out", str(tmp_path / "y.py"))
    assert code == 2 and "not a run directory" in err


def test_export_cli_from_a_run_directory(capsys, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"space": "autoformer", "settings": {}, "split": {}}))
    best = {"genome": PROXIES["matmul_softmax"], "iteration": 12, "space": "autoformer",
            "search": {"jcm": 0.31, "targets": {"c100_kd": {"kendall": 0.4}}}, "test": {"jcm": 0.22},
            "written": "2026-01-01T00:00:00+00:00", "finished": True}
    (run / "best.json").write_text(json.dumps(best))
    out = tmp_path / "proxy.py"
    code, text, err = run_cli(capsys, "export", str(run), "--out", str(out), "--no-simplify")
    assert code == 0, err
    module = _load(out)
    assert module.GENOME == PROXIES["matmul_softmax"]
    assert module.PROVENANCE["search_jcm"] == 0.31 and module.PROVENANCE["test_jcm"] == 0.22
    assert module.PROVENANCE["iteration"] == 12 and module.PROVENANCE["source"] == str(run)


def test_export_of_a_run_without_best_json_says_it_exports_the_hall_of_fames_first(capsys, run_copy, tmp_path):
    """A run whose best.json is missing (in progress, or removed) still exports, as show and report still show
    it, but a line on stderr says that the hall of fame's first entry is exported instead; --rank says so itself."""
    from autoprox.search.halloffame import load_hall_of_fame

    (run_copy / "best.json").unlink()
    first = load_hall_of_fame(run_copy).hall.entries[0]
    out = tmp_path / "proxy.py"
    code, _, err = run_cli(capsys, "export", str(run_copy), "--out", str(out), "--no-simplify")
    assert code == 0, err
    assert err.splitlines() == [f"autoprox: warning: {run_copy} has no best.json: exporting the hall of fame's "
                                f"first entry (iteration {first.iteration}) instead; a search writes best.json when "
                                "it ends or stops, and --rank N exports another entry"]
    assert _load(out).GENOME == first.genome
    code, _, err = run_cli(capsys, "export", str(run_copy), "--rank", "1", "--out", str(out), "--no-simplify")
    assert code == 0 and err == ""


RUNS = REPO / "runs"
REFERENCE_RUNS = sorted(p.parent for p in RUNS.glob("*-reference/best.json"))
#: The committed runs of issue 6: other aggregations, architecture terminals, free trees.
ISSUE6_RUNS = sorted(p.parent for p in [*RUNS.glob("*-best/best.json"), *RUNS.glob("ablation/*/best.json")])


@pytest.mark.slow
@pytest.mark.skipif(not REFERENCE_RUNS, reason="no committed reference run")
def test_reference_runs_export_proxies_that_reproduce_the_engine(capsys, tmp_path, af_small, pit_small):
    files, genomes, spaces = {}, {}, {}
    for run in REFERENCE_RUNS + ISSUE6_RUNS:
        best = json.loads((run / "best.json").read_text())
        key = f"{run.parent.name}_{run.name}".replace("-", "_")
        out = tmp_path / f"{key}.py"
        code, _, err = run_cli(capsys, "export", str(run), "--out", str(out), "--no-simplify")
        assert code == 0, (run, err)
        files[key], genomes[key], spaces[key] = str(out), best["genome"], best["space"]
    archs = {"autoformer": af_small.archs[1], "pit": pit_small.archs[1]}
    job = {"files": files, "seed": SEED, "batch": SPEC.batch_size,
           "archs": {name: arch_to_config(arch) for name, arch in archs.items()}}
    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)["scores"]
    stats = {space: compute_statistics(arch, SPEC, SEED, 100) for space, arch in archs.items()}
    for key, genome in genomes.items():
        space = spaces[key]
        with torch_threads(1):
            engine = score_architecture(parse_genome(genome), stats[space], terminal_values(archs[space]))
        assert abs(scores[f"{space}/{key}"] - engine) <= 1e-5 * abs(engine), (key, scores[f"{space}/{key}"], engine)


def test_export_out_a_link_writes_its_target_and_a_loop_of_links_is_refused(capsys, tmp_path):
    """``--out LINK`` used to replace the link by a regular file, and a loop of links was "wrote", exit 0.
    A link to a file of the user's is refused like the file itself: export replaces only a module it wrote."""
    target = tmp_path / "real" / "proxy.py"
    target.parent.mkdir()
    link = tmp_path / "proxy.py"
    link.symlink_to(target)
    for _ in range(2):  # a link to nothing yet, then a link to the module written the first time
        code, text, err = run_cli(capsys, "export", PUBLISHED, "--out", str(link), "--no-simplify")
        assert code == 0, err
        assert link.is_symlink() and link.resolve() == target.resolve() and "GENOME" in target.read_text()
    target.write_text("previous content\n")
    code, text, err = run_cli(capsys, "export", PUBLISHED, "--out", str(link), "--no-simplify")
    assert code == 2 and "was not written by `autoprox export`" in err and len(err.strip().splitlines()) == 1
    assert link.is_symlink() and target.read_text() == "previous content\n"
    (tmp_path / "loopA").symlink_to(tmp_path / "loopB")
    (tmp_path / "loopB").symlink_to(tmp_path / "loopA")
    code, text, err = run_cli(capsys, "export", PUBLISHED, "--out", str(tmp_path / "loopA"), "--no-simplify")
    assert code == 2 and text == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"autoprox: error: cannot write {tmp_path / 'loopA'}: it goes through a loop of symbolic links")
    assert (tmp_path / "loopA").is_symlink() and os.readlink(tmp_path / "loopA") == str(tmp_path / "loopB")


def test_an_exported_weighted_formula_carries_the_engines_transforms_and_matches_it(tmp_path):
    """The exported weighted formula copies the engine's r, lr and z (it once kept a second copy of them): with ties,
    gaps, mixed and negative signs, every transform and rerank, its scores equal the engine's to the last digit."""
    import numpy as np

    from autoprox.genome.rank_formula import transforms_source
    from autoprox.genome.weighted import WeightedFormula, parse_weighted
    from autoprox.reports.weighted_export import weighted_export_source

    terms = parse_weighted("weighted(mul(z(a), rerank(lr(c))), max(z(b), neg(r(a))), z(c))").terms
    formula = WeightedFormula(("a", "b", "c", "absent"), terms, (0.5, -1.0, 0.25, 2.0, 0.7, -0.3, 1.1), 0.2, "lr")
    rng = np.random.default_rng(0)
    columns = {"a": list(rng.normal(size=40).round(1)), "b": list(-np.exp(rng.normal(size=40))),
               "c": list(np.exp(rng.normal(size=40)))}
    columns["a"][3], columns["c"][7] = None, float("nan")
    source = weighted_export_source(formula)
    assert transforms_source() in source
    (tmp_path / "weighted.py").write_text(source)
    spec = importlib.util.spec_from_file_location("exported_transforms", tmp_path / "weighted.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = formula.score({n: np.array([np.nan if v is None else v for v in vs]) for n, vs in columns.items()})
    assert np.array_equal(module.score(columns), expected)


@pytest.mark.slow
def test_the_manuals_recipe_gives_an_exported_proxy_the_score_autoprox_score_writes(capsys, tmp_path, pit_bench,
                                                                                   session_cache):
    """docs/manual.md (*Export*, the value of one model): the engine's model and minibatch for --stat-seeds 0, given
    to the exported module, give `score`'s value (to the float16 cache's precision)."""
    import autoprox
    from autoprox.data.benchmark import write_benchmark_jsonl
    from autoprox.networks.statistics import derived_seed, make_batch

    bench = tmp_path / "pit3.jsonl"
    write_benchmark_jsonl(pit_bench.subset([0, 1, 2]), bench)
    run = RUNS / "pit-reference"
    code, _, err = run_cli(capsys, "export", str(run), "--out", str(tmp_path / "proxy.py"))
    assert code == 0, err
    code, _, err = run_cli(capsys, "score", "--proxy", str(run / "best.json"), "--bench", str(bench), "--workers", "1",
                           "--cache-dir", str(session_cache.root), "--out", str(tmp_path / "s.csv"))
    assert code == 0, err
    module = _load(tmp_path / "proxy.py")
    rows = (tmp_path / "s.csv").read_text().splitlines()[1:]
    assert len(rows) == 3
    for arch, row in zip(pit_bench.subset([0, 1, 2]).archs, rows):
        model = autoprox.build_vit(arch, seed=derived_seed(0, "model"))
        images, labels = make_batch(InputSpec(), 100, 0)
        assert module.score(model, images, labels) == pytest.approx(float(row.rsplit(",", 1)[1]), rel=1e-4)


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize("as_file", [False, True], ids=["run", "best.json"])
@pytest.mark.parametrize("edit", [
    {"search": {"jcm": 0.1, "targets": "c100_kd"}},  # AttributeError: 'str' object has no attribute 'items'
    {"stats": {"input": 5, "seeds": [0]}},  # AttributeError: 'int' object has no attribute 'get'
    {"stats": {"seeds": [0], "note": _nested(300)}},  # the module did not parse: too many nested parentheses
], ids=["targets-a-string", "input-a-number", "stats-300-deep"])
def test_export_reads_a_hand_edited_best_json_s_provenance_as_far_as_it_goes(capsys, run_copy, tmp_path, edit,
                                                                             as_file):
    """A ``best.json`` whose provenance fields were edited to the wrong type ended ``export`` in an AttributeError
    traceback, and one whose ``stats`` nested 300 deep in a RuntimeError (the module it wrote did not parse). The
    genome is what is exported; a provenance field that is not what the engine writes is left out."""
    best = run_copy / "best.json"
    best.write_text(json.dumps({**json.loads(best.read_text()), **edit}))
    out = tmp_path / "proxy.py"
    code, _, err = run_cli(capsys, "export", str(best if as_file else run_copy), "--out", str(out), "--no-simplify")
    assert code == 0 and "Traceback" not in err, err
    provenance = _load(out).PROVENANCE  # the module parses and imports
    assert provenance["stats"]["seeds"] == [0]
    assert (provenance["search_kendall"] == {}) == ("search" in edit)


@pytest.mark.parametrize("as_file", [False, True], ids=["text", "file"])
def test_export_of_a_rank_formula_says_it_is_one(capsys, tmp_path, as_file):
    """``export rf.json`` of a rank-formula file (or ``export 'r(params)'``) said ``is a built-in proxy, not a
    genome``: it names the rank formula."""
    source = "r(params)"
    if as_file:
        source = str(tmp_path / "rf.json")
        Path(source).write_text(json.dumps({"format": "autoprox-rank-formula/1", "formula": "r(params)"}))
    code, _, err = run_cli(capsys, "export", source, "--out", str(tmp_path / "p.py"))
    assert code == 2 and err == (f"autoprox: error: {source} is a rank formula (r(params)), not a genome: export "
                                 "writes a genome's module of the statistics, and a rank formula has none\n")
    assert not (tmp_path / "p.py").exists()
