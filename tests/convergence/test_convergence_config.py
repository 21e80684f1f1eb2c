"""Settings in one place: the checks behind every config, --config TOML files, and the
comparison with a run folder's stored config on resume."""
import json

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.settings import ConfigError
from ctcbench.convergence.runconfig import config_conflicts, load_toml
from ctcbench.convergence.data import DataConfig
from ctcbench.convergence.trainconfig import ModelConfig, TrainConfig

CONFIG = """\
optimizer = ["adam", "sgd"]
lr = 0.01
steps = 5                # overridden on the command line
batch_size = 4
eval_every = 2

[model]
channels = 4
hidden = 8

[data]
train_size = 48
test_size = 8
min_len = 1
max_len = 3
seed = 7
"""


def invoke(*args):
    return CliRunner().invoke(cli, ["convergence", *map(str, args)], catch_exceptions=False)


@pytest.fixture(scope="module")
def toml_run(tmp_path_factory):
    """A two-run grid from a TOML file, with --steps overridden on the command line.
    Returns (run folder, config file, cache folder, result)."""
    tmp = tmp_path_factory.mktemp("toml-run")
    path, out, cache = tmp / "conv.toml", tmp / "run", tmp / "cache"
    path.write_text(CONFIG)
    res = invoke("--config", path, "--steps", 3, "--jobs", 1, "--out", out, "--cache-dir", cache,
                 "--format", "json")
    return out, path, cache, res


def test_config_file_round_trip_with_override(toml_run):
    """Every value of the file reaches the stored config and the runs, except the one the
    command line overrides."""
    out, _, _, res = toml_run
    assert res.exit_code == 0, res.output
    stored = json.loads((out / "meta.json").read_text())["config"]
    base, grid = stored["base"], stored["grid"]
    assert base["steps"] == 3  # the command line wins over the file's 5
    assert (base["batch_size"], base["eval_every"]) == (4, 2)
    assert (base["model"]["channels"], base["model"]["hidden"]) == (4, 8)
    data_keys = ("train_size", "test_size", "min_len", "max_len", "seed")
    assert {k: base["data"][k] for k in data_keys} == {
        "train_size": 48, "test_size": 8, "min_len": 1, "max_len": 3, "seed": 7}
    assert grid == {"optimizers": ["adam", "sgd"], "lrs": [0.01], "seeds": [0], "models": ["crnn"]}
    rows = json.loads(res.stdout)["runs"]
    assert sorted((r["optimizer"], r["lr"], r["steps"]) for r in rows) == [
        ("adam", 0.01, 3), ("sgd", 0.01, 3)]


def test_resume_with_a_different_option_names_it(toml_run):
    """Resuming with an option whose value differs from the stored config is an error naming
    the option, the folder and both values; nothing is run."""
    out, _, _, _ = toml_run
    before = (out / "summary.csv").stat().st_mtime_ns
    res = invoke("--out", out, "--resume", "--lr", "0.003", "--channels", 4, "--data-seed", 8)
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"Error: --lr: the run folder {out} was started with 0.01, got 0.003; "
        "drop the option to resume",
        f"--data-seed: the run folder {out} was started with 7, got 8; drop the option to resume"]
    assert (out / "summary.csv").stat().st_mtime_ns == before


def test_resume_with_the_same_options_resumes(toml_run):
    """Options equal to the stored config (the original command line) are no conflict."""
    out, path, cache, first = toml_run
    res = invoke("--config", path, "--steps", 3, "--out", out, "--resume", "--cache-dir", cache,
                 "--format", "json")
    assert res.exit_code == 0, res.output
    assert [r["final_cer"] for r in json.loads(res.stdout)["runs"]] == [
        r["final_cer"] for r in json.loads(first.stdout)["runs"]]


def test_resume_with_the_config_file_alone_conflicts_on_the_overridden_key(toml_run):
    """The file's steps = 5 was overridden by --steps 3 when the run started: the file alone
    does not describe the run, and the error says so."""
    out, path, _, _ = toml_run
    res = invoke("--config", path, "--out", out, "--resume")
    assert res.exit_code == 1
    assert f"--steps: the run folder {out} was started with 3, got 5" in res.output


STORED = {"base": {"lr": 0.001, "steps": 3, "model": {"name": "crnn", "channels": 4},
                   "data": {"seed": 0, "charset": "01"}},
          "grid": {"optimizers": ["adam", "rmsprop"], "lrs": [0.001], "seeds": [0],
                   "models": ["crnn"]}}


@pytest.mark.parametrize("given,messages", [
    ({"steps": 3, "model.channels": 4, "data.seed": 0, "lr": (0.001,)}, []),
    ({"lr": (0.003,)}, ["--lr: the run folder R was started with 0.001, got 0.003"]),
    ({"optimizer": ("adam",)},
     ["--optimizer: the run folder R was started with adam,rmsprop, got adam"]),
    ({"model.name": ("crnn", "perpos")},
     ["--model: the run folder R was started with crnn, got crnn,perpos"]),
    ({"model.channels": 8, "data.charset": "01"},
     ["--channels: the run folder R was started with 4, got 8"]),
    ({"data.seed": 1, "steps": 4}, ["--data-seed: the run folder R was started with 0, got 1",
                                    "--steps: the run folder R was started with 3, got 4"]),
    # not stored: the run used the default (TrainConfig.from_dict fills it in)
    ({"beam": 0, "model.batchnorm": False}, []),
    ({"beam": 2}, ["--beam: the run folder R was started with 0, got 2"]),
    ({"model.batchnorm": True}, ["--batchnorm: the run folder R was started with false, got true"]),
])
def test_config_conflicts(given, messages):
    """Each given setting that differs from the stored config, and only those, is one message."""
    assert config_conflicts(STORED, given, run_dir="R") == [
        m + "; drop the option to resume" for m in messages]


@pytest.mark.parametrize("cfg,message", [
    (TrainConfig(seed=-1), "seed: expected a non-negative integer, got -1"),
    (TrainConfig(steps="3"), "steps: expected an integer, got '3'"),
    (TrainConfig(lr=float("inf")), "lr: expected a finite positive number, got inf"),
    (TrainConfig(beta2=1.0), "beta2: expected a value in [0, 1), got 1.0"),
    (TrainConfig(model=ModelConfig(name="vgg")), "model.name: expected one of linecnn, "
                                                 "linecnnlstm, crnn, rescrnn, perpos, repeatvec, got 'vgg'"),
    (TrainConfig(data=DataConfig(min_len=0)), "data.min_len: expected >= 1, got 0"),
    (TrainConfig(data=DataConfig(height=40)), "data.height: expected a multiple of 16, got 40"),
    (TrainConfig(data=DataConfig(kind="digits", charset="ab")),
     "data.charset: expected digits only for data kind 'digits', got 'ab'"),
    (DataConfig(min_len=5, max_len=4), "max_len: expected >= min_len (5), got 4"),
])
def test_check_names_the_key(cfg, message):
    """Every config's check() goes through one path and names the bad key, nested ones dotted."""
    with pytest.raises(ConfigError) as info:
        cfg.check()
    assert str(info.value) == message


@pytest.mark.parametrize("args,message", [
    (["--seed", "-1"], "--seed: expected a non-negative integer, got -1"),
    (["--seed", "1,-1"], "--seed: expected a non-negative integer, got -1"),
    (["--data-seed", "-1"], "--data-seed: expected a non-negative integer, got -1"),
    (["--data", "mnist"], "--data: expected one of lines, captcha, digits, got 'mnist'"),
    (["--reduction", "none"], "--reduction: expected one of mean, sum, per-line, got 'none'"),
    (["--height", "20"], "--height: expected a multiple of 16, got 20"),
])
def test_bad_option_values_name_the_option(tmp_path, args, message):
    """A bad value on the command line is one error line naming the option; no folder is made."""
    res = invoke(*args, "--out", tmp_path / "x")
    assert res.exit_code == 1
    assert res.output.strip() == f"Error: {message}"
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("text,message", [
    ("stepz = 3\n", "{path}: stepz: expected a known key (alpha, batch_size, beam, beta1"),
    ("[model]\nchanels = 4\n", "{path}: model.chanels: expected a known [model] key (batchnorm, "
                               "channels, hidden, name, stride, window), got an unknown key"),
    ("[optim]\nlr = 1\n", "{path}: optim: expected a known key"),
    ('model = "crnn"\n', "{path}: model: expected a [model] table (its keys: name, batchnorm, "
                         "channels, hidden, window, stride), got 'crnn'"),
    ("[model]\nheight = 64\n", "{path}: model.height: expected a known [model] key"),
    ('steps = "many"\n', "{path}: steps: expected an integer, got 'many'"),
    ("steps = 2.5\n", "{path}: steps: expected an integer, got 2.5"),
    ("[model]\nbatchnorm = 1\n", "{path}: model.batchnorm: expected true or false, got 1"),
    ("clip = [1.0, 2.0]\n", "{path}: clip: expected a number, got [1.0, 2.0]"),
    ('lr = ["fast"]\n', "{path}: lr: expected a number or a list of them, got ['fast']"),
    ("seed = []\n", "{path}: seed: expected at least one value, got []"),
    ("seed = [1, 1]\n", "{path}: seed: expected distinct values, got [1, 1]"),
    ("steps = \n", "{path}: expected TOML, got a syntax error"),
])
def test_bad_config_file_names_file_and_key(tmp_path, text, message):
    """Unknown keys and wrong types in --config are one error line naming the file and the
    key; nothing is written."""
    path = tmp_path / "bad.toml"
    path.write_text(text)
    res = invoke("--config", path, "--out", tmp_path / "x")
    assert res.exit_code == 1
    assert res.output.startswith("Error: " + message.format(path=path))
    assert len(res.output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_missing_config_file_is_named(tmp_path):
    """A --config file that does not exist is a clear error naming the option and the path."""
    res = invoke("--config", tmp_path / "none.toml")
    assert res.exit_code == 1
    assert f"--config: expected an existing TOML file, got '{tmp_path / 'none.toml'}'" in res.output


def test_bad_value_from_the_file_names_the_file_key_unless_overridden(tmp_path):
    """A value that fails its check is named by where it came from: the file's key, or the
    option that overrode it."""
    path = tmp_path / "c.toml"
    path.write_text("[data]\nmin_len = 0\n")
    res = invoke("--config", path, "--out", tmp_path / "x")
    assert res.output.strip() == f"Error: {path}: data.min_len: expected >= 1, got 0"
    res = invoke("--config", path, "--min-len", -2, "--out", tmp_path / "x")
    assert res.output.strip() == "Error: --min-len: expected >= 1, got -2"
    assert not (tmp_path / "x").exists()


def test_load_toml_types_and_lists(tmp_path):
    """Grid settings become tuples whether given as a value or a list; ints become floats
    where the setting is a float."""
    path = tmp_path / "c.toml"
    path.write_text('optimizer = "adam"\nlr = [1, 0.5]\nclip = 2\n'
                    '[model]\nname = ["crnn", "perpos"]\n[data]\ngaps = false\n')
    assert load_toml(path) == {"optimizer": ("adam",), "lr": (1.0, 0.5), "clip": 2.0,
                               "model.name": ("crnn", "perpos"), "data.gaps": False}
    assert type(load_toml(path)["clip"]) is float


def test_a_config_error_survives_a_worker_process():
    """Raised in a spawned worker, a ConfigError is pickled back with its key and message."""
    import pickle
    exc = pickle.loads(pickle.dumps(ConfigError("curriculum_len", "expected 3, got 2")))
    assert (exc.key, str(exc)) == ("curriculum_len", "curriculum_len: expected 3, got 2")


def test_resume_reads_the_stored_config_from_meta_json(tmp_path):
    """stored_config reads the folder's meta.json (None without a convergence config), which
    --resume then holds the options given against."""
    from ctcbench.convergence.config import stored_config
    assert stored_config(tmp_path) is None
    (tmp_path / "meta.json").write_text('{"kind": "convergence", "config": {"base": {}, "grid": {}}}')
    assert stored_config(tmp_path) == {"base": {}, "grid": {}}
    (tmp_path / "meta.json").write_text('{"kind": "compare", "config": {}}')
    assert stored_config(tmp_path) is None
    (tmp_path / "meta.json").write_text("not json")
    assert stored_config(tmp_path) is None
