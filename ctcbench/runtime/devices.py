"""Where a backend or a user's torch function computes: the one vocabulary of devices, in
torch's words (``torch.device("cuda")``)."""
from __future__ import annotations

DEVICES = ("cpu", "cuda")
