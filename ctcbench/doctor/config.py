"""The settings of ``ctcbench doctor``, declared once (:mod:`ctcbench.settings`): its options,
their help in docs/cli.md and the library's defaults (``examine``, ``diagnose``,
``check_decoder``, ...: ``DEFAULTS``) are all made from ``DoctorSettings``; which settings go
together is said once too, in ``RULES``."""
from __future__ import annotations

from dataclasses import dataclass

import click

from ctcbench.cli_types import Number, OneOf
from ctcbench.core.layouts import LAYOUTS
from ctcbench.core.reduction import REDUCTIONS
from ctcbench.doctor.load import MAX_BYTES
from ctcbench.runtime.devices import DEVICES
from ctcbench.settings import setting, settings

FILE = click.Path(dir_okay=False)  # an output file: refused at once when it is a folder


@dataclass(frozen=True)
class DoctorSettings:
    strict: bool = setting(False, "Exit 1 on warnings too (default: only on errors; info notes "
                                  "never fail).", flag=True)
    explain: bool = setting(False, "Score all-blank and perfect predictions for FILE's shapes "
                                   "under each convention instead of diagnosing.",
                            option="--explain-perfect-vs-blank", flag=True)
    blank: int | None = setting(None, "Blank index the loss uses  [default: FILE's 'blank', "
                                      "else 0]")
    layout: str = setting(LAYOUTS[0], "Layout the loss expects the values in (torch's "
                                      "ctc_loss: TNC).", click_type=OneOf(LAYOUTS))
    reduction: str = setting("mean", "Reduction the loss uses.", click_type=OneOf(REDUCTIONS))
    plot: str | None = setting(None, "Also write a PNG of the first samples' frames "
                                     "(probabilities, blank, greedy emissions).", click_type=FILE)
    html: str | None = setting(None, "Also write the findings, their evidence and fixes and "
                                     "the frames plot as one HTML page.", click_type=FILE)
    max_bytes: int = setting(MAX_BYTES, "Refuse FILE when its arrays claim more bytes than this "
                                        "in all (read from the headers, before loading).",
                             click_type=Number(int, min=1))
    device: str | None = setting(None, "Also say which of torch's CTC paths FILE's batch takes "
                                       "there (on cuda: cuDNN or native, by torch's rule; no GPU "
                                       "needed) and how to take the other.",
                                 click_type=OneOf(DEVICES))
    decoder: str | None = setting(None, "Check this decode function on FILE's values (and "
                                        "input_lengths) against ctcbench's decoding instead of "
                                        "diagnosing the loss's inputs.", metavar="PKG.MOD:NAME")
    aligner: str | None = setting(None, "Check this forced-align function, align(log_probs "
                                        "(T,C), target (L,), *, blank) -> [path, score], on "
                                        "FILE's values and targets against the exact best "
                                        "paths, in a worker process, instead of diagnosing "
                                        "the loss's inputs.", metavar="PKG.MOD:NAME")
    beam: int | None = setting(None, "With --decoder: it is a beam search of this width "
                                     "(default: greedy).", click_type=Number(int, min=1))
    alphabet: str | None = setting(None, "With --decoder: class k's character is CHARS[k], for "
                                         "a decoder that returns strings.", metavar="CHARS")
    transformers_config: str | None = setting(
        None, "FILE is a Hugging Face *ForCTC batch (ctcbench.transformers.Monitor's): read it "
              "with this model config.json (pad_token_id as the blank, ctc_loss_reduction, "
              "ctc_zero_infinity, -100 label padding); needs ctcbench[transformers].",
        metavar="CONFIG.json", click_type=click.Path(dir_okay=False))


DEFAULTS = DoctorSettings()  # the library functions' defaults


def doctor_settings():
    """Every setting of the doctor (for ``SettingsCommand``)."""
    return settings(DoctorSettings)


@dataclass(frozen=True)
class Rule:
    """The settings ``keys`` hold only with ``mode`` set (``needed``) or only without it, where
    they ``expected`` something else."""

    keys: tuple[str, ...]
    mode: str
    needed: bool
    expected: str = ""


RULES = (  # checked in this order; the first one broken is the error
    Rule(("beam", "alphabet"), "decoder", needed=True),
    Rule(("explain", "device", "html", "plot"), "decoder", needed=False,
         expected="a diagnosis of the loss's inputs"),
    Rule(("html", "device"), "explain", needed=False, expected="a diagnosis"),
    Rule(("decoder", "explain", "device", "html", "plot"), "aligner", needed=False,
         expected="no other check with --aligner"),
    Rule(("decoder", "aligner", "explain", "device", "html", "plot", "blank"),
         "transformers_config", needed=False,
         expected="the model's own conventions with --transformers-config"),
)


def conflict(given: dict) -> str | None:
    """The first of ``RULES`` that ``given`` (``{key: value}``, unset ones None or false)
    breaks, as "--OPTION: expected X, got Y", or None."""
    option = {s.key: s.option for s in doctor_settings()}
    for rule in RULES:
        if bool(given.get(rule.mode)) == rule.needed:
            continue
        broken = [k for k in rule.keys if given.get(k)]
        if broken:
            mode = option[rule.mode]
            return f"{option[broken[0]]}: expected " + (
                f"{mode} with it, got none" if rule.needed else f"{rule.expected}, got {mode}")
    return None
