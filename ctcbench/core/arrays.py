"""Array-likes (NumPy arrays, torch tensors, nested lists) to NumPy, without importing torch."""
from __future__ import annotations

import numpy as np


def _is_tensor(x) -> bool:
    """Whether ``x`` is a torch tensor, without importing torch."""
    return hasattr(x, "detach") and hasattr(x, "cpu")


def to_numpy(x, name: str) -> tuple[np.ndarray, str]:
    """``x`` as a NumPy array on the host, and the name of the dtype it came in.

    A torch tensor is detached and copied to the CPU; bfloat16, which NumPy lacks, comes
    back as float32 (which holds its values exactly) with the dtype name ``"bfloat16"``.
    ``name`` names the argument in the error for something that is not an array (a ragged
    list and the like): ``"NAME: expected an array, got TYPE (why)"``.
    """
    if _is_tensor(x):
        dtype = str(x.dtype).removeprefix("torch.")
        x = x.detach().cpu()
        if dtype == "bfloat16":  # NumPy has no bfloat16; float32 holds its values exactly
            x = x.float()
        return x.numpy(), dtype
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name}: expected an array, got {type(x).__name__} ({exc})") from None
    return arr, arr.dtype.name


def float_sum(x, arr: np.ndarray) -> float:
    """The sum of all entries of ``arr`` (``x`` as :func:`to_numpy` gave it), in float64 for
    float64 entries, else float32; by torch where ``x`` is a tensor (one pass, 5x NumPy's
    float32 sum: 0.04 against 0.2 ms for 4 MB). Overflow gives inf, silently."""
    wide = arr.dtype == np.float64
    if _is_tensor(x):
        import torch  # imported already: x is one of its tensors
        return float(x.detach().sum(dtype=torch.float64 if wide else torch.float32))
    with np.errstate(over="ignore", invalid="ignore"):
        return float(arr.sum(dtype=np.float64 if wide else np.float32))
