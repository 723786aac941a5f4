"""What a newcomer following the README and the manual ran into (the docwalk of 2026-12-07): each test here failed
before its fix."""

from __future__ import annotations

import pytest

from autoprox.cli.main import main

#: The commands that start a folder of their own, each at its smallest, with ``--input`` and ``--out`` added.
FOLDER_COMMANDS = {
    "search": ["search", "--space", "pit", "--iterations", "0"],
    "vit-search": ["vit-search", "--space", "pit", "--proxy", "params", "--samples", "2"],
    "evaluate": ["evaluate", "--space", "pit", "--folds", "2", "--iterations", "0"],
    "transfer": ["transfer", "--space", "pit", "--iterations", "0"],
}


@pytest.mark.parametrize("command", sorted(FOLDER_COMMANDS))
@pytest.mark.parametrize("images", ["missing", "empty"])
def test_a_mistyped_image_folder_is_refused_before_the_command_writes_its_folder(tmp_path, capsys, command, images):
    """``--input images:DIR`` with no such folder (or none of its images) used to be found only once the command had
    written its folder (config.json, protocol.json, vit_search.json): the corrected command was then refused as
    continuing another run (``OUT already holds a run``)."""
    folder = tmp_path / "photos"
    if images == "empty":
        folder.mkdir()
    out = tmp_path / "out"
    status = main([*FOLDER_COMMANDS[command], "--input", f"images:{folder}", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2
    assert err[-1].startswith("autoprox: error: ") and str(folder) in err[-1], err
    assert not out.exists()


def test_the_python_search_refuses_a_mistyped_image_folder_before_writing_its_run(tmp_path):
    from autoprox import ProxySearch
    from autoprox.core.errors import InputSpecError

    out = tmp_path / "run"
    with pytest.raises(InputSpecError, match="image folder not found"):
        ProxySearch(space="pit", iterations=0, input=f"images:{tmp_path / 'photos'}", out=str(out)).fit()
    assert not out.exists()


def _small_table(path):
    """A proxy table of 12 rows: id, an accuracy, three standard proxy columns."""
    lines = ["id,val_acc,params,nwot,jacov"]
    for i in range(12):
        lines.append(f"a{i},{60 + (i * 7) % 12 + 0.5 * i:.2f},{1 + i * 0.3:.2f},{700 + (i * 5) % 12},{-90 + i % 4}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("formula, problem", [
    ("r(nwot", "ends early (expected ')')"),
    ("lrsum(params nwot)", "expected ')', found 'nwot'"),
    ("mul(r(nwot), jacov)", "unknown operator or transform 'jacov'"),
    ("first(r(params), lr(nwot)", "ends early"),
])
@pytest.mark.parametrize("command", ["rank", "score"])
def test_a_mistyped_rank_formula_on_a_table_is_named_as_one(tmp_path, capsys, formula, problem, command):
    """A typo in a rank formula on a table was reported as a genome of the statistics: 'not a genome (unknown token
    'r' in genome ...; known tokens: F1, F1g, ... (70 names))', which says nothing of the formula the user typed."""
    table = _small_table(tmp_path / "mine.csv")
    out = ["--out", str(tmp_path / "scores.csv")] if command == "score" else []
    assert main([command, "--proxy", formula, "--bench", str(table), *out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("autoprox: error: ")
    assert "not a rank formula" in err and problem in err and "known tokens" not in err, err


@pytest.mark.parametrize("formula, problem", [
    ("r(params", "ends early (expected ')')"),
    ("lrsum(params nwot)", "expected ')', found 'nwot'"),
])
def test_a_mistyped_rank_formula_on_a_vit_space_is_named_as_one_too(capsys, formula, problem):
    """On a ViT space the same typo answered with the genome's list of every token: resolve_proxy, which every
    command reads proxies with, names the formula's own problem when the text opens as only a formula does."""
    assert main(["rank", "--proxy", formula, "--space", "pit"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("autoprox: error: ")
    assert "not a rank formula" in err and problem in err and "known tokens" not in err, err


def test_a_stray_comma_after_one_proxy_leaves_the_one_proxy(tmp_path, capsys):
    """'--proxy params,' was read whole as a genome ('unknown token params ... known tokens: ...'); it is the one
    proxy params, as its comma list says, and ranks and scores as --proxy params does."""
    for proxy in ("params", "params,", " params , "):
        assert main(["score", "--proxy", proxy, "--space", "pit", "--out", str(tmp_path / f"{len(proxy)}.csv")]) == 0
    capsys.readouterr()
    assert (tmp_path / "6.csv").read_text() == (tmp_path / "7.csv").read_text() == (tmp_path / "10.csv").read_text()
    assert main(["rank", "--proxy", "params,", "--space", "pit"]) == 0
    assert "params" in capsys.readouterr().out


@pytest.mark.slow
def test_the_manual_s_beyond_size_excerpt_is_the_end_of_its_command_s_output(capsys):
    """The manual's ``show runs/ablation/pit-sum --top 2 --beyond-size`` excerpt had lost the ``*`` that marks the
    hall-of-fame entry best.json holds (#2 in that run), which the command prints."""
    import re

    from tests.commands import run_cli
    from tests.conftest import REPO

    text = (REPO / "docs" / "manual.md").read_text()
    excerpt = re.search(r"`autoprox show runs/ablation/pit-sum --top 2 --beyond-size`\nends with:\n\n```\n(.*?)```",
                        text, re.S).group(1).splitlines()
    code, out, err = run_cli(capsys, "show", str(REPO / "runs" / "ablation" / "pit-sum"), "--top", "2",
                             "--beyond-size", "--no-simplify")
    assert code == 0 and [line.rstrip() for line in out.splitlines()[-len(excerpt):]] == \
        [line.rstrip() for line in excerpt]


def test_autoprox_help_s_first_paragraph_names_every_command(capsys):
    """``autoprox --help`` opened with 'search, transfer, rank, cache build, reports and vit-search', six of its
    13 commands: score, evaluate, select and spaces, which the README's few-label workflow uses, were not named."""
    from autoprox.cli.main import COMMANDS

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    first = " ".join(out[out.index("\n\n"):out.index("positional arguments")].split())
    assert all(f" {name}," in first or f" {name} " in first for name in COMMANDS), first


@pytest.mark.parametrize("command, extra", [("show", []), ("curves", ["--out", "c.png"]),
                                            ("select", ["--out", "s.json"]), ("search", ["--resume", "--out"])])
@pytest.mark.parametrize("name", ["best.json", "config.json"])
def test_a_run_s_own_file_given_for_its_folder_names_the_folder(tmp_path, capsys, command, extra, name):
    """``show RUN/best.json`` (tab completion's slip) said 'RUN/best.json is not a run directory (no config.json)',
    wrong for RUN/config.json itself, and ``select`` 'RUN/best.json/best.json: ... is a file'; ``report`` already
    named the folder to give."""
    import shutil

    from tests.conftest import REPO

    run = tmp_path / "run"
    run.mkdir()
    for kept in ("config.json", "best.json"):
        shutil.copy(REPO / "runs" / "pit-reference" / kept, run / kept)
    given = str(run / name)
    argv = [command, *extra, given] if command == "search" else [command, given, *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"autoprox: error: {given} is a run's {name}, not its folder: give the run directory, {run}", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_the_space_protocol_summary_keeps_a_long_column_name_apart_from_its_figure(tmp_path, capsys):
    """FlexiBERT's own column ``head_softmax_confidence_normalized`` ran into its figure in the summary of
    ``evaluate --leave-space-out --rank-formulas`` (``head_softmax_confidence_normalized+0.033  (1 spaces)``)."""
    import re

    long_name = "head_softmax_confidence_normalized"
    benches = []
    for t in range(3):
        lines = [f"id,acc,params,nwot{',' + long_name if t == 0 else ''}"]
        for i in range(12):
            own = f",{(i * 5 + t) % 12}" if t == 0 else ""
            lines.append(f"a{i},{50 + (i * (3 + t)) % 12 + i},{1 + i},{(i * 7 + t) % 12}{own}")
        path = tmp_path / f"t{t}.csv"
        path.write_text("\n".join(lines) + "\n")
        benches += ["--bench", str(path)]
    out = tmp_path / "lso"
    assert main(["evaluate", "--leave-space-out", "--rank-formulas", *benches, "--seeds", "1", "--iterations", "1",
                 "--bootstrap", "5", "--out", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    summary = [line for line in text[text.index("mean over left-out spaces"):].splitlines()[1:] if line[:2] == "  "]
    row = next(line for line in summary if long_name in line)
    assert re.fullmatch(rf"  {long_name}\s+[+-]\d\.\d{{3}}  \(1 space\)", row), row
    assert all(re.fullmatch(r"  \S+\s+[+-]\d\.\d{3}  \(\d space(s)?\)", line) for line in summary), summary


def test_a_vit_search_rerun_with_other_settings_names_what_differs(tmp_path, capsys):
    """The same vit-search command again continues it; one with another setting said only 'OUT holds a different
    ViT search (vit_search.json differs)', leaving the newcomer to compare JSON by hand."""
    out = str(tmp_path / "vit")
    assert main(["vit-search", "--space", "pit", "--proxy", "params", "--samples", "2", "--out", out]) == 0
    capsys.readouterr()
    assert main(["vit-search", "--space", "pit", "--proxy", "flops", "--samples", "3", "--params", "3:20",
                 "--out", out]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"autoprox: error: {out} holds a different ViT search (vit_search.json records ") and \
        "proxy params (given flops)" in err and "samples 2 (given 3)" in err and "params 2:25 (given 3:20)" in err, err
    assert main(["vit-search", "--space", "pit", "--proxy", "params", "--samples", "2", "--out", out]) == 0


def test_evaluate_resume_of_a_few_label_protocol_gives_back_its_options(tmp_path, capsys):
    """The manual's 'continues with autoprox evaluate --resume --out OUT' on a few-label protocol said 'OUT: no
    protocol.json to resume', as if nothing were there; it needs its own options again, which the line now gives."""
    lines = ["id,val_acc,params,nwot"] + [f"a{i},{50 + (i * 7) % 30 + 0.3 * i:.2f},{1 + i},{(i * 11) % 30}"
                                            for i in range(30)]
    table = tmp_path / "mine.csv"
    table.write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "few")
    options = ["--few-labels", "10", "--repeats", "2", "--methods", "size,ridge", "--bench", str(table)]
    assert main(["evaluate", *options, "--out", out, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "--resume", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"autoprox: error: {out} holds a few-label protocol (few_labels.json)") and \
        "--few-labels 10 --repeats 2 --methods size,ridge --protocol-seed 0" in err and "(mine)" in err, err
    assert main(["evaluate", *options, "--resume", "--out", out, "--quiet"]) == 0


@pytest.mark.parametrize("command", [["rank"], ["score", "--out", "{tmp}/s.csv"], ["vit-search", "--out", "{tmp}/v"]])
@pytest.mark.parametrize("where", [["--space", "pit"], ["--bench", "{tmp}/mine.csv"]])
def test_a_mistyped_run_directory_given_as_proxy_is_said_to_name_nothing(tmp_path, capsys, command, where):
    """``--proxy runs/pit-referense`` (one letter off) was answered 'not a genome (unexpected character '/' at
    position 4 of genome)': the path was read as a genome."""
    if command[0] == "vit-search" and where[0] == "--bench":
        where = ["--on-bench", "{tmp}/mine.csv"]
        command = ["vit-search"]
    _small_table(tmp_path / "mine.csv")
    missing = tmp_path / "runs" / "pit-referense"
    argv = [part.format(tmp=tmp_path) for part in [*command, *where]]
    assert main([*argv, "--proxy", f"params,{missing}" if command[0] == "rank" else str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"autoprox: error: {missing}: no such file or folder (--proxy takes a run directory"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.csv"]


def test_a_mistyped_run_directory_is_said_to_name_nothing_from_python_too(tmp_path):
    """resolve_proxy, which the Python API and every command read proxies with, says so itself; the command line's
    check before dispatch only says it earlier."""
    from autoprox.core.errors import ProxyError
    from autoprox.proxies.proxy import resolve_proxy

    missing = tmp_path / "runs" / "pit-referense"
    with pytest.raises(ProxyError, match="pit-referense: no such file or folder") as caught:
        resolve_proxy(str(missing))
    assert "genome" not in str(caught.value).split("(")[0]


@pytest.mark.parametrize("typed", ["locl:2", "Local:2", "lcoal:2"])
def test_a_misspelt_local_scheduler_is_named_at_once(capsys, typed):
    """``--scheduler locl:2`` was taken as the address of a scheduler on port 2 of a host 'locl': 20 s of waiting,
    then 'no Dask scheduler answered at tcp://locl:2'."""
    import time

    start = time.perf_counter()
    assert main(["cache", "build", "--space", "pit", "--scheduler", typed]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"autoprox: error: --scheduler {typed}: did you mean local:2 (2 worker processes here)?"), err
    assert time.perf_counter() - start < 10


def test_a_scheduler_address_on_this_machine_is_still_an_address():
    from autoprox.core.parallel import parse_scheduler

    assert parse_scheduler("localhost:8786") == ("address", "tcp://localhost:8786")
    assert parse_scheduler("tcp://locl:2") == ("address", "tcp://locl:2")  # a URL is taken as written


@pytest.mark.parametrize("methods", [["--methods", "forest"], ["--methods", "size,forest"], []])
def test_the_forest_without_scikit_learn_is_refused_when_asked_for_by_name(tmp_path, capsys, monkeypatch, methods):
    """Without the bench extra, ``evaluate --few-labels 10 --methods forest`` left the forest out with a note and
    wrote a protocol of no method at all (exit 0, 'k=10 over 1 table: ' and nothing after it); left to the
    default, the forest is still left out with the note."""
    import sys

    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn fails, as where the extra is not installed
    lines = ["id,val_acc,params,nwot"] + [f"a{i},{50 + (i * 7) % 30 + 0.3 * i:.2f},{1 + i},{(i * 11) % 30}"
                                            for i in range(30)]
    table = tmp_path / "mine.csv"
    table.write_text("\n".join(lines) + "\n")
    out = tmp_path / "few"
    status = main(["evaluate", "--few-labels", "10", "--repeats", "2", "--bench", str(table), *methods,
                   "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    if methods:
        assert status == 2 and not out.exists()
        assert err.strip().splitlines()[-1].startswith("autoprox: error: --methods forest needs scikit-learn"), err
    else:
        assert status == 0 and "the forest baseline is left out" in err


def test_vit_search_s_default_folder_is_one_folder_named_after_the_proxy(tmp_path, capsys, monkeypatch, session_cache):
    """Without --out, ``--proxy recommended:pit/c100_kd`` wrote into ``runs/vit-pit-recommended:pit/c100_kd-seed0``
    (two folders, one with a ':'), and every run's best.json into ``runs/vit-pit-best-seed0``, where the next run's
    proxy was then refused as another search; a run's best.json is named by its run's folder."""
    import shutil

    from autoprox.cli.vitsearch import _out_label
    from tests.conftest import REPO

    assert _out_label("recommended:pit/c100_kd", "recommended:pit/c100_kd") == "recommended-pit-c100_kd"
    assert _out_label("runs/pit-reference/best.json", "x") == "pit-reference"
    assert _out_label("mine/pit.json", "x") == "pit"
    run = tmp_path / "my-run"
    run.mkdir()
    shutil.copy(REPO / "runs" / "pit-reference" / "best.json", run / "best.json")
    monkeypatch.chdir(tmp_path)
    assert main(["vit-search", "--space", "pit", "--proxy", str(run), "--samples", "1", "--batch-size", "2",
                 "--cache-dir", str(session_cache.root), "--workers", "1"]) == 0
    assert (tmp_path / "runs" / "vit-pit-my-run-seed0" / "top.json").is_file()


def test_vit_search_with_a_list_of_proxies_says_a_list_is_for_on_bench(tmp_path, capsys):
    """``vit-search --space pit --proxy params,flops`` was read as one genome: 'not a genome (unknown token
    'params' ...)' and the genome's list of 70 tokens."""
    assert main(["vit-search", "--space", "pit", "--proxy", "params,flops", "--samples", "2",
                 "--out", str(tmp_path / "v")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("autoprox: error: --proxy params,flops: vit-search takes one proxy, not a list of 2; a list is "
                   "compared on a benchmark's architectures with --on-bench FILE"), err
    assert not (tmp_path / "v").exists()


def test_export_of_a_list_of_proxies_says_it_writes_one(tmp_path, capsys):
    """``export params,nwot --out p.py`` was read as one genome: 'not a genome (unknown token 'params' ...)'."""
    out = tmp_path / "p.py"
    assert main(["export", "params,nwot", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("autoprox: error: params,nwot: export takes one proxy, not a list of 2; export them one at a "
                   "time, each to its own module"), err  # the words of vit-search's line (one helper)
    assert not out.exists()


@pytest.mark.parametrize("proxy, line", [
    ("params,nwot", "--proxy params,nwot: score takes one proxy, not a list of 2; score each in its own run, each to "
                    "its own --out"),
    ("all", "--proxy all: score takes one proxy; all names every built-in (compare them with autoprox rank --proxy "
            "all)")])
def test_score_of_a_list_or_of_all_says_it_takes_one_proxy(tmp_path, capsys, proxy, line):
    """``score`` refuses a list in vit-search's and export's words (one helper), and ``all`` saying what it names,
    before the table is read or anything is written."""
    out = tmp_path / "s.csv"
    assert main(["score", "--proxy", proxy, "--space", "pit", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"autoprox: error: {line}"
    assert not out.exists()


def test_score_help_says_what_targets_picks():
    """``score --help`` said rank's '--targets: comma-separated targets (default: all columns)', which says nothing
    of the one target whose scores score writes."""
    from autoprox.cli.main import build_parser

    score = build_parser()._subparsers._group_actions[0].choices["score"]
    help_text = next(a.help for a in score._actions if "--targets" in a.option_strings)
    assert help_text.startswith("the target whose scores are written") and "all columns" not in help_text


@pytest.mark.parametrize("argv", [["show", "{run}"], ["report", "{run}", "--out", "{tmp}/r.html"],
                                  ["export", "{run}", "--out", "{tmp}/p.py"], ["rank", "--proxy", "{run}"],
                                  ["rank", "--proxy", "{run}/best.json"], ["select", "{run}", "--out", "{tmp}/s.json"]])
def test_a_run_of_an_operator_not_registered_here_is_named_so(tmp_path, capsys, argv):
    """A run searched (from Python) with an operator of one's own, read by the command line, where it is not
    registered: show and report said 'evaluation record 4 is malformed: unknown token ...', export and rank listed
    every genome token; ``search --resume`` alone named the operator."""
    import json
    import shutil

    from tests.conftest import REPO

    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "best.json", "hall_of_fame.json"):
        shutil.copy(REPO / "runs" / "pit-reference" / name, run / name)
    config = json.loads((run / "config.json").read_text())
    config["operators"] = ["element_wise_nosuch_here", "frobenius_norm", "element_wise_sum", "no_op"]
    (run / "config.json").write_text(json.dumps(config))
    best = json.loads((run / "best.json").read_text())
    best["genome"] = ("block_mean(to_mean_scalar(element_wise_sum(element_wise_nosuch_here(no_op(F1)), "
                      "frobenius_norm(no_op(F2)))))")
    (run / "best.json").write_text(json.dumps(best))
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main([part.format(run=run, tmp=tmp_path) for part in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"autoprox: error: {run} was searched with the operator 'element_wise_nosuch_here' of your own, "
                   "which is not registered in this process: register it in Python first (autoprox.primitives."
                   f"register_primitive), then read the run there (autoprox.ProxySearch.from_run({str(run)!r}), or "
                   "autoprox.cli.main.main([...]) with this command's arguments)"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_manual_says_how_long_a_first_ranking_table_takes_and_that_it_is_cached():
    """``rank --proxy all --space autoformer`` with no zoo values cached ran for many minutes (GraSP most of it) and
    the manual gave no time: its ranking-table section now quotes BENCHMARKS.md's figures for the whole table on a
    2-core CPU, and says a second run reads the score cache."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    manual = (repo / "docs" / "manual.md").read_text()
    section = " ".join(manual[manual.index("### The ranking table"):manual.index("## Searching several spaces")].split())
    benchmarks = " ".join((repo / "BENCHMARKS.md").read_text().split())
    recorded = re.search(r"`autoprox rank --proxy all --space SPACE --seeds 0 --workers 2` \(warm statistics cache, "
                         r"[^)]*\): AutoFormer (\d+:\d\d), PiT (\d+:\d\d)", benchmarks)
    assert recorded, "BENCHMARKS.md no longer records the whole ranking table's time"
    autoformer, pit = recorded.groups()
    assert re.search(rf"2-core CPU.*{autoformer} on AutoFormer and {pit} on PiT", section), section
    assert "score cache" in section and "under a minute" in section and "BENCHMARKS.md#the-proxy-zoo" in section
