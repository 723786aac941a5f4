"""benchmarks/docs_tables.py: the measured tables of docs/results.md and README.md say what runs/ says.

Runs the script as a subprocess with the plain interpreter: it reads the run files as JSON
and must not need torch or the autoprox package.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "docs_tables.py"
RESULTS = REPO / "docs" / "results.md"


def run_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tracked", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


def table_body(text: str, name: str) -> str:
    match = re.search(rf"<!-- table:{name} -->\n(.*?)<!-- /table:{name} -->", text, re.S)
    assert match, f"no table {name}"
    return match.group(1)


def test_committed_tables_match_the_runs():
    result = run_script("--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_changed_number_fails_the_check(tmp_path):
    text = RESULTS.read_text()
    body = table_body(text, "reference-autoformer")
    assert "| JCM | 0.357 | **0.172** |" in body  # the paper-setting AutoFormer run, test JCM
    copy = tmp_path / "results.md"
    copy.write_text(text.replace("| JCM | 0.357 | **0.172** |", "| JCM | 0.357 | **0.173** |"))
    result = run_script("--check", "--docs", str(copy))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "reference-autoformer" in result.stderr
    assert copy.read_text() != text  # --check leaves the file alone

    # without --check the script writes the runs' figures back, and the check passes again
    rewrite = run_script("--docs", str(copy))
    assert rewrite.returncode == 0, rewrite.stdout + rewrite.stderr
    assert copy.read_text() == text
    assert run_script("--check", "--docs", str(copy)).returncode == 0


def test_every_generated_table_is_checked(tmp_path):
    """Altering any one generated table (not only the first) is caught, and names that table."""
    text = RESULTS.read_text()
    names = re.findall(r"<!-- table:([\w-]+) -->\n.*?<!-- /table:\1 -->", text, re.S)
    assert {"reference-pit", "ablation-autoformer", "per-target-pit", "transfer-autoformer", "beyond-size",
            "vit-search"} <= set(names)
    for name in names:
        body = table_body(text, name)
        number = re.search(r"\d\.\d{3}", body)
        assert number, f"table {name} has no 3-decimal figure"
        digit = "1" if number.group()[-1] != "1" else "2"
        altered = body[:number.end() - 1] + digit + body[number.end():]
        copy = tmp_path / f"{name}.md"
        copy.write_text(text.replace(body, altered, 1))
        result = run_script("--check", "--docs", str(copy))
        assert result.returncode == 1, (name, result.stdout + result.stderr)
        assert name in result.stderr


def test_hand_kept_text_is_left_alone(tmp_path):
    """Text outside the markers (prose, hand-kept tables) is neither checked nor rewritten."""
    text = RESULTS.read_text()
    copy = tmp_path / "results.md"
    edited = text.replace("## Read this first", "## Read this first (edited)", 1)
    copy.write_text(edited)
    assert run_script("--check", "--docs", str(copy)).returncode == 0
    assert run_script("--docs", str(copy)).returncode == 0
    assert copy.read_text() == edited


def test_missing_markers_are_an_error(tmp_path):
    text = RESULTS.read_text()
    copy = tmp_path / "results.md"
    copy.write_text(re.sub(r"<!-- table:beyond-size -->\n.*?<!-- /table:beyond-size -->\n", "", text, flags=re.S))
    result = run_script("--check", "--docs", str(copy))
    assert result.returncode == 2
    assert "beyond-size" in result.stderr


def test_no_torch_and_no_autoprox_import():
    source = SCRIPT.read_text()
    assert not re.search(r"^\s*(import|from)\s+(torch|autoprox|numpy)\b", source, re.M)
