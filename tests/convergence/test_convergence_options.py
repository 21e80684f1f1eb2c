"""The `convergence` options are generated from the config dataclasses: one per field, with the
field's default, the real choice tables, comma lists for the grid settings."""
import dataclasses
import subprocess
import sys

from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.convergence.command import convergence
from ctcbench.convergence.options import command_line_settings
from ctcbench.convergence.trainconfig import TrainConfig

# written out here, not read from the code under test
DERIVED = {"model.num_classes", "model.height", "model.width", "model.max_len"}
RENAMED = {"model.name": "--model", "data.kind": "--data", "data.seed": "--data-seed"}
GRID = {"optimizer", "lr", "seed", "model.name"}


def leaf_fields(cls, prefix=""):
    """(dotted key, field) of every leaf field of a dataclass, nested ones included."""
    for f in dataclasses.fields(cls):
        nested = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if dataclasses.is_dataclass(nested):
            yield from leaf_fields(nested, f"{prefix}{f.name}.")
        else:
            yield prefix + f.name, f


def options_by_name():
    ctx = convergence.make_context("convergence", [])
    params = {opt: p for p in convergence.get_params(ctx) for opt in [*p.opts, *p.secondary_opts]}
    return ctx, params


def test_every_dataclass_field_has_an_option_with_its_default():
    """Each field of TrainConfig, ModelConfig and DataConfig (derived ones aside) has its
    --kebab-name option, and running with no options gives the field's default (a one-value
    list for the grid settings)."""
    ctx, params = options_by_name()
    keys = [k for k, _ in leaf_fields(TrainConfig) if k not in DERIVED]
    assert {"steps", "model.channels", "data.noise"} <= set(keys)  # nested fields are walked
    for key, f in leaf_fields(TrainConfig):
        if key in DERIVED:
            continue
        name = RENAMED.get(key, "--" + key.rpartition(".")[2].replace("_", "-"))
        assert name in params, f"{key} has no option {name}"
        value = ctx.params[params[name].name]
        assert value == ((f.default,) if key in GRID else f.default), key
        if isinstance(f.default, bool):
            assert "--no-" + name[2:] in params, key


def test_existing_option_names_still_parse():
    """Every option the command took before its options were generated still parses."""
    ctx = convergence.make_context("convergence", [
        "--optimizer", "adam,sgd", "--lr", "1e-3,3e-3", "--seed", "0,1", "--model", "crnn",
        "--batchnorm", "--channels", "8", "--hidden", "16", "--beta1", "0.5", "--beta2", "0.9",
        "--alpha", "0.9", "--momentum", "0.1", "--weight-decay", "0.01", "--clip", "1",
        "--warmup", "5", "--reduction", "sum", "--ctc-backend", "numpy", "--data", "digits",
        "--charset", "012", "--min-len", "2", "--max-len", "5", "--train-size", "10",
        "--test-size", "5", "--data-seed", "3", "--steps", "7", "--batch-size", "2",
        "--eval-every", "3", "--beam", "2", "--threads", "2", "--jobs", "1", "--out", "o",
        "--cache-dir", "c", "--format", "json"])
    assert command_line_settings(ctx) == {
        "optimizer": ("adam", "sgd"), "lr": (1e-3, 3e-3), "seed": (0, 1), "model.name": ("crnn",),
        "model.batchnorm": True, "model.channels": 8, "model.hidden": 16, "beta1": 0.5,
        "beta2": 0.9, "alpha": 0.9, "momentum": 0.1, "weight_decay": 0.01, "clip": 1.0,
        "warmup": 5, "reduction": "sum", "ctc_backend": "numpy", "data.kind": "digits",
        "data.charset": "012", "data.min_len": 2, "data.max_len": 5, "data.train_size": 10,
        "data.test_size": 5, "data.seed": 3, "steps": 7, "batch_size": 2, "eval_every": 3,
        "beam": 2, "threads": 2}
    assert (ctx.params["jobs"], ctx.params["out"], ctx.params["fmt"]) == (1, "o", "json")


def test_only_options_given_count_as_given():
    """Options left at their defaults are not reported as given on the command line."""
    ctx = convergence.make_context("convergence", ["--lr", "0.003", "--no-gaps"])
    assert command_line_settings(ctx) == {"lr": (0.003,), "data.gaps": False}


def test_help_lists_choices_from_the_tables():
    """--help shows the optimizer, model, data and reduction choices (written out here: the
    names the docs use), and an example config file."""
    res = CliRunner().invoke(cli, ["convergence", "--help"], terminal_width=200)
    assert res.exit_code == 0
    for choices in ("adam|rmsprop|sgd|adamw|adadelta",
                    "linecnn|linecnnlstm|crnn|rescrnn|perpos|repeatvec",
                    "lines|captcha|digits", "mean|sum|per-line"):
        assert choices in res.output
    assert "--config FILE.toml" in res.output and "[model]" in res.output


def test_cli_import_and_help_do_not_import_torch():
    """`ctcbench --help` stays instant: options are generated only when `convergence` is used."""
    code = ("import sys; from ctcbench.cli import cli; cli(['--help'], standalone_mode=False); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "convergence" in done.stdout
