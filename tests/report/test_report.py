"""`ctcbench report` and `doctor --html`: pages made from real small runs (a compare run with a
wrong plugin, a tiny bench, a two-seed convergence grid, a doctor file with several findings),
loaded in headless Chromium and checked on the rendered page."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.cli import cli
from ctcbench.compare.checks import prepare
from ctcbench.drivers import kinds
from ctcbench.runs.kinds import identify

from conftest import WRONG_BACKENDS_SOURCE, random_problem, trained_log_probs

CASES = ["tf_basic", "toy_alpha_beta", "single_alignment_*", "empty_target", "ragged_batch"]
TINY_TRAIN = ["--train-size", "48", "--test-size", "8", "--min-len", "1", "--max-len", "3",
              "--steps", "4", "--eval-every", "2", "--batch-size", "4", "--channels", "4",
              "--hidden", "8"]


def _cli(*args):
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Real run folders of every kind, each made by its own command (which writes report.html)."""
    base = tmp_path_factory.mktemp("runs")
    plugin = base / "plugin"
    plugin.mkdir()
    (plugin / "wrongctc.py").write_text(WRONG_BACKENDS_SOURCE)
    info = plugin / "wrongctc-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wrongctc\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[ctcbench.backends]\nmerges-repeats = wrongctc:MergesRepeats\n")
    cmd = [sys.executable, "-c", "from ctcbench.cli import main; main()", "compare",
           "--backend", "merges-repeats", "--backend", "numpy", "--dtype", "float64",
           "--out", str(base / "compare"), *[a for c in CASES for a in ("--case", c)]]
    proc = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(plugin), "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]  # the wrong plugin fails the gate
    grid = base / "grid.json"
    grid.write_text('[{"T": 20, "N": 2, "C": 5, "L": 4}, {"T": 60, "N": 4, "C": 10, "L": 8}]')
    for name in ("bench", "bench2"):
        res = _cli("bench", "--backend", "numpy", "--grid", grid, "--repeat", "2",
                   "--out", base / name)
        assert res.exit_code == 0, res.output
    res = _cli("convergence", *TINY_TRAIN, "--optimizer", "adam,rmsprop", "--seed", "0,1",
               "--jobs", "1", "--out", base / "convergence", "--cache-dir", base / "cache")
    assert res.exit_code == 0, res.output
    for flags in ([], ["--resume"]):  # two searches in one folder
        res = _cli("fuzz", "--backend", "numpy", "--budget", "1", "--out", base / "fuzz", *flags)
        assert res.exit_code == 0, res.output
    return base


@pytest.fixture(scope="module")
def doctor_file(tmp_path_factory):
    """A saved batch with several findings: a label equal to the blank, a target longer than
    its input, a model stuck on the blank plateau, very unequal target lengths."""
    rng = np.random.default_rng(0)
    p = random_problem(rng, T=40, N=6, C=8, L=12, full_length=True, garbage=False)
    log_probs = trained_log_probs(rng, p, paths=np.zeros((40, 6), int))  # all blank
    targets, input_lengths, target_lengths = p.targets.copy(), p.input_lengths.copy(), p.target_lengths.copy()
    target_lengths[:2] = [1, 12]
    targets[1, :12] = np.r_[np.arange(1, 10) % 7 + 1, [0, 0, 0]]  # three labels equal the blank
    input_lengths[3] = 3  # too short for its target
    target_lengths[3] = 8
    path = tmp_path_factory.mktemp("doctor") / "batch.npz"
    np.savez(path, log_probs=log_probs, targets=targets, input_lengths=input_lengths,
             target_lengths=target_lengths)
    return path


# -- without a browser --------------------------------------------------------------------
@pytest.mark.long
def test_each_command_writes_report_html_into_its_run_folder(runs):
    """compare, bench, convergence and fuzz leave report.html next to their rows when they
    finish."""
    for name in ("compare", "bench", "convergence"):  # these inline their plots
        assert (runs / name / "report.html").stat().st_size > 10_000, name
    assert "<h3>Searches</h3>" in (runs / "fuzz" / "report.html").read_text()


@pytest.mark.parametrize("name,files", [
    ("compare", {"rows.jsonl", "meta.json", "rows.csv", "rows.json", "margins.png"}),
    ("bench", {"rows.jsonl", "meta.json", "bench.csv", "bench.json", "time_vs_cells.png"}),
    ("convergence", {"rows.jsonl", "meta.json", "summary.csv", "curves.csv", "runs/"}),
])
def test_each_page_links_the_files_of_its_run(runs, name, files):
    """The files line of a page links what its kind declares it writes, each to a file there."""
    html = (runs / name / "report.html").read_text()
    links = dict((text, href) for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', html))
    assert files <= set(links), files - set(links)
    assert all((runs / name / links[f]).exists() for f in files)


@pytest.mark.parametrize("name,kind", [("compare", "compare"), ("bench", "bench"),
                                       ("convergence", "convergence"), ("fuzz", "fuzz")])
def test_kind_is_recognised_without_meta(runs, tmp_path, name, kind):
    """A folder whose meta.json is gone is still recognised by its files and rows; a "kind"
    in meta.json is taken as said."""
    copy = tmp_path / name
    shutil.copytree(runs / name, copy)
    (copy / "meta.json").unlink()
    assert identify(copy, kinds())[0].name == kind
    (copy / "meta.json").write_text(json.dumps({"kind": kind}))
    assert identify(copy, kinds())[0].name == kind


def test_report_command_default_path_and_errors(runs, tmp_path):
    """`ctcbench report DIR` writes DIR/report.html; not a run folder (or none at all) and
    several folders without --out are clean errors naming the argument."""
    (runs / "bench" / "report.html").unlink()
    res = _cli("report", runs / "bench")
    assert res.exit_code == 0 and (runs / "bench" / "report.html").is_file()
    (tmp_path / "empty").mkdir()
    res = _cli("report", tmp_path / "empty")
    assert res.exit_code == 1 and "RUN_DIR: expected a ctcbench run folder" in res.output
    res = _cli("report", runs / "bench", runs / "bench2")
    assert res.exit_code == 1 and "--out: expected an HTML file" in res.output
    for missing in ([tmp_path / "nowhere"], [runs / "bench", tmp_path / "nowhere"]):
        res = _cli("report", *missing)  # the folder is named, not the --out it would imply
        assert res.exit_code == 1 and res.output.startswith(
            f"Error: RUN_DIR: expected a run folder, got '{tmp_path / 'nowhere'}' (no such "
            "folder)"), res.output
    res = _cli("report", runs / "bench", "--out", tmp_path / "x.txt")  # no HTML in a .txt
    assert res.exit_code == 1 and "--out: expected an HTML path ending in .html or .htm, " \
        "got '" in res.output and not (tmp_path / "x.txt").exists()


# -- in a real browser ----------------------------------------------------------------------
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through playwright; skipped with the reason when either is missing."""
    exe = os.environ.get("CTCBENCH_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).is_file():
        pytest.skip("needs Chromium: apt-get install chromium (or set CTCBENCH_CHROMIUM to its path)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("needs playwright, part of the [test] extra: pip install -e '.[test]'")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=BROWSER_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Where the screenshots go (a test artifact): pytest's temporary folder."""
    return tmp_path_factory.mktemp("screenshots")


class Loaded:
    """A page opened from a file, with every request and console error it made."""

    def __init__(self, browser, path: Path):
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.requests, self.errors = [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_load_state("load")

    def check_and_shoot(self, shot: Path, cells: str = "td, th") -> None:
        """No request left the file, no console error, no None/NaN text in a table cell (of
        those ``cells`` selects), every plot decoded; then a full-page screenshot."""
        assert all(u.startswith(("file://", "data:")) for u in self.requests), self.requests
        assert not self.errors, self.errors
        cells = self.page.eval_on_selector_all(cells, "els => els.map(e => e.innerText.trim())")
        # a missing value on its own; an id such as torch-nan-gradient-... is no missing value
        missing = r"(?<![\w-])(None|nan|NaN|null|undefined)(?![\w-])"
        assert not [c for c in cells if re.search(missing, c)]
        widths = self.page.eval_on_selector_all("img", "els => els.map(e => e.naturalWidth)")
        assert widths and all(w > 100 for w in widths), widths
        self.page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        self.page.close()


def test_compare_report_in_browser(browser, runs, shots):
    """The failing cases (those with adjacent repeats) lead the matrix, red for the wrong
    plugin; a cell opens to its numbers and reason; numpy passes everywhere."""
    with_repeats = {c.name for c in select_cases(load_cases(), CASES)
                    if any(p.repeats().any() for p in prepare(c, "float64").problems)}
    assert len(with_repeats) >= 3
    page = Loaded(browser, runs / "compare" / "report.html")
    heads = page.page.eval_on_selector_all("table.matrix thead th", "els => els.map(e => e.innerText)")
    assert heads == ["case", "merges-repeats", "numpy"]
    rows = page.page.locator("table.matrix tbody tr")
    first = [rows.nth(i).locator("td.case").inner_text().split()[0] for i in range(len(with_repeats))]
    assert set(first) == with_repeats  # failures first
    for i in range(rows.count()):
        case = rows.nth(i).locator("td.case").inner_text().split()[0]
        wrong, ref = rows.nth(i).locator("td.cell").all()
        assert ("s-mismatch" in wrong.get_attribute("class")) == (case in with_repeats), case
        assert "s-ok" in ref.get_attribute("class")
    cell = rows.nth(0).locator("td.cell").first
    cell.locator("summary").click()
    numbers = cell.locator(".numbers").inner_text()
    assert "loss error" in numbers and "tolerance" in numbers and "loss vs" in numbers
    page.check_and_shoot(shots / "compare.png")


def test_bench_report_in_browser(browser, runs, shots):
    """Every backend is in the table, and clicking a column header sorts by its numbers."""
    rows = [json.loads(line) for line in (runs / "bench" / "rows.jsonl").read_text().splitlines()]
    page = Loaded(browser, runs / "bench" / "report.html")
    table = page.page.locator("table.bench")
    backends = table.locator("tbody tr td:first-child").all_inner_texts()
    assert set(backends) == {r["backend"] for r in rows} == {"numpy", "torch"}
    table.locator("thead th", has_text="ns/cell").click()
    col = table.locator("thead th").all_inner_texts().index(
        next(h for h in table.locator("thead th").all_inner_texts() if "ns/cell" in h))
    keys = table.locator(f"tbody tr td:nth-child({col + 1})").evaluate_all(
        "els => els.map(e => Number(e.dataset.v))")
    assert keys == sorted(r["ns_per_cell"] for r in rows)
    page.check_and_shoot(shots / "bench.png")


def test_two_bench_runs_show_before_after(browser, runs, shots, tmp_path):
    """Two bench folders: side by side, and a before/after table whose time ratio is
    after / before from the two rows.jsonl."""
    def medians(name):
        return {(r["backend"], r["T"]): r["time_median_s"]
                for r in map(json.loads, (runs / name / "rows.jsonl").read_text().splitlines())}
    before, after = medians("bench"), medians("bench2")
    out = tmp_path / "two.html"
    assert _cli("report", runs / "bench", runs / "bench2", "--out", out).exit_code == 0
    page = Loaded(browser, out)
    assert page.page.locator("section.run").count() == 2
    got = page.page.locator("section.before-after tbody tr").evaluate_all(
        "rows => rows.map(r => [r.cells[0].innerText, Number(r.cells[1].innerText),"
        " r.cells[8].innerText])")
    assert len(got) == len(before)
    for backend, T, ratio in got:
        assert ratio == f"{after[backend, T] / before[backend, T]:.2f}×"
    page.check_and_shoot(shots / "bench-before-after.png")


def test_convergence_report_in_browser(browser, runs, shots):
    """Every run of the grid is in the runs table, steps never reached are empty cells, and
    each checkpoint link resolves, relative to the page, to that run's checkpoint."""
    names = sorted(p.name for p in (runs / "convergence" / "runs").iterdir())
    assert len(names) == 4
    page = Loaded(browser, runs / "convergence" / "report.html")
    table = page.page.locator("table.runs-table")
    assert sorted(table.locator("tbody tr td:first-child").all_inner_texts()) == names
    for row in table.locator("tbody tr").all():
        name = row.locator("td").first.inner_text()
        href = row.locator("a").get_attribute("href")
        assert not href.startswith(("/", "file:"))
        assert (runs / "convergence" / href).resolve() == (runs / "convergence" / "runs" / name / "checkpoint.pt")
        summary = json.loads((runs / "convergence" / "runs" / name / "summary.json").read_text())
        if summary["steps_to_cer10"] is None:
            assert row.locator("td").nth(6).inner_text() == ""
    assert page.page.locator("text=Optimizers").count() >= 1
    page.check_and_shoot(shots / "convergence.png")


def test_doctor_html_in_browser(browser, doctor_file, shots, tmp_path):
    """`doctor FILE --html OUT`: every finding the JSON output lists, with its fix, and the
    frames plot."""
    report = json.loads(_cli("doctor", doctor_file, "--format", "json").stdout)
    codes = [f["code"] for f in report["findings"]]
    assert len(codes) >= 3
    out = tmp_path / "doctor.html"
    res = _cli("doctor", doctor_file, "--html", out)
    assert out.is_file(), res.output
    page = Loaded(browser, out)
    shown = page.page.locator(".finding h4 code").all_inner_texts()
    assert shown == codes
    fixes = page.page.locator(".finding .fix").all_inner_texts()
    assert [f.removeprefix("Fix: ").strip() for f in fixes] == [f["fix"] for f in report["findings"]]
    page.check_and_shoot(shots / "doctor.png")


def test_markup_in_names_is_escaped(browser, tmp_path, shots):
    """Backend names and reasons are text, never markup (Jinja autoescape)."""
    run = tmp_path / "odd"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"kind": "compare"}))
    row = {"backend": "<img src=x onerror=alert(1)>", "case": "<b>bold</b>", "dtype": "float64",
           "device": "cpu", "status": "error", "reason": "<script>alert(2)</script>"}
    (run / "rows.jsonl").write_text(json.dumps(row) + "\n")
    page = Loaded(browser, _write(run))
    assert page.page.locator("table.matrix img, table.matrix b, table.matrix script").count() == 0
    assert "<b>bold</b>" in page.page.locator("table.matrix").inner_text()
    page.check_and_shoot(shots / "escaped.png")


def test_fuzz_report_in_browser(browser, runs, shots):
    """A fuzz folder's page lists each search of its log with what it tried; nothing found."""
    searches = [json.loads(line) for line in (runs / "fuzz" / "rows.jsonl").read_text().splitlines()]
    page = Loaded(browser, runs / "fuzz" / "report.html")
    assert all(u.startswith(("file://", "data:")) for u in page.requests) and not page.errors
    rows = page.page.locator("table.sortable tbody tr")
    assert rows.count() == len(searches) == 2
    assert [int(t) for t in rows.locator("td:nth-child(6)").all_inner_texts()] == \
        [s["tried"] for s in searches]
    assert "nothing found" in page.page.inner_text("body")
    page.page.screenshot(path=str(shots / "fuzz.png"), full_page=True)


def _write(run: Path) -> Path:
    from ctcbench.drivers import write_report
    return write_report([run])


def test_datasheet_report_in_browser(browser, shots, tmp_path, register_backends, monkeypatch):
    """Two backends side by side: one column each, linked to its own section; the planted
    cliff's limit reads "300 (wrong at 301)" in the table and in its section, with the plot
    of the sizes tried; numba's malformed-input rows are all there."""
    from ctcbench.runtime.malformed import PROBES
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    register_backends("wrong-past-L300", "cliff_backends:WrongPastL300")
    run = tmp_path / "ds"
    res = _cli("datasheet", "--backend", "wrong-past-L300,numba", "--stages", "limits,robustness",
               "--axes", "L", "--budget", "60", "--max-memory", "64", "--timeout", "5", "--out", run)
    assert res.exit_code == 0, res.output
    page = Loaded(browser, run / "report.html")
    side = page.page.locator("table.datasheet")
    assert side.locator("thead th a").all_inner_texts() == ["wrong-past-L300", "numba"]
    row = side.locator("tbody tr", has_text="correct up to L (float32)").locator("td").all_inner_texts()
    assert row[0] == "300 (wrong at 301)" and row[1].startswith(">= ")
    section = page.page.locator("section#ds-wrong-past-L300")
    cells = section.locator("table").first.locator("tbody tr td").all_inner_texts()
    assert cells[0] == "L" and cells[2:4] == ["300", "301"] and cells[4].startswith("wrong")
    assert section.locator("img").count() == 1
    items = page.page.locator("section#ds-numba table.robustness tbody tr td:first-child")
    assert items.all_inner_texts() == [p.name for p in PROBES]
    # the malformed inputs hold NaN on purpose; every other cell must not
    page.check_and_shoot(shots / "datasheet.png",
                         cells="table:not(.robustness) td, table:not(.robustness) th")
    alone = Loaded(browser, run / "pages" / "wrong-past-L300.html")  # one backend's own page
    assert alone.page.locator("table.datasheet thead th a").all_inner_texts() == ["wrong-past-L300"]
    assert alone.page.locator("section.sheet").count() == 1
    links = alone.page.eval_on_selector_all("a[href$='.jsonl']", "els => els.map(e => e.href)")
    assert links and all(Path(href.removeprefix("file://")).is_file() for href in links)
    alone.check_and_shoot(shots / "datasheet-one.png", cells="table:not(.robustness) td")
