"""HTML pages: the renderer and its templates. ``ctcbench.drivers.write_report`` makes the
page of run folders of any kind; ``ctcbench.doctor.command.write_doctor_report`` a diagnosis's."""
from ctcbench.report.render import render_page, write_page

__all__ = ["render_page", "write_page"]
