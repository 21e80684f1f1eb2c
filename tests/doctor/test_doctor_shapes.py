"""The doctor on batches whose shape is the problem: an empty batch (N, T or C of 0) is one
error line naming the values and the empty axis, in the library and the command; a batch whose
layout its shape and values cannot confirm (T == N, or raw scores with C equal to another axis)
says so, with the option that settles it, instead of a bare "no problems found"."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench import diagnose
from ctcbench.cli import main

from test_doctor_causes import _args, _healthy

EXPECTED = "a non-empty ({}) batch (at least one frame, sample and class)"


def _empty(shape, layout="TNC"):
    """Values of ``shape`` with lengths and targets that fit its batch axis."""
    N = shape[layout.index("N")]
    return dict(targets=np.ones((N, 1), int), input_lengths=np.full(N, shape[layout.index("T")]),
                target_lengths=np.ones(N, int))


@pytest.mark.parametrize("shape, layout, axis", [
    ((5, 0, 4), "TNC", "N"), ((0, 2, 4), "TNC", "T"), ((5, 2, 0), "TNC", "C"),
    ((0, 5, 4), "NTC", "N"), ((2, 0, 4), "NTC", "T")])
@pytest.mark.parametrize("kind", ["log_probs", "logits", "probs"])
def test_an_empty_batch_is_one_line_naming_the_values_and_the_axis(shape, layout, axis, kind):
    """N, T or C of 0, in either layout, as each kind: one ValueError "KIND: expected a
    non-empty batch ..., got shape S: AXIS = 0", never NumPy's reduction error."""
    with pytest.raises(ValueError) as raised:
        diagnose(**{kind: np.zeros(shape)}, layout=layout, **_empty(shape, layout))
    assert str(raised.value) == (f"{kind}: expected {EXPECTED.format(', '.join(layout))}, "
                                 f"got shape {shape}: {axis} = 0")


@pytest.mark.parametrize("shape, axis", [((5, 0, 4), "N"), ((0, 2, 4), "T"), ((5, 2, 0), "C")])
def test_the_command_names_the_file_of_an_empty_batch(tmp_path, shape, axis):
    """ctcbench doctor on an .npz with an empty batch: exit 1, one line "Error: FILE: key:
    expected ...", no traceback."""
    np.savez(tmp_path / "x.npz", log_probs=np.zeros(shape), **_empty(shape))
    result = CliRunner().invoke(main, ["doctor", str(tmp_path / "x.npz")])
    assert result.exit_code == 1
    assert result.output == (f"Error: x.npz: log_probs: expected {EXPECTED.format('T, N, C')}, "
                             f"got shape {shape}: {axis} = 0\n")


def _codes(report, severity):
    return [f.code for f in report.findings if f.severity == severity]


@pytest.mark.parametrize("layout", ["TNC", "NTC"])
def test_a_square_batch_says_its_layout_cannot_be_told(rng, layout):
    """T == N == 8, every sample all frames (no padding to tell): a layout-ambiguous note naming
    --layout and the other layout; the table does not say a bare "no problems found"; a batch
    one frame longer gets no such note."""
    p, lp = _healthy(rng, T=8, N=8, C=12, L=3, full_length=True)
    held = lp if layout == "TNC" else lp.transpose(1, 0, 2)
    report = diagnose(held, layout=layout, **_args(p))
    assert report.ok and _codes(report, "info") == ["layout-ambiguous"], report
    note = report.findings[0]
    other = "NTC" if layout == "TNC" else "TNC"
    assert "--layout" in note.fix and f"layout='{other}'" in note.fix
    table = report.format_table().splitlines()
    assert "no problems found" not in table and "cannot confirm" in table[1]
    longer, lp9 = _healthy(rng, T=9, N=8, C=12, L=3, full_length=True)
    assert _codes(diagnose(lp9, **_args(longer)), "info") == []


def test_a_square_batch_whose_padding_shows_its_layout_gets_no_note(rng):
    """T == N with NaN past each (ragged) input length: read the other way some valid frames
    would be NaN, so the values confirm the layout: no note."""
    p, lp = _healthy(rng, T=8, N=8, C=12, L=2)  # 6 to 8 frames each
    mask = np.arange(8)[:, None] < p.input_lengths[None, :]  # (T, N) valid frames
    assert np.isnan(lp.transpose(1, 0, 2)[mask]).any()  # the other reading meets padding
    report = diagnose(lp, **_args(p))
    assert report.ok and report.findings == [], report


def test_raw_scores_with_as_many_classes_as_frames_get_a_note(rng):
    """Logits with C == T: nothing shows which axis is the classes (a note); the same frames
    as log-probs are normalised over C, which does (no note)."""
    p, lp = _healthy(rng, T=12, N=3, C=12, L=3, full_length=True)
    logits = lp * 1.5 + 2.0
    assert _codes(diagnose(logits=logits, **_args(p)), "info") == ["layout-ambiguous"]
    assert _codes(diagnose(lp, **_args(p)), "info") == []
