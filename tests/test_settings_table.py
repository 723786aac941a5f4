"""Issue 33: a search option is one row of the option table. A row registered at run time is a command-line
option, a ``ProxySearch`` parameter, a field of ``config.json`` and part of the settings digest, so that a resume
given another value of it is refused, without a line anywhere else."""

from __future__ import annotations

import inspect
import json

import pytest

from autoprox.api import ProxySearch
from autoprox.cli.main import main
from autoprox.core.errors import ConfigError, RunDirError
from autoprox.search.conversions import number
from autoprox.search.options import Option, option_values, register_option, unregister_option
from autoprox.search.resume import check_resume
from autoprox.search.settings import SearchSettings, settings_digest, settings_from_options


@pytest.fixture
def noise_floor():
    """A real row: a number at least 0, default 0, recorded as ``noise_floor`` when it is not 0."""
    row = Option("noise_floor", 0.0, "scores closer than this count as equal (a test option)", number(0.0),
                 setting="noise_floor")
    register_option(row)
    yield row
    unregister_option("noise_floor")


def test_a_registered_option_is_a_command_line_option_and_an_api_parameter(noise_floor, capsys):
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "--noise-floor NOISE_FLOOR" in capsys.readouterr().out
    parameter = inspect.signature(ProxySearch).parameters["noise_floor"]
    assert parameter.default == 0.0 and parameter.kind is inspect.Parameter.KEYWORD_ONLY
    assert ProxySearch(space="pit", noise_floor="0.5").noise_floor == 0.5
    with pytest.raises(ConfigError, match="noise_floor: expected a number in"):
        ProxySearch(space="pit", noise_floor=-1)


def test_the_option_table_is_the_signature_of_proxy_search():
    from autoprox.search.options import options_for

    signature = inspect.signature(ProxySearch).parameters
    assert [(p.name, p.default) for p in signature.values()] == [(o.name, o.default) for o in options_for("search")]


def test_a_registered_option_is_recorded_only_when_it_differs_from_its_default(noise_floor):
    plain = settings_from_options(option_values({"space": "pit"}))
    assert "noise_floor" not in plain.to_json()  # earlier runs' configurations read as before
    assert plain.option("noise_floor") == 0.0
    chosen = settings_from_options(option_values({"space": "pit", "noise_floor": 0.5}))
    recorded = json.loads(json.dumps(chosen.to_json()))
    assert recorded["noise_floor"] == 0.5
    again = SearchSettings.from_json(recorded)
    assert again == chosen and again.option("noise_floor") == 0.5
    assert settings_digest(chosen, "0" * 64) != settings_digest(plain, "0" * 64)
    with pytest.raises(ConfigError, match="setting 'noise_floor' has a value of the wrong type"):
        SearchSettings.from_json({**recorded, "noise_floor": "high"})
    with pytest.raises(ConfigError, match="unknown setting 'noise_ceiling'"):
        SearchSettings.from_json({**recorded, "noise_ceiling": 1.0})
    with pytest.raises(ConfigError, match=r"--noise-floor 0.25 \(the run has 0.5\)"):
        check_resume({"noise_floor": 0.25}, chosen, "pit", "RUN")
    check_resume({"noise_floor": 0.5}, chosen, "pit", "RUN")


def test_a_resume_with_another_value_of_a_registered_option_is_refused(noise_floor, af_small_file, session_cache,
                                                                       tmp_path, capsys):
    out = tmp_path / "run"
    line = ["search", "--bench", str(af_small_file), "--targets", "c100_kd,flower_kd", "--population", "4",
            "--batch-size", "2", "--workers", "1", "--cache-dir", str(session_cache.root), "--retry-cap", "2",
            "--search-fraction", "0.75", "--quiet", "--out", str(out)]
    assert main(line + ["--iterations", "1", "--noise-floor", "0.5"]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["settings"]["noise_floor"] == 0.5
    capsys.readouterr()
    assert main(line + ["--resume", "--iterations", "2", "--noise-floor", "0.25"]) == 2
    assert "--noise-floor 0.25 (the run has 0.5)" in capsys.readouterr().err
    # config.json edited to another value: its digest is not the checkpoint's, and the resume names the setting
    config["settings"]["noise_floor"] = 0.25
    (out / "config.json").write_text(json.dumps(config))
    with pytest.raises(RunDirError, match="noise_floor 0.25 \\(then 0.5\\)"):
        ProxySearch(out=str(out), resume=True, quiet=True).fit()
    config["settings"]["noise_floor"] = 0.5
    (out / "config.json").write_text(json.dumps(config))
    assert main(line + ["--resume", "--iterations", "2", "--noise-floor", "0.5"]) == 0
    assert json.loads((out / "checkpoint.json").read_text())["iteration"] == 2
