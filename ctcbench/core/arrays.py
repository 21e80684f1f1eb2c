"""Array-likes (NumPy arrays, torch tensors, nested lists) to NumPy, without importing torch."""
from __future__ import annotations

import numpy as np


def to_numpy(x, name: str) -> tuple[np.ndarray, str]:
    """``x`` as a NumPy array on the host, and the name of the dtype it came in.

    A torch tensor is detached and copied to the CPU; bfloat16, which NumPy lacks, comes
    back as float32 (which holds its values exactly) with the dtype name ``"bfloat16"``.
    ``name`` names the argument in the error for something that is not an array (a ragged
    list and the like): ``"NAME: expected an array, got TYPE (why)"``.
    """
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch tensor, without importing torch
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
