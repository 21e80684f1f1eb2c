"""Self-fuzz of ``convergence --config FILE.toml``: a file of every declared setting at its
default (grid settings as lists), mutated key by key, read and checked as the command does
before training."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ctcbench.convergence.runconfig import build, check_run, load_toml, setting_table

from selffuzz.strategies_files import kept, mutated, to_toml


def _valid_config() -> dict:
    """Every setting at its declared default, in the file's tables ([model], [data])."""
    out: dict = {}
    for key, s in setting_table().items():
        *tables, name = key.split(".")
        node = out
        for t in tables:
            node = node.setdefault(t, {})
        node[name] = [s.default] if s.grid else s.default
    return out


CONFIG = _valid_config()


def _toml(data: dict) -> str:
    """Top-level keys, then one [table] per sub-table."""
    flat = {k: v for k, v in data.items() if not isinstance(v, dict)}
    text = to_toml(flat)
    for name, table in data.items():
        if isinstance(table, dict):
            text += f"[{name}]\n" + to_toml(table)
    return text


@settings(parent=settings.get_profile("ctcbench-selffuzz"))
@given(data=st.data())
def test_mutated_config_file(oracle, data):
    """A mutated --config file is read and checked, or refused in one line naming the file
    and the key; a misspelt key is never dropped."""
    raw, mutations = data.draw(mutated(CONFIG), label="mutated config")
    text = _toml(raw)
    what = f"--config {text!r} after {mutations}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.toml")
        path.write_text(text, encoding="utf-8")
        try:
            with oracle.bounded(what=what):
                base, grid = build(load_toml(path))
                check_run(base, grid)
        except oracle.Finding:
            raise
        except Exception as exc:
            oracle.record("--config files", oracle.check_error(exc, what))
            return
    oracle.record("--config files", None)
    assert not [m for m in mutations if m.refusable and kept(raw, m)], \
        f"{what}: a misspelt or unknown key was dropped"


@pytest.mark.parametrize("key", ["channels", "hidden", "window", "stride"])
def test_found_huge_model_size(oracle, key):
    """A model size of 10**9 is refused by its declaration (torch was asked for 72 TB and
    answered with its allocator's RuntimeError or TypeError)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "config.toml")
        path.write_text(f"[model]\n{key} = 1000000000\n", encoding="utf-8")
        with pytest.raises(ValueError) as refused:
            check_run(*build(load_toml(path)))
    assert oracle.check_error(refused.value, key).startswith(f"model.{key}: expected an integer in")
