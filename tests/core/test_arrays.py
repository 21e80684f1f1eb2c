"""to_numpy: the one conversion of tensors and array-likes to NumPy."""
import numpy as np
import pytest
import torch

from ctcbench.core.arrays import to_numpy


def test_torch_tensor_keeps_its_dtype_name_and_values():
    """A float16 tensor comes back as float16 NumPy with the same values, detached."""
    x = torch.tensor([0.5, -2.0, 3.25], dtype=torch.float16, requires_grad=True)
    arr, dtype = to_numpy(x, "x")
    assert dtype == "float16" and arr.dtype == np.float16
    assert arr.tolist() == [0.5, -2.0, 3.25]


def test_bfloat16_comes_back_as_float32_holding_the_same_values():
    """NumPy has no bfloat16: float32 holds every bfloat16 value exactly; the name says bfloat16."""
    values = [1.0, 1.0078125, -(2.0 ** 127), 2.0 ** -126]  # exactly representable in bfloat16
    arr, dtype = to_numpy(torch.tensor(values, dtype=torch.bfloat16), "logits")
    assert dtype == "bfloat16" and arr.dtype == np.float32
    assert arr.tolist() == np.array(values, dtype=np.float32).tolist()


def test_lists_and_arrays_pass_through():
    """Plain NumPy arrays and nested lists become arrays with NumPy's dtype name."""
    arr, dtype = to_numpy([[1, 2], [3, 4]], "targets")
    assert arr.shape == (2, 2) and dtype == arr.dtype.name and arr.dtype.kind == "i"
    same = np.arange(3.0)
    assert to_numpy(same, "x")[0] is same


def test_ragged_list_names_the_argument():
    """A ragged list is a ValueError "NAME: expected an array, got list (...)"."""
    with pytest.raises(ValueError, match=r"^targets: expected an array, got list \("):
        to_numpy([[1, 2], [3]], "targets")
