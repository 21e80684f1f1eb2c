"""ctcbench.doctor.plot.plot_frames: a PNG for any batch, batch-major included."""
from __future__ import annotations


from ctcbench.doctor.plot import plot_frames

from conftest import random_problem, trained_log_probs


def test_plot_frames_writes_png_for_batch_major_input(tmp_path, rng):
    """Batch-major input is transposed like diagnose does, and at most `samples` panels drawn."""
    p = random_problem(rng, T=30, N=6, C=8, L=4, full_length=True, garbage=False)
    lp = trained_log_probs(rng, p).transpose(1, 0, 2)
    out = plot_frames(tmp_path / "f.png", lp, targets=p.targets, input_lengths=p.input_lengths,
                      target_lengths=p.target_lengths, samples=2)
    assert out.read_bytes()[:4] == b"\x89PNG"
