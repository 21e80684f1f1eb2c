"""The atlas (cases/atlas.toml): every entry loads, is sourced and is consistent with the
library and the known issues, a malformed file is one error, and the entries that reproduce
on this stack are run."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from ctcbench.atlas.run import atlas
from ctcbench.caselib.known import load_atlas, load_known_issues
from ctcbench.caselib.library import load_cases
from ctcbench.caselib.decoder_cases import load_decoder_cases
from ctcbench.runtime.decoders import BUILTIN_DECODERS, DecoderTraits, get_decoder
from ctcbench.runtime.factory import load_factory
from ctcbench.runtime.registry import BUILTIN_BACKENDS, get_backend
from ctcbench.runtime.protocol import BackendUnavailable

FILE = Path(__file__).resolve().parents[2] / "cases" / "atlas.toml"
ENTRIES = load_atlas()
CASES = {c.name: c for c in load_cases()}
DECODER_CASES = {c.name: c for c in load_decoder_cases()}


def test_every_entry_of_the_file_loads():
    """The installed atlas is the repository's file, one entry per [[entry]], in its order."""
    raw = tomllib.loads(FILE.read_text())["entry"]
    assert [e.id for e in ENTRIES] == [r["id"] for r in raw] and ENTRIES
    assert load_atlas(FILE) == ENTRIES


def test_every_entry_cites_an_upstream_address_or_ctcbench_s_own_measurement():
    """A stranger can check each entry: it links upstream, or ctcbench measured it."""
    unsourced = [e.id for e in ENTRIES if not e.url and "measured by ctcbench" not in e.source]
    assert not unsourced, unsourced


THREAD = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(issues|pull|security/advisories)/")


def test_every_entry_on_an_upstream_thread_says_where_it_stood_and_when():
    """An entry whose url is an issue, a PR or an advisory has the thread's state and the day
    it was read; a fix in fixed_in is a release or names its repository's PR or commit."""
    undated = [e.id for e in ENTRIES if e.url and THREAD.match(e.url)
               and not (e.upstream_state and e.checked)]
    assert not undated, undated
    for e in (e for e in ENTRIES if e.fixed_in):
        assert re.fullmatch(r"[\w.-]+ \d[\w.+!-]*|[\w.-]+/[\w.-]+ (PR#\d+|@[0-9a-f]{7,40})",
                            e.fixed_in), e.id
        if e.upstream_state:
            assert e.upstream_state != "not found", e.id  # a fix is only what a thread says


def test_tryable_entries_name_a_builtin_backend_and_a_case_in_its_dtype():
    """backend/case/dtype name a built-in backend and a library case run in that dtype, or a
    built-in decoder and a decoder case, in the dtype the decoder computes in."""
    for e in (e for e in ENTRIES if e.case is not None):
        if e.backend in BUILTIN_DECODERS:
            traits = DecoderTraits.of(load_factory(BUILTIN_DECODERS[e.backend]))
            assert e.case in DECODER_CASES and e.dtype == traits.dtype, e.id
            continue
        assert e.backend in BUILTIN_BACKENDS, e.id
        assert e.case in CASES and e.dtype in CASES[e.case].dtypes, e.id
        assert (e.device == "gpu") == e.backend.startswith("torch-cu"), e.id


def test_known_issues_point_into_the_atlas_and_cover_its_cpu_rows():
    """Every known issue's atlas id exists; every CPU entry with a case is a known issue of
    that row, so compare's gate stays green while the bug reproduces."""
    ids = {e.id for e in ENTRIES}
    issues = load_known_issues()
    assert {i.atlas for i in issues if i.atlas} <= ids
    for e in (e for e in ENTRIES if e.case is not None and e.device == "cpu"
              and not _fixed(e)):
        assert any(i.matches(e.backend, e.case, e.dtype) and i.atlas == e.id
                   for i in issues), e.id


def _fixed(entry) -> bool:
    """An entry its upstream says was fixed and no known issue claims: compare passes it."""
    return entry.fixed_in is not None and not any(
        i.atlas == entry.id for i in load_known_issues())


ENTRY = ('format = 1\n[[entry]]\nid = "a"\nimplementation = "x"\nproblem = "p"\n'
         'device = "cpu"\nsource = "s"\n')


@pytest.mark.parametrize("text, message", [
    (ENTRY.replace('"cpu"', '"tpu"'),
     "atlas.toml: entry[0].device: expected one of cpu, gpu, got 'tpu'"),
    (ENTRY + 'case = "tf_basic"\n',
     "atlas.toml: entry[0]: expected all of case, dtype or none, got only case"),
    (ENTRY + 'case = "tf_basic"\ndtype = "float32"\n',
     "atlas.toml: entry[0]: expected backend beside case, got no backend"),
    (ENTRY + 'backend = "torch"\nprobe = "label near 2^32"\nshows = ["crashes"]\n',
     "atlas.toml: entry[0].probe: expected one of negative input length, huge negative input "
     "length"),
    (ENTRY + 'backend = "torch"\nprobe = "empty target"\nshows = ["segfaults"]\n',
     "atlas.toml: entry[0].shows: expected globs matching one of raises, crashes"),
    (ENTRY + 'url = "github.com/x"\n',
     "atlas.toml: entry[0].url: expected an https:// address, got 'github.com/x'"),
    (ENTRY + 'backend = "tf"\ncase = "tf_basic"\ndtype = "float8"\n',
     "atlas.toml: entry[0].dtype: expected one of float16, bfloat16, float32, float64, "
     "got 'float8'"),
    (ENTRY + ENTRY[len("format = 1\n"):], "atlas.toml: entry ids: expected each id once, got a"),
    (ENTRY + 'upstream_state = "fixed"\nchecked = "2026-12-04"\n',
     "atlas.toml: entry[0].upstream_state: expected one of open, closed, merged, published, "
     "not found, got 'fixed'"),
    (ENTRY + 'upstream_state = "open"\n',
     "atlas.toml: entry[0]: expected all of upstream_state, checked or none, got only "
     "upstream_state"),
    (ENTRY + 'upstream_state = "open"\nchecked = "2026-13-04"\n',
     "atlas.toml: entry[0].checked: expected a date YYYY-MM-DD (a string), got '2026-13-04'"),
    (ENTRY + 'upstream_state = "open"\nchecked = 2026-12-04\n',
     "atlas.toml: entry[0].checked: expected a date YYYY-MM-DD (a string), got "
     "datetime.date(2026, 12, 4)"),
    (ENTRY + 'upstream_note = "closed"\n',
     "atlas.toml: entry[0]: expected upstream_state beside upstream_note, got no "
     "upstream_state"),
    (ENTRY + 'fixed_in = "soon"\n',
     "atlas.toml: entry[0].fixed_in: expected a release 'DIST VERSION' (torch 2.4.0) or a fix "
     "'OWNER/REPO PR#N' or 'OWNER/REPO@COMMIT', got 'soon'"),
    (ENTRY + 'fixed_in = "PR#123"\n', "atlas.toml: entry[0].fixed_in: expected a release"),
])
def test_a_malformed_atlas_is_one_error_naming_the_field(tmp_path, text, message):
    (tmp_path / "atlas.toml").write_text(text)
    with pytest.raises(ValueError) as err:
        load_atlas(tmp_path / "atlas.toml")
    assert str(err.value).startswith(message)


def test_a_well_formed_entry_keeps_its_fields(tmp_path):
    """Optional keys absent are None; an entry with a case is tryable."""
    (tmp_path / "atlas.toml").write_text(ENTRY + ENTRY[len("format = 1\n"):].replace(
        'id = "a"', 'id = "b"') + 'backend = "tf"\ncase = "tf_basic"\ndtype = "float32"\n')
    bare, tried = load_atlas(tmp_path / "atlas.toml")
    assert (bare.url, bare.known_in, bare.fixed_in, bare.case, bare.tryable) \
        == (None, None, None, None, False)
    assert (bare.upstream_state, bare.checked, bare.upstream_note) == (None, None, None)
    assert (tried.id, tried.backend, tried.case, tried.dtype, tried.tryable) \
        == ("b", "tf", "tf_basic", "float32", True)


def test_an_entry_keeps_where_its_thread_stood(tmp_path):
    (tmp_path / "atlas.toml").write_text(
        ENTRY + 'fixed_in = "torch 2.4.0"\nupstream_state = "closed"\nchecked = "2026-12-04"\n'
        'upstream_note = "closed by PR#1"\n')
    (entry,) = load_atlas(tmp_path / "atlas.toml")
    assert (entry.fixed_in, entry.upstream_state, entry.checked, entry.upstream_note) \
        == ("torch 2.4.0", "closed", "2026-12-04", "closed by PR#1")


@pytest.mark.long
def test_entries_that_reproduce_here_are_run(tmp_path, monkeypatch):
    """Each CPU entry with a case, on a backend installed here, reproduces (its compare row
    fails as the known issue says); GPU entries without a GPU cannot be tried. Entries on
    the long cases (a minute of TF's dense path) are left to compare's gate in CI."""
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    cpu = {e.backend for e in ENTRIES if e.case is not None and e.device == "cpu"
           and not e.case.endswith("_long")}
    here = []
    for name in sorted(cpu):
        try:
            (get_decoder if name in BUILTIN_DECODERS else get_backend)(name).close()
            here.append(name)
        except BackendUnavailable:
            pass
    if not here:
        pytest.skip("no third-party backend installed")
    gpu = sorted({e.backend for e in ENTRIES if e.case is not None and e.device == "gpu"})
    result = atlas(here + gpu, out=tmp_path / "run")
    rows = {r["id"]: r for r in json.loads((tmp_path / "run" / "rows.json").read_text())}
    assert len(rows) == len(ENTRIES)
    for e in ENTRIES:
        if (e.case is not None and e.backend in here and e.device == "cpu"
                and not e.case.endswith("_long")):
            want = "fixed" if _fixed(e) else "reproduces"
            assert rows[e.id]["status"] == want, (e.id, rows[e.id]["reason"])
    for e in (e for e in ENTRIES if e.case is not None and e.device == "gpu"):
        if rows[e.id]["status"] == "cannot try":  # no GPU here: compare skipped the row
            assert "skipped" in rows[e.id]["reason"], (e.id, rows[e.id]["reason"])
    assert result.summary["entries"] == len(ENTRIES)


def test_probe_entries_name_a_builtin_backend_and_say_what_shows_the_bug():
    for e in (e for e in ENTRIES if e.probe is not None):
        assert e.backend in BUILTIN_BACKENDS and e.shows, e.id
    untried = [e.id for e in ENTRIES if e.device == "cpu" and not e.tryable and not e.not_tried]
    assert not untried, untried  # every CPU entry is tried, or says why it cannot be


def _probed(tmp_path, register_backends, plugin: str, probe: str, shows: list[str]) -> dict:
    """One atlas entry with a probe on a plugin backend, run; its row."""
    name = "probed-" + plugin.lower()
    register_backends(name, f"cliff_backends:{plugin}")
    (tmp_path / "atlas.toml").write_text(
        ENTRY + f'backend = "{name}"\nprobe = "{probe}"\nshows = {json.dumps(shows)}\n')
    atlas(out=tmp_path / "run", entries=load_atlas(tmp_path / "atlas.toml"))
    return json.loads((tmp_path / "run" / "rows.json").read_text())[0]


@pytest.mark.parametrize("plugin, probe, shows, status", [
    ("RawSegfaults", "label >= C", ["crashes"], "reproduces"),  # the worker dies: contained
    ("RawSegfaults", "empty target", ["crashes"], "fixed"),  # a valid input: answered right
    ("RawGarbage", "target longer than input", ["returns garbage"], "reproduces"),
    ("RawRaises", "label = blank", ["returns garbage"], "fixed"),
])
def test_a_probe_entry_reproduces_exactly_when_the_call_shows_its_sign(
        tmp_path, register_backends, plugin, probe, shows, status):
    row = _probed(tmp_path, register_backends, plugin, probe, shows)
    assert row["status"] == status, row["reason"]
    assert row["reason"].startswith(f"{probe}: ") or row["reason"].startswith("does not")


def test_torch_infinite_loss_gradient_is_measured_as_torch_gives_it(tmp_path):
    """The entry's probe against torch itself: an infeasible sample's gradient, computed here
    with F.ctc_loss on the same batch, is NaN exactly when the atlas says it reproduces."""
    import torch
    from ctcbench.runtime.malformed import PROBES, valid_batch
    b = next(p for p in PROBES if p.name == "target longer than input").change(valid_batch())
    x = torch.from_numpy(b["logits"]).requires_grad_()
    loss = torch.nn.functional.ctc_loss(
        x.log_softmax(-1), *(torch.from_numpy(b[k]) for k in
                             ("targets", "input_lengths", "target_lengths")), reduction="none")
    loss.sum().backward()
    nan = bool(torch.isnan(x.grad[:, 0]).any())
    entry = next(e for e in ENTRIES if e.id == "torch-nan-gradient-of-infinite-loss")
    result = atlas(["torch"], out=tmp_path / "run", entries=[entry])
    assert result.rows.to_dict("records")[0]["status"] == ("reproduces" if nan else "fixed")
