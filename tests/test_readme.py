"""The README's and the docs' examples run and tell the truth."""
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import ctcbench
from ctcbench.runtime.status import Status

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BACKENDS_DOC = ROOT / "docs" / "backends-and-plugins.md"
CASE_DOC = ROOT / "docs" / "case-format.md"


def block_after(page: Path, marker: str, lang: str = "python") -> str:
    """The first ```lang code block after ``marker`` on ``page``."""
    text = page.read_text()
    start = text.index(marker)
    return re.search(rf"```{lang}\n(.*?)```", text[start:], re.S).group(1)


def register_doc_plugin(name: str) -> None:
    """Execute the documented plugin and register its class under ``name``."""
    namespace = {}
    exec(block_after(BACKENDS_DOC, "A complete plugin"), namespace)
    ctcbench.register_backend(name, namespace["MyCTC"])


def forget_backend(name: str) -> None:
    """Drop a backend registered by a test."""
    ctcbench.unregister_backend(name)


def test_quick_start_has_the_two_commands_ci_relies_on():
    """The Quick start holds exactly two commands: set up + compare, set up + pytest, torch pinned as in CI."""
    commands = [line for line in block_after(README, "## Quick start", "bash").splitlines()
                if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    main_job, tests = (shlex.split(c) for c in commands)
    assert main_job[-2:] == [".venv/bin/ctcbench", "compare"]
    assert tests[-5:] == [".venv/bin/python", "-m", "pytest", "-n", "auto"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest -n auto\n" in ci  # CI runs the README's test command
    pin = re.search(r"torch==[\d.]+", ci).group(0)
    assert all(pin in c for c in commands), (pin, commands)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r"^test = \[", pyproject, re.M), "the '[test]' extra the commands install"


def test_plugin_example_is_a_correct_backend():
    """The documented plugin registers, runs, and agrees with the reference, inf included."""
    register_doc_plugin("readme-plugin")
    try:
        logits = np.random.default_rng(0).normal(size=(6, 2, 4))
        problem = ctcbench.CTCProblem(logits, np.array([[1, 1, 2], [3, 3, 3]]), [6, 4], [3, 3])
        got = ctcbench.get_backend("readme-plugin").run(problem)
        ref = ctcbench.get_backend("numpy").run(problem)
        assert np.isinf(got.loss[1]) and np.isinf(ref.loss[1])
        np.testing.assert_allclose(got.loss, ref.loss, rtol=1e-10)
        np.testing.assert_allclose(got.grad_logits, ref.grad_logits, atol=1e-10)
    finally:
        forget_backend("readme-plugin")


@pytest.mark.long
def test_plugin_example_passes_the_whole_case_library(tmp_path):
    """Run through compare over every case in float64, the documented plugin is all ok."""
    from ctcbench.compare.run import compare
    register_doc_plugin("readme-plugin")
    try:
        rows = compare(["readme-plugin"], dtypes=["float64"], out=tmp_path, progress=False).rows
    finally:
        forget_backend("readme-plugin")
    bad = rows[~rows.status.isin(["ok", "unsupported"])]
    assert bad.empty, bad[["case", "status", "reason"]].to_string()
    assert (rows.status == "ok").sum() >= 25


def test_problem_example_runs():
    """The documented CTCProblem example runs as written."""
    namespace = {}
    exec(block_after(BACKENDS_DOC, "## The problem and its conventions"), namespace)
    assert namespace["result"].loss.shape == (2,)


def test_case_file_example_passes_compare(tmp_path):
    """The documented example case file holds: numpy and torch are ok on it in every dtype."""
    import json

    from click.testing import CliRunner

    from ctcbench.cli import cli
    block = block_after(CASE_DOC, "A case file of your own", "toml")
    assert "ordering" in block
    (tmp_path / "cases").mkdir()
    (tmp_path / "cases" / "mine.toml").write_text(block)
    res = CliRunner().invoke(cli, ["compare", "--no-plot", "--backend", "numpy", "--backend",
                                   "torch", "--cases", str(tmp_path / "cases"), "--format",
                                   "json", "--out", str(tmp_path / "run")])
    rows = json.loads(res.stdout)["rows"]
    assert res.exit_code == 0, [r["reason"] for r in rows]
    assert sorted((r["backend"], r["dtype"], r["status"]) for r in rows) == [
        ("numpy", "float32", "ok"), ("numpy", "float64", "ok"),
        ("torch", "float32", "ok"), ("torch", "float64", "ok")]


# -- example outputs: each "$ ctcbench ..." block is what that command printed ----------------
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE = re.compile(r"^```(?:console)?\n\$ (ctcbench [^\n]*)\n(.*?)^```", re.S | re.M)
RUN = ("backends", "cases", "compare", "bench", "convergence", "fuzz")  # run again here, cheaply
NOT_RUN = {"doctor": "reads the reader's own file", "predict": "reads a checkpoint and images",
           "datasheet": "runs for its --budget seconds per backend, plus its other stages"}
PLUGINS = {"merges-repeats": "wrong_backends:MergesRepeats",  # the docs' plugins: the tests' own
           "segv-always": "misbehaving_backends:SegfaultAlways"}
KEY_COLUMNS = {"backends": 1, "cases": 3, "compare": 4, "bench": 6, "convergence": 1}  # the
# columns a row must repeat; the others (numbers, availability, install hints) vary by machine
HEADED = ("compare", "bench", "convergence")  # the block's first line is the table's header
LAST = {"compare": "compare ", "convergence": "run folder: "}  # a closing line, checked whole
STATUSES = tuple(Status)  # a compare row's status, the first column of its table
IN_PROCESS = ("numpy", "numba")  # what bench times when the example times every backend
TRIM = "..."  # a line of its own where a block leaves lines out


@dataclass
class Example:
    """One block: the page, the command after ``$``, and the lines it shows below it."""

    page: Path
    command: str
    lines: list[str]

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.command)[1:]

    @property
    def trimmed(self) -> bool:
        """Whether the block leaves lines out (a ``...`` line)."""
        return any(line.strip() == TRIM for line in self.lines)

    def options(self, name: str) -> list[str]:
        """The values given to option ``name`` in the command, in order."""
        argv = self.argv
        return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]

    def rows(self) -> list[list[str]]:
        """The shown rows as words (see ``table_rows``)."""
        return table_rows(self.argv[0], self.lines)

    def __str__(self):
        return f"{self.page.relative_to(ROOT)}: $ {self.command}"


def is_row(name: str, line: str) -> bool:
    """Whether ``line`` of command ``name``'s output (past its header) is a row of its table:
    not blank, a separator, ``...`` or a closing line; a compare row starts with its status."""
    words = line.split()
    return (bool(words) and line.strip() != TRIM and not set(line) <= {"-", " "}
            and not line.startswith(LAST.get(name, "\0"))
            and (name != "compare" or words[0] in STATUSES))


def table_rows(name: str, lines: list[str]) -> list[list[str]]:
    """The rows of command ``name``'s table among ``lines``, as words."""
    return [line.split() for line in (lines[1:] if name in HEADED else lines) if is_row(name, line)]


def unmarked_cuts(ex: Example, keys: list[tuple], k: int) -> list[str]:
    """Where the block leaves out rows of ``keys`` (the real rows' first ``k`` columns, in
    order) with no ``...`` line there, or shows rows out of their order: [] when none."""
    name, at, cut, found = ex.argv[0], -1, False, []
    for line in ex.lines[1:] if name in HEADED else ex.lines:
        if line.strip() == TRIM:
            cut = True
        elif is_row(name, line):
            key = tuple(line.split()[:k])
            if key not in keys[at + 1:]:
                found.append(f"out of order: {' '.join(key)}")
                continue
            i = keys.index(key, at + 1)
            if i > at + 1 and not cut:
                found.append(f"rows left out before {' '.join(key)}")
            at, cut = i, False
    if at < len(keys) - 1 and not cut:
        found.append(f"{len(keys) - 1 - at} rows left out at the end")
    return found


def masked(line: str) -> str:
    """A line with its numbers (counts, seconds) as ``#``: what a run of another length keeps."""
    return re.sub(r"\d+(\.\d+)?", "#", line)


def examples() -> list[Example]:
    """Every block that shows one ctcbench command and what it printed (blocks listing several
    commands, or a synopsis with nothing below it, are not examples of output)."""
    found = []
    for page in PAGES:
        for m in EXAMPLE.finditer(page.read_text()):
            lines = m.group(2).splitlines()
            if lines and not any(line.startswith("$ ") for line in lines):
                found.append(Example(page, m.group(1), lines))
    return found


def cheap_argv(ex: Example, out: Path) -> list[str]:
    """The example's command, made cheap where it would not be, with the same header and rows:
    compare only on the cases its rows show (when it names none), bench on the small grid with
    one repeat and, when it times every backend, only the in-process ones, convergence for two
    steps on a few lines, fuzz for one second."""
    argv, name = ex.argv, ex.argv[0]
    if name == "compare":
        argv += ["--out", str(out), "--no-plot"]
        if narrowed(ex):
            for case in dict.fromkeys(r[2] for r in ex.rows()):
                argv += ["--case", case]
    elif name == "bench":
        argv += ["--grid", "small", "--repeat", "1", "--out", str(out)]
        if not ex.options("--backend"):
            available = {i.name for i in ctcbench.list_backends() if i.available}
            for backend in IN_PROCESS:
                argv += ["--backend", backend] if backend in available else []
    elif name == "convergence":
        argv += ["--steps", "2", "--eval-every", "1", "--batch-size", "4", "--train-size", "16",
                 "--test-size", "8", "--channels", "4", "--hidden", "8", "--out", str(out),
                 "--cache-dir", str(out.parent / "cache")]
    elif name == "fuzz":
        argv += ["--budget", "1", "--out", str(out)]
    return argv


def narrowed(ex: Example) -> bool:
    """Whether the cheap command prints fewer rows than the block's own would: bench on a
    smaller grid, compare without --case on the shown cases only."""
    return ex.argv[0] == "bench" or (ex.argv[0] == "compare" and not ex.options("--case"))


_printed: dict[tuple, list[str]] = {}  # the same cheap command is run once per session


def printed(ex: Example, out: Path) -> list[str]:
    """What the example's cheap command prints now (stdout lines), its run folder named as the
    examples name it (``reports/compare-...``); exit 1 is allowed, as the examples include
    failing gates, a traceback is not."""
    from click.testing import CliRunner

    from ctcbench.cli import cli
    from ctcbench.runtime.worker import shutdown_workers
    key = tuple(a for a in cheap_argv(ex, out) if a != str(out))
    if key not in _printed:
        res = CliRunner().invoke(cli, cheap_argv(ex, out), prog_name="ctcbench")
        shutdown_workers()
        clean = res.exception is None or isinstance(res.exception, SystemExit)
        assert res.exit_code in (0, 1) and clean, f"{ex}\n{res.output[-2000:]}"
        _printed[key] = res.stdout.replace(str(out), f"reports/{ex.argv[0]}-...").splitlines()
    return _printed[key]


def needs(ex: Example, register_backends) -> None:
    """Register the docs' plugins the command names; skip when it names a backend not installed."""
    infos = {i.name: i for i in ctcbench.list_backends()}
    for name in ex.options("--backend"):
        if name in PLUGINS:
            register_backends(name, PLUGINS[name])
        elif name in infos and not infos[name].available:
            info = infos[name]
            pytest.skip(f"needs backend {name}: {info.reason} ({info.hint})")
    for target in ex.options("--decoder") + ex.options("--aligner"):
        for module in FUNCTION_NEEDS.get(target, ()):
            pytest.importorskip(module)


# the docs' user functions that wrap a third-party package ([decoders] extra)
FUNCTION_NEEDS = {"tests.decoding.user_functions:ctc_segmentation_align": ("ctc_segmentation",)}


EXAMPLES = examples()


def test_every_example_is_checked_or_says_why_not():
    """Each example block's command is run again below, or listed with why it is not."""
    names = {ex.argv[0] for ex in EXAMPLES}
    assert {"backends", "cases", "compare", "bench", "convergence", "fuzz"} <= names, names
    unknown = [str(ex) for ex in EXAMPLES if ex.argv[0] not in (*RUN, *NOT_RUN)]
    assert not unknown, unknown


def test_a_readme_block_of_a_narrowed_run_is_marked_trimmed():
    """A README block whose cheap run prints fewer rows than its command (a bench grid) cannot
    be checked whole below, so it says that it leaves lines out, with a ``...`` line."""
    unmarked = [str(ex) for ex in EXAMPLES if ex.page == README and ex.argv[0] in RUN
                and narrowed(ex) and not ex.trimmed]
    assert not unmarked, f"blocks the test cannot check whole, without a '...' line: {unmarked}"


@pytest.mark.parametrize("ex", [e for e in EXAMPLES if e.argv[0] in RUN], ids=str)
def test_example_output_matches_the_command(ex, tmp_path, register_backends):
    """The block's header line is the command's real header, column for column; every row it
    shows (its first columns: name, status, case, dtype or size) is one the command prints, and
    its closing line is the command's; a block shows its rows in the command's order with a
    ``...`` line wherever it leaves rows out."""
    needs(ex, register_backends)
    real = printed(ex, tmp_path / "run")
    name = ex.argv[0]
    if name in HEADED:
        assert real and ex.lines[0].split() == real[0].split(), \
            f"{ex}\n  shown: {ex.lines[0]}\n  real:  {real[0] if real else '(nothing)'}"
    if name == "fuzz":  # a second's search: the same lines, other counts
        shown = [masked(line) for line in ex.lines if line.strip() != TRIM]
        missing = [line for line in shown if line not in map(masked, real)]
        assert not missing, f"{ex}: lines shown that the command no longer prints: {missing}"
        assert ex.trimmed or shown == [masked(line) for line in real], f"{ex}\n{real}"
        return
    k = KEY_COLUMNS[name]
    keys = [tuple(r[:k]) for r in table_rows(name, real)]
    shown = ex.rows()
    if name == "bench":  # the rows of the backends and sizes the cheap run measured
        measured = [w for w in map(str.split, real[2:]) if len(w) > 5 and w[1].isdigit()]
        backends, sizes = {w[0] for w in measured}, {tuple(w[2:6]) for w in measured}
        shown = [r for r in shown if len(r) > 5 and r[1].isdigit() and r[0] in backends
                 and tuple(r[2:6]) in sizes]
    assert shown, f"{ex}: no row it shows is one the cheap run could print"
    missing = [" ".join(r[:k]) for r in shown if tuple(r[:k]) not in keys]
    assert not missing, f"{ex}: rows shown that the command no longer prints: {missing}"
    last = [line for line in ex.lines if line.startswith(LAST.get(name, "\0"))]
    if last and not narrowed(ex):  # the verdict and the run folder, as the command says them
        assert last == [line for line in real if line.startswith(LAST[name])], f"{ex}\n{real}"
    if not narrowed(ex):  # its rows in order, each cut marked; the plugins installed on
        # this machine are no row of the pages'
        ordered = [tuple(r[:k]) for r in table_rows(name, real)
                   if name != "backends" or r[2] == "builtin"]
        cuts = unmarked_cuts(ex, ordered, k)
        assert not cuts, f"{ex}: {cuts}\n  real rows: {[' '.join(r) for r in ordered]}"


def test_the_case_counts_and_atlas_outcomes_the_readme_gives_are_true():
    """The library's size and split, and the atlas's outcome names, as the README says them."""
    from ctcbench.atlas.kind import Outcome
    from ctcbench.caselib.library import load_cases
    text = README.read_text()
    total, own, ported = map(int, re.search(
        r"\((\d+) cases: (\d+) of our own, (\d+) ported from the\s+CTC tests of", text).groups())
    families = {"warp-ctc": "warpctc", "TensorFlow": "tensorflow", "PyTorch": "pytorch",
                "optax": "optax", "flashlight": "flashlight"}
    assert all(name in text for name in families)
    cases = load_cases()
    from_peers = [c for c in cases if c.family in families.values()]
    assert (total, own, ported) == (len(cases), len(cases) - len(from_peers), len(from_peers))
    atlas = text[text.index("**`ctcbench atlas`**"):text.index("**`ctcbench datasheet`**")]
    assert re.findall(r"`([a-z ]+)`(?:\s\(|,|\sor)", atlas) == list(Outcome)


def test_ci_runs_the_long_tests_the_readme_command_leaves_out():
    """The long tests are marked where they are written (``@pytest.mark.long``; pyproject's
    ``--strict-markers`` refuses a misspelt one); the README's command leaves them out and CI
    runs them."""
    assert "-m 'not long'" in (ROOT / "pyproject.toml").read_text()
    assert "--strict-markers" in (ROOT / "pyproject.toml").read_text()
    assert ".venv/bin/python -m pytest -m long" in (ROOT / ".ci" / "run").read_text()
