"""The atlas's "is this bug fixed?": a real entry that reproduces here, in a table where its
``fixed_in`` is set to releases before, at and after the installed one, and to a PR. The
installed release is read here with importlib.metadata; whether the bug shows is computed
here with torch itself."""
from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

from ctcbench.atlas.run import atlas, records, table_text
from ctcbench.caselib.known import load_atlas
from ctcbench.drivers import finish_run

FILE = Path(__file__).resolve().parents[2] / "cases" / "atlas.toml"
ENTRY = "torch-nan-gradient-of-infinite-loss"  # a probe on torch's own call, a second or two


def _toml(entry: dict) -> str:
    return "[[entry]]\n" + "".join(f"{k} = {_value(v)}\n" for k, v in entry.items())


def _value(v) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _shows_here() -> bool:
    """The entry's bug, computed with F.ctc_loss on the probe's batch: a NaN gradient."""
    import torch
    from ctcbench.runtime.malformed import PROBES, valid_batch
    b = next(p for p in PROBES if p.name == "target longer than input").change(valid_batch())
    x = torch.from_numpy(b["logits"]).requires_grad_()
    loss = torch.nn.functional.ctc_loss(
        x.log_softmax(-1), *(torch.from_numpy(b[k]) for k in
                             ("targets", "input_lengths", "target_lengths")), reduction="none")
    loss.sum().backward()
    return bool(torch.isnan(x.grad[:, 0]).any())


def test_a_reproducing_entry_fixed_in_an_older_release_is_a_regression(tmp_path):
    pytest.importorskip("torch")
    if not _shows_here():
        pytest.skip(f"{ENTRY} does not show on the installed torch")
    installed = importlib.metadata.version("torch")  # the oracle, e.g. "2.13.0+cpu"
    major, minor = (int(n) for n in re.match(r"(\d+)\.(\d+)", installed).groups())
    at = re.match(r"\d+\.\d+\.\d+", installed).group()  # the release without a local tag
    raw = next(e for e in tomllib.loads(FILE.read_text())["entry"] if e["id"] == ENTRY)
    fixed = {"older": f"torch {major - 1}.0.0", "same": f"torch {at}",
             "newer": f"torch {major}.{minor + 1}.0", "pr": "pytorch/pytorch PR#16199"}
    (tmp_path / "atlas.toml").write_text("format = 1\n" + "".join(
        _toml({**raw, "id": f"{ENTRY}-{k}", "fixed_in": v}) for k, v in fixed.items()))
    result = atlas(["torch"], out=tmp_path / "run", entries=load_atlas(tmp_path / "atlas.toml"))
    rows = {r["id"].rsplit("-", 1)[1]: r for r in records(result)}
    assert {r["status"] for r in rows.values()} == {"reproduces"}, rows
    url = raw["url"]
    for k in ("older", "same"):
        assert rows[k]["regression"] == f"fixed in {fixed[k]} per {url}, reproduces on torch " \
                                        f"{installed}"
    assert rows["newer"]["regression"] is None
    assert rows["newer"]["fixed_in_check"] == f"fixed in {fixed['newer']}, after the " \
                                              f"installed torch {installed}"
    assert rows["pr"]["regression"] is None and "cannot be compared" in rows["pr"]["fixed_in_check"]
    assert result.summary["regressions"] == [f"{ENTRY}-{k}: {rows[k]['regression']}"
                                             for k in ("older", "same")]
    text = table_text(result)
    assert f"regression: {ENTRY}-older: fixed in {fixed['older']}" in text
    assert f"regression: {ENTRY}-newer" not in text
    page = finish_run(result, named=True).run_dir / "report.html"
    assert f"reproduces on torch {installed}" in page.read_text()


def test_a_fixed_in_that_is_a_pr_or_an_unknown_framework_is_not_compared(tmp_path):
    """Only a release of an installed framework is compared; tensorflow's release names the
    wheel installed (tensorflow-cpu here)."""
    from ctcbench.compare.stale import fixed_in_check
    base = ('format = 1\n[[entry]]\nid = "x"\nimplementation = "i"\nproblem = "p"\n'
            'device = "cpu"\nsource = "s"\nurl = "https://github.com/o/r/issues/1"\n')
    (tmp_path / "atlas.toml").write_text(base + 'fixed_in = "nosuchframework 1.0"\n')
    (entry,) = load_atlas(tmp_path / "atlas.toml")
    assert fixed_in_check(entry) == (None, "fixed in nosuchframework 1.0: nosuchframework is "
                                           "not installed here to compare")
    (tmp_path / "atlas.toml").write_text(base + 'fixed_in = "tensorflow 2.5.0"\n')
    (entry,) = load_atlas(tmp_path / "atlas.toml")
    for wheel in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"):
        try:
            version = importlib.metadata.version(wheel)
        except importlib.metadata.PackageNotFoundError:
            continue
        assert fixed_in_check(entry)[0] == ("fixed in tensorflow 2.5.0 per "
                                            f"https://github.com/o/r/issues/1, reproduces on "
                                            f"{wheel} {version}")
        break
    else:
        assert fixed_in_check(entry)[0] is None
