"""Backends ``numba`` and ``numba-cuda``: ctcbench's own compiled CTC kernels (docs/numba.md).

``backend`` is the adapter, ``kernels`` the CPU kernel (``rows``, ``blocks``, ``rescue`` and
``primitives`` its parts), ``cuda`` and ``cuda_kernels`` the GPU one. Importing this package
imports no numba: the modules do, when a backend is asked for.
"""
