"""The seeds' questions as named experiments: ``ctcbench convergence --scenario NAME``.

A scenario is settings (the keys of a ``--config`` file) shared by its *arms*, and one
grid per arm: an arm changes one thing against the ``baseline`` arm (a learning rate, the
batch size, BatchNorm, ...). ``--out DIR`` holds ``scenario.json`` and one convergence run
folder per arm (``DIR/<arm>/``), each resumable on its own; ``--resume`` continues the
unfinished arms. Precedence: the scenario's shared settings < what the command line (or
``--config``) gives < the arm's own settings, so ``--steps 200 --seed 0,1`` shortens every
arm while the ``lr3e-3`` arm keeps its rate.

What each arm is judged by (``scenario_tables``): per arm and (model, optimizer), the
verdict rule of :mod:`ctcbench.convergence.verdicts` for two metrics, the end of the blank
plateau (``plateau_end_step``) and ``steps_to_cer10``, each with a bootstrap interval over
seeds, censored runs counted; and for every arm against ``baseline`` the difference of the
medians with its interval (negative: the arm gets there sooner).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ctcbench.files import atomic_write, read_text

if TYPE_CHECKING:
    import pandas as pd

METRICS = ("plateau_end_step", "steps_to_cer10")

# the Keras captcha tutorial's alphabet (19 characters) and length: on the blank plateau its
# per-line loss reads about 16, the number the captcha seed's loss stalled at
CAPTCHA_CHARSET = "2345678bcdefgmnpwxy"


@dataclass(frozen=True)
class Scenario:
    question: str
    settings: dict  # config keys -> values (grid keys hold tuples), shared by every arm
    arms: dict  # arm name -> the settings it changes; "baseline" is the reference arm


SCENARIOS = {
    "line-labs": Scenario(
        "Sliding-window LineCNN vs LineCNN+LSTM vs CRNN, Adam vs RMSprop, each optimizer at "
        "its best learning rate, on rendered digit lines.",
        {"model.name": ("linecnn", "linecnnlstm", "crnn"), "optimizer": ("adam", "rmsprop"),
         "lr": (3e-4, 1e-3, 3e-3), "seed": (0, 1, 2), "data.train_size": 4000,
         "data.test_size": 256, "diagnose_every": 50},
        {"baseline": {}}),
    "captcha-stall": Scenario(
        "The captcha ResNet+BiLSTM whose loss stalls near 16 (per line, Keras' convention): "
        "reproduce the stall, then change one thing at a time to see what ends it.",
        {"data.kind": "captcha", "data.charset": CAPTCHA_CHARSET, "data.min_len": 5,
         "data.max_len": 5, "data.train_size": 4000, "data.test_size": 256,
         "model.name": ("rescrnn",), "model.batchnorm": True, "optimizer": ("adam",),
         "lr": (1e-3,), "batch_size": 16, "reduction": "per-line", "steps": 1000,
         "seed": (0, 1, 2, 3), "diagnose_every": 100},
        {"baseline": {}, "lr3e-4": {"lr": (3e-4,)}, "lr3e-3": {"lr": (3e-3,)},
         "batch64": {"batch_size": 64}, "no-batchnorm": {"model.batchnorm": False},
         "lengths2-5": {"data.min_len": 2},
         "lengths2-5-curriculum": {"data.min_len": 2, "curriculum_steps": 300,
                                   "curriculum_len": 3}}),
    "repeatvec": Scenario(
        "The captcha bug where one feature vector is repeated across all time steps, next "
        "to the healthy CRNN, with the doctor run during training.",
        {"model.name": ("crnn", "repeatvec"), "optimizer": ("rmsprop",), "seed": (0, 1),
         "steps": 300, "diagnose_every": 50, "data.train_size": 4000, "data.test_size": 256},
        {"baseline": {}}),
}


def arm_values(scenario: Scenario, arm: str, given: dict) -> dict:
    """The settings one arm runs with (see the module docstring for the precedence)."""
    return {**scenario.settings, **given, **scenario.arms[arm]}


def run_scenario(name: str, given: dict, *, out: Path, resume: bool,
                 run_arm: Callable[[dict, Path, bool], object],
                 check_arm: Callable[[dict], object] = lambda values: None, echo=print) -> dict:
    """Run every arm of scenario ``name`` into ``out/<arm>`` with ``run_arm(values, folder,
    resume)`` (which returns a ``RunResult``); returns ``{arm: RunResult}``. Every arm not
    started yet is first checked with ``check_arm(values)`` (raising on a bad setting), before
    anything is written."""
    scenario = SCENARIOS[name]
    out = Path(out)
    marker = out / "scenario.json"
    if marker.exists():
        try:
            stored = json.loads(read_text(marker, str(marker)))
            stored_given = {k: tuple(v) if isinstance(v, list) else v
                            for k, v in stored["given"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(f"--out: expected a scenario.json written by `ctcbench convergence "
                             f"--scenario`, got {str(marker)!r}") from None
        if not resume:
            raise ValueError(f"--out: {str(out)!r} already holds scenario "
                             f"{stored.get('scenario')!r}; add --resume to continue it")
        if stored.get("scenario") != name:
            raise ValueError(f"--scenario: {str(out)!r} holds scenario "
                             f"{stored.get('scenario')!r}, not {name!r}")
        given = {**stored_given, **given}  # a resumed scenario keeps what its first run was given
    elif out.exists() and any(out.iterdir()):
        raise ValueError(f"--out: expected a new or empty folder for a scenario, got "
                         f"{str(out)!r} (it holds other files)")
    elif resume:
        raise ValueError(f"--resume: {str(out)!r} holds no scenario to continue")
    for arm in scenario.arms:
        if not (out / arm / "meta.json").exists():
            check_arm(arm_values(scenario, arm, given))
    if not marker.exists():
        out.mkdir(parents=True, exist_ok=True)
        record = {"scenario": name, "given": {k: list(v) if isinstance(v, tuple) else v
                                              for k, v in given.items()}}
        atomic_write(marker, json.dumps(record, indent=2) + "\n")
    results = {}
    for i, arm in enumerate(scenario.arms, 1):
        folder = out / arm
        echo(f"scenario {name}: arm {i}/{len(scenario.arms)} {arm}")
        results[arm] = run_arm(arm_values(scenario, arm, given), folder,
                               (folder / "meta.json").exists())
    return results


def scenario_tables(results: dict) -> tuple["pd.DataFrame", "pd.DataFrame", "pd.DataFrame"]:
    """``(verdicts, differences, versus_baseline)`` from ``{arm: RunResult}``: each arm's
    verdicts and its optimizers' pairwise differences, for each metric, and each arm against
    the baseline (see the module docstring)."""
    import pandas as pd

    from ctcbench.convergence.verdicts import bootstrap_difference, censored, verdicts
    rows, pairs, diffs = [], [], []
    for metric in METRICS:
        at_best = {}
        for arm, result in results.items():
            table, between = verdicts(result.rows, metric=metric)
            pairs += [{"arm": arm, **row} for row in between.to_dict("records")]
            for row in table.to_dict("records"):
                rows.append({"arm": arm, **row})
                at_best[arm, row["model"], row["optimizer"]] = censored(
                    result.rows.loc[(result.rows["model"] == row["model"])
                                    & (result.rows["optimizer"] == row["optimizer"])
                                    & (result.rows["lr"] == row["best_lr"]), metric])
        for (arm, model, opt), values in at_best.items():
            base = at_best.get(("baseline", model, opt))
            if arm == "baseline" or base is None:
                continue
            point, low, high = bootstrap_difference(values, base)
            diffs.append({"arm": arm, "model": model, "optimizer": opt, "metric": metric,
                          "difference": point, "ci_low": low, "ci_high": high,
                          "sooner": True if high < 0 else False if low > 0 else None})
    return pd.DataFrame(rows), pd.DataFrame(pairs), pd.DataFrame(diffs)


def scenario_curves(results: dict) -> "pd.DataFrame":
    """Every arm's per-eval rows with an ``arm`` column (``findings`` stay lists)."""
    import pandas as pd

    from ctcbench.convergence.grid import load_curves
    return pd.concat([load_curves(Path(result.run_dir), list(result.rows["run"])).assign(arm=arm)
                      for arm, result in results.items()], ignore_index=True)


def finding_counts(curves: "pd.DataFrame") -> "pd.DataFrame":
    """How often the doctor flagged what, per arm and model, over the diagnosed evals of
    every run: one row per finding code seen (``time-invariant`` always, so that its count
    on healthy models, the false positives, is explicit): ``runs_flagged`` of ``runs``,
    ``evals_flagged`` of ``diagnosed_evals``. Empty when nothing was diagnosed."""
    import pandas as pd
    if "findings" not in curves:
        return pd.DataFrame()
    diagnosed = curves[curves["findings"].map(lambda f: isinstance(f, list))]
    rows = []
    for (arm, model), g in diagnosed.groupby(["arm", "model"], sort=False):
        codes = dict.fromkeys(["time-invariant", *(c for f in g["findings"] for c in f)])
        for code in codes:
            flagged = g[g["findings"].map(lambda f: code in f)]
            rows.append({"arm": arm, "model": model, "finding": code,
                         "runs_flagged": flagged["run"].nunique(), "runs": g["run"].nunique(),
                         "evals_flagged": len(flagged), "diagnosed_evals": len(g)})
    return pd.DataFrame(rows)


def write_scenario(folder: Path, name: str, results: dict) -> dict:
    """``verdicts.json`` (every arm's runs, the verdicts, the arms against the baseline) and
    ``scenario.png`` (one colour per arm) in the scenario folder; returns what was written."""
    from ctcbench.convergence.plots import plot_curves
    from ctcbench.convergence.tables import records
    from ctcbench.convergence.verdicts import to_records
    from ctcbench.files import to_json
    table, pairs, versus = scenario_tables(results)
    curves = scenario_curves(results)
    findings = finding_counts(curves)
    scenario = SCENARIOS[name]
    record = {"scenario": name, "question": scenario.question,
              "arms": [{"arm": arm, "changes": {k: list(v) if isinstance(v, tuple) else v
                                                for k, v in scenario.arms[arm].items()},
                        "run_dir": str(result.run_dir), "runs": records(result.rows)}
                       for arm, result in results.items()],
              "verdicts": to_records(table), "differences": to_records(pairs),
              "versus_baseline": to_records(versus), "findings": to_records(findings)}
    atomic_write(folder / "verdicts.json", to_json(record, indent=2) + "\n")
    plot = folder / "scenario.png"
    by = ("arm",) if len(results) > 1 else ("model", "optimizer", "lr")
    plot_curves(curves, plot, by=by)
    return {"verdicts": table, "differences": pairs, "versus_baseline": versus,
            "findings": findings, "json": record, "folder": folder, "plot": plot}
