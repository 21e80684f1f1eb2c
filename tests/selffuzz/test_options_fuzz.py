"""Every option of every command, read off the click tree (a new option is fuzzed with no new
list), given values its own declaration refuses, alone and in company: each answer is a
result or one ``Error:`` line naming the option, never a traceback, a library's words or a
hang."""
from __future__ import annotations

import itertools
from pathlib import Path

import click
import numpy as np
import pytest
from hypothesis import given, strategies as st

from selffuzz.strategies_cli import (bad_value, check, choices_of, commands, fuzz_settings,
                                     is_path, options, run_cli, value_options)

BOUND_S = 60  # one call: a bad value is refused before any slow work, a cheap run ends sooner


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder with what the cheap invocations read: a one-size bench grid, a doctor batch."""
    tmp = tmp_path_factory.mktemp("options")
    (tmp / "grid.json").write_text('[{"T": 20, "N": 2, "C": 5, "L": 4}]')
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(12, 2, 5))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.savez(tmp / "batch.npz", log_probs=log_probs, targets=np.array([[1, 2], [3, 4]]),
             input_lengths=np.array([12, 10]), target_lengths=np.array([2, 2]))
    (tmp / "empty-run").mkdir()
    return tmp


def cheap(name: str, place) -> list[str]:
    """Arguments that make ``ctcbench NAME`` finish in seconds, so a bad value it accepts
    costs little; a command missing here is fuzzed bare."""
    return {
        "compare": ["--backend", "numpy", "--case", "published/tf_basic", "--no-plot"],
        "bench": ["--grid", place / "grid.json", "--backend", "numpy", "--repeat", "1"],
        "fuzz": ["--backend", "numpy", "--against", "numpy", "--budget", "1"],
        "datasheet": ["--backend", "numpy", "--stages", "determinism"],
        "atlas": ["--backend", "numpy"],
        "convergence": ["--steps", "2", "--eval-every", "1", "--batch-size", "4", "--channels",
                        "4", "--hidden", "8", "--train-size", "16", "--test-size", "4",
                        "--min-len", "1", "--max-len", "3", "--jobs", "1",
                        "--cache-dir", place / "cache"],
        "doctor": [place / "batch.npz"],
        "predict": ["--checkpoint", place / "missing.pt", place / "missing.png"],
        "report": [place / "empty-run"],
    }.get(name, [])


COMMANDS = commands()
CASES = [(path, o.opts[0]) for path, cmd in COMMANDS.items() for o in value_options(cmd)]
_counter = itertools.count()
# options whose valid values choose large work by design (every backend, a whole scenario, a
# Dask cluster, installing releases) or a user's code (test_functions_*): not drawn in company
EXPENSIVE = ("--all", "--scenario", "--executor", "--scheduler", "--versions", "--function",
             "--decoder", "--aligner")


def _args(path, place, extra) -> list[str]:
    cmd = COMMANDS[path]
    out = [] if not any("--out" in o.opts for o in options(cmd)) or "--out" in extra else \
        ["--out", place / f"run-{next(_counter)}"]
    return [*path, *cheap(path[-1], place), *out, *extra]


def test_every_command_and_option_is_found():
    """The walk reaches every command and the generated setting options (so the fuzz below
    covers them): the oracle is the commands `ctcbench --help` lists."""
    from click.testing import CliRunner

    from ctcbench.cli import cli
    listed = CliRunner().invoke(cli, ["--help"]).output.split("Commands:")[1].splitlines()
    assert {p[-1] for p in COMMANDS} == {line.split()[0] for line in listed if line.strip()}
    assert ("compare", "--max-change") in [(p[-1], o) for p, o in CASES]  # a setting
    assert ("convergence", "--channels") in [(p[-1], o) for p, o in CASES]  # a nested one


@fuzz_settings(quick=2)
@given(data=st.data())
@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: " ".join(p))
def test_a_value_its_declaration_refuses_is_one_line_naming_the_option(path, place, data,
                                                                        oracle):
    """One option of the command, drawn from its declaration, given a bad value."""
    cmd = COMMANDS[path]
    opts = value_options(cmd)
    if not opts:
        pytest.skip("no option takes a value")
    option = data.draw(st.sampled_from(opts), label="option")
    value = data.draw(bad_value(cmd, option, place), label="value")
    out = run_cli(_args(path, place, [option.opts[0], value]), BOUND_S, cwd=place)
    inside = [p.name for p in Path(value).iterdir()] if is_path(option) and value and \
        Path(value).is_dir() else []  # a file of a folder given, named by its name
    given = [value] if value and (is_path(option) or len(value) >= 8) else []  # a file named
    arguments = [p.human_readable_name.rstrip(".") for p in cmd.params  # or the input it
                 if isinstance(p, click.Argument)]  # conflicts with (doctor's FILE)
    names = (*option.opts, option.name, *given, *inside, *arguments,
             *([option.metavar] if option.metavar else []))
    check(out, oracle, "options: " + path[-1], names=names)


def _valid(cmd, option, place) -> st.SearchStrategy[list[str]]:
    """A value the declaration allows, where one can be drawn cheaply."""
    if option.is_flag:
        return st.just([option.opts[0]])
    choices = choices_of(cmd, option)
    if choices:
        return st.sampled_from(choices).map(lambda c: [option.opts[0], c])
    if is_path(option):
        return st.sampled_from([place / "a-folder", place / "fresh" / "x.out"]).map(
            lambda p: [option.opts[0], str(p)])
    return st.sampled_from(["1", "0", "numpy", "x:y"]).map(lambda v: [option.opts[0], v])


@fuzz_settings(quick=1)
@given(data=st.data())
@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: " ".join(p))
def test_options_in_any_company_are_a_result_or_one_line(path, place, data, oracle):
    """Two to four options together, each with a value its declaration allows (flags,
    choices, paths): conflicting ones are refused in one line, the rest give a result."""
    cmd = COMMANDS[path]
    (place / "a-folder").mkdir(exist_ok=True)
    pool = [o for o in options(cmd) if o.opts[0] not in EXPENSIVE]
    chosen = data.draw(st.lists(st.sampled_from(pool), min_size=min(2, len(pool)), max_size=4,
                                unique_by=lambda o: o.opts[0]), label="options")
    extra = [a for o in chosen for a in data.draw(_valid(cmd, o, place), label=o.opts[0])]
    check(run_cli(_args(path, place, extra), BOUND_S, cwd=place), oracle, "options: " + path[-1])


# -- what the fuzz found, kept: each input and the words its one line must hold ---------------
def _long_name(place):
    return place / ("x" * 300)


REGRESSIONS = [  # (argv after `ctcbench`, given the folder, fragments of the Error: line)
    (lambda p: ["fuzz", "--backend", "numpy", "--against", "", "--out", p / "r1"],
     ["--against: expected one of"]),  # was "--backend: expected one of ..."
    (lambda p: ["bench", "--grid", _long_name(p), "--out", p / "r2"],
     ["expected a path this system can use, got 'File name too long'"]),  # was [Errno 36]
    (lambda p: ["predict", "--checkpoint", p / "a-folder", p / "x.png"],
     ["--checkpoint: expected a file, got", "(a folder)"]),  # was click's "is a directory."
    (lambda p: ["report", p / "grid.json"], ["RUN_DIR: expected a folder, got", "(a file)"]),
    (lambda p: ["bench", "--baseline", p / "missing", "--out", p / "r3"],
     ["--baseline: expected an existing file or folder, got", "(no such path)"]),
    (lambda p: ["predict", "--checkpoint", "", p / "x.png"],
     ["--checkpoint: expected a file path, got ''"]),  # was "checkpoint: ..., got '.'"
    (lambda p: [*cheap_convergence(p), "--charset", " "],
     ["--charset: expected a non-empty string of distinct characters, printable and no spaces"]),  # NumPy's
    (lambda p: [*cheap_convergence(p), "--charset", "\x1e"],  # was PIL's raqm_layout() failed
     ["--charset: expected a non-empty string of distinct characters, printable and no spaces"]),
    (lambda p: ["atlas", "--backend", "numpy", "--out", ""],  # wrote a run into the current
     ["--out: expected a folder path, got ''"]),  # folder
    (lambda p: ["convergence", "--cache-dir", "", "--steps", "1"],
     ["--cache-dir: expected a folder path, got ''"]),
    (lambda p: ["cases", "--cases", ""], ["--cases: expected a folder path, got ''"]),
    (lambda p: ["bench", "--decoder", "greedy", "--backend", "numpy", "--out", p / "r4"],
     ["--decoder: expected it without --backend, --function and --baseline, got --backend"]),
    (lambda p: ["datasheet", "--decoder", "greedy", "--backend", "numpy"],
     ["--decoder: expected it without --backend, got --backend too"]),
]


def cheap_convergence(place):
    return ["convergence", *cheap("convergence", place), "--out", place / "r-conv"]


@pytest.mark.parametrize("argv, words", REGRESSIONS)
def test_found_by_the_fuzz_and_fixed(argv, words, place, oracle):
    """Inputs the option fuzz found answered in a library's words, answered in ours now."""
    (place / "a-folder").mkdir(exist_ok=True)
    line = check(run_cli(argv(place), BOUND_S, cwd=place), oracle, "options: regressions")
    assert line and all(w in line for w in words), line
