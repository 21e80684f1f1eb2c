"""The README stays short, every link in the docs resolves, and docs/cli.md matches the CLI."""
import re
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.cli_docs import REGENERATE, WIDTH, command_helps
from ctcbench.doctor.findings import CODES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)


def relative_links(page: Path) -> list[str]:
    """Targets of the page's markdown links that point into the repository."""
    return [t for t in LINK.findall(page.read_text())
            if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def test_readme_is_at_most_15000_bytes():
    """README.md stays a five-minute read: at most 15,000 bytes."""
    size = len(README.read_bytes())
    assert size <= 15_000, f"README.md: expected at most 15000 bytes, got {size}; move detail to docs/"


def test_every_relative_link_points_to_an_existing_file():
    """Every relative link (and image) in README.md and docs/*.md names a file that exists."""
    broken = [f"{page.relative_to(ROOT)} -> {target}"
              for page in PAGES for target in relative_links(page)
              if not (page.parent / target.split("#")[0]).exists()]
    assert not broken, broken


def test_the_readme_links_every_docs_page():
    """Each page under docs/ is reachable from the README."""
    linked = {(ROOT / t.split("#")[0]).resolve() for t in relative_links(README)}
    missing = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not missing, missing


def test_link_check_catches_a_broken_link(tmp_path):
    """The link finder sees links, images and anchors, and skips URLs and in-page anchors."""
    page = tmp_path / "p.md"
    page.write_text("[a](x.md) ![b](img/y.png) [c](z.md#part) [d](https://e.org/f) [g](#here)")
    assert relative_links(page) == ["x.md", "img/y.png", "z.md#part"]


def test_cli_doc_is_current():
    """docs/cli.md is exactly what the documented regeneration command prints now."""
    command = REGENERATE.split(">")[0].split()  # python -m ctcbench.cli_docs
    fresh = subprocess.run([sys.executable, *command[1:]], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout
    assert CLI_DOC.read_text() == fresh, f"docs/cli.md is stale; regenerate it with: {REGENERATE}"


def every_command(group: click.Group, path=()):
    """Argument paths of every (sub)command of ``group``, the group itself first."""
    yield path
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from every_command(command, (*path, name))
        else:
            yield (*path, name)


def test_cli_doc_holds_each_command_help_as_the_terminal_prints_it():
    """Each rendered section is what `ctcbench ... --help` prints at that width, for every command."""
    helps = dict(command_helps(cli, "ctcbench"))
    paths = list(every_command(cli))
    assert sorted(helps) == sorted(" ".join(("ctcbench", *p)) for p in paths)
    for path in paths:
        res = CliRunner().invoke(cli, [*path, "--help"], prog_name="ctcbench", terminal_width=WIDTH)
        assert res.exit_code == 0, res.output
        assert helps[" ".join(("ctcbench", *path))] == res.output.rstrip("\n")


def test_doctor_page_explains_every_finding_code():
    """docs/doctor.md has a row for every code diagnose can report."""
    text = (ROOT / "docs" / "doctor.md").read_text()
    missing = [code for code in CODES if f"| `{code}` |" not in text]
    assert not missing, missing
