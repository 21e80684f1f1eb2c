"""The limits probes of one backend as a picture: one line per axis, each size tried a mark
(right, or how it failed), so the cliff and the bisection that found it can be seen."""
from __future__ import annotations

from ctcbench.datasheet.search import Status
from ctcbench.plotting import png_uri, pyplot


def limits_figure(probes: dict[str, list[dict]], title: str):
    """``probes``: axis -> its probe rows (``value``, ``status``). None without probes."""
    axes = [a for a in probes if probes[a]]
    if not axes:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(axes) + 1.4))
    seen = set()
    for y, axis in enumerate(axes):
        for r in probes[axis]:
            status = Status(r["status"])  # a row read back from the run folder: the word
            marker, color = status.marker, status.color
            label = r["status"] if r["status"] not in seen else None
            seen.add(r["status"])
            ax.scatter([max(r["value"], 1)], [y], marker=marker, color=color, s=46, label=label,
                       zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_yticks(range(len(axes)), axes)
    ax.invert_yaxis()
    ax.set_xlabel("size tried (each axis' own quantity, log 2)")
    ax.set_title(title, fontsize=11)
    ax.grid(True, axis="x", which="major", alpha=0.25)
    ax.legend(fontsize=8, frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return fig


def limits_plot(probes: dict[str, list[dict]], title: str) -> str | None:
    """:func:`limits_figure` as a PNG data URI; None without probes."""
    fig = limits_figure(probes, title)
    return None if fig is None else png_uri(fig)
