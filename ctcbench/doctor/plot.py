"""A picture of the frames the doctor looked at: per sample, the class probabilities along time,
the blank's probability, and where greedy decoding emits labels. Blank plateaus, repeated
frames and misplaced blanks are easier to see than to read."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ctcbench.core.ctcmath import emission_frames
from ctcbench.doctor.inputs import prepare
from ctcbench.doctor.normalise import normalise
from ctcbench.plotting import pyplot


def plot_frames(path, log_probs=None, *, logits=None, probs=None, targets, input_lengths,
                target_lengths, blank: int = 0, layout: str = "TNC", samples: int = 4) -> Path:
    """Write :func:`frames_figure` as a PNG at ``path``; returns the path."""
    fig = frames_figure(log_probs, logits=logits, probs=probs, targets=targets,
                        input_lengths=input_lengths, target_lengths=target_lengths, blank=blank,
                        layout=layout, samples=samples)
    path = Path(path)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def frames_figure(log_probs=None, *, logits=None, probs=None, targets, input_lengths,
                  target_lengths, blank: int = 0, layout: str = "TNC", samples: int = 4):
    """One panel per sample (the first ``samples``): p(class) along time in grey, p(blank) on a
    twin axis, greedy emissions marked."""
    plt = pyplot()
    inp, _ = prepare(log_probs, logits=logits, probs=probs, targets=targets,
                     input_lengths=input_lengths, target_lengths=target_lengths, blank=blank,
                     layout=layout)
    lp, _ = normalise(inp)  # (T, N, C) log-probabilities the model most likely meant
    T, N, C, L = inp.shape
    shown = min(samples, N)
    fig, axes = plt.subplots(shown, 1, figsize=(10, 2.4 * shown), squeeze=False)
    for n, ax in enumerate(axes[:, 0]):
        length = int(inp.lengths[n])
        probs_n = np.exp(lp[:length, n]).T  # (C, t)
        ax.imshow(probs_n, aspect="auto", origin="lower", cmap="Greys", vmin=0, vmax=1,
                  extent=(-0.5, length - 0.5, -0.5, C - 0.5), interpolation="nearest")
        ax.axhline(inp.blank, color="tab:blue", lw=0.6, alpha=0.5)
        twin = ax.twinx()
        twin.plot(np.arange(length), probs_n[inp.blank], color="tab:blue", lw=1.2)
        twin.set_ylim(0, 1.05)
        twin.set_ylabel("p(blank)", color="tab:blue")
        best = probs_n.argmax(0)
        emit = emission_frames(best, blank=inp.blank)  # frames where greedy decoding emits
        ax.scatter(emit, best[emit], marker="v", color="tab:red", s=18, zorder=3,
                   label="greedy emits")
        y = inp.targets[n, : min(inp.target_lengths[n], L)].tolist()
        shown_y = " ".join(map(str, y[:30])) + (" ..." if len(y) > 30 else "")
        ax.set_title(f"sample {n}: {length} frames, target ({len(y)}): {shown_y}  |  "
                     f"greedy emits {len(emit)}", fontsize=9)
        ax.set_ylabel("class")
        ax.set_xlim(-0.5, max(length, 1) - 0.5)
    axes[-1, 0].set_xlabel("frame t (grey: p(class), blue: blank, red: greedy emissions)")
    fig.tight_layout()
    return fig
