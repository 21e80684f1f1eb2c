"""Self-fuzz of the known-issue tables (``compare --known-issues``, cases/known_issues.toml)
and the atlas (cases/atlas.toml): the built-in files mutated key by key, read by their one
loader, whose row classes declare every key."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from ctcbench.caselib.known import ATLAS_FILE, FILE_NAME, load_atlas, load_known_issues

from selffuzz.strategies_files import kept, builtin_table, mutated, to_toml

TABLES = {FILE_NAME: (load_known_issues, builtin_table(FILE_NAME)),
          ATLAS_FILE: (load_atlas, builtin_table(ATLAS_FILE))}


def _some_rows(data: dict, key: str, first: int) -> dict:
    """The file with a window of 3 rows: mutations land on every row across examples."""
    rows = data[key]
    return {**data, key: rows[first % len(rows):][:3]}


@settings(parent=settings.get_profile("ctcbench-selffuzz"))
@given(data=st.data(), file=st.sampled_from(sorted(TABLES)), first=st.integers(0, 400))
def test_mutated_table_file(oracle, data, file, first):
    """A mutated known-issues or atlas file loads, or is one error in the form; a misspelt
    or unknown key is never dropped."""
    load, table = TABLES[file]
    seed = _some_rows(table, "issue" if file == FILE_NAME else "entry", first)
    raw, mutations = data.draw(mutated(seed), label="mutated table")
    text = to_toml(raw)
    what = f"{file} {text[:2000]!r} after {mutations}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, file)
        path.write_text(text, encoding="utf-8")
        try:
            with oracle.bounded(what=what):
                load(path)
        except oracle.Finding:
            raise
        except Exception as exc:
            oracle.record(file, oracle.check_error(exc, what))
            return
    oracle.record(file, None)
    assert not [m for m in mutations if m.refusable and kept(raw, m)], \
        f"{what}: a misspelt or unknown key was dropped"

