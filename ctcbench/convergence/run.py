"""``convergence()``: the convergence driver as a library function, what ``ctcbench
convergence`` calls.

It takes the settings (``{key: value}``, grid keys holding tuples; see
:mod:`ctcbench.convergence.config`) and, optionally, a ``--config`` TOML file whose keys they
override, and runs one grid into a run folder (see :mod:`ctcbench.convergence.grid`), or with
``scenario`` one grid per arm of a named experiment (see :mod:`ctcbench.convergence.scenarios`).
With ``resume`` a folder continues with the config it was started with; a setting given now
that differs from it is an error naming the option.

A wrong setting raises ``ConfigError`` naming its key (``data.min_len``), which the command
line renames to the option; one that came from the config file (and was not overridden) is
named ``FILE: key`` here. report.html is not written here (``ctcbench.drivers.finish_run``).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ctcbench.settings import ConfigError
from ctcbench.convergence.datacache import DEFAULT_CACHE_DIR
from ctcbench.errors import InputError, expect
from ctcbench.runs.store import RunResult, resume_needs_out



@dataclass
class ScenarioResult(RunResult):
    """The result of a scenario, for its folder: ``rows`` are every arm's runs (an ``arm``
    column first), ``summary`` what ``verdicts.json`` holds, ``arms`` each arm's own
    ``RunResult`` and ``tables`` the verdicts, differences, versus_baseline and findings."""

    arms: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def convergence(settings: dict, *, scenario: str | None = None, out=None, resume: bool = False,
                jobs: int | None = None, cache_dir=DEFAULT_CACHE_DIR, executor: str = "local",
                scheduler: str | None = None, tensorboard=None, config_file=None,
                echo: Callable[[str], None] = _stderr) -> RunResult:
    """Run the grid the settings describe (or each arm of ``scenario``) into ``out``.

    ``settings``: ``{key: value}`` over ``config_file``'s; ``jobs``: runs at a time (default
    min(2, CPUs)); ``executor``/``scheduler``: where runs execute (see
    :func:`ctcbench.convergence.executors.make_executor`); ``tensorboard``: also write event
    files there (``""``: into the run folder); ``echo``: where progress lines go (stderr).
    Returns the grid's ``RunResult``, or a :class:`ScenarioResult` for the scenario folder.
    """
    from ctcbench.convergence.runconfig import load_toml
    from ctcbench.convergence.executors import make_executor
    from_file = load_toml(config_file) if config_file else {}
    values = {**from_file, **settings}
    expect(jobs is None or jobs >= 1, "--jobs", ">= 1", jobs)
    resume_needs_out(out, resume, "scenario folder" if scenario else "run folder")
    if tensorboard is not None:  # before training: a missing package must not waste a run
        from ctcbench.convergence.events import check_tensorboard
        check_tensorboard(tensorboard)
    pool = make_executor(executor, scheduler=scheduler, jobs=jobs or min(2, os.cpu_count() or 1))

    def named(exc: ConfigError) -> InputError:  # a key from the file is named by the file
        if exc.key in from_file and exc.key not in settings:
            return InputError(f"{config_file}: {exc.key}", exc.problem)
        return exc

    def check_values(values: dict):
        from ctcbench.convergence.runconfig import build, check_run
        base, grid = build(values)
        try:
            check_run(base, grid)
        except ConfigError as exc:
            raise named(exc) from None
        return base, grid

    def run_values(values: dict, folder, resume_it: bool, events_dir) -> RunResult:
        from ctcbench.convergence.config import stored_config
        from ctcbench.convergence.runconfig import build, config_conflicts
        from ctcbench.convergence.grid import run_grid
        stored = stored_config(folder) if resume_it else None
        if stored is not None:  # the stored config is used: what was given must agree with it
            conflicts = config_conflicts(stored, values, run_dir=folder)
            if conflicts:
                raise ValueError("\n".join(conflicts))
        base, grid = build(values) if resume_it else check_values(values)
        try:
            result = run_grid(base, grid, out=folder, resume=resume_it, jobs=jobs,
                              cache_dir=cache_dir, executor=pool)
        except ConfigError as exc:
            raise named(exc) from None
        if events_dir is not None:
            from ctcbench.convergence.events import write_events
            echo(f"tensorboard: {write_events(result.run_dir, events_dir or None)}")
        return result

    if scenario is None:
        return run_values(values, out, resume, tensorboard)
    return _scenario(scenario, values, out=out, resume=resume, tensorboard=tensorboard,
                     run_values=run_values, check_values=check_values, echo=echo)


def _scenario(name: str, values: dict, *, out, resume: bool, tensorboard, run_values,
              check_values, echo) -> ScenarioResult:
    """Each arm of scenario ``name`` as a grid in ``out/<arm>``, then the scenario's tables."""
    import pandas as pd

    from ctcbench.convergence.scenarios import run_scenario, write_scenario
    from ctcbench.runs.store import run_folder_path
    folder = run_folder_path(f"scenario-{name}", out)
    arms = run_scenario(
        name, values, out=folder, resume=resume,
        run_arm=lambda values, arm_dir, resume_it: run_values(
            values, arm_dir, resume_it,
            tensorboard if not tensorboard else str(Path(tensorboard) / arm_dir.name)),
        check_arm=check_values, echo=echo)
    written = write_scenario(folder, name, arms)
    rows = pd.concat([r.rows.assign(arm=arm)[["arm", *r.rows.columns]] for arm, r in arms.items()],
                     ignore_index=True)
    resumed = sum(r.resumed for r in arms.values())
    tables = {k: written[k] for k in ("verdicts", "differences", "versus_baseline", "findings")}
    return ScenarioResult(folder, rows, written["json"], next(iter(arms.values())).environment,
                          resumed=resumed, files=[folder / "verdicts.json", written["plot"]],
                          arms=arms, tables=tables)
