"""The conversions of the option table: one rule for every list option (adversarial pass 4, F1, F2, F11)."""

from __future__ import annotations

import re

import pytest

from autoprox.core.errors import ConfigError
from autoprox.search.options import OPTIONS, option_values
from autoprox.cli.main import main


def refused(capsys, *argv: str) -> str:
    """The one ``autoprox search: error:`` line argparse writes, exit status 2, for a value a conversion refuses."""
    with pytest.raises(SystemExit) as exit:
        main(["search", "--space", "pit", *argv])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("autoprox search: error:")]
    assert exit.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("name, twice, said", [
    ("targets", "c100_kd,c100_kd", "c100_kd is given twice"),
    ("aggregation", "mean,mean", "mean is given twice"),
    ("aggregation", "mean,block_mean", "mean is given twice"),
    ("terminals", "stats,stats", "stats is given twice"),
    ("operators", "paper,paper", "paper is given twice"),
    ("operators", "paper,element_wise_sum", "element_wise_sum is given twice (paper holds it)"),
    ("stat_seeds", "0,0", "0 is given twice"),
    ("weights", "c100_kd=1,c100_kd=2", "c100_kd is given twice"),
    ("seed_proxies", "autoprox_a,autoprox_a", "autoprox_a is given twice"),
])
def test_a_name_given_twice_is_refused_by_every_list_option(name, twice, said, capsys):
    """``--targets c100_kd,c100_kd`` counted one target twice in the JCM and ``--aggregation mean,mean`` gave the
    mean double odds, while ``--operators paper,paper`` was refused."""
    with pytest.raises(ConfigError, match=f"^{name}: {re.escape(said)}"):
        OPTIONS[name].value(twice)
    assert said in refused(capsys, f"--{name.replace('_', '-')}", twice)


@pytest.mark.parametrize("name", ["targets", "aggregation", "terminals", "operators", "stat_seeds", "weights",
                                  "seed_proxies"])
def test_an_empty_list_is_refused_not_read_as_the_default(name, capsys):
    """``--targets ''`` searched the three default targets, while ``--operators ''`` was refused. An empty comma
    string is refused by every list option, and so is an empty sequence where the default is not empty."""
    assert "an empty list" in refused(capsys, f"--{name.replace('_', '-')}", "")
    with pytest.raises(ConfigError, match="an empty list"):
        OPTIONS[name].value("")
    if OPTIONS[name].default not in ((), {}):
        with pytest.raises(ConfigError, match="an empty list"):
            OPTIONS[name].value([])


def test_a_default_given_back_is_the_default_and_one_target_is_one_target():
    """``get_params`` gives ``targets=()`` back (scikit-learn's clone passes it again); ``--targets Y`` of the
    outside check is one target."""
    assert option_values({"targets": (), "weights": {}})["targets"] == ()
    # a list is a tuple to every list option: the empty one too, where the default is empty
    assert option_values({"targets": [], "seed_proxies": [], "space_file": []}) == option_values({})
    assert OPTIONS["targets"].value("acc") == ("acc",)
    assert OPTIONS["seed_proxies"].value("block_mean(to_mean_scalar(F1))") == ("block_mean(to_mean_scalar(F1))",)


def test_gene_with_other_aggregations_names_the_real_names(capsys):
    """``--aggregation gene,mean`` said "unknown aggregation 'block_gene'", a name the user never typed."""
    assert refused(capsys, "--aggregation", "gene,mean").endswith(
        "gene stands alone (all four, chosen by evolution): give gene or a comma list of mean, sum, wmean, std")
    assert OPTIONS["aggregation"].value("gene") == "gene"


def test_an_integer_bound_refuses_above_it_and_a_recorded_value_is_read_as_before():
    """``integer(minimum, maximum)``: a value typed or passed above ``maximum`` is refused in one line; what a run
    recorded is checked against the minimum alone, so a run recorded before a bound was added stays readable."""
    from autoprox.search.conversions import integer

    bounded = integer(1, 1000)
    assert bounded("1000") == 1000 and bounded(1) == 1
    with pytest.raises(ConfigError, match=r"^expected at most 1,000, got 1,001$"):
        bounded("1001")
    with pytest.raises(ConfigError, match=r"^expected at least 1, got 0$"):
        bounded(0)
    assert bounded.recorded(10 ** 7) and not bounded.recorded(0)
    assert option_values({"iterations": 10 ** 6})["iterations"] == 10 ** 6
    with pytest.raises(ConfigError, match=r"^iterations: expected at most 1,000,000, got 1,000,001$"):
        option_values({"iterations": 10 ** 6 + 1})


def test_a_negative_statistics_seed_is_refused_where_it_is_typed(capsys):
    """``--stat-seeds -1`` was accepted, wrote the run's config.json, then ended in a ``ValueError: expected
    non-negative integer`` traceback from NumPy's seed sequence inside the statistics workers (``vit-search``:
    every architecture failed). A seed of the statistics is at least 0, from the command line and Python alike,
    and a recorded negative one is no recorded value."""
    assert "--stat-seeds: expected at least 0, got -1" in refused(capsys, "--stat-seeds", "0,-1")
    with pytest.raises(ConfigError, match="^stat_seeds: expected at least 0, got -1"):
        OPTIONS["stat_seeds"].value([-1])
    assert OPTIONS["stat_seeds"].value("0,1") == (0, 1)
    assert not OPTIONS["stat_seeds"].is_recorded([-1]) and OPTIONS["stat_seeds"].is_recorded([3])


def test_rank_refuses_a_negative_seed_of_its_table(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["rank", "--proxy", "params,flops", "--space", "pit", "--seeds", "-2"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "argument --seeds: expected at least 0, got -2" in err, err
