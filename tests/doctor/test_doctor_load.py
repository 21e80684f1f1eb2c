"""ctcbench.doctor.load.load_inputs: .npz without pickle, .pt weights-only, clear errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ctcbench.doctor.load import load_inputs


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
