"""Export: a standalone torch-only module whose score equals the engine's, in a fresh interpreter."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from autoprox.cli import main
from autoprox.export import ExportInfo, export_source, write_export
from autoprox.genome import parse_genome, score_architecture
from autoprox.simplify import readable_formula
from autoprox.spaces import arch_to_config
from autoprox.statistics import InputSpec, compute_statistics, torch_threads

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
}
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
    from autoprox.models import build_model
    from autoprox.statistics import InputSpec, derived_seed, make_batch

    scores = {}
    for arch_name, config in job["archs"].items():
        for name, module in modules.items():
            model = build_model(config, num_classes=100, seed=derived_seed(job["seed"], "model"))
            images, labels = make_batch(InputSpec("gaussian", job["batch"]), 100, job["seed"])
            scores[f"{arch_name}/{name}"] = module.score(model, images, labels)
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
                engine = score_architecture(parse_genome(genome), stats)
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
    assert imported == {"__future__", "math", "torch"}
    doc = ast.get_docstring(tree)
    assert "score = 1/L * sum_l ( mean(frobenius(minmax(W_proj)) + 1/sqrt(1 + exp(-G_A_mlp))) )" in doc
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


def test_a_model_without_transformer_blocks_is_refused_clearly(exported):
    module = _load(exported["published"])
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    with pytest.raises(module.NoTransformerBlocks, match=r"attn\.qkv, attn\.proj, mlp\.fc1"):
        module.score(model, torch.randn(2, 3, 4), torch.tensor([0, 1]))


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


REFERENCE_RUNS = sorted(p.parent for p in (Path(__file__).resolve().parent.parent / "runs").glob("*-reference/best.json"))


@pytest.mark.skipif(not REFERENCE_RUNS, reason="no committed reference run")
def test_reference_runs_export_proxies_that_reproduce_the_engine(capsys, tmp_path, af_small, pit_small):
    files, archs, genomes = {}, {}, {}
    for run in REFERENCE_RUNS:
        best = json.loads((run / "best.json").read_text())
        out = tmp_path / f"{run.name}.py"
        code, _, err = run_cli(capsys, "export", str(run), "--out", str(out), "--no-simplify")
        assert code == 0, err
        files[run.name] = str(out)
        genomes[run.name] = best["genome"]
        archs[run.name] = (af_small if best["space"] == "autoformer" else pit_small).archs[1]
    job = {"files": files, "seed": SEED, "batch": SPEC.batch_size,
           "archs": {name: arch_to_config(arch) for name, arch in archs.items()}}
    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    scores = json.loads(result.stdout)["scores"]
    for name, arch in archs.items():
        stats = compute_statistics(arch, SPEC, SEED, 100)
        with torch_threads(1):
            engine = score_architecture(parse_genome(genomes[name]), stats)
        assert abs(scores[f"{name}/{name}"] - engine) <= 1e-5 * abs(engine)
