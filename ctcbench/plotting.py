"""matplotlib (Agg) for every plot, and pictures as ``data:image/png;base64`` URIs, so an HTML
page is one file that needs nothing from the network."""
from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path

DPI = 100


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def png_uri(fig) -> str:
    """The figure as a PNG data URI; the figure is closed."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def file_uri(path: Path) -> str:
    """A PNG already on disk as a data URI."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def written_uri(write) -> str:
    """Run ``write(path)`` (a plot function of the drivers that takes a PNG path) into a
    temporary file and return the picture as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plot.png"
        write(path)
        return file_uri(path)


def plain_log(axis) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
