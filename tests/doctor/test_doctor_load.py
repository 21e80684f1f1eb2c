"""ctcbench.doctor.load.load_inputs: .npz without pickle, .pt weights-only, clear errors."""
from __future__ import annotations

import io
import tracemalloc
import zipfile

import numpy as np
import pytest
import torch

from ctcbench.doctor.load import MAX_BYTES, load_inputs


def _arrays():
    return dict(log_probs=np.log(np.full((6, 2, 4), 0.25)), targets=np.array([[1, 2], [3, 0]]),
                input_lengths=np.array([6, 5]), target_lengths=np.array([2, 1]))


def test_npz_round_trip_with_blank(tmp_path):
    """An .npz with the four arrays and a blank comes back as diagnose keyword arguments."""
    path = tmp_path / "batch.npz"
    np.savez(path, **_arrays(), blank=np.int64(3))
    out = load_inputs(path)
    assert set(out) == {"log_probs", "targets", "input_lengths", "target_lengths", "blank"}
    assert out["blank"] == 3 and np.array_equal(out["targets"], _arrays()["targets"])


def test_pt_dict_of_tensors_keeps_bfloat16(tmp_path):
    """A torch.save'd dict of tensors loads weights-only; bfloat16 stays a bfloat16 tensor."""
    path = tmp_path / "batch.pt"
    data = {k: torch.from_numpy(v) for k, v in _arrays().items()}
    data["logits"] = data.pop("log_probs").to(torch.bfloat16)
    data["blank"] = 0
    torch.save(data, path)
    out = load_inputs(path)
    assert out["logits"].dtype == torch.bfloat16 and out["blank"] == 0


def test_pt_zero_dim_tensors_load_as_numpy_scalars_do(tmp_path):
    """A 0-d tensor (a blank, torch's unbatched input length) reads as the .npz's 0-d array
    does: the same value, no traceback."""
    path = tmp_path / "batch.pt"
    data = {k: torch.from_numpy(v) for k, v in _arrays().items()}
    data["blank"] = torch.tensor(0)
    torch.save(data, path)
    out = load_inputs(path)
    assert out["blank"] == 0


def test_a_torch_file_named_npz_is_said_to_be_one(tmp_path):
    """torch.save writes a zip too: read as .npz it holds no array, and the error says what it
    is rather than 'found: nothing'."""
    path = tmp_path / "batch.npz"
    torch.save({k: torch.from_numpy(v) for k, v in _arrays().items()}, path)
    with pytest.raises(ValueError, match=r"^batch.npz: expected a NumPy .npz archive, got a "
                                         r"torch.save file \(its data.pkl\): name it .pt"):
        load_inputs(path)


def test_object_arrays_are_refused_without_unpickling(tmp_path):
    """An .npz holding a pickled object array is refused with a clear message."""
    path = tmp_path / "evil.npz"
    np.savez(path, **_arrays(), extra=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="evil.npz: expected plain numeric arrays"):
        load_inputs(path)


class Payload:
    pass


def test_pt_with_arbitrary_objects_is_refused(tmp_path):
    """A .pt that needs full unpickling (a custom class) is refused by weights_only."""
    path = tmp_path / "evil.pt"
    torch.save({"log_probs": Payload()}, path)
    with pytest.raises(ValueError, match="evil.pt: expected a torch.save'd dict of tensors"):
        load_inputs(path)


@pytest.mark.parametrize("name, content, message", [
    ("junk.npz", b"not a zip", "junk.npz: expected a NumPy .npz archive"),
    ("junk.pt", b"not a pickle", "junk.pt: expected a torch.save'd dict"),
    ("batch.csv", b"1,2", "FILE: expected a .npz or .pt file, got 'batch.csv'"),
])
def test_unreadable_files_get_one_clear_error(tmp_path, name, content, message):
    """Corrupt files and unknown suffixes raise ValueError naming the file."""
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        load_inputs(path)


def test_missing_and_ambiguous_keys_are_listed(tmp_path):
    """A file without targets, or with both logits and log_probs, says what it found."""
    a = _arrays()
    np.savez(tmp_path / "a.npz", **{k: v for k, v in a.items() if k != "targets"})
    with pytest.raises(ValueError, match="missing or ambiguous: targets; found: input_lengths"):
        load_inputs(tmp_path / "a.npz")
    np.savez(tmp_path / "b.npz", **a, logits=a["log_probs"])
    with pytest.raises(ValueError, match="exactly one of log_probs/logits/probs"):
        load_inputs(tmp_path / "b.npz")
    np.savez(tmp_path / "c.npz", **a, blank=np.array([0.5]))  # 1.0 would pass
    with pytest.raises(ValueError, match="blank: expected one integer"):
        load_inputs(tmp_path / "c.npz")
    with pytest.raises(FileNotFoundError, match="FILE: expected an existing"):
        load_inputs(tmp_path / "none.npz")


# -- hostile files: sizes are read before data ----------------------------------------------------
def _npy_header(shape, descr="<f8") -> bytes:
    """The bytes of a .npy header (format 1.0) claiming ``shape``, written by NumPy itself."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False,
                                               "shape": shape})
    return buf.getvalue()


def _npz_with(path, name, member_bytes=None, *, zeros=0, compress=zipfile.ZIP_STORED):
    """The healthy arrays of _arrays() plus member ``name``: the given bytes, or a float64
    header for ``zeros`` bytes of zeros followed by them, written in chunks (never in memory)."""
    np.savez(path, **{k: v for k, v in _arrays().items() if k != name.removesuffix(".npy")})
    with zipfile.ZipFile(path, "a", compression=compress) as archive:
        with archive.open(name, "w", force_zip64=True) as fp:
            if member_bytes is not None:
                fp.write(member_bytes)
            else:
                fp.write(_npy_header((zeros // 8,)))
                chunk = bytes(2 ** 20)
                for _ in range(zeros // len(chunk)):
                    fp.write(chunk)


def test_npz_header_claiming_a_trillion_elements_is_refused_before_allocation(tmp_path):
    """A 1 kB .npz whose log_probs header claims 10**6 x 10**6 float64 (8 TB): refused in one
    line naming the member, its claimed size and the limit, with little memory allocated."""
    path = tmp_path / "huge.npz"
    _npz_with(path, "log_probs.npy", _npy_header((10 ** 6, 10 ** 6)) + bytes(64))
    tracemalloc.start()
    with pytest.raises(ValueError) as err:
        load_inputs(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    message = str(err.value)
    assert message == (f"huge.npz: log_probs.npy: expected at most {MAX_BYTES} bytes (256 MiB; "
                       "raise it with max_bytes= or --max-bytes), got an array header claiming "
                       f"shape (1000000, 1000000) float64 = {8 * 10 ** 12} bytes")
    assert peak < 2 ** 22, peak


def test_npz_member_that_inflates_past_the_limit_is_refused_unread(tmp_path):
    """16 MiB of zeros deflated to a few kB, with a 1 MiB limit: refused from the size the zip
    records, before a byte is inflated; the same file loads once the limit is raised."""
    path = tmp_path / "bomb.npz"
    _npz_with(path, "log_probs.npy", zeros=2 ** 24, compress=zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 2 ** 17
    tracemalloc.start()
    with pytest.raises(ValueError) as err:
        load_inputs(path, max_bytes=2 ** 20)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    message = str(err.value)
    assert message.startswith("bomb.npz: log_probs.npy: expected at most 1048576 bytes (1 MiB;")
    inflated = 2 ** 24 + len(_npy_header((2 ** 21,)))
    assert f"got a member that inflates to {inflated} bytes" in message and "\n" not in message
    assert peak < 2 ** 20, peak
    assert load_inputs(path, max_bytes=2 ** 25)["log_probs"].shape == (2 ** 21,)


def test_npz_arrays_within_the_limit_one_by_one_but_not_together_are_refused(tmp_path):
    """The limit holds for the file's arrays in all: the member that crosses it is named."""
    path = tmp_path / "two.npz"
    np.savez(path, **dict(_arrays(), log_probs=np.zeros(2 ** 16)), probs=np.zeros(2 ** 16))
    with pytest.raises(ValueError, match=r"two.npz: (probs|log_probs).npy: expected at most "
                                         r"\d+ bytes .* \(with the members before it: \d+\)"):
        load_inputs(path, max_bytes=2 ** 19 + 2 ** 18)


def test_npz_member_shorter_than_its_header_claims_is_refused(tmp_path):
    """A header claiming 1000 float64 followed by 80 bytes: one line, no traceback."""
    path = tmp_path / "short.npz"
    _npz_with(path, "log_probs.npy", _npy_header((1000,)) + bytes(80))
    with pytest.raises(ValueError, match="short.npz: log_probs.npy: expected 8000 bytes of "
                                         "float64 data after its header, got fewer"):
        load_inputs(path)


def test_pt_storage_past_the_limit_is_refused_before_torch_load(tmp_path):
    """A .pt whose tensor storage (a member of torch's zip format) exceeds the limit is refused
    naming that member; torch.load is never reached."""
    path = tmp_path / "big.pt"
    torch.save({k: torch.from_numpy(v) for k, v in _arrays().items()}
               | {"log_probs": torch.zeros(2 ** 18)}, path)
    with pytest.raises(ValueError, match=r"big.pt: big/data/\d+: expected at most 524288 bytes "
                                         r"\(raise it .*\), got a member that holds 1048576 bytes"):
        load_inputs(path, max_bytes=2 ** 19)
    assert load_inputs(path)["log_probs"].shape == (2 ** 18,)


def test_legacy_pt_format_is_refused_as_its_sizes_cannot_be_checked(tmp_path):
    """torch.save(..., _use_new_zipfile_serialization=False) allocates storages from sizes in
    the pickle before reading them: such files are refused with one line saying why."""
    path = tmp_path / "old.pt"
    torch.save({k: torch.from_numpy(v) for k, v in _arrays().items()}, path,
               _use_new_zipfile_serialization=False)
    with pytest.raises(ValueError, match="old.pt: expected a torch.save'd dict .* not torch's "
                                         "zip format"):
        load_inputs(path)


def test_pt_nested_lists_sharing_rows_are_counted_before_an_array_is_built(tmp_path):
    """A tiny .pt whose list repeats one 1,000-number row 1,000 times (pickle shares it) would
    make a 8 MB array: refused past a 1 MiB limit, naming the key."""
    path = tmp_path / "rows.pt"
    row = [0.0] * 1000
    torch.save({k: torch.from_numpy(v) for k, v in _arrays().items()} | {"probs": [row] * 1000},
               path)
    assert path.stat().st_size < 2 ** 16
    with pytest.raises(ValueError, match=r"rows.pt: probs: expected at most 1048576 bytes .* got a "
                                         r"nested list of more than 131072 numbers"):
        load_inputs(path, max_bytes=2 ** 20)
