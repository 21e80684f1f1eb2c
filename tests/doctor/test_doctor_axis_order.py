"""One cause for all the evidence: values whose axes are in another order, or squashed by a
sigmoid, get one finding naming that cause and a fix that, applied by the test, leaves the
batch clean; a batch whose errors no order explains gets no invented reordering."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from ctcbench.core.ctcmath import log_softmax
from ctcbench.doctor.diagnose import diagnose

from test_doctor_causes import _args, _healthy, _problems

ORDERS = [q for q in itertools.permutations(range(3)) if q != (0, 1, 2)]


def _finite(lp, C=12):
    """A model's output on padding is some frame, not NaN: uniform there."""
    return np.where(np.isnan(lp), -np.log(C), lp)


def _errors(report) -> list[str]:
    return [f.code for f in report.findings if f.severity == "error"]


@pytest.mark.parametrize("layout", ["TNC", "NTC"])
@pytest.mark.parametrize("kind", ["log_probs", "logits", "probs"])
@pytest.mark.parametrize("order", ORDERS)
def test_every_axis_order_is_one_layout_finding_whose_permute_cleans_the_batch(rng, order,
                                                                                 kind, layout):
    """A healthy batch held in the layout the user names, then given with its axes in another
    order: one error, ``layout``, whose permute is the inverse of the fault; the batch
    permuted that way is clean. (Every sample spans the batch's frames, as the longest of a
    padded batch does: raw scores are read in another order only then.)"""
    p, lp = _healthy(rng, T=40, N=5, C=12, L=5, full_length=True)  # distinct sizes
    lp = _finite(lp)
    values = {"log_probs": lp, "logits": lp * 1.5 + 2.0, "probs": np.exp(lp)}[kind]
    held = values if layout == "TNC" else values.transpose(1, 0, 2)
    report = diagnose(**{kind: held.transpose(order)}, layout=layout, **_args(p))
    assert _errors(report) == ["layout"], report
    permute = report.findings[0].evidence["permute"]
    assert permute == np.argsort(order).tolist()
    fixed = diagnose(**{kind: held.transpose(order).transpose(permute)}, layout=layout,
                     **_args(p))
    assert _problems(fixed) == set(), fixed


def test_a_conv_output_normalised_over_time_gets_the_order_then_the_axis(rng):
    """(N, C, T) conv output, log_softmax over its last axis (time), passed as (T, N, C): the
    order first, the softmax axis second; log_softmax over the class dim the fix names, then
    its permute, is clean."""
    p, lp = _healthy(rng, T=40, N=5, C=12, L=5)
    conv = _finite(lp).transpose(1, 2, 0)  # (N, C, T) scores
    given = log_softmax(conv)  # over T: the mistake
    report = diagnose(given, **_args(p))
    assert _errors(report) == ["layout", "softmax-axis"], report
    cause = report.findings[0]
    assert "length-mismatch" in cause.explains and "dim=1" in cause.fix
    fixed = np.moveaxis(log_softmax(np.moveaxis(conv, 1, -1)), -1, 1).transpose(
        cause.evidence["permute"])  # log_softmax over dim 1 as given, then the permute
    assert _problems(diagnose(fixed, **_args(p))) == set()


@pytest.mark.parametrize("kind", ["log_probs", "probs", "logits"])
def test_sigmoid_outputs_are_named_not_as_raw_scores(rng, kind):
    """Each class squashed by a sigmoid: one ``sigmoid-outputs`` error, not ``not-normalized``;
    log_softmax of the scores before the sigmoid (the fix) is clean."""
    p, lp = _healthy(rng)
    scores = np.nan_to_num(lp, nan=0.0) + 3.0  # (T, N, C) a healthy model's raw scores
    squashed = 1 / (1 + np.exp(-scores))
    report = diagnose(**{kind: squashed}, **_args(p))
    assert _errors(report) == ["sigmoid-outputs"], report
    assert _problems(diagnose(log_softmax(scores), **_args(p))) == set()


def test_no_order_is_invented_for_errors_no_order_explains(rng):
    """An infeasible target and a label out of range in a (T, N, C) batch that another order
    could be read in: both reported as they are, no ``layout``."""
    p, lp = _healthy(rng, T=40, N=5, C=12, L=5)
    targets = p.targets.copy()
    targets[0, 0] = 12  # out of range
    input_lengths = p.input_lengths.copy()
    input_lengths[1] = 1  # infeasible
    report = diagnose(lp, **_args(p, targets=targets, input_lengths=input_lengths))
    assert "layout" not in report.codes
    assert {"target-out-of-range", "infeasible-target"} <= set(_errors(report))


def test_values_no_order_can_read_are_refused_as_before(rng):
    """No axis of the batch's size: the one-line error names the values and N."""
    p, lp = _healthy(rng, T=40, N=5, C=12, L=5)
    with pytest.raises(ValueError, match="log_probs: expected a batch axis of size N = 5"):
        diagnose(lp[:, :4], **_args(p))


def test_the_file_command_plots_the_frames_in_the_order_it_read_them(rng, tmp_path):
    """ctcbench doctor FILE on (N, C, T) values: the plot and the page get (T, N, C) frames."""
    from ctcbench.doctor.examine import examine
    from ctcbench.doctor.plot import plot_frames
    p, lp = _healthy(rng, T=40, N=5, C=12, L=5)
    np.savez(tmp_path / "nct.npz", log_probs=_finite(lp).transpose(1, 2, 0), **_args(p))
    found = examine(tmp_path / "nct.npz")
    assert found.result.codes == ["layout"]
    assert found.inputs["log_probs"].shape == (40, 5, 12)
    assert plot_frames(tmp_path / "frames.png", **found.inputs).stat().st_size > 0


@pytest.mark.parametrize("kind", ["log_probs", "probs", "logits"])
def test_float32_sigmoid_outputs_that_saturate_to_1_are_still_named(rng, kind):
    """A confident model's float32 sigmoid rounds to exactly 1.0 past a score of ~17: still
    ``sigmoid-outputs`` (not ``not-normalized``), its fix log_softmax."""
    p, lp = _healthy(rng)
    scores = (np.nan_to_num(lp, nan=0.0) + 3.0) * 8  # (T, N, C)
    squashed = (1 / (1 + np.exp(-scores.astype(np.float32)))).astype(np.float32)
    assert (squashed == 1).any() and ((squashed > 0) & (squashed < 1)).mean() > 0.5
    report = diagnose(**{kind: squashed}, **_args(p))
    assert _errors(report) == ["sigmoid-outputs"], report
    assert "log_softmax" in report.findings[0].fix


def test_log_sigmoid_outputs_are_named_as_sigmoid_outputs(rng):
    """logsigmoid(scores) passed as log_probs: every exp() in (0, 1), frames summing above 1:
    ``sigmoid-outputs`` saying log-sigmoid, not ``not-normalized``."""
    p, lp = _healthy(rng)
    scores = np.nan_to_num(lp, nan=0.0) + 3.0
    report = diagnose(-np.logaddexp(0, -scores), **_args(p))  # log(sigmoid(scores))
    assert _errors(report) == ["sigmoid-outputs"], report
    assert "log-sigmoid" in report.findings[0].message and "logsigmoid" in report.findings[0].fix


def test_log_probs_lowered_by_an_offset_stay_not_normalized(rng):
    """log_softmax minus a positive offset per frame is also <= 0 everywhere, but its frames
    sum below 1: raw scores (``not-normalized``), not a log-sigmoid."""
    p, lp = _healthy(rng)
    lowered = np.nan_to_num(lp, nan=0.0) - rng.uniform(0.1, 2.0, size=(60, 8, 1))
    assert _errors(diagnose(lowered, **_args(p))) == ["not-normalized"]
