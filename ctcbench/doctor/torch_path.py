"""Which of torch's CTC paths a batch would take: on CUDA, cuDNN or torch's native kernel.

The rule is the one torch documents in ``torch.nn.CTCLoss`` (read in torch 2.13's
``torch/nn/modules/loss.py``): cuDNN runs only with concatenated targets, every input length
equal to ``T``, ``blank=0``, target lengths within the limit, int32 integer arguments and
float32 log-probs. The kernel's own check (``torch._use_cudnn_ctc_loss``) is compiled and
dispatches only on CUDA tensors, so a CPU build cannot call it; the two conditions it adds to the
documented ones come from the upstream threads cited next to them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ctcbench.core.arrays import to_numpy
from ctcbench.doctor.atlas_refs import CONDITIONS, atlas_ref, cite
from ctcbench.doctor.config import DEFAULTS
from ctcbench.doctor.inputs import prepare
from ctcbench.runtime.devices import DEVICES

CUDNN_MAX_TARGET = 255  # documented as <= 256; exactly 256 fails (pytorch#53505, PR#53557)

DIFFERENCES = {
    "cudnn": [
        "target lengths up to 255 only: cuDNN fails at exactly 256 (pytorch/pytorch#53505, "
        "PR#53557; #131656 asks to lift it)",
        "its non-deterministic algorithm gave NaN gradients where the deterministic one did not "
        "(pytorch/pytorch#21680); determinism only with torch.backends.cudnn.deterministic "
        "(#17798), and cudnn.flags(deterministic=True) does not raise for CTC's backward (#78475)",
        "its gradients differ from the native kernel's in direction and size (#26797)",
        "the fast path: native was ~50x slower than deterministic cuDNN at ~10k classes, and "
        "the two want different target dtypes and devices (#22234)",
        "an illegal memory access when a target is longer than its input (PR#130071); "
        "CPU-resident length tensors broke on the cuDNN v8 path (PR#152745)",
    ],
    "native": [
        "never deterministic on CUDA (pytorch/pytorch#17798): with "
        "torch.use_deterministic_algorithms(True) its backward raises RuntimeError (listed in "
        "that function's docstring in torch 2.13)",
        "takes padded (N, L) int64 targets, any input lengths and any blank; float32 and "
        "float64",
        "gradient wrong for L > 896 in float64 / L > 1024 in float32 (#27442); its large-batch "
        "path is up to 2.5x faster with 1.8x the memory (#27540); rare NaN in the gradient at "
        "blank positions on that path (PR#21244)",
    ],
    "cpu": [
        "torch's CPU kernel: float32 and float64 only (float16/bfloat16 raise "
        "NotImplementedError, checked on torch 2.13); deterministic; no cuDNN",
    ],
}


# the atlas entries of the upstream bugs each path's differences cite
PATH_ATLAS = {
    "cudnn": ("torch-cudnn-target-length-256", "torch-cudnn-nondeterministic-nan",
              "torch-cudnn-deterministic-flag-silent", "torch-cudnn-native-gradients-differ",
              "torch-cudnn-native-input-requirements", "torch-cudnn-illegal-memory-infeasible",
              "torch-cudnn-v8-cpu-lengths"),
    "native": ("torch-cuda-nondeterministic", "torch-cuda-gradient-long-targets",
               "torch-cuda-large-batch-nan-at-blank", "torch-batched-vs-single"),
    "cpu": (),
}


@dataclass
class Condition:
    """One condition of the cuDNN rule: what it needs, what the batch has, and the fix."""

    name: str
    needs: str
    has: str
    holds: bool
    fix: str
    source: str = "torch.nn.CTCLoss docs (torch 2.13)"
    atlas: str | None = None  # the atlas entry of the bug met when it is broken

    def __post_init__(self):
        if self.atlas is None and CONDITIONS.get(self.name) and atlas_ref(CONDITIONS[self.name]):
            self.atlas = CONDITIONS[self.name]
        if self.atlas is not None and not self.holds:
            self.fix += f" (known upstream: {cite([self.atlas])})"


@dataclass
class PathReport:
    """The path a batch would take on ``device``, why, what it does differently, how to switch."""

    device: str
    path: str
    conditions: list[Condition]
    differences: list[str]
    force_other: list[str]
    torch: dict = field(default_factory=dict)
    atlas: list = field(default_factory=list)  # ids of the atlas entries of this path's bugs

    def __post_init__(self):
        if not self.atlas:
            self.atlas = [i for i in PATH_ATLAS.get(self.path, ()) if atlas_ref(i)]

    def to_dict(self) -> dict:
        return asdict(self)

    def format_table(self) -> str:
        names = {"cudnn": "cuDNN", "native": "torch's native CUDA kernel",
                 "cpu": "torch's CPU kernel"}
        lines = [f"torch path on {self.device}: {names[self.path]} (rule of torch "
                 f"{self.torch.get('version', '?')}; {self.torch.get('note', '')})".rstrip()]
        for c in self.conditions:
            mark = "ok  " if c.holds else "FAIL"
            lines.append(f"  {mark} {c.name}: needs {c.needs}, has {c.has}"
                         + ("" if c.holds else f"  -> {c.fix}"))
        lines.append(f"  {names[self.path]} is known to:")
        lines += [f"    - {d}" for d in self.differences]
        if self.atlas:
            lines.append(f"  its atlas entries (ctcbench atlas): {', '.join(self.atlas)}")
        lines.append("  to take the other path:")
        lines += [f"    - {f}" for f in self.force_other]
        return "\n".join(lines)


def torch_path(log_probs=None, *, logits=None, probs=None, targets, input_lengths,
               target_lengths, blank: int = 0, layout: str = DEFAULTS.layout,
               device: str = "cuda") -> PathReport:
    """Which torch CTC path the batch takes on ``device`` ("cuda": cuDNN or native, decided by
    torch's documented rule; "cpu": the CPU kernel), with each condition checked.

    The dtypes are the ones given (int64 targets stay int64); no GPU is needed.
    """
    if device not in DEVICES:
        raise ValueError(f"device: expected one of {', '.join(DEVICES)}, got {device!r}")
    inp, _ = prepare(log_probs, logits=logits, probs=probs, targets=targets,
                     input_lengths=input_lengths, target_lengths=target_lengths, blank=blank,
                     layout=layout)
    T, N, C, L = inp.shape
    values = next(v for v in (log_probs, logits, probs) if v is not None)
    dtype = to_numpy(values, inp.kind)[1]
    targets_arr, targets_dtype = to_numpy(targets, "targets")
    il_dtype, tl_dtype = (to_numpy(v, name)[1] for v, name in
                          ((input_lengths, "input_lengths"), (target_lengths, "target_lengths")))
    info = _torch_info()
    if device == "cpu":
        return PathReport("cpu", "cpu", [Condition(
            "log_probs dtype", "float32 or float64", dtype, dtype in ("float32", "float64"),
            "log_probs.float()", "checked on torch 2.13 (ctc_loss_cpu)")],
            DIFFERENCES["cpu"], ["move log_probs to CUDA for cuDNN or the native CUDA kernel "
                                 "(ctcbench doctor FILE --device cuda says which)"], info)
    longest = int(inp.target_lengths.max(initial=0))
    over_input = int((inp.target_lengths > inp.input_lengths).sum())
    short = int((inp.input_lengths != T).sum())
    conditions = [
        Condition("log_probs dtype", "float32", dtype, dtype == "float32",
                  "log_probs.float()"),
        Condition("blank", "0", str(inp.blank), inp.blank == 0,
                  "relabel so the blank is class 0 (labels + 1, blank 0)"),
        Condition("targets layout", "concatenated 1-D", "concatenated 1-D"
                  if targets_arr.ndim == 1 else f"padded {tuple(targets_arr.shape)}",
                  targets_arr.ndim == 1,
                  "torch.cat([t[:n] for t, n in zip(targets, target_lengths)])"),
        Condition("targets dtype", "int32", targets_dtype, targets_dtype == "int32",
                  "targets.int()"),
        Condition("lengths dtype", "int32", f"{il_dtype}, {tl_dtype}",
                  il_dtype == tl_dtype == "int32", "input_lengths.int(), target_lengths.int()"),
        Condition("input lengths", f"all equal to T = {T}",
                  "all T" if not short else f"{short} of {N} shorter", not short,
                  "none for this batch: cuDNN needs every input length = T (batch samples of one length)"),
        Condition("target lengths", f"at most {CUDNN_MAX_TARGET}", f"max {longest}",
                  longest <= CUDNN_MAX_TARGET, "split long targets, or stay on native",
                  "documented as <= 256; 256 fails: pytorch/pytorch#53505, PR#53557"),
        Condition("target vs input length", "every target length <= its input length",
                  "all" if not over_input else f"{over_input} longer",
                  not over_input, "drop or shorten those samples",
                  "pytorch/pytorch PR#130071 (illegal memory access in cuDNN otherwise)"),
        Condition("cuDNN enabled", "torch.backends.cudnn.enabled", str(info["cudnn_enabled"]),
                  bool(info["cudnn_enabled"]), "torch.backends.cudnn.enabled = True",
                  "torch.backends.cudnn (torch 2.13)"),
    ]
    cudnn = all(c.holds for c in conditions)
    path = "cudnn" if cudnn else "native"
    differences = list(DIFFERENCES[path])
    if path == "native" and info.get("deterministic_algorithms"):
        differences.insert(0, "torch.use_deterministic_algorithms(True) is on here: this batch's "
                              "backward on CUDA would raise RuntimeError")
    if path == "cudnn" and info.get("cudnn_deterministic") is False:
        differences.insert(0, "torch.backends.cudnn.deterministic is False here: torch's docs "
                              "say cuDNN may then pick a nondeterministic algorithm")
    if cudnn:
        force = ["pass targets as int64 (targets.long()): the native kernel runs, with padded or "
                 "concatenated targets", "or wrap the loss in "
                 "`with torch.backends.cudnn.flags(enabled=False):`"]
    else:
        force = [f"{c.name}: {c.fix}" for c in conditions if not c.holds]
    return PathReport("cuda", path, conditions, differences, force, info)


def _torch_info() -> dict:
    """The installed torch's version and cuDNN state; the rule is torch's, applied as a CUDA
    build of this version would apply it."""
    try:
        import torch
    except ImportError:
        return {"version": "not installed", "cudnn_enabled": True,
                "note": "torch's documented rule, torch not installed here"}
    cuda = bool(torch.cuda.is_available())
    note = ("CUDA available" if cuda else
            "no CUDA here: the rule applied as a CUDA build of this version applies it")
    return {"version": torch.__version__, "cudnn_enabled": bool(torch.backends.cudnn.enabled),
            "cudnn_available": bool(torch.backends.cudnn.is_available()), "cuda": cuda,
            "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
            "note": note}

