"""CTCProblem: conversions and the validation every backend relies on."""
import numpy as np
import pytest
import torch

from ctcbench import CTCProblem


def ok_inputs(T=5, N=2, C=4):
    logits = np.zeros((T, N, C), dtype=np.float32)
    targets = np.array([[1, 2, 3], [2, 2, 0]])
    return logits, targets, np.array([5, 4]), np.array([3, 2])


def test_padded_and_concatenated_targets_agree():
    """A concatenated 1-D target is split by target_lengths into the padded form."""
    logits, targets, il, tl = ok_inputs()
    padded = CTCProblem(logits, targets, il, tl)
    concat = CTCProblem(logits, np.array([1, 2, 3, 2, 2]), il, tl)
    assert np.array_equal(padded.targets, concat.targets)
    assert concat.concatenated_targets().tolist() == [1, 2, 3, 2, 2]


def test_padding_entries_are_ignored_even_if_invalid():
    """Target entries past target_lengths may hold anything, even the blank or -1."""
    logits, _, il, tl = ok_inputs()
    p = CTCProblem(logits, np.array([[1, 2, 3], [2, 2, -1]]), il, tl)
    assert p.targets[1].tolist()[:2] == [2, 2]


def test_nan_in_padded_frames_is_accepted():
    """NaN garbage beyond input_lengths is not an error and never reaches the log-probs."""
    logits, targets, il, tl = ok_inputs()
    logits[4:, 1] = np.nan
    p = CTCProblem(logits, targets, il, tl)
    assert np.isnan(p.logits[4, 1]).all()  # kept as given ...
    assert np.isfinite(p.log_probs()).all()  # ... but masked wherever a backend reads it
    np.testing.assert_allclose(p.log_probs()[:, 0], np.log(np.full((5, 4), 0.25)))


def test_torch_tensors_and_bfloat16_are_accepted():
    """torch tensors convert to NumPy; bfloat16 keeps its name and float32 values."""
    logits, targets, il, tl = ok_inputs()
    p = CTCProblem(torch.from_numpy(logits).bfloat16(), torch.from_numpy(targets),
                   torch.from_numpy(il), torch.from_numpy(tl))
    assert p.dtype == "bfloat16" and p.logits.dtype == np.float32
    assert p.shape == (5, 2, 4, 3)


def test_repeats_and_feasibility():
    """A target needs one frame per label plus one per adjacent repeat."""
    logits = np.zeros((3, 2, 4))
    p = CTCProblem(logits, np.array([[1, 1], [1, 2]]), [3, 2], [2, 2])
    assert p.repeats().tolist() == [1, 0]
    assert p.feasible().tolist() == [True, True]
    p = CTCProblem(logits, np.array([[1, 1], [1, 2]]), [2, 1], [2, 2])
    assert p.feasible().tolist() == [False, False]


@pytest.mark.parametrize("change, argument, fragment", [
    (dict(logits=np.zeros(5)), "logits", "3-D"),
    (dict(logits=np.zeros((5, 2, 4), dtype=np.int64)), "logits", "float dtype"),
    (dict(logits=np.zeros((5, 0, 4))), "logits", "non-empty batch"),
    (dict(input_lengths=np.array([5, -1])), "input_lengths", "non-negative"),
    (dict(input_lengths=np.array([6, 4])), "input_lengths", "<= T = 5"),
    (dict(input_lengths=np.array([5])), "input_lengths", "shape (2,)"),
    (dict(input_lengths=np.array([5.0, 4.0])), "input_lengths", "integer"),
    (dict(target_lengths=np.array([4, 2])), "target_lengths", "<= padded target width"),
    (dict(target_lengths=np.array([3, -2])), "target_lengths", "non-negative"),
    (dict(targets=np.array([[1, 2, 4], [2, 2, 0]])), "targets", "labels in [0, 4)"),
    (dict(targets=np.array([[1, 0, 3], [2, 2, 0]])), "targets", "no label equal to blank=0"),
    (dict(targets=np.array([1, 2, 3, 2])), "targets", "sum(target_lengths) = 5"),
    (dict(targets=np.array([[1, 2, 3]])), "targets", "2 rows"),
    (dict(blank=4), "blank", "[-4, 4)"),
    (dict(blank=-5), "blank", "[-4, 4)"),
    (dict(blank=1.0), "blank", "an int"),
])
def test_bad_input_names_the_argument(change, argument, fragment):
    """Each malformed argument gets a ValueError that names it and says what was expected."""
    logits, targets, il, tl = ok_inputs()
    kwargs = dict(logits=logits, targets=targets, input_lengths=il, target_lengths=tl)
    blank = change.pop("blank", 0)
    kwargs.update(change)
    with pytest.raises(ValueError) as err:
        CTCProblem(**kwargs, blank=blank)
    message = str(err.value)
    assert message.startswith(f"{argument}: expected") and fragment in message, message


ARRAY_KINDS = [np.asarray, torch.from_numpy]  # a tensor's sum is torch's (core.arrays)


@pytest.mark.parametrize("kind", ARRAY_KINDS)
@pytest.mark.parametrize("bad", [np.nan, np.inf, "all -inf"])
def test_non_finite_valid_frame_is_rejected(bad, kind):
    """NaN, +inf or a frame without a finite logit inside a valid frame is an error that says where."""
    logits, targets, il, tl = ok_inputs()
    if bad == "all -inf":
        logits[3, 1, :] = -np.inf
    else:
        logits[3, 1, 2] = bad
    with pytest.raises(ValueError, match=r"logits: expected finite .* t=3, n=1"):
        CTCProblem(kind(logits), targets, il, tl)


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_huge_finite_logits_are_accepted_and_a_nan_among_them_is_not(kind):
    """Logits near float32's largest value are finite although their sum overflows, so they
    are valid; a NaN among them in a valid frame is still an error that says where."""
    logits = np.full((6, 2, 5), 3e38, dtype=np.float32)
    logits[:, :, 0] = -3e38
    with np.errstate(over="ignore"):
        assert np.isinf(logits.sum())
    CTCProblem(kind(logits), [[1, 2], [3, 3]], [6, 6], [2, 2])
    logits[2, 0, 4] = np.nan
    with pytest.raises(ValueError, match=r"logits: expected finite .* t=2, n=0"):
        CTCProblem(kind(logits), [[1, 2], [3, 3]], [6, 6], [2, 2])


@pytest.mark.parametrize("kind", ARRAY_KINDS)
def test_logits_are_a_private_copy_unless_copy_is_false(kind):
    """By default a later change to the caller's logits does not reach the problem; with
    ``copy=False`` the problem holds a read-only view of them; the caller's stay writable."""
    logits, targets, il, tl = ok_inputs()
    given = kind(logits)
    kept, viewed = (CTCProblem(given, targets, il, tl, copy=copy) for copy in (True, False))
    logits[0, 0, 0] = 7.0
    assert kept.logits[0, 0, 0] == 0.0 and viewed.logits[0, 0, 0] == 7.0
    assert not kept.logits.flags.writeable and not viewed.logits.flags.writeable
    assert logits.flags.writeable


def test_minus_inf_logit_in_a_valid_frame_is_probability_zero():
    """A -inf logit (a masked class) is accepted and gives log-probability -inf, no NaN."""
    logits, targets, il, tl = ok_inputs()
    logits[3, 1, 2] = -np.inf
    lp = CTCProblem(logits, targets, il, tl).log_probs()
    assert lp[3, 1, 2] == -np.inf and not np.isnan(lp).any()
