"""ctcbench.torch: a registry backend as a differentiable torch loss, checked against finite
differences (gradcheck) and against torch.nn.functional.ctc_loss itself."""
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ctcbench
import ctcbench.torch as ctorch
from ctcbench import BackendUnavailable

REDUCTIONS = ("none", "mean", "sum")


def _random_batch(seed, *, T=7, N=5, C=5, S=4, blank=0, infeasible=True):
    """``(z (T, N, C) float64 free scores, targets (N, S), input_lengths, target_lengths)``:
    ragged lengths, a repeated label, and (when ``infeasible``) one target too long for its
    input; ``T >= 2S - 1``."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.tensor([c for c in range(C) if c != blank])
    z = torch.randn(T, N, C, generator=g, dtype=torch.float64) * 1.5  # (T, N, C)
    targets = labels[torch.randint(len(labels), (N, S), generator=g)]  # (N, S)
    targets[0, 1] = targets[0, 0]  # an adjacent repeat needs a blank between
    target_lengths = torch.randint(0, S + 1, (N,), generator=g)
    target_lengths[0] = 2
    input_lengths = torch.randint(2 * S - 1, T + 1, (N,), generator=g)  # any target fits...
    if infeasible:  # ...but this one: 4 labels in 2 frames
        target_lengths[1], input_lengths[1] = S, 2
    return z, targets, input_lengths, target_lengths


def _concatenated(targets, target_lengths):
    return torch.cat([targets[n, :l] for n, l in enumerate(target_lengths.tolist())])


def _loss_and_grad(fn, log_probs, *args, reduction, upstream=None, **kw):
    """(loss, gradient w.r.t. the log-probs leaf) of ``fn``; ``upstream`` weights 'none'."""
    leaf = log_probs.detach().requires_grad_()
    loss = fn(leaf, *args, reduction=reduction, **kw)
    if reduction == "none":
        loss.backward(torch.ones_like(loss) if upstream is None else upstream)
    else:
        loss.backward()
    return loss.detach(), leaf.grad


def test_import_ctcbench_does_not_import_torch_and_the_module_uses_real_torch():
    """Importing ctcbench loads no torch; ctcbench.torch's own `torch` is the real package."""
    code = ("import sys, ctcbench; assert 'torch' not in sys.modules; "
            "import ctcbench.torch as t; import torch; "
            "assert t.torch is torch and hasattr(torch, 'autograd'), t.torch")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert ctorch.torch is torch


@pytest.mark.parametrize("reduction,blank", [("none", 1), ("mean", 0), ("sum", 3)])
def test_gradcheck_through_log_softmax(reduction, blank):
    """gradcheck in float64 through log_softmax(free tensor) -> ctc_loss, blank anywhere,
    zero_infinity with an infeasible target, per-sample upstream gradients for 'none'."""
    z, targets, il, tl = _random_batch(blank, T=6, N=3, C=4, S=3, blank=blank)
    z.requires_grad_()

    def f(x):
        return ctorch.ctc_loss(x.log_softmax(-1), targets, il, tl, blank=blank,
                               reduction=reduction, zero_infinity=True, backend="numpy")
    assert torch.autograd.gradcheck(f, (z,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradcheck_directly_on_log_probs(reduction):
    """gradcheck on log-probs themselves: the gradient handed back is the exact derivative of
    the value, because the loss renormalises (where torch's own ctc_loss fails this check)."""
    z, targets, il, tl = _random_batch(7, T=6, N=3, C=4, S=3, infeasible=False)
    log_probs = z.log_softmax(-1).detach().requires_grad_()

    def ours(x):
        return ctorch.ctc_loss(x, targets, il, tl, reduction=reduction, backend="numpy")
    assert torch.autograd.gradcheck(ours, (log_probs,))

    def torchs(x):
        return F.ctc_loss(x, targets, il, tl, reduction=reduction)
    assert not torch.autograd.gradcheck(torchs, (log_probs,), raise_exception=False)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("blank", [0, 3])
def test_loss_and_gradient_match_torch(reduction, zero_infinity, layout, blank):
    """Loss and log-prob gradient equal torch's for every reduction and zero_infinity, with an
    infeasible target (inf loss, NaN gradient on its valid frames without zero_infinity),
    padded or concatenated targets, blank anywhere, random per-sample upstream gradients."""
    for seed in range(3):
        z, targets, il, tl = _random_batch(10 * seed + blank, C=6, blank=blank)
        if layout == "concatenated":
            targets = _concatenated(targets, tl)
        log_probs = z.log_softmax(-1)
        upstream = torch.rand(z.shape[1], dtype=torch.float64) + 0.5  # (N,)
        args = (targets, il, tl)
        kw = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity,
                  upstream=upstream)
        want_loss, want_grad = _loss_and_grad(F.ctc_loss, log_probs, *args, **kw)
        loss, grad = _loss_and_grad(ctorch.ctc_loss, log_probs, *args, backend="numpy", **kw)
        assert loss.dtype == torch.float64 and loss.shape == want_loss.shape
        torch.testing.assert_close(loss, want_loss, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(grad, want_grad, rtol=1e-9, atol=1e-12, equal_nan=True)
        assert torch.isnan(grad).any() == (not zero_infinity)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gradient_through_log_softmax_matches_torch(reduction):
    """The gradient w.r.t. the free scores under log_softmax equals torch's chain."""
    z, targets, il, tl = _random_batch(3)
    grads = []
    for fn, kw in ((F.ctc_loss, {}), (ctorch.ctc_loss, {"backend": "numpy"})):
        leaf = z.clone().requires_grad_()
        loss = fn(leaf.log_softmax(-1), targets, il, tl, reduction=reduction, zero_infinity=True,
                  **kw)
        loss.sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_unbatched_input_matches_torch(reduction):
    """Unbatched (T, C) log-probs with (S,) targets and scalar lengths: a scalar loss and a
    (T, C) gradient equal to torch's, also with plain int lengths."""
    z, targets, il, tl = _random_batch(5)
    log_probs, target = z[:, 2].log_softmax(-1), targets[2, :tl[2]]  # (T, C), (S,)
    args = (target, il[2], tl[2])
    want_loss, want_grad = _loss_and_grad(F.ctc_loss, log_probs, *args, reduction=reduction)
    loss, grad = _loss_and_grad(ctorch.ctc_loss, log_probs, *args, reduction=reduction)
    assert loss.shape == () and grad.shape == log_probs.shape
    torch.testing.assert_close(loss, want_loss, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad, want_grad, rtol=1e-9, atol=1e-12)
    loss_ints = ctorch.ctc_loss(log_probs, target, int(il[2]), int(tl[2]), reduction=reduction)
    torch.testing.assert_close(loss_ints, want_loss, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_float32_in_float32_out(backend):
    """Float32 log-probs give a float32 loss and gradient, equal to torch's float32 result to
    float32 precision, whether the backend computes in float64 (numpy) or float32 (torch)."""
    z, targets, il, tl = _random_batch(11)
    log_probs = z.float().log_softmax(-1)
    want_loss, want_grad = _loss_and_grad(F.ctc_loss, log_probs, targets, il, tl,
                                          reduction="mean", zero_infinity=True)
    loss, grad = _loss_and_grad(ctorch.ctc_loss, log_probs, targets, il, tl, reduction="mean",
                                zero_infinity=True, backend=backend)
    assert loss.dtype == grad.dtype == torch.float32
    torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad, want_grad, rtol=1e-4, atol=1e-6)


class NumpyWithoutGradWeights:
    """A real backend whose run() takes no grad_weights: the float64 reference, unit weights."""

    def run(self, problem):
        from ctcbench.backends.numpy_ref import NumpyBackend
        return NumpyBackend().run(problem)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_backend_without_grad_weights_is_scaled_here(register_backends, reduction):
    """A backend without grad_weights gives the same loss and gradient as torch: the weights
    and the upstream gradient are applied to its unit-weight gradient."""
    register_backends("numpy-unweighted", NumpyWithoutGradWeights)
    loaded = ctcbench.get_backend("numpy-unweighted")
    assert not loaded.traits.takes_grad_weights
    z, targets, il, tl = _random_batch(13)
    log_probs = z.log_softmax(-1)
    upstream = torch.linspace(0.5, 2.0, z.shape[1], dtype=torch.float64)
    kw = dict(reduction=reduction, zero_infinity=True, upstream=upstream)
    want_loss, want_grad = _loss_and_grad(F.ctc_loss, log_probs, targets, il, tl, **kw)
    loss, grad = _loss_and_grad(ctorch.ctc_loss, log_probs, targets, il, tl, backend=loaded, **kw)
    torch.testing.assert_close(loss, want_loss, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(grad, want_grad, rtol=1e-9, atol=1e-12)


def test_scalar_upstream_gradient_scales_linearly():
    """A non-unit upstream gradient on a reduced loss scales the gradient linearly."""
    z, targets, il, tl = _random_batch(17)
    grads = []
    for factor in (1.0, -2.5):
        leaf = z.log_softmax(-1).detach().requires_grad_()
        (factor * ctorch.ctc_loss(leaf, targets, il, tl, zero_infinity=True)).backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], -2.5 * grads[0], rtol=1e-12, atol=1e-14)


def test_second_derivative_is_refused():
    """Double backward is an error, not a silent zero: the backend gives first derivatives only."""
    z, targets, il, tl = _random_batch(29)
    leaf = z.log_softmax(-1).detach().requires_grad_()
    loss = ctorch.ctc_loss(leaf, targets, il, tl, zero_infinity=True)
    (grad,) = torch.autograd.grad(loss, leaf, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        grad.sum().backward()


def test_module_matches_function_and_names_its_backend():
    """CTCLoss gives the function's loss and says which backend it resolved."""
    z, targets, il, tl = _random_batch(19)
    module = ctorch.CTCLoss(blank=0, reduction="sum", zero_infinity=True, backend="numpy")
    want = F.ctc_loss(z.log_softmax(-1), targets, il, tl, reduction="sum", zero_infinity=True)
    torch.testing.assert_close(module(z.log_softmax(-1), targets, il, tl), want)
    assert "backend='numpy'" in repr(module) and isinstance(module, torch.nn.Module)


class Unavailable:
    def __init__(self):
        raise BackendUnavailable("not built here", "pip install it")


def test_default_backend_prefers_the_compiled_one_when_available(register_backends,
                                                                  monkeypatch):
    """backend=None takes the preferred backend when registered and available, else numpy."""
    monkeypatch.setattr(ctorch, "PREFERRED_BACKEND", "preferred-test")
    assert ctorch.resolve_backend(None).name == "numpy"  # not registered
    register_backends("preferred-test", Unavailable)
    assert ctorch.resolve_backend(None).name == "numpy"  # registered, cannot run here
    ctcbench.unregister_backend("preferred-test")
    register_backends("preferred-test", NumpyWithoutGradWeights)
    assert ctorch.resolve_backend(None).name == "preferred-test"


def test_default_backend_is_numba_or_numpy():
    """The documented default: numba where it is available, the numpy reference otherwise."""
    available = {b.name for b in ctcbench.list_backends() if b.available}
    assert ctorch.resolve_backend(None).name == ("numba" if "numba" in available else "numpy")


@pytest.mark.parametrize("call,error,message", [
    (lambda a: ctorch.ctc_loss(*a, reduction="avg"), ValueError,
     "reduction: expected one of none, sum, mean, got 'avg'"),
    (lambda a: ctorch.ctc_loss(*a, backend="nope"), KeyError, "backend: expected one of .*, got 'nope'"),
    (lambda a: ctorch.ctc_loss(*a, backend=3), TypeError, "backend: expected a registry name"),
    (lambda a: ctorch.ctc_loss(a[0][None], *a[1:]), ValueError, "log_probs: expected shape"),
    (lambda a: ctorch.ctc_loss(a[0][:, 0], *a[1:]), ValueError,
     r"targets: expected shape \(S,\) for unbatched"),
    (lambda a: ctorch.ctc_loss(a[0], a[1], a[2], a[3] + 9), ValueError, "target_lengths:"),
    (lambda a: ctorch.CTCLoss(reduction="avg"), ValueError, "reduction: expected one of"),
])
def test_bad_arguments_are_named(call, error, message):
    """Bad reductions, backends, shapes and lengths are errors naming the argument."""
    z, targets, il, tl = _random_batch(23)
    with pytest.raises(error, match=message):
        call((z.log_softmax(-1), targets, il, tl))


def test_default_backend_is_resolved_once_per_registry_state(register_backends, monkeypatch):
    """Listing the registry reads the entry points (~5 ms, more than the loss itself at
    training sizes): backend=None resolves once and again only when the registry changes."""
    first = ctorch.resolve_backend(None)
    assert ctorch.resolve_backend(None) is first
    monkeypatch.setattr(ctorch, "PREFERRED_BACKEND", "preferred-test")
    register_backends("preferred-test", NumpyWithoutGradWeights)
    assert ctorch.resolve_backend(None).name == "preferred-test"
    ctcbench.unregister_backend("preferred-test")
    assert ctorch.resolve_backend(None).name == "numpy"


@pytest.mark.long
def test_float32_compute_when_asked_and_it_says_so():
    """compute_dtype="float32" (numba's opt-in float32 compute) on float32 input: torch's loss
    and gradient within float32 round-off; the loss says what it was computed in; the default
    stays float64; another backend refuses the option."""
    pytest.importorskip("numba")
    z, targets, il, tl = _random_batch(41, T=30, N=4, C=6, S=5, infeasible=False)
    z = z.float()
    x = z.clone().requires_grad_()
    ours = ctorch.ctc_loss(x.log_softmax(-1), targets, il, tl, reduction="sum",
                           compute_dtype="float32")
    ours.backward()
    assert ours.compute_dtype == "float32" and ours.dtype == torch.float32
    y = z.clone().requires_grad_()
    want = F.ctc_loss(y.log_softmax(-1), targets, il, tl, reduction="sum")
    want.backward()
    torch.testing.assert_close(ours, want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(x.grad, y.grad, rtol=0, atol=1e-5)
    default = ctorch.ctc_loss(z.log_softmax(-1), targets, il, tl)
    assert default.compute_dtype == "float64"
    module = ctorch.CTCLoss(compute_dtype="float32")
    assert module(z.log_softmax(-1), targets, il, tl).compute_dtype == "float32"
    with pytest.raises(ValueError, match="compute_dtype: only backend 'numba'"):
        ctorch.ctc_loss(z.log_softmax(-1), targets, il, tl, backend="numpy",
                        compute_dtype="float32")
    with pytest.raises(ValueError, match="compute_dtype: expected None or one of"):
        ctorch.ctc_loss(z.log_softmax(-1), targets, il, tl, compute_dtype="half")


@pytest.mark.long
def test_float32_tensors_get_the_float64_gradient_rounded_once():
    """float32 logits: the gradient numba's float64 compute stores in float32 is its float64
    gradient rounded once, bit for bit, on every path a sample can take (fast, the blocked
    rescue, log space, infeasible, padded frames), and within float32 rounding of the NumPy
    reference; raw logits as the leaf, so x.grad is the loss's gradient itself. float16 gets
    the reference's within float16 rounding."""
    pytest.importorskip("numba")
    from ctcbench.core.problem import CTCProblem
    from ctcbench.backends.numba.backend import NumbaBackend
    from ctcbench.backends.numpy_ref import NumpyBackend
    rng = np.random.default_rng(47)
    T, N, C, L = 3000, 5, 10, 120
    z = rng.standard_normal((T, N, C)).astype(np.float32)  # sample 0 at T=3000: the rescue
    targets = rng.integers(1, C, (N, L))
    targets[1, :6] = [1, 2, 1, 2, 1, 2]  # its only alignment in 6 frames...
    z[:, 1, 0] = 900.0  # ...which the blank rules out by e^900: log space
    il = np.array([T, 6, 200, 3, 1000])  # sample 3: 10 labels in 3 frames, infeasible
    tl = np.array([L, 6, 20, 10, 5])
    x = torch.tensor(z, requires_grad=True)
    loss = ctorch.ctc_loss(x, torch.tensor(targets), torch.tensor(il), torch.tensor(tl),
                           reduction="sum", zero_infinity=True)
    loss.backward()
    problem = CTCProblem(z, targets, il, tl)
    result = NumbaBackend().run(problem)
    paths = " ".join(result.notes)
    assert "blocked" in paths and "log-space" in paths, paths
    want = result.grad_logits  # (T, N, C) float64, zero on padded frames
    want[:, 3] = 0.0  # zero_infinity
    assert x.grad.dtype == torch.float32
    np.testing.assert_array_equal(x.grad.numpy(), want.astype(np.float32))
    ref = NumpyBackend().run(problem)  # the independent float64 reference
    ref.grad_logits[:, 3] = 0.0
    np.testing.assert_allclose(x.grad.numpy(), ref.grad_logits, rtol=0, atol=1e-7)
    assert loss.item() == pytest.approx(ref.loss[np.isfinite(ref.loss)].sum(), rel=1e-6)
    half = torch.tensor(z[:200, 2:3], dtype=torch.float16, requires_grad=True)
    ctorch.ctc_loss(half, torch.tensor(targets[2:3]), torch.tensor([200]),
                    torch.tensor(tl[2:3]), reduction="sum").backward()
    want = NumpyBackend().run(CTCProblem(half.detach().float().numpy(), targets[2:3], [200],
                                         tl[2:3])).grad_logits
    np.testing.assert_allclose(half.grad.float().numpy(), want, rtol=2e-3, atol=1e-7)
    with pytest.raises(ValueError, match="grad_dtype: expected None or 'float32'"):
        NumbaBackend().run(CTCProblem(z[:9, :1], targets[:1], [9], [L]), grad_dtype="float16")


def test_a_leafs_gradient_holds_across_retained_and_repeated_backward():
    """loss.backward() hands torch the saved gradient itself (no pass multiplying it by 1):
    a retained graph run backward twice gives twice the gradient, a second step adds its
    own, and a scaled upstream gradient still scales it."""
    z, targets, il, tl = _random_batch(53, infeasible=False)
    want = _loss_and_grad(F.ctc_loss, z.log_softmax(-1), targets, il, tl, reduction="mean")[1]
    leaf = z.log_softmax(-1).detach().requires_grad_()
    loss = ctorch.ctc_loss(leaf, targets, il, tl)
    loss.backward(retain_graph=True)
    torch.testing.assert_close(leaf.grad, want, rtol=1e-10, atol=1e-12)
    loss.backward()
    torch.testing.assert_close(leaf.grad, 2 * want, rtol=1e-10, atol=1e-12)
    ctorch.ctc_loss(leaf, targets, il, tl).backward()
    torch.testing.assert_close(leaf.grad, 3 * want, rtol=1e-10, atol=1e-12)
    (0.5 * ctorch.ctc_loss(leaf, targets, il, tl)).backward()
    torch.testing.assert_close(leaf.grad, 3.5 * want, rtol=1e-10, atol=1e-12)
