"""convergence(), the driver as a library function: a RunResult, settings errors named by
key (or by the config file's key), no report written, a scenario's result for its folder."""
import pytest
import torch
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.settings import ConfigError
from ctcbench.convergence.run import ScenarioResult, convergence
from ctcbench.runs.store import RunResult

TINY = {"data.train_size": 48, "data.test_size": 8, "data.min_len": 1, "data.max_len": 3,
        "steps": 2, "eval_every": 2, "batch_size": 4, "model.channels": 4, "model.hidden": 8}


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def test_a_grid_returns_its_rows_and_writes_no_report(tmp_path):
    """Two seeds: a RunResult with one row per run, the exports listed; report.html is the
    command line's to write, not the driver's."""
    out = tmp_path / "grid"
    result = convergence({**TINY, "seed": (0, 1)}, out=out, jobs=1, cache_dir=tmp_path / "cache",
                         echo=lambda line: None)
    assert isinstance(result, RunResult) and result.run_dir == out
    assert sorted(result.rows["seed"]) == [0, 1] and result.summary["runs"] == 2
    assert all(f.is_file() for f in result.files)
    assert not (out / "report.html").exists()


def test_a_bad_setting_is_named_by_its_key_or_by_the_file(tmp_path):
    """A setting given in the dict is a ConfigError naming its key (the CLI renames it to the
    option); one read from the config file is named FILE: key."""
    with pytest.raises(ConfigError, match=r"^data.max_len: expected >= min_len \(5\), got 3$") as exc:
        convergence({**TINY, "data.min_len": 5}, out=tmp_path / "x")
    assert exc.value.key == "data.max_len"
    path = tmp_path / "c.toml"
    path.write_text("[data]\nmin_len = 0\n")
    with pytest.raises(ValueError, match=f"^{path}: data.min_len: expected >= 1, got 0$") as exc:
        convergence({}, config_file=path, out=tmp_path / "x")
    assert not isinstance(exc.value, ConfigError)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"jobs": 0}, "--jobs: expected >= 1, got 0"),
    ({"resume": True}, "--resume: expected --out DIR, the run folder to continue, got none"),
    ({"resume": True, "scenario": "repeatvec"},
     "--resume: expected --out DIR, the scenario folder to continue, got none"),
    ({"executor": "dask-local", "scheduler": "tcp://10.0.0.1:8786"},
     "--scheduler: expected no --executor dask-local with a scheduler address"),
])
def test_bad_arguments_are_named_by_their_option(tmp_path, kwargs, message):
    """Each fails before anything is written."""
    with pytest.raises(ValueError, match=message):
        convergence(TINY, cache_dir=tmp_path / "cache", **kwargs)
    assert not (tmp_path / "cache").exists()


def test_resume_without_out_is_one_error_line(tmp_path):
    """`--resume` alone on the command line: one line naming --resume and --out."""
    res = CliRunner().invoke(cli, ["convergence", "--resume"])
    assert res.exit_code == 1
    assert res.output.strip() == ("Error: --resume: expected --out DIR, the run folder to "
                                  "continue, got none")


def test_a_scenario_returns_a_result_for_its_folder(tmp_path):
    """The repeatvec scenario: the scenario folder's result, each arm's runs with an arm
    column, the arm's own RunResult, its verdicts as summary, its files."""
    out = tmp_path / "sc"
    lines = []
    result = convergence({**TINY, "seed": (0,)}, scenario="repeatvec", out=out, jobs=1,
                         cache_dir=tmp_path / "cache", echo=lines.append)
    assert isinstance(result, ScenarioResult) and result.run_dir == out
    assert list(result.arms) == ["baseline"] and result.arms["baseline"].run_dir == out / "baseline"
    assert result.rows.columns[0] == "arm"
    assert sorted(result.rows["model"]) == ["crnn", "repeatvec"]
    assert set(result.rows["arm"]) == {"baseline"}
    assert result.summary["scenario"] == "repeatvec" and "verdicts" in result.summary
    assert result.files == [out / "verdicts.json", out / "scenario.png"]
    assert lines == ["scenario repeatvec: arm 1/1 baseline"]
