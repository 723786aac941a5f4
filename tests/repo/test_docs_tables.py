"""benchmarks/docs_tables.py: the measured tables of the results pages (docs/results*.md) say what runs/ says.

The script runs as a subprocess with the plain interpreter: it reads the run files as JSON and
must not need torch or the autoprox package. Apart from the check of the committed pages, every
test writes a small synthetic runs/ tree and pages, so the assertions follow from figures the
test chose, not from whatever the committed runs hold.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPT = REPO / "benchmarks" / "docs_tables.py"
SPACES = {"autoformer": ["c100_kd", "flower_kd"], "pit": ["c100_kd", "flower_kd"]}
RESULTS_TABLES = [f"{kind}-{space}" for space in SPACES for kind in ("protocol-ablation", "recommended", "repeats")]
RESULTS_TABLES += ["headline", "vit-search"]  # the headline left README.md for the in-space page (issue 42)
#: The leave-one-space-out tables (benchmarks/docs_tables_cross.py), read from the committed protocols' records.
sys.path.insert(0, str(REPO / "benchmarks"))
from docs_tables_cross import (  # noqa: E402 (beside the script)
    CROSS_PROTOCOLS,
    FULL_TABLES,
    LEVERS_TABLE,
    SPACE_CEILING,
    SPACE_CEILING_TABLE,
    SPACE_FORMULA_TABLES,
    SPACE_LEVERS_TABLE,
    SPACE_TABLES,
)

CROSS_TABLES = [f"{name}{suffix}" for name in FULL_TABLES for suffix in ("", "-targets")] + [LEVERS_TABLE]
#: The N-space protocols' tables, and the protocols they read (relative to runs/).
SPACE_PROTOCOLS = sorted({*SPACE_TABLES.values(), *SPACE_FORMULA_TABLES.values()})
from docs_tables_few import FEW_LABELS, tables as few_label_tables  # noqa: E402 (beside the script)

RESULTS_TABLES += CROSS_TABLES + [*SPACE_TABLES, *SPACE_FORMULA_TABLES, SPACE_LEVERS_TABLE, SPACE_CEILING_TABLE]
RESULTS_TABLES += list(few_label_tables())


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def table_body(text: str, name: str) -> str:
    match = re.search(rf"<!-- table:{name} -->\n(.*?)<!-- /table:{name} -->", text, re.S)
    assert match, f"no table {name}"
    return match.group(1)


def _figure(mean: float, sd: float = 0.05, n: int = 5) -> dict:
    return {"mean": mean, "sd": sd, "n": n}


def _difference(mean: float, n: int = 5) -> dict:
    return {"mean": mean, "ci": [mean - 0.02, mean + 0.02], "corrected_ci": [mean - 0.05, mean + 0.05],
            "ahead": n if mean > 0 else 0, "n": n}


def _summary(proxy: float, blend: float, n: int) -> dict:
    """One summary block: the proxy's and three baselines' test figures and the proxy's differences."""
    figures = {"proxy": proxy, "params": 0.300, "coarse": 0.400, "blend": blend}
    block = {"test": {m: _figure(v, n=n) for m, v in figures.items()},
             "difference": {m: _difference(proxy - figures[m], n) for m in ("params", "coarse", "blend")}}
    return {"folds": n, "jcm": block, "targets": {t: block for t in SPACES["autoformer"]}}


def protocol(space: str, selection: str, proxy: float, blend: float, genome: str, repeats: int = 1) -> dict:
    """A finished protocol record with the fields docs_tables reads (as ``autoprox evaluate`` writes them)."""
    folds = [{"repeat": r, "fold": k, "result": {"genome": genome}} for r in range(repeats) for k in range(5)]
    record = {"space": space, "finished": True, "targets": SPACES[space],
              "settings": {"genome": {"kind": "template", "aggregations": ["block_mean", "block_sum"],
                                      "arch_terminals": True},
                           "evolution": {"patience": 30}},
              "protocol": {"folds": 5, "repeats": repeats, "selection": selection},
              "folds": folds, "summary": _summary(proxy, blend, 5 * repeats)}
    if repeats > 1:
        record["repeat_summaries"] = [_summary(proxy + 0.001 * r, blend, 5) for r in range(repeats)]
    return record


def vit_top(space: str) -> dict:
    return {"space": space, "budget_millions": [4, 9], "finished": True, "scored": 40, "samples": 40, "failed": 0,
            "search_seconds": 12.0, "seconds_per_architecture": 0.3,
            "top": [{"rank": 1, "score": 2.5, "params": 8_010_000, "macs": 1_780_000_000,
                     "arch": {"hidden_dim": 240, "mlp_ratio": [3.5, 4.0]}}]}


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@pytest.fixture
def synthetic(tmp_path) -> dict:
    """A runs/ tree with the four headline protocols, one more AutoFormer protocol and one ViT search,
    and empty pages holding every table's markers."""
    runs = tmp_path / "runs"
    for space, searched, recommended, blend in [("autoformer", "autoformer-best-patience30",
                                                 "autoformer-best-patience30-cv-pick-coarse", 0.548),
                                                ("pit", "pit-best", "pit-best-cv-pick-coarse", 0.780)]:
        write_json(runs / "protocol" / searched / "protocol.json",
                   protocol(space, "best", blend - 0.123, blend, "block_sum(to_mean_scalar(A_depth))", repeats=3))
        write_json(runs / "protocol" / recommended / "protocol.json",
                   protocol(space, "cv-pick-coarse", blend + 0.064, blend, "block_mean(to_mean_scalar(F1))",
                            repeats=3))
    write_json(runs / "protocol" / "autoformer-gene" / "protocol.json",
               protocol("autoformer", "best", 0.415, 0.548, "block_mean(frobenius_norm(F2g))"))
    write_json(runs / "vit-autoformer" / "top.json", vit_top("autoformer"))
    for relative in [*CROSS_PROTOCOLS, *SPACE_PROTOCOLS]:  # the cross-space tables' input: protocol.json
        source = REPO / "runs" / relative
        (runs / relative).mkdir(parents=True, exist_ok=True)
        (runs / relative / "protocol.json").write_bytes((source / "protocol.json").read_bytes())
    (runs / SPACE_CEILING).parent.mkdir(parents=True, exist_ok=True)  # the in-sample ceiling's record
    (runs / SPACE_CEILING).write_bytes((REPO / "runs" / SPACE_CEILING).read_bytes())
    (runs / FEW_LABELS).parent.mkdir(parents=True, exist_ok=True)  # the few-label protocol's record
    (runs / FEW_LABELS).write_bytes((REPO / "runs" / FEW_LABELS).read_bytes())
    results, readme = tmp_path / "results.md", tmp_path / "README.md"
    results.write_text("# Results\n\nprose\n\n"
                       + "".join(f"<!-- table:{name} -->\n<!-- /table:{name} -->\n\n" for name in RESULTS_TABLES))
    readme.write_text("# Front\n\nlinks to the results pages, no table\n")
    return {"runs": runs, "results": results, "readme": readme}


def run_on(paths: dict, *args: str) -> subprocess.CompletedProcess:
    return run_script(*args, "--runs", str(paths["runs"]), "--docs", str(paths["results"]),
                      "--readme", str(paths["readme"]))


def test_committed_tables_match_the_runs():
    result = run_script("--check", "--tracked")  # the committed run files only, not a user's own runs/
    assert result.returncode == 0, result.stdout + result.stderr


def test_tables_are_written_from_the_run_figures(synthetic):
    assert run_on(synthetic, "--check").returncode == 1  # empty tables are stale
    assert run_on(synthetic).returncode == 0
    headline = table_body(synthetic["results"].read_text(), "headline")
    # recommended 0.612 against the blend's 0.548: +0.064, its t-interval, folds ahead, corrected interval
    assert "| AutoFormer | 5 x 3 | 0.425 +- 0.050 | 0.612 +- 0.050 (`cv-pick-coarse`) |" in headline
    assert "+0.064 [+0.044, +0.084] 15/15 | [+0.014, +0.114] |" in headline
    text = synthetic["results"].read_text()
    repeats = table_body(text, "repeats-pit")
    assert [line.split(" |")[0] for line in repeats.splitlines()[2:]] == \
        ["| repeat 0 (5 folds)", "| repeat 1 (5 folds)", "| repeat 2 (5 folds)", "| all (15 folds)"]
    assert "| repeat 2 (5 folds) | 0.659 +- 0.050 | 0.846 +- 0.050 | 0.780 +- 0.050 |" in repeats
    ablation = table_body(text, "protocol-ablation-autoformer")
    # every finished AutoFormer protocol is a row; the statistic count reads the fold genomes
    assert "`autoformer-gene`" in ablation and "`pit-best`" not in ablation
    assert re.search(r"\| `autoformer-best-patience30` \(repeat 0 of 3\) \| [^|]+ \| 0/5 \|", ablation)
    assert re.search(r"\| `autoformer-best-patience30-cv-pick-coarse` \(repeat 0 of 3\) \| [^|]+ \| 5/5 \|", ablation)
    assert "Blend on the same folds: JCM 0.548." in ablation
    vit = table_body(text, "vit-search")
    assert "| 1 | 2.500000 | 8.01M | 1.78G | hidden_dim 240, mlp_ratio [3.5, 4] |" in vit
    # one row per N-space protocol, each left-out space's lead over params as that protocol records it
    levers = table_body(text, SPACE_LEVERS_TABLE).splitlines()[2:]
    assert len(levers) == len(SPACE_TABLES) + 2 and levers[-2].startswith("| *params (no label)* |")
    worst = json.loads((synthetic["runs"] / "space-protocol" / "protocol.json").read_text())
    lead = worst["directions"]["pit"]["paired"]["params"]["difference"]
    assert levers[0].startswith("| `runs/space-protocol`: worst, neutral, ")
    assert levers[0].split(" | ")[4].startswith(f"{lead:+.3f} [")  # the pit column
    # one row per set of spaces whose labels were read; the space outside the set is marked out
    ceiling = table_body(text, SPACE_CEILING_TABLE).splitlines()[2:]
    record = json.loads((synthetic["runs"] / SPACE_CEILING).read_text())
    assert len(ceiling) == len(record["sets"]) == 6 and ceiling[0].startswith("| all five | ")
    without_pit = ceiling[1 + list(record["sets"][0]["per_space"]).index("pit")]
    assert without_pit.startswith("| all but pit | ") and without_pit.count("**out**") == 1
    entry = next(r for r in record["sets"] if "pit" not in r["spaces"])["per_space"]["pit"]
    assert without_pit.split(" | ")[5].startswith(f"{entry['lead']:+.3f} [")  # the pit column, read from the record
    assert run_on(synthetic, "--check").returncode == 0


def test_a_changed_run_figure_fails_the_check_until_rewritten(synthetic):
    assert run_on(synthetic).returncode == 0
    written = synthetic["results"].read_text()
    path = synthetic["runs"] / "protocol" / "pit-best-cv-pick-coarse" / "protocol.json"
    record = json.loads(path.read_text())
    record["summary"]["jcm"]["test"]["proxy"]["mean"] = 0.700
    path.write_text(json.dumps(record))
    result = run_on(synthetic, "--check")
    assert result.returncode == 1
    assert "recommended-pit" in result.stderr and "repeats-pit" in result.stderr and "headline" in result.stderr
    assert synthetic["results"].read_text() == written  # --check changes nothing
    assert run_on(synthetic).returncode == 0
    assert "| JCM | 0.700 +- 0.050 |" in table_body(synthetic["results"].read_text(), "recommended-pit")
    assert run_on(synthetic, "--check").returncode == 0


def test_every_generated_table_is_checked(synthetic, tmp_path):
    """Altering any one generated table (not only the first) is caught, and names that table."""
    assert run_on(synthetic).returncode == 0
    text = synthetic["results"].read_text()
    names = re.findall(r"<!-- table:([\w-]+) -->\n.*?<!-- /table:\1 -->", text, re.S)
    assert sorted(names) == sorted(RESULTS_TABLES)
    for name in names:
        body = table_body(text, name)
        number = re.search(r"\d\.\d{3}", body)
        assert number, f"table {name} has no 3-decimal figure"
        digit = "1" if number.group()[-1] != "1" else "2"
        altered = body[:number.end() - 1] + digit + body[number.end():]
        synthetic["results"].write_text(text.replace(body, altered, 1))
        result = run_on(synthetic, "--check")
        assert result.returncode == 1, (name, result.stdout + result.stderr)
        assert name in result.stderr


def test_hand_kept_text_is_left_alone(synthetic):
    """Text outside the markers (prose, hand-kept tables) is neither checked nor rewritten."""
    assert run_on(synthetic).returncode == 0
    edited = synthetic["results"].read_text().replace("prose", "prose, edited by hand")
    synthetic["results"].write_text(edited)
    assert run_on(synthetic, "--check").returncode == 0
    assert run_on(synthetic).returncode == 0
    assert synthetic["results"].read_text() == edited


def test_missing_or_unknown_markers_are_an_error(synthetic):
    text = synthetic["results"].read_text()
    synthetic["results"].write_text(text.replace("<!-- table:vit-search -->\n<!-- /table:vit-search -->\n", ""))
    result = run_on(synthetic, "--check")
    assert result.returncode == 2 and "no markers for table 'vit-search'" in result.stderr
    synthetic["results"].write_text(text + "<!-- table:beyond-size -->\n<!-- /table:beyond-size -->\n")
    result = run_on(synthetic, "--check")
    assert result.returncode == 2 and "unknown table 'beyond-size'" in result.stderr


def test_the_readme_holds_no_table(synthetic):
    """Issue 42: README.md links to the results pages instead of repeating their figures; a table there is an error."""
    assert run_on(synthetic).returncode == 0
    text = synthetic["results"].read_text()
    block = re.search(r"<!-- table:headline -->\n.*?<!-- /table:headline -->\n", text, re.S).group()
    synthetic["readme"].write_text(synthetic["readme"].read_text() + block)
    result = run_on(synthetic, "--check")
    assert result.returncode == 2 and "unknown table 'headline'" in result.stderr
    synthetic["results"].write_text(text.replace(block, ""))  # moved back to the README alone: missing from the pages
    result = run_on(synthetic, "--check")
    assert result.returncode == 2 and "no markers for table 'headline'" in result.stderr
    assert not re.search(r"<!-- table:", (REPO / "README.md").read_text())


def test_protocols_on_other_folds_are_refused(synthetic):
    """Rows of one ablation table must share their folds: a protocol whose blend differs is an error."""
    path = synthetic["runs"] / "protocol" / "autoformer-gene" / "protocol.json"
    record = json.loads(path.read_text())
    record["summary"]["jcm"]["test"]["blend"]["mean"] = 0.600
    path.write_text(json.dumps(record))
    result = run_on(synthetic)
    assert result.returncode == 2 and "do not share their folds" in result.stderr


def test_no_torch_and_no_autoprox_import():
    source = SCRIPT.read_text()
    assert not re.search(r"^\s*(import|from)\s+(torch|autoprox|numpy)\b", source, re.M)


def test_a_search_counts_once_scored_in_a_whole_or_a_trimmed_protocol(monkeypatch):
    """``protocol.json`` beside an archive keeps no per-architecture scores (scripts/runs_archive.py): a
    search with a genome is one the protocol scored; in a whole one, a search not scored yet has scores None."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import docs_tables_cross

    assert docs_tables_cross._scored({"scores": {"c100_kd": [1.0]}, "genome": "g"})
    assert docs_tables_cross._scored({"genome": "g", "search_jcm": 0.5})  # trimmed
    assert not docs_tables_cross._scored({"scores": None, "genome": "g"})  # searched, not scored yet
    assert not docs_tables_cross._scored({"scores": None})


def test_tables_may_live_in_an_appendix(synthetic):
    """A results table moved to an appendix page (results-*.md beside results.md) is checked there, and only once."""
    assert run_on(synthetic).returncode == 0
    text = synthetic["results"].read_text()
    block = re.search(r"<!-- table:vit-search -->\n.*?<!-- /table:vit-search -->\n", text, re.S).group()
    appendix = synthetic["results"].parent / "results-appendix.md"
    appendix.write_text("# Appendix\n\n" + block)
    synthetic["results"].write_text(text.replace(block, ""))
    assert run_on(synthetic, "--check").returncode == 0
    altered = block.replace("scored", "scored!", 1) if "scored" in block else block.replace("|", "| x", 1)
    appendix.write_text("# Appendix\n\n" + altered)
    result = run_on(synthetic, "--check")
    assert result.returncode == 1 and "results-appendix.md: stale tables: vit-search" in result.stderr
    synthetic["results"].write_text(text)  # now in both pages
    result = run_on(synthetic, "--check")
    assert result.returncode == 2 and "table 'vit-search' appears more than once" in result.stderr
