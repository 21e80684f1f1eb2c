"""Which lines a training step sees, and a batch as tensors."""
import numpy as np

from ctcbench.convergence.batches import batch_indices, tensors
from ctcbench.convergence.data import Pool


def test_batches_depend_only_on_seed_and_step():
    """Batch sampling is a pure function of (seed, step)."""
    assert (batch_indices(1, 7, 100, 5) == batch_indices(1, 7, 100, 5)).all()
    assert not (batch_indices(1, 7, 100, 5) == batch_indices(1, 8, 100, 5)).all()
    assert not (batch_indices(1, 7, 100, 5) == batch_indices(2, 7, 100, 5)).all()


def test_batches_drawn_among_some_lines_stay_among_them():
    """``among`` restricts a batch to those pool indices (the curriculum's short lines)."""
    among = np.array([3, 9, 11])
    idx = batch_indices(0, 0, 100, 50, among=among)
    assert len(idx) == 50 and set(idx.tolist()) <= {3, 9, 11}


def test_tensors_shapes_and_values():
    """Lines 2 and 0 of a three-line pool: images (2, 1, H, W), labels and lengths as stored."""
    images = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    labels = np.array([[1, 2, 0], [3, 0, 0], [2, 2, 1]])
    pool = Pool(images, labels, np.array([2, 1, 3]), "abc")
    x, targets, lengths = tensors(pool, np.array([2, 0]))
    assert tuple(x.shape) == (2, 1, 4, 5)
    assert (x[0, 0].numpy() == images[2]).all() and (x[1, 0].numpy() == images[0]).all()
    assert targets.tolist() == [[2, 2, 1], [1, 2, 0]] and lengths.tolist() == [3, 2]
