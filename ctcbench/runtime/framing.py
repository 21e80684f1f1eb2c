"""The worker protocol's frames: a length-prefixed JSON header, then ``.npz`` arrays (no pickle).

    >I header length | header JSON | >Q blob length | np.savez blob (empty: no arrays)
"""
from __future__ import annotations

import io
import json
import struct

import numpy as np


def pack(header: dict, arrays: dict | None = None) -> bytes:
    head = json.dumps(header).encode()
    blob = b""
    if arrays:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        blob = buf.getvalue()
    return struct.pack(">I", len(head)) + head + struct.pack(">Q", len(blob)) + blob


def unpack_arrays(blob: bytes) -> dict:
    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def read_exact(stream, n: int) -> bytes | None:
    """``n`` bytes from a blocking stream, or None when it ends first."""
    data = stream.read(n)
    if len(data) < n:
        return None
    return data
