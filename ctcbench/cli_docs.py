"""The command-line reference (docs/cli.md), rendered from click's own ``--help`` text.

Regenerate with ``python -m ctcbench.cli_docs > docs/cli.md``; a test fails when the file
and the CLI disagree. The help is rendered at a fixed width so the file does not depend on
the terminal it was generated in.
"""
from __future__ import annotations

import sys

import click

WIDTH = 80  # click's own cap on help width, fixed here so the output is reproducible
REGENERATE = "python -m ctcbench.cli_docs > docs/cli.md"


def command_helps(command: click.Command, name: str,
                  parent: click.Context | None = None) -> list[tuple[str, str]]:
    """``(full command name, help text)`` for ``command`` and, depth first, every subcommand.

    Each help text is what ``<full name> --help`` prints, produced through a click context
    chained to the parent's, so usage lines read ``ctcbench compare [OPTIONS]``.
    """
    settings = {**command.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(command, info_name=name, parent=parent, **settings)  # as `--help` builds it
    helps = [(ctx.command_path, command.get_help(ctx))]
    if isinstance(command, click.Group):
        for sub_name in command.list_commands(ctx):
            sub = command.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                helps += command_helps(sub, sub_name, ctx)
    return helps


def render_markdown(command: click.Command | None = None, name: str = "ctcbench") -> str:
    """docs/cli.md: one section per command, each holding its ``--help`` verbatim."""
    if command is None:
        from ctcbench.cli import cli as command
    lines = ["# Command-line reference", "",
             "Every command's `--help`, generated from the CLI itself; do not edit by hand.",
             f"Regenerate with `{REGENERATE}`.", ""]
    for path, text in command_helps(command, name):
        lines += [f"## `{path}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


def main() -> None:
    sys.stdout.write(render_markdown())


if __name__ == "__main__":
    main()
