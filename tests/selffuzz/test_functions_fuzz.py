"""User functions (``--function``, ``--decoder``, ``--aligner`` targets) that misbehave in a
generated way: raise, exit, hang, return the wrong type, NaN, a tuple, a tensor on the meta
device or of another dtype, the wrong shape, declare nonsense traits. Each such function is
wrong, so the oracle is: the command fails it (exit 1 with its rows or findings) or refuses
it in one line naming the option or the function, within a bound; never a pass, a
traceback, a library's words or a hang."""
from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest
from hypothesis import given, strategies as st

from selffuzz.strategies_cli import LONG, check, fuzz_settings, run_cli

LOSS_BOUND_S = 420  # a --function call that never returns is stopped after 120 s (protocol.py)
BOUND_S = 120  # a decoder or aligner declares timeout_s = 2 before it hangs
_names = itertools.count()

FILLS = ("float('nan')", "float('inf')", "-1.0", "0.0", "1e300")
SHAPES = ("(N,)", "(N + 1,)", "(N, 1)", "()", "(0,)", "(T, N)")
DTYPES = ("torch.float32", "torch.float16", "torch.float64", "torch.int64", "torch.bool",
          "torch.complex64")
DEVICES = ("'cpu'", "'meta'")
WRAPS = ("{v}", "({v}, {v})", "[{v}]", "{v}.tolist()", "{v}.numpy() if {v}.device.type == "
         "'cpu' else {v}", "{{'loss': {v}}}", "None", "'loss'", "iter([{v}])")
ACTS = ("raise ValueError('boom')", "raise KeyboardInterrupt", "raise SystemExit(3)",
        "import os; os._exit(7)", "raise RecursionError('deep')", "return",
        "raise MemoryError")
HANG = "import time; time.sleep(10_000)"


@st.composite
def loss_body(draw) -> str:
    """The body of a torch-convention CTC loss that is wrong in a drawn way."""
    acts = ACTS + ((HANG,) if LONG else ())  # a hang costs 120 s: the long run only
    if draw(st.booleans(), label="acts"):
        return draw(st.sampled_from(acts), label="act")
    value = (f"torch.full({draw(st.sampled_from(SHAPES))}, {draw(st.sampled_from(FILLS))}, "
             f"dtype={draw(st.sampled_from(DTYPES))}, device={draw(st.sampled_from(DEVICES))})")
    return f"v = {value}\nreturn " + draw(st.sampled_from(WRAPS), label="wrap").format(v="v")


LABELS = ("[1]", "[1.5]", "[float('nan')]", "[-3]", "[10**6]", "'ab'", "None", "[[1]]",
          "torch.tensor([1], device='meta')", "np.array([1], dtype=object)")
SCORES = ("0.0", "float('nan')", "'high'", "None", "[0.0]", "torch.tensor(0.0, device='meta')",
          "1e400", "np.float16(-1)")
DECLARED = ("", "score = 'best'", "search = 'greedy'", "timeout_s = float('inf')",
            "timeout_s = -1", "timeout_s = 'soon'", "exact_beam = 'yes'", "dtype = 'int8'",
            "ties = 3")


@st.composite
def decoder_body(draw) -> tuple[str, str]:
    """(body, declared attributes) of a decoder ``decode(log_probs, lengths, *, blank,
    beam)`` that is wrong in a drawn way."""
    declared = draw(st.sampled_from(DECLARED), label="declares")
    what = draw(st.sampled_from(["act", "hang", "hyps", "shape"]), label="what")
    if what == "act":
        return draw(st.sampled_from(ACTS)), declared
    if what == "hang":
        return HANG, "timeout_s = 2"
    if what == "shape":
        return draw(st.sampled_from(["return []", "return [[]] * (len(lengths) + 1)",
                                     "return ([[1], 0.0],)", "return {}", "return 7",
                                     "return [[[1], 0.0, 'x']] * len(lengths)"])), declared
    labels, score = draw(st.sampled_from(LABELS)), draw(st.sampled_from(SCORES))
    return f"return [[[{labels}, {score}]] for _ in range(len(lengths))]", declared


@st.composite
def aligner_body(draw) -> tuple[str, str]:
    """(body, declared attributes) of an aligner ``align(log_probs, target, *, blank)`` that
    is wrong in a drawn way."""
    what = draw(st.sampled_from(["act", "hang", "pair"]), label="what")
    if what == "act":
        return draw(st.sampled_from(ACTS)), ""
    if what == "hang":
        return HANG, "timeout_s = 2"
    path = draw(st.sampled_from(["[0] * 3", "[0] * (len(log_probs) + 1)", "[-1] * len(log_probs)",
                                 "[99] * len(log_probs)", "[0.5] * len(log_probs)", "None",
                                 "torch.zeros(len(log_probs), device='meta')",
                                 "np.zeros((len(log_probs), 2))", "'path'"]), label="path")
    score = draw(st.sampled_from(SCORES), label="score")
    wrap = draw(st.sampled_from(["[{p}, {s}]", "({p}, {s})", "{p}", "[{p}, {s}, {s}]",
                                 "{{'path': {p}}}"]), label="wrap")
    return "return " + wrap.format(p=path, s=score), ""


def write_module(folder, signature: str, body: str, declared: str = "") -> str:
    """A module in ``folder`` holding ``f`` with ``body``; returns its ``PKG.MOD:NAME``."""
    name = f"user_fn_{next(_names)}"
    source = (f"import numpy as np\nimport torch\n\n\ndef f{signature}:\n"
              f"    T, N = log_probs.shape[0], log_probs.shape[-2] if log_probs.ndim == 3 else 1\n"
              + textwrap.indent(body, "    ") + "\n"
              + (f"\nf.{declared}\n" if declared else ""))
    (folder / f"{name}.py").write_text(source)
    return f"{name}:f"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Where the user modules are written and the commands run (the current folder is on a
    worker's path); a small doctor batch for --aligner."""
    place = tmp_path_factory.mktemp("functions")
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(12, 2, 5))  # (T, N, C)
    np.savez(place / "batch.npz", log_probs=logits - np.log(np.exp(logits).sum(-1, keepdims=True)),
             targets=np.array([[1, 2], [3, 4]]), input_lengths=np.array([12, 10]),
             target_lengths=np.array([2, 2]))
    return place


def judged(out, oracle, surface, target, option):
    """Failed (exit 1, no Error line) or refused naming the option or the function."""
    line = check(out, oracle, surface, names=(option, target, target.partition(":")[0]))
    assert out.exit_code != 0, f"{target}: a wrong function passed:\n{out.output[-1500:]}"
    return line


@fuzz_settings(quick=1)
@given(body=loss_body())
def test_a_wrong_loss_function_is_failed_or_refused(folder, body, oracle):
    """``compare --function`` with a torch-convention loss that misbehaves."""
    target = write_module(folder, "(log_probs, targets, input_lengths, target_lengths, blank=0, "
                                  "reduction='none')", body)
    out = run_cli(["compare", "--function", target, "--case", "published/tf_basic",
                   "--no-plot", "--out", folder / f"run-{target[:-2]}"], LOSS_BOUND_S, cwd=folder)
    judged(out, oracle, "functions: --function", target, "--function")


@pytest.mark.long
@fuzz_settings(quick=2)
@given(drawn=decoder_body())
def test_a_wrong_decoder_function_is_failed_or_refused(folder, drawn, oracle):
    """``compare --decoder`` with a decoder function that misbehaves."""
    target = write_module(folder, "(log_probs, lengths, *, blank, beam)", *drawn)
    out = run_cli(["compare", "--decoder", target, "--case", "decoders/edges/random_small",
                   "--out", folder / f"run-{target[:-2]}"], BOUND_S, cwd=folder)
    judged(out, oracle, "functions: --decoder", target, "--decoder")


@pytest.mark.long
@fuzz_settings(quick=1)
@given(drawn=aligner_body())
def test_a_wrong_aligner_function_is_failed_or_refused(folder, drawn, oracle):
    """``doctor FILE --aligner`` with an aligner function that misbehaves."""
    target = write_module(folder, "(log_probs, target, *, blank)", *drawn)
    out = run_cli(["doctor", folder / "batch.npz", "--aligner", target], BOUND_S, cwd=folder)
    judged(out, oracle, "functions: --aligner", target, "--aligner")


def test_a_timeout_of_forever_is_refused_naming_the_function(folder, oracle):
    """An aligner declaring ``timeout_s = inf`` (a hang would never be stopped) is refused
    naming the function's attribute; it was refused naming ctcbench's own class."""
    target = write_module(folder, "(log_probs, target, *, blank)", HANG, "timeout_s = float('inf')")
    out = run_cli(["doctor", folder / "batch.npz", "--aligner", target], BOUND_S, cwd=folder)
    line = judged(out, oracle, "functions: regressions", target, "--aligner")
    assert f"{target}.timeout_s: expected a positive finite number of seconds, got inf" in line


@pytest.mark.parametrize("body, declared, words", [
    ("return [0] * 3", "", "--aligner: expected [path, score], got list of 3 (from {target})"),
    (HANG, "timeout_s = 2", "--aligner: expected an aligner that answers within 2 s (its "
                            "timeout_s), got no answer from {target} on sample 0"),
])
def test_found_by_the_fuzz_and_fixed(folder, body, declared, words, oracle):
    """An aligner returning a bare list of three (was a TypeError traceback) or hanging past
    its timeout_s (was the worker's 'did not answer ... will be restarted') is one line."""
    target = write_module(folder, "(log_probs, target, *, blank)", body, declared)
    out = run_cli(["doctor", folder / "batch.npz", "--aligner", target], BOUND_S, cwd=folder)
    line = judged(out, oracle, "functions: regressions", target, "--aligner")
    assert words.format(target=target) in line, line


def test_a_loss_returning_none_is_said_as_none(folder, oracle):
    """A --function that returns nothing is refused saying it returned None (it said
    Python's 'NoneType')."""
    target = write_module(folder, "(log_probs, targets, input_lengths, target_lengths, blank=0, "
                                  "reduction='none')", "return")
    out = run_cli(["compare", "--function", target, "--case", "published/tf_basic", "--no-plot",
                   "--out", folder / f"run-{target[:-2]}"], LOSS_BOUND_S, cwd=folder)
    line = judged(out, oracle, "functions: regressions", target, "--function")
    assert f"got {target} returned None: return an array" in line, line


def test_a_trait_declared_as_a_number_is_refused_naming_it(folder, oracle):
    """A decoder declaring ``ties = 3`` (a word is expected) is refused naming the attribute;
    it was a TypeError traceback ('int' object is not iterable)."""
    target = write_module(folder, "(log_probs, lengths, *, blank, beam)", "return []", "ties = 3")
    out = run_cli(["compare", "--decoder", target, "--case", "decoders/edges/random_small",
                   "--out", folder / f"run-{target[:-2]}"], BOUND_S, cwd=folder)
    line = judged(out, oracle, "functions: regressions", target, "--decoder")
    assert f"{target}.ties: expected one of" in line and "got 3" in line, line
