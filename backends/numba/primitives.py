"""Branch-free ``exp`` and ``log`` for the numba kernels (``backends/kernels.py``).

libm's ``exp`` and ``log`` are scalar calls, which keep LLVM from vectorising the loops that
use them; these are plain arithmetic on the float's bits, within 2 ulp of libm (tested against
NumPy's in ``tests/backends/test_numba_backend.py``). Both are compiled without ``reassoc``,
which would undo their rounding tricks; a loop that inlines them must not have it either
(the log-space loops, :data:`LOG_JIT`), or must call them as functions LLVM inlines with their
own flags (the softmax). Below them, the two things the kernels ask of the CPU itself: the
flush-to-zero bits for their calls, and prefetches of the next frame's rows.
"""
from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


# -- exp of a non-positive argument, branch-free so that LLVM vectorises the softmax loop ----
@intrinsic
def _bits_to_float(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _float_to_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


MAGIC = 6755399441055744.0  # 1.5 * 2**52: x + MAGIC rounds x to an integer held in the low bits
LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125  # few bits, so k * LN2_HI is exact for |k| < 2**11
LN2_LO = 1.4286068203094173e-06  # ln 2 - LN2_HI


# No 'reassoc' here: it would fold (y + MAGIC) - MAGIC to y and lose the rounding.
@njit(cache=True, fastmath={"contract"}, error_model="numpy")
def exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` (-inf included) within 1 ulp of libm's: x = k ln2 + r,
    ``|r| <= ln2 / 2``, degree-13 Taylor polynomial (truncation below 1e-17, evaluated by
    Estrin's scheme), times ``2**k`` built from its bits in two halves so that results down
    to the subnormals come out."""
    x = max(x, -745.5)  # exp(-745.5) rounds to 0
    kf = x * LOG2E + MAGIC
    k = _float_to_bits(kf) - _float_to_bits(MAGIC)  # round(x / ln2) as an integer
    kf = kf - MAGIC
    r = (x - kf * LN2_HI) - kf * LN2_LO
    # 1 + r + r**2 q(r), q(r) = sum_i r**i / (i + 2)! to r**11 (the degree-13 Taylor
    # polynomial), q by Estrin's scheme: a shorter chain of dependent operations than Horner's
    # (the loops that call this are bound by it), and the 1 added last keeps the rounding small
    r2 = r * r
    r4 = r2 * r2
    q0 = (1.0 / 2.0 + r * (1.0 / 6.0)) + r2 * (1.0 / 24.0 + r * (1.0 / 120.0))
    q1 = (1.0 / 720.0 + r * (1.0 / 5040.0)) + r2 * (1.0 / 40320.0 + r * (1.0 / 362880.0))
    q2 = (1.0 / 3628800.0 + r * (1.0 / 39916800.0)) \
        + r2 * (1.0 / 479001600.0 + r * (1.0 / 6227020800.0))
    q = (q0 + r4 * q1) + (r4 * r4) * q2
    p = 1.0 + (r + r2 * q)
    k1 = k >> 1
    return p * _bits_to_float((k1 + 1023) << 52) * _bits_to_float((k - k1 + 1023) << 52)


SQRT2 = 1.4142135623730951
MANTISSA = (1 << 52) - 1


@njit(cache=True, fastmath={"contract"}, error_model="numpy")
def log_1_to_4(x):
    """``log(x)`` for ``1 <= x < 4``, branch-free so that LLVM vectorises the loops that call
    it (libm's ``log`` is a scalar call): ``x = 2**k f`` with ``f`` in ``[sqrt(1/2), sqrt(2))``,
    ``log f = 2 atanh(z)``, ``z = (f - 1) / (f + 1)``, ``|z| <= 0.172``: the odd series to
    ``z**21`` (truncation below 1e-18 relative)."""
    bits = _float_to_bits(x)
    k = (bits >> 52) - 1023  # 0 or 1
    f = _bits_to_float((bits & MANTISSA) | (1023 << 52))  # in [1, 2)
    big = f > SQRT2
    f = f * 0.5 if big else f
    kf = np.float64(k + 1 if big else k)
    z = (f - 1.0) / (f + 1.0)
    z2 = z * z
    p = 1.0 / 21.0
    p = p * z2 + 1.0 / 19.0
    p = p * z2 + 1.0 / 17.0
    p = p * z2 + 1.0 / 15.0
    p = p * z2 + 1.0 / 13.0
    p = p * z2 + 1.0 / 11.0
    p = p * z2 + 1.0 / 9.0
    p = p * z2 + 1.0 / 7.0
    p = p * z2 + 1.0 / 5.0
    p = p * z2 + 1.0 / 3.0
    p = p * z2
    return kf * LN2_HI + (kf * LN2_LO + (2.0 * z + 2.0 * z * p))


# For loops that inline the functions above (the log-space ones need no reassociation: they
# have no reductions).
LOG_JIT = dict(cache=True, fastmath={"contract"}, error_model="numpy", nogil=True)


@njit(inline="always", **LOG_JIT)
def lse3(a, b, c):
    """``log(exp(a) + exp(b) + exp(c))`` for values in ``[-inf, 0]``; ``-inf`` if all are.
    Branch-free: the largest term is ``exp(0) = 1``, so the sum lies in ``[1, 3]`` (skipping
    the largest term's ``exp`` was slower: docs/numba.md, "What did not help")."""
    m = max(a, max(b, c))
    shift = m if m > -np.inf else 0.0
    total = exp_nonpositive(a - shift) + exp_nonpositive(b - shift) + exp_nonpositive(c - shift)
    return m + log_1_to_4(max(total, 1.0))


# -- subnormals flushed to zero while a kernel runs ------------------------------------------
# Peaked (trained-like) logits leave the states far from the alignment decaying through the
# subnormals every frame, and an Intel core takes a slow assist on each such operation
# (docs/numba.md, design item 8 and step 14). Each kernel call sets the calling thread's
# flush bits (MXCSR is per thread) and puts the register back before it returns.
FLUSH_SUBNORMALS = 0x8040  # MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6)
X86 = platform.machine().lower() in ("x86_64", "amd64")  # elsewhere the calls do nothing
_I8P = ir.IntType(8).as_pointer()


def _mxcsr(builder, name, ptr):
    fn = builder.module.declare_intrinsic(name, fnty=ir.FunctionType(ir.VoidType(), [_I8P]))
    builder.call(fn, [builder.bitcast(ptr, _I8P)])


@intrinsic
def get_fp_control(typingctx):
    """The calling thread's MXCSR (x86-64's SSE/AVX control register); 0 off x86."""
    def codegen(context, builder, signature, args):
        ptr = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(32), 0))
        if X86:
            _mxcsr(builder, "llvm.x86.sse.stmxcsr", ptr)
        return builder.zext(builder.load(ptr), ir.IntType(64))
    return types.int64(), codegen


@intrinsic
def set_fp_control(typingctx, value):
    """Load ``value`` into the calling thread's MXCSR (nothing off x86)."""
    def codegen(context, builder, signature, args):
        if X86:
            ptr = cgutils.alloca_once(builder, ir.IntType(32))
            builder.store(builder.trunc(args[0], ir.IntType(32)), ptr)
            _mxcsr(builder, "llvm.x86.sse.ldmxcsr", ptr)
        return context.get_dummy_value()
    return types.void(types.int64), codegen


# The same from Python (``backend.launch``: what a kernel that raised leaves set is put back),
# compiled when this module is imported, so that an out-of-memory error never waits on them.
@njit("int64()", cache=True)
def fp_control():
    return get_fp_control()


@njit("void(int64)", cache=True)
def restore_fp_control(value):
    set_fp_control(value)


# -- software prefetch of the next frame's rows ---------------------------------------------
# A sample's logits and gradient rows lie N * C entries apart in a (T, N, C) batch: every frame
# on another page, where the hardware's stream prefetchers stop, so each row came from memory
# by demand misses (docs/numba.md, step 17).
CACHE_LINE = 64  # bytes


@intrinsic
def _prefetch(typingctx, arr, t, n, c):
    """Ask the CPU to bring ``arr[t, n, c]`` (a 3-D array) into its caches (LLVM's
    ``llvm.prefetch``, for reading, kept in every level); no fault, no effect on results."""
    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, list(args[1:]),
                                       wraparound=False)
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [_I8P, i32, i32, i32]))
        builder.call(fn, [builder.bitcast(ptr, _I8P), ir.Constant(i32, 0), ir.Constant(i32, 3),
                          ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(arr, types.intp, types.intp, types.intp), codegen


@njit(inline="always", cache=True)
def prefetch_row(arr, t, n):
    """Prefetch every cache line of the row ``arr[t, n]`` of a C-contiguous ``(T, N, C)``
    array, given by its indices: a view of it made here would cost two atomic reference
    counts (docs/numba.md, step 19)."""
    step = max(1, CACHE_LINE // arr.itemsize)
    for c in range(0, arr.shape[2], step):
        _prefetch(arr, t, n, c)
