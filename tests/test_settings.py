"""ctcbench.settings: a setting declared once gives its option, its default, its help and its
check; a toy declaration stands in for a driver's, and the datasheet's own is run both ways."""
from __future__ import annotations

from dataclasses import dataclass

import click
import pytest
from click.testing import CliRunner

from ctcbench.settings import (ConfigError, SettingsCommand, at_least, check_config,
                               command_line_settings, setting, settings)


@dataclass(frozen=True)
class Toy:
    stages: tuple[str, ...] = setting(("a", "b"), "Stages.", choices=lambda: ("a", "b", "c"),
                                      metavar="STAGE")
    budget: float = setting(7.5, "Seconds.", check=at_least(1))
    tries: int | None = setting(None, "Tries.", check=at_least(1), option="--max-tries")


def toy_command():
    """``toy`` in a group of ctcbench's kind, which words option errors as the library does."""
    from ctcbench.cli import Commands

    @click.group(cls=Commands)
    def group():
        pass

    @group.command(cls=SettingsCommand, settings=lambda: settings(Toy))
    @click.pass_context
    def toy(ctx, **_):
        given = command_line_settings(ctx, settings(Toy))
        config = check_config(Toy(**given))
        click.echo(f"{given} {config}")
    return group


def run(*args):
    return CliRunner().invoke(toy_command(), ["toy", *args])


def test_the_declaration_makes_the_option_its_default_and_its_help():
    help_text = run("--help").output
    assert "--budget FLOAT" in help_text and "[default: 7.5]" in help_text
    assert "--stages STAGE[,...]" in help_text and "[default: a,b]" in help_text
    assert "Some of a, b, c." in help_text  # the choices, from the table
    assert "--max-tries" in help_text  # the option a field names
    res = run()
    assert res.exit_code == 0 and res.output.startswith("{} Toy(stages=('a', 'b'), budget=7.5")


def test_given_values_are_parsed_and_only_they_are_passed():
    res = run("--stages", "c", "--stages", "a", "--max-tries", "3")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("{'stages': ('c', 'a'), 'tries': 3}")


@pytest.mark.parametrize("args,message", [
    (["--budget", "0.5"], "--budget: expected >= 1, got 0.5"),
    (["--stages", "a,bb"], "--stages: expected some of a, b, c, got 'bb' (did you mean 'b'?)"),
    (["--stages", "a,a"], "--stages: expected distinct values, got 'a,a'"),
    (["--stages", " ,"], "--stages: expected STAGE[,STAGE...], got ' ,'"),
    (["--max-tries", "0"], "--max-tries: expected >= 1, got 0"),  # named by its option
])
def test_a_bad_value_is_one_line_naming_the_option(args, message):
    res = run(*args)
    assert res.exit_code != 0 and message in res.output, res.output
    assert "Traceback" not in res.output


def test_the_library_names_the_key():
    with pytest.raises(ConfigError, match=r"^tries: expected >= 1, got 0$"):
        check_config(Toy(tries=0))
    with pytest.raises(ConfigError, match=r"^stages: expected at least one value"):
        check_config(Toy(stages=()))


def test_the_datasheet_checks_its_settings_before_any_folder(tmp_path):
    from ctcbench.cli import cli
    from ctcbench.datasheet.run import datasheet
    with pytest.raises(ConfigError, match=r"^budget: expected a finite positive number, got -1"):
        datasheet(["numpy"], budget=-1, out=tmp_path / "a", progress=False)
    with pytest.raises(ValueError, match=r"did you mean 'budget='"):
        datasheet(["numpy"], budgte=1, out=tmp_path / "b", progress=False)
    res = CliRunner().invoke(cli, ["datasheet", "--backend", "numpy", "--max-memory", "0",
                                   "--out", str(tmp_path / "c")])
    assert res.exit_code == 1 and "Error: --max-memory: expected >= 1, got 0" in res.output
    assert not any(tmp_path.iterdir())


def test_the_datasheets_reproduce_command_parses_back_to_its_settings():
    """datasheet.md's command (``command_line``) read by the datasheet's own option parser
    gives back every setting of the run, large seeds and small floats included."""
    import shlex

    from ctcbench.cli import cli
    from ctcbench.datasheet.config import DatasheetSettings, command_line, datasheet_settings
    run = DatasheetSettings(budget=0.25, timeout=1e-3, seed=10_000_000, trials=7,
                            stages=("limits", "speed"), axes=("T",), dtypes=("float64",))
    config = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(run).items()}
    command = cli.commands["datasheet"]
    ctx = command.make_context("datasheet", ["--backend", "numpy",
                                             *shlex.split(command_line(config))])
    assert DatasheetSettings(**command_line_settings(ctx, datasheet_settings())) == run
