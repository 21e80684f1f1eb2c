"""Decoders and forced aligners: the contract, its traits and the registry, like the losses'.

A **decoder** turns one batch of normalised log-probabilities into hypotheses::

    decode(log_probs (T, N, C) float64, lengths (N,) int64, *, blank: int, beam: int)
        -> N lists, best first, of [labels (list of int, no blank), score (float or None)]

An **aligner** finds the most probable path of a known target::

    align(log_probs (T, C) float64, target (L,) int64, *, blank: int)
        -> [path (list of T ints, blanks included), score (float)]

The adapter maps its framework's conventions (the blank's index, logits or probabilities,
batch- or time-major, padding) to this contract, so the judge (``ctcbench.caselib.decoder_judge``)
never guesses. What the judge must know of an adapter is declared as traits (``DecoderTraits``),
read by the one traits reader (``ctcbench.runtime.protocol.read_traits``). Constructing an
adapter must be cheap and raise ``BackendUnavailable`` (with an install hint) when it cannot run
here; an ``isolated`` one runs in a worker process (``ctcbench.runtime.worker``'s ``call``
request), where a crash or a hang costs one case.

The registry is a :class:`~ctcbench.runtime.table.Registry` like the losses': built-ins, the
entry-point group ``ctcbench.decoders`` (the entry point's name is the decoder's name) and
:func:`register_decoder` / :func:`unregister_decoder` at run time.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ctcbench.errors import expect
from ctcbench.runtime.factory import load_factory
from ctcbench.runtime.protocol import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    SHARED_CHECKS,
    choice,
    read_traits,
)
from ctcbench.runtime.table import Registry

ENTRY_POINT_GROUP = "ctcbench.decoders"

# name -> "module:attr", built-ins and third parties alike; nothing is imported until asked for
BUILTIN_DECODERS: dict[str, str] = {
    "greedy": "ctcbench.backends.decoders.own:GreedyDecoder",
    "beam": "ctcbench.backends.decoders.own:PrefixBeamDecoder",  # float64 prefix beam search
    "viterbi": "ctcbench.backends.decoders.own:ViterbiAligner",  # forced alignment, exact
    "tf-greedy": "ctcbench.backends.decoders.tf:TFGreedyDecoder",  # tf.nn.ctc_greedy_decoder
    "tf-beam": "ctcbench.backends.decoders.tf:TFBeamDecoder",  # tf.nn.ctc_beam_search_decoder
    "tf-beam-v1": "ctcbench.backends.decoders.tf:TFBeamV1Decoder",  # merge_repeated=True
    "keras-jax-greedy": "ctcbench.backends.decoders.keras:KerasJaxGreedy",
    "keras-jax-beam": "ctcbench.backends.decoders.keras:KerasJaxBeam",
    "keras-tf-greedy": "ctcbench.backends.decoders.keras:KerasTFGreedy",
    "keras-tf-beam": "ctcbench.backends.decoders.keras:KerasTFBeam",
    "keras-torch-greedy": "ctcbench.backends.decoders.keras:KerasTorchGreedy",
    "keras-torch-beam": "ctcbench.backends.decoders.keras:KerasTorchBeam",
    "fast-ctc-beam": "ctcbench.backends.decoders.fastctc:FastCTCBeamDecoder",
    "fast-ctc-viterbi": "ctcbench.backends.decoders.fastctc:FastCTCViterbiDecoder",
    "flashlight": "ctcbench.backends.decoders.flashlight:FlashlightDecoder",  # log_add=False
    "flashlight-logadd": "ctcbench.backends.decoders.flashlight:FlashlightLogAddDecoder",
    "ctc-segmentation": "ctcbench.backends.decoders.ctcseg:CTCSegmentationAligner",
    "transformers-ctc": "ctcbench.backends.decoders.wav2vec2:TransformersCTCDecoder",
    "transformers-ctc-words": "ctcbench.backends.decoders.wav2vec2:TransformersCTCWordsDecoder",
    "transformers-ctc-skip-special":
        "ctcbench.backends.decoders.wav2vec2:TransformersCTCSkipSpecialDecoder",
}
OWN_DECODERS = ("greedy", "beam", "viterbi")  # ctcbench's own: compare checks them by default
REFERENCE_DECODER = "beam"  # exact at a beam of prefix_count(T, C)
REFERENCE_ALIGNER = "viterbi"
ROLES = ("decoder", "aligner")
SEARCHES = ("greedy", "beam")
SCORES = ("labelling", "path", "none")
TIES = ("first", "any")
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class DecoderTraits:
    """What a decoder or aligner declares (class attributes of these names), with defaults.

    ``score``: what a hypothesis's score is: ``labelling``, log P(labels), the log of the sum
    over all its paths (minus its CTC loss); ``path``, the log-probability of the single best
    path (greedy; an aligner's path); ``none``, not a log-probability (or no score).
    """

    role: str = "decoder"  # ROLES
    search: str = "beam"  # SEARCHES: greedy ignores ``beam``
    score: str = "labelling"  # SCORES
    ties: str = "first"  # greedy: an argmax tie goes to the lowest class ("first") or any
    exact_beam: bool = False  # a beam of prefix_count(T, C) never prunes: its answer is exact
    blank: str = "any"  # the blank index it takes natively ("any", "first", "last"): the
    # adapter maps the others; said on the page, never used by the judge
    conventions: str = ""  # one line for people: merge_repeated's meaning, score, scaling
    dtype: str = "float64"  # what it computes scores in: the judge's tolerance (float32/64)
    # as BackendTraits says of these (ctcbench.runtime.protocol): a worker process, its
    # limits and its start, and the import names whose versions a run records
    isolated: bool = False
    packages: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S  # isolated only: per call
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    prepare: Callable[[], None] | None = None  # called once in a new worker (Keras)

    @classmethod
    def of(cls, impl) -> "DecoderTraits":
        """The traits ``impl`` (an adapter or its class) declares, defaults for the rest; a
        word outside its vocabulary is an UnknownName "CLASS.ATTR: expected one of ..."."""
        return read_traits(cls, impl, _CHECKS)


_CHECKS = {**SHARED_CHECKS, "role": choice(ROLES), "search": choice(SEARCHES),
           "score": choice(SCORES), "ties": choice(TIES), "dtype": choice(DTYPES)}


@dataclass(frozen=True)
class Hypothesis:
    labels: tuple[int, ...]
    score: float | None


DECODERS = Registry("decoder", BUILTIN_DECODERS, ENTRY_POINT_GROUP, DecoderTraits)


def decoder_names(role: str | None = None) -> list[str]:
    """Every registered decoder and aligner, or those of one ``role``; loads none of them
    except to read a role."""
    table = DECODERS.view()
    names = sorted(table)
    if role is None:
        return names
    return [n for n in names if _role_of(table[n]) == role]


def _role_of(target) -> str | None:
    try:
        return DecoderTraits.of(load_factory(target)).role
    except Exception:  # an adapter that does not import: its role is unknown
        return None


ALL = "all"  # --decoder all: every registered decoder and aligner


def expand_decoder_names(names) -> list[str]:
    """``--decoder`` values, each once: names, or ``all``."""
    names = list(dict.fromkeys(names or ()))
    return decoder_names() if ALL in names else names


def register_decoder(name: str, factory, *, replace: bool = False) -> None:
    """Register ``factory`` (a class, a zero-argument function or ``"module:attr"``) as the
    decoder or aligner ``name``; a name already known is a ValueError unless ``replace``.
    To run isolated, it must be importable in a worker process, as for a backend."""
    DECODERS.register(name, factory, replace=replace)


def unregister_decoder(name: str) -> None:
    """Remove ``name``: one added by :func:`register_decoder` is forgotten, a built-in or
    entry-point one hidden until registered again; an unknown name is a KeyError."""
    DECODERS.unregister(name)


def check_decoder_names(names, option: str = "decoder") -> None:
    DECODERS.check(names, option)


def get_decoder(name: str, *, isolated: bool | None = None) -> "LoadedDecoder":
    """Build the decoder or aligner ``name``; ``BackendUnavailable`` if it cannot run here.
    ``isolated``: in a worker process (``None``: as its trait says; malformed input: True)."""
    return LoadedDecoder(name, *DECODERS.build(name, isolated=isolated))


class LoadedDecoder:
    """A registered decoder or aligner, built; its answers checked against the contract."""

    def __init__(self, name: str, impl, traits: DecoderTraits, worker=None):
        self.name, self.impl, self.traits, self.worker = name, impl, traits, worker

    def _call(self, method: str, arrays: dict, **kwargs):
        if self.worker is not None:
            return self.worker.call(method, arrays, **kwargs)
        return getattr(self.impl, method)(**arrays, **kwargs)

    def decode(self, log_probs, lengths, *, blank: int = 0,
               beam: int = 1) -> list[list[Hypothesis]]:
        """``log_probs (T, N, C)`` float64 normalised, ``lengths (N,)``: per sample, best
        first."""
        log_probs = np.ascontiguousarray(log_probs, dtype=np.float64)
        lengths = np.asarray(lengths, dtype=np.int64)
        out = self._call("decode", {"log_probs": log_probs, "lengths": lengths},
                         blank=int(blank), beam=int(beam))
        if not isinstance(out, (list, tuple)) or len(out) != len(lengths):
            raise TypeError(f"decoder {self.name!r}: expected one list of hypotheses per "
                            f"sample ({len(lengths)}), got {_kind(out)}")
        return [[_hypothesis(self.name, h) for h in hyps] for hyps in out]

    def align(self, log_probs, target, *, blank: int = 0) -> tuple[tuple[int, ...], float]:
        """``log_probs (T, C)``, ``target (L,)`` -> (path of T classes, its score)."""
        out = self._call("align", {"log_probs": np.asarray(log_probs, dtype=np.float64),
                                   "target": np.asarray(target, dtype=np.int64)},
                         blank=int(blank))
        if not (isinstance(out, (list, tuple)) and len(out) == 2):
            raise TypeError(f"aligner {self.name!r}: expected [path, score], got {_kind(out)}")
        return _labels(self.name, out[0]), float(out[1])

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()


def check_decode_inputs(log_probs, lengths, *, blank: int, beam: int | None = None) -> None:
    """What ctcbench's own decoders refuse, each as one ValueError naming the argument: a
    third-party adapter leaves the input as it came, so its framework's reaction is seen
    (``ctcbench datasheet --decoder``)."""
    T, N, C = log_probs.shape
    lengths = np.asarray(lengths)
    in_frame = np.arange(T)[:, None] < np.minimum(lengths, T)[None, :]  # (T, N) valid frames
    frames = log_probs[in_frame]  # (frames, C)
    expect(not (np.isnan(frames).any() or np.isposinf(frames).any()), "log_probs",
           "log-probabilities in the valid frames (finite, or -inf for probability 0)",
           "NaN or +inf entries")
    expect(bool(((lengths >= 0) & (lengths <= T)).all()), "lengths", f"frame counts in [0, {T}]",
           lengths.tolist()[:8])
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    if beam is not None:
        expect(beam >= 1, "beam", "a positive integer", repr(beam))


def check_align_inputs(log_probs, target, *, blank: int) -> None:
    """What ctcbench's own aligner refuses, each one ValueError naming the argument."""
    C = log_probs.shape[1]
    expect(not (np.isnan(log_probs).any() or np.isposinf(log_probs).any()), "log_probs",
           "log-probabilities (finite, or -inf for probability 0)", "NaN or +inf entries")
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    bad = [int(k) for k in target if not 0 <= k < C or k == blank]
    expect(not bad, "target", f"labels in [0, {C}) other than the blank ({blank})",
           f"{[int(k) for k in target]} (bad: {bad})")


def _kind(value) -> str:
    if value is None:  # not Python's "NoneType"
        return "None"
    return f"{type(value).__name__} of {len(value)}" if hasattr(value, "__len__") else \
        type(value).__name__


def _labels(name: str, labels) -> tuple[int, ...]:
    if not isinstance(labels, (list, tuple)) or not all(
            isinstance(k, int) and not isinstance(k, bool) for k in labels):
        raise TypeError(f"decoder {name!r}: expected labels as a list of int, got "
                        f"{_kind(labels)}")
    return tuple(labels)


def _hypothesis(name: str, h) -> Hypothesis:
    if not (isinstance(h, (list, tuple)) and len(h) == 2):
        raise TypeError(f"decoder {name!r}: expected a hypothesis [labels, score], got {_kind(h)}")
    score = h[1]
    if score is not None and not isinstance(score, (int, float)):
        raise TypeError(f"decoder {name!r}: expected a score float or None, got {_kind(score)}")
    return Hypothesis(_labels(name, h[0]), None if score is None else float(score))
