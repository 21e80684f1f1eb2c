"""ctcbench.doctor.plot: one panel per sample shown, each with the class probabilities along its
own frames, p(blank) on a twin axis and the frames where greedy decoding emits, batch-major input
included."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from ctcbench import CTCProblem
from ctcbench.doctor.plot import frames_figure, plot_frames
from ctcbench.plotting import pyplot

from conftest import trained_log_probs

T, N, C = 30, 6, 8
TARGETS = np.array([[1, 2, 3, 4], [5, 5, 6, 0], [7, 1, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0],
                    [3, 4, 5, 6]])
TARGET_LENGTHS = np.array([4, 3, 2, 1, 0, 4])
INPUT_LENGTHS = np.array([30, 30, 24, 30, 30, 18])
# The model peaks on one-frame label spikes at int((k + 0.5) * length / len(target)) (conftest's
# spike_paths), so greedy decoding emits label k there, by hand:
EMITS = [[3, 11, 18, 26], [5, 15, 25], [6, 18], [15], [], [2, 6, 11, 15]]


@pytest.fixture
def batch_major(rng):
    """Trained-like log-probs as (N, T, C), NaN past each input length; sample 3 holds its
    label over frames 15 and 16, a repeat that greedy decoding emits once."""
    p = CTCProblem(np.zeros((T, N, C)), TARGETS, INPUT_LENGTHS, TARGET_LENGTHS)
    values = trained_log_probs(rng, p).transpose(1, 0, 2)  # (N, T, C)
    values[3, 16] = values[3, 15]
    return values


def _figure(values, samples):
    return frames_figure(values, targets=TARGETS, input_lengths=INPUT_LENGTHS,
                         target_lengths=TARGET_LENGTHS, samples=samples)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    pyplot().close("all")


@pytest.mark.parametrize("samples, panels", [(1, 1), (2, 2), (6, 6), (10, 6)])
def test_one_panel_per_sample_shown(batch_major, samples, panels):
    """At most `samples` panels, one per sample in batch order, each with its p(blank) twin axis."""
    fig = _figure(batch_major, samples)
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == panels and len(fig.axes) == 2 * panels
    assert [ax.get_title().split(":")[0] for ax in maps] == [f"sample {n}" for n in range(panels)]
    assert sum(ax.get_ylabel() == "p(blank)" for ax in fig.axes) == panels
    assert "frame t" in maps[-1].get_xlabel()


def test_each_panel_shows_its_own_frames_blank_and_greedy_emissions(batch_major):
    """Batch-major input is read as (N, T, C), as diagnose reads it: each panel holds that
    sample's p(class) over its own input length, p(blank) is class 0's row, and the red marks
    sit at the spike frames on the target labels."""
    fig = _figure(batch_major, N)
    maps, twins = fig.axes[:N], fig.axes[N:]
    probs = np.exp(batch_major)  # (N, T, C)
    for n, (ax, twin) in enumerate(zip(maps, twins)):
        length, labels = INPUT_LENGTHS[n], TARGETS[n, :TARGET_LENGTHS[n]].tolist()
        np.testing.assert_allclose(ax.images[0].get_array(), probs[n, :length].T, rtol=1e-12)
        np.testing.assert_allclose(twin.get_lines()[0].get_ydata(), probs[n, :length, 0],
                                   rtol=1e-12)
        offsets = ax.collections[0].get_offsets()
        assert offsets[:, 0].tolist() == EMITS[n] and offsets[:, 1].tolist() == labels, n
        assert ax.get_title().startswith(f"sample {n}: {length} frames, target ({len(labels)})")
        assert ax.get_title().endswith(f"greedy emits {len(EMITS[n])}")


def test_plot_frames_writes_a_png_that_grows_with_the_panels(tmp_path, batch_major):
    """plot_frames saves the figure as a PNG; four panels are twice as tall as two."""
    heights = []
    for samples in (2, 4):
        out = plot_frames(tmp_path / f"f{samples}.png", batch_major, targets=TARGETS,
                          input_lengths=INPUT_LENGTHS, target_lengths=TARGET_LENGTHS,
                          samples=samples)
        with Image.open(out) as image:
            assert image.format == "PNG" and image.width > 500
            heights.append(image.height)
    assert heights[1] == pytest.approx(2 * heights[0], abs=2)
