"""The command line: rank's table and JSON, cache build, and one-line errors for bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from autoprox.cli.main import build_parser, main
from autoprox.data.benchmark import write_benchmark_jsonl
from autoprox.search.evolution import EvolutionConfig
from tests.conftest import AF_FILE, PIT_FILE, REPO

#: Kendall tau-b of the parameter count, as printed in the benchmark's README (autoprox/resources/vit-bench-101/README.md).
README_PARAMS_KENDALL = {
    AF_FILE: {"c100_kd": 0.548, "flower_kd": 0.700, "chaoyang_kd": 0.315, "imagenet_super": -0.218, "c100_base": -0.324},
    PIT_FILE: {"c100_kd": 0.817, "flower_kd": 0.865, "chaoyang_kd": 0.564, "c100_base": 0.716},
}
AUTOFORMER_FILE = REPO / "examples" / "spaces" / "autoformer-ti.json"
PUBLISHED = ("block_mean(to_mean_scalar(element_wise_sum(frobenius_norm(min_max_normalize(F2)), "
             "element_wise_sqrt(sigmoid(F4g)))))")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("bench_file", [AF_FILE, PIT_FILE], ids=["autoformer", "pit"])
def test_rank_params_reproduces_the_benchmark_readme(capsys, bench_file):
    code, out, _ = run_cli(capsys, "rank", "--proxy", "params", "--bench", str(bench_file), "--json")
    assert code == 0
    result = json.loads(out)
    for target, kendall in README_PARAMS_KENDALL[bench_file].items():
        assert round(result[target]["kendall"], 3) == kendall
        assert result[target]["n"] == 100
        assert {"kendall", "spearman", "pearson", "n", "kendall_with_params", "bar", "beats_bar"} <= set(result[target])


def test_rank_table_and_splits(capsys):
    code, out, _ = run_cli(capsys, "rank", "--proxy", "flops", "--bench", str(PIT_FILE), "--split", "test")
    assert code == 0
    assert "split test, 40 architectures" in out
    assert "c100_kd" in out and "kendall" in out


@pytest.fixture(scope="module")
def small_jsonl(af_small, tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "af16.jsonl"
    write_benchmark_jsonl(af_small.subset(range(8)), path)
    return path


@pytest.mark.slow
def test_rank_a_genome_and_a_proxy_file(capsys, small_jsonl, session_cache, tmp_path):
    common = ["--bench", str(small_jsonl), "--batch-size", "2", "--cache-dir", str(session_cache.root),
              "--workers", "1", "--json", "--targets", "c100_kd,flower_kd"]
    code, out, _ = run_cli(capsys, "rank", "--proxy", PUBLISHED, *common)
    assert code == 0
    from_string = json.loads(out)
    assert set(from_string) == {"c100_kd", "flower_kd"} and from_string["c100_kd"]["n"] == 8
    proxy_file = tmp_path / "best.json"
    proxy_file.write_text(json.dumps({"genome": PUBLISHED}))
    code, out, _ = run_cli(capsys, "rank", "--proxy", str(proxy_file), *common)
    assert code == 0 and json.loads(out) == from_string


@pytest.mark.slow
def test_cache_build_reports_what_it_computed(capsys, small_jsonl, tmp_path):
    args = ["cache", "build", "--bench", str(small_jsonl), "--batch-size", "1", "--cache-dir", str(tmp_path),
            "--workers", "2", "--targets", "c100_kd"]
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "8 computed" in out
    assert len(list(tmp_path.rglob("*.npz"))) == 8
    code, out, _ = run_cli(capsys, *args)
    assert code == 0 and "0 computed" in out and "8 already cached" in out


def _bad_pth(tmp_path):
    path = tmp_path / "weights.pth"
    torch.save({"w": torch.zeros(2)}, path)
    return path


@pytest.mark.parametrize(
    "argv_factory, message",
    [
        (lambda p: ["rank", "--proxy", "params", "--bench", str(p / "missing.pth")], "not found"),
        (lambda p: ["rank", "--proxy", "params", "--bench", str(_bad_pth(p))], "list of benchmark entries"),
        (lambda p: ["rank", "--proxy", "params", "--bench", str(AF_FILE), "--targets", "c10_kd"], "unknown target 'c10_kd'"),
        (lambda p: ["rank", "--proxy", "block_mean(to_mean_scalar(F9))", "--bench", str(AF_FILE)], "unknown token 'F9'"),
        (lambda p: ["rank", "--proxy", "snip_like_thing", "--bench", str(AF_FILE)], "unknown proxy"),
        (lambda p: ["rank", "--proxy", str(p / "nothing.json"), "--bench", str(AF_FILE)], "proxy file not found"),
        (lambda p: ["search", "--resume", "--out", str(p)], "not a run directory"),
        (lambda p: ["search", "--bench", str(AF_FILE), "--input", "images:" + str(p / "none"), "--out", str(p / "r")],
         "image folder not found"),
    ],
    ids=["missing-file", "not-a-benchmark", "unknown-target", "unknown-token", "unknown-proxy", "missing-proxy-file",
         "resume-non-run", "missing-image-folder"],
)
def test_user_errors_are_one_line_with_status_2(capsys, tmp_path, argv_factory, message):
    code, out, err = run_cli(capsys, *argv_factory(tmp_path))
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[-1].startswith("autoprox: error:") and message in lines[-1]
    assert "Traceback" not in err


@pytest.mark.parametrize("argv, expects", [
    (["show", "{p}"], "(give a run directory)"),
    (["curves", "{p}", "--out", "{tmp}/c.png"], "(give a run directory)"),
    (["report", "{p}", "--out", "{tmp}/r.html"], "(give a run directory or a protocol directory)"),
    (["report", "{p}", "--serve", "--port", "0"], "(give a run directory or a protocol directory)"),
    (["export", "{p}", "--out", "{tmp}/x.py"], "(export takes a run directory, a proxy JSON"),
    (["export", "{p}", "--rank", "2", "--out", "{tmp}/x.py"], "(--rank needs a run directory)"),
    (["select", "{p}", "--selection", "cv-pick", "--out", "{tmp}/s.json"], "(give a finished run directory)"),
])
def test_a_path_that_does_not_exist_is_said_not_to_exist(capsys, tmp_path, argv, expects):
    """A mistyped run directory is said to name nothing, not to be a folder without config.json, a malformed
    genome or no directory; nothing is written."""
    missing = tmp_path / "runs" / "pit-reference"
    code, out, err = run_cli(capsys, *[a.format(p=missing, tmp=tmp_path) for a in argv])
    assert code == 2 and out == ""
    assert err.strip().startswith(f"autoprox: error: {missing}: no such file or folder {expects}")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_malformed_arch_in_a_benchmark_names_entry_and_key(capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    good = {"arch": {"base_dim": 16, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]}, "c100_kd_acc": 70.0}
    bad = {"arch": {"base_dim": 17, "mlp_ratio": 6, "depth": [2, 8, 4], "num_heads": [2, 4, 4]}, "c100_kd_acc": 71.0}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    code, _, err = run_cli(capsys, "rank", "--proxy", "params", "--bench", str(path))
    assert code == 2 and "entry 1" in err and "base_dim" in err


# --- the proxy zoo and the ranking table (issue 3) -------------------------------------


@pytest.mark.slow
def test_rank_table_of_a_comma_list_in_each_format(capsys, small_jsonl, session_cache):
    common = ["--bench", str(small_jsonl), "--batch-size", "2", "--cache-dir", str(session_cache.root),
              "--workers", "1", "--targets", "c100_kd"]
    code, out, err = run_cli(capsys, "rank", "--proxy", "params,synflow,autoprox_p", *common)
    assert code == 0 and "ranking 3 proxies on 8 architectures" in err
    assert "| proxy | target | Kendall |" in out and "| synflow | c100_kd |" in out and "| autoprox_p | c100_kd |" in out
    code, out, _ = run_cli(capsys, "rank", "--proxy", "params,synflow", "--seeds", "0,1", "--format", "csv", *common)
    assert code == 0 and out.splitlines()[0].startswith("proxy,kind,target,n,kendall_mean,kendall_std")
    assert len(out.splitlines()) == 3
    code, out, _ = run_cli(capsys, "rank", "--proxy", "synflow", "--seeds", "0", "--format", "json", *common)
    table = json.loads(out)
    assert table["seeds"] == [0] and table["proxies"][0]["proxy"] == "synflow"


@pytest.mark.slow
def test_rank_single_zoo_proxy_keeps_the_single_proxy_output(capsys, small_jsonl, session_cache):
    common = ["--bench", str(small_jsonl), "--batch-size", "2", "--cache-dir", str(session_cache.root),
              "--workers", "1", "--targets", "c100_kd,flower_kd"]
    code, out, err = run_cli(capsys, "rank", "--proxy", "tvt", "--json", *common)
    assert code == 0 and "no teacher given" in err
    result = json.loads(out)
    assert set(result) == {"c100_kd", "flower_kd"} and {"kendall", "spearman", "pearson", "n", "partial_given_depth"} <= set(result["c100_kd"])
    code, out, _ = run_cli(capsys, "rank", "--proxy", "tvt_l2", "--json", *common)
    assert json.loads(out) == result


def test_rank_unknown_name_in_a_list_names_the_known_ones(capsys):
    code, _, err = run_cli(capsys, "rank", "--proxy", "params,snipp", "--bench", str(AF_FILE))
    assert code == 2 and "unknown proxy 'snipp'" in err and "snip, grasp, synflow" in err and "autoprox_p" in err


@pytest.mark.slow
def test_search_seed_proxies_autoprox_a_and_p_and_refusals(capsys, small_jsonl, session_cache, tmp_path):
    from autoprox.proxies.proxy import AUTOPROX_A, AUTOPROX_P
    from autoprox.search.rundir import RunDirectory

    common = ["search", "--bench", str(small_jsonl), "--batch-size", "2", "--cache-dir", str(session_cache.root),
              "--workers", "1", "--population", "3", "--iterations", "0", "--search-fraction", "0.75", "--quiet"]
    code, out, err = run_cli(capsys, *common, "--out", str(tmp_path / "run"), "--seed-proxies", "autoprox_a,autoprox_p")
    assert code == 0, err
    run = RunDirectory(tmp_path / "run")
    assert run.config()["settings"]["seed_proxies"] == [AUTOPROX_A, AUTOPROX_P]
    evaluated = [r["genome"] for r in run.evaluations()]
    assert evaluated[:2] == [AUTOPROX_A, AUTOPROX_P]
    code, _, err = run_cli(capsys, *common, "--out", str(tmp_path / "no"), "--seed-proxies", "autoprox_a,snip")
    assert code == 2 and "snip cannot seed the search: it is a hand-crafted proxy" in err
    assert not (tmp_path / "no").exists()
    code, _, err = run_cli(capsys, *common, "--out", str(tmp_path / "no"), "--seed-proxies", "params")
    assert code == 2 and "computed from the architecture alone" in err


# ------------------------------------------------------- issue 32, bug 1: a path part over 255 bytes
LONG = "x" * 300  # one path part longer than NAME_MAX (255 bytes on ext4, tmpfs, xfs, btrfs)


def _long_name_commands(root):
    long = str(root / LONG)
    pit_run = str(REPO / "runs" / "pit-reference")
    quick_search = ["search", "--bench", str(PIT_FILE), "--iterations", "1", "--quiet", "--batch-size", "2"]
    return {
        "show": ["show", LONG],  # a genome pasted where the run directory goes
        "report": ["report", long],
        "curves": ["curves", long, "--out", str(root / "c.png")],
        "select": ["select", long, "--out", str(root / "s.json")],
        "spaces --space-file": ["spaces", "--space-file", long],
        "search --out": [*quick_search, "--out", long],
        "search --cache-dir": [*quick_search, "--out", str(root / "run"), "--cache-dir", long],
        "vit-search --out": ["vit-search", "--space", "pit", "--proxy", "params", "--samples", "2", "--out", long],
        "report --out": ["report", pit_run, "--out", long + ".html", "--no-simplify"],
    }


@pytest.mark.parametrize("command", list(_long_name_commands(Path("/r"))))
def test_a_path_part_longer_than_the_file_system_allows_is_one_line(command, capsys, tmp_path, monkeypatch):
    """Issue 32, bug 1: each used to end in an ``OSError: [Errno 36] File name too long`` traceback."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *_long_name_commands(tmp_path)[command])
    assert code == 2, err
    assert "Traceback" not in err and "Errno" not in err
    lines = [line for line in err.strip().splitlines() if line.startswith("autoprox: error:")]
    assert len(lines) == 1 and lines[0] == err.strip().splitlines()[-1], err
    assert re.match(r"autoprox: error: path too long \(a part of 30\d bytes, where the file system allows 255", lines[0])
    assert not (tmp_path / "run").exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_evaluate_help_names_every_selection_rule(capsys):
    """Issue 32: ``evaluate --help`` left cv-pick-wide out of --selection (its text was written by hand; issue 42:
    it is read from the registry)."""
    from autoprox.apps.selection import SELECTIONS
    from autoprox.cli.command_options import EVALUATE_OPTIONS

    text = next(o.help_text for o in EVALUATE_OPTIONS if o.name == "selection")
    assert [name for name in SELECTIONS if not re.search(rf"(^|[ ,(]){re.escape(name)} \(", text)] == []
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    shown = capsys.readouterr().out.split()
    assert all(any(name in word for word in shown) for name in SELECTIONS)  # and not broken at a hyphen


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--margin", "--sample-ratio", "--gene-probability", "--search-fraction"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_numbers_are_refused(capsys, option, value):
    with pytest.raises(SystemExit) as info:
        main(["search", "--bench", str(PIT_FILE), f"{option}={value}"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"argument {option}: expected a finite number, got '{value}'" in err
    with pytest.raises(SystemExit):
        main(["search", "--bench", str(PIT_FILE), "--weights", f"c100_kd={value}"])
    with pytest.raises(Exception, match="margin must be a finite number"):
        EvolutionConfig(margin=float(value))


def _option_helps(parser) -> dict[str, str]:
    """``--option`` -> its help text as printed, for every command."""
    import argparse

    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update({f"{name} {k}": v for k, v in _option_helps(sub).items()})
        elif action.option_strings:
            found[action.option_strings[-1]] = parser._get_formatter()._expand_help(action) if action.help else ""
    return found


@pytest.mark.slow
def test_help_states_each_default_once(capsys):
    helps = _option_helps(build_parser())
    assert helps["search --population"] == "genomes in the population (default 20)"
    assert helps["search --iterations"].count("default") == 1
    assert helps["search --stat-seeds"].count("default") == 1
    for option, text in helps.items():
        assert text.count("(default") <= 1, (option, text)  # argparse's "(default: ...)" after our own "(default ...)"
        assert not text.endswith("(default: None)") and "default None" not in text, (option, text)
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "(default: None)" not in capsys.readouterr().out


def _unusable_outs(root: Path) -> dict[str, str]:
    (root / "loopA").symlink_to("loopB")
    (root / "loopB").symlink_to("loopA")
    (root / "dangling").symlink_to("nowhere")
    (root / "file").write_text("not a folder")
    return {"loopA": "it goes through a loop of symbolic links", "loopA/run": "loop of symbolic links",
            "dangling": "it is a symbolic link to nowhere, which does not exist",
            "file/run": "it, or a folder above it, is a file"}


def test_an_unusable_out_is_refused_in_one_line_by_every_command(capsys, tmp_path, monkeypatch):
    from tests.conftest import PIT_FILE

    monkeypatch.chdir(tmp_path)
    for out, why in _unusable_outs(tmp_path).items():
        for command in (["search", "--bench", str(PIT_FILE), "--iterations", "1", "--quiet"],
                        ["vit-search", "--space", "pit", "--proxy", "params", "--samples", "2"]):
            code, _, err = run_cli(capsys, *command, "--out", out)
            assert code == 2, (command, out, err)
            errors = [line for line in err.splitlines() if line.startswith("autoprox: error: ")]
            assert errors == [err.strip().splitlines()[-1]] and "Traceback" not in err
            assert errors[0].startswith(f"autoprox: error: {out} cannot be a folder: ") and why in errors[0]
            assert errors[0].endswith("; choose another --out")
    assert (tmp_path / "file").read_text() == "not a folder"
    assert not (tmp_path / "nowhere").exists()


def test_a_huge_genome_is_not_echoed_whole(capsys):
    genome = "foo" * 35_000  # 105 KB
    code, _, err = run_cli(capsys, "rank", "--proxy", genome, "--space", "pit")
    assert code == 2 and err.count("\n") == 1
    assert len(err) < 2_000 and __import__("re").search(r"foo\.\.\. \(105,00\d characters\)", err)


def test_spaces_cuts_a_huge_description(capsys, tmp_path):
    definition = json.loads(AUTOFORMER_FILE.read_text()) | {"name": "wordy", "description": "many words " * 1_000_000}
    path = tmp_path / "wordy.json"
    path.write_text(json.dumps(definition))
    code, out, _ = run_cli(capsys, "spaces", "wordy", "--space-file", str(path))
    assert code == 0 and len(out) < 5_000
    assert "... (cut: 10,999,999 characters; --json shows it whole)" in out


def test_help_shows_no_percent_escapes_or_rst(capsys):
    from autoprox.cli.main import COMMANDS

    for command in [[], *([name] for name in COMMANDS)]:
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        text = capsys.readouterr().out
        assert "%%" not in text and "``" not in text, command


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_says_so(capsys, tmp_path, af_small_file):
    for argv in (["search", "--bench", str(af_small_file), "--out", str(tmp_path / "run")],
                 ["rank", "--proxy", "params", "--bench", str(af_small_file)]):
        code, _, err = run_cli(capsys, *argv, "--device", "cuda")
        assert code == 2 and "cache build" not in err
        assert err.strip().startswith("autoprox: error: --device cuda: CUDA is not available on this machine")


@pytest.mark.parametrize("rule", ["cv-lcb", "hof-average"])
def test_select_by_the_hall_of_fame_refuses_a_corrupt_one(capsys, tmp_path, rule):
    import shutil

    run = shutil.copytree(REPO / "runs" / "pit-best", tmp_path / "run")
    (run / "evaluations.jsonl").unlink(missing_ok=True)
    (run / "hall_of_fame.json").write_text("{ not json")
    code, _, err = run_cli(capsys, "select", str(run), "--selection", rule, "--out", str(tmp_path / "chosen.json"))
    assert code == 2 and not (tmp_path / "chosen.json").exists()
    assert err.strip().splitlines() == [
        f"autoprox: error: {run / 'hall_of_fame.json'}: hall_of_fame.json unreadable ({run / 'hall_of_fame.json'} "
        "is not valid JSON (Expecting property name enclosed in double quotes at line 1)), and no evaluations to "
        f"rebuild it from; --selection {rule} chooses among the hall of fame: restore the file, or use "
        "--selection best"]


def test_a_search_without_a_test_part_prints_its_search_figures_alone(capsys, small_jsonl, session_cache, tmp_path):
    """adv5 F-weak-5: ``--search-fraction 1`` printed a summary of ``nan`` test columns."""
    from autoprox.search.engine import NO_TEST_PART

    code, out, err = run_cli(capsys, "search", "--bench", str(small_jsonl), "--batch-size", "2", "--cache-dir",
                             str(session_cache.root), "--workers", "1", "--population", "2", "--iterations", "0",
                             "--search-fraction", "1", "--quiet", "--out", str(tmp_path / "run"))
    assert code == 0, err
    table = out[out.index("best proxy:"):out.index("written to")]
    assert "nan" not in table and "test" not in table.splitlines()[1], table
    assert "search tau" in table and "params search" in table and NO_TEST_PART in table
