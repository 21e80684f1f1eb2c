"""Load a user's saved CTC tensors safely: ``.npz`` without pickle, ``.pt`` weights-only.

The file holds ``log_probs`` or ``logits`` or ``probs``, ``targets``, ``input_lengths``,
``target_lengths`` and optionally ``blank``; :func:`load_inputs` returns them as keyword
arguments for :func:`ctcbench.doctor.diagnose`.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

VALUE_KEYS = ("log_probs", "logits", "probs")
REQUIRED_KEYS = ("targets", "input_lengths", "target_lengths")
SUFFIXES = (".npz", ".pt", ".pth")


def load_inputs(path) -> dict:
    """``{"log_probs"|"logits"|"probs": ..., "targets": ..., ..., ["blank": int]}`` from ``path``.

    Raises ``ValueError`` naming the file and what was expected for anything unreadable or
    malformed, and ``FileNotFoundError`` when it does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"FILE: expected an existing .npz or .pt file, got {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"FILE: expected a .npz or .pt file, got {path.name!r}")
    data = _load_npz(path) if suffix == ".npz" else _load_pt(path)
    given = [k for k in VALUE_KEYS if k in data]
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if len(given) != 1 or missing:
        want = "exactly one of log_probs/logits/probs" if len(given) != 1 else ""
        want = ", ".join(filter(None, [want, *missing]))
        raise ValueError(f"{path.name}: expected arrays log_probs (or logits or probs), targets, "
                         f"input_lengths, target_lengths; missing or ambiguous: {want}; "
                         f"found: {', '.join(sorted(data)) or 'nothing'}")
    out = {k: data[k] for k in (*given, *REQUIRED_KEYS)}
    if "blank" in data:
        blank = data["blank"]
        blank = np.asarray(blank.tolist() if hasattr(blank, "tolist") else blank)
        if blank.size != 1 or blank.dtype.kind not in "iuf" or blank.reshape(()) % 1 != 0:
            raise ValueError(f"{path.name}: blank: expected one integer, got "
                             f"{blank.dtype} of shape {blank.shape}")
        out["blank"] = int(blank.reshape(()))
    return out


def _load_npz(path: Path) -> dict:
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path.name}: expected a NumPy .npz archive (np.savez), got a file that "
                         "is not a zip archive")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{path.name}: expected a NumPy .npz archive, got an unreadable file "
                         f"({type(exc).__name__}: {exc})") from None
    except ValueError as exc:  # object arrays need pickle, which is refused
        raise ValueError(f"{path.name}: expected plain numeric arrays, got {exc}") from None


def _load_pt(path: Path) -> dict:
    import pickle

    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"{path.name}: expected a torch.save'd dict of tensors loadable with "
                         f"weights_only=True, got an unreadable file ({first})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path.name}: expected a dict of tensors, got {type(obj).__name__}")
    # Tensors stay tensors (bfloat16 keeps its name, and so its tolerance); the rest -> NumPy.
    return {str(k): v.detach().cpu() if isinstance(v, torch.Tensor) else np.asarray(v)
            for k, v in obj.items()}
