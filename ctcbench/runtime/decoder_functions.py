"""A user's decoder or aligner, a plain function, registered as one: ``--decoder PKG.MOD:NAME``
and ``--aligner PKG.MOD:NAME``, run in a worker process and probed at once.

The function has the contract's signature (:mod:`ctcbench.runtime.decoders`)::

    decode(log_probs (T, N, C) float64, lengths (N,) int64, *, blank, beam)
        -> N lists, best first, of [labels, score]
    align(log_probs (T, C) float64, target (L,) int64, *, blank) -> [path (T,), score]

A ``blank`` parameter it lacks means it handles blank 0 only (a case with another blank is
``unsupported``); a ``beam`` one it lacks, that it takes no width. Labels, paths and scores
may be lists, NumPy arrays or tensors (anything with ``.tolist()``). What the judge must know
the function declares as attributes of itself, named as the decoders' traits
(``DecoderTraits``): ``score`` (``labelling``: log P(labels), summed over all its paths;
``path``: the best single path's log-probability; ``none``), ``search`` (``greedy`` or
``beam``), ``ties``, ``exact_beam``, ``dtype`` and ``timeout_s``; ``score=`` (``--score``)
declares the score for a function that does not. Undeclared, a decoder is a beam search with
``labelling`` scores (a greedy one's are ``path``), and an aligner's score is its path's.

The function's module is imported in its worker only, with the current folder on the path
(as for ``--function``): a segfault or an abort costs the worker, not the run, and the case
it died on becomes a ``crashed`` row.
"""
from __future__ import annotations

import functools
import importlib
import math
import importlib.util
import inspect

from ctcbench.errors import InputError, expect, fail, one_of
from ctcbench.runtime.decoders import (DTYPES, ROLES, SCORES, SEARCHES, TIES, get_decoder,
                                       register_decoder, unregister_decoder)
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout, UnsupportedProblem

OPTION = {"decoder": "--decoder", "aligner": "--aligner"}
DECLARED = {"score": SCORES, "search": SEARCHES, "ties": TIES, "dtype": DTYPES,
            "exact_beam": None, "timeout_s": None}  # attribute -> its words (None: checked apart)
DEFAULT_SCORE = {"greedy": "path", "beam": "labelling", "aligner": "path"}


def is_function_target(value: str) -> bool:
    """``"pkg.mod:name"`` (a function) rather than a registered decoder's name."""
    return isinstance(value, str) and ":" in value


def add_decoder_function(target: str, *, role: str = "decoder", score: str | None = None,
                         option: str | None = None) -> tuple[str, str]:
    """Register the function at ``target`` as the decoder (or, ``role="aligner"``, aligner)
    of that name, with the traits it declares; returns ``(name, what was found)``. Its worker
    imports it and reads its attributes first: whatever is wrong is one error naming
    ``option`` (default ``--decoder`` or ``--aligner``) before any case runs."""
    from ctcbench.runtime.functions import check_target
    one_of("role", role, ROLES)
    option = option or OPTION[role]
    check_target(target, option, "mypkg.ocr:decode")
    if score is not None:
        one_of("--score", score, SCORES)
    try:
        described = _describe(target, role, option)
        traits = _traits(target, role, described, score)
    except Exception:
        unregister_decoder(target)  # no half-registered name left behind
        raise
    register_decoder(target, functools.partial(FunctionDecoder, target=target, role=role,
                                               option=option, **traits), replace=True)
    blank = "any blank" if described["takes_blank"] else "blank 0 only (no blank parameter)"
    said = ", ".join(f"{k} {traits[k]} ({_source(k, described['declared'], score)})"
                     for k in ("search", "score") if k in traits)
    return target, f"{target}: {role}, {said}; {blank}"


def _source(key: str, declared: dict, score) -> str:
    if key in declared:
        return "declared"
    return "--score" if key == "score" and score is not None else "default"


def add_decoder_functions(decoders=(), aligners=(), *, score: str | None = None,
                          say=print) -> list[str]:
    """``--decoder`` and ``--aligner`` values as registered names, each once: a
    ``PKG.MOD:NAME`` one registered by :func:`add_decoder_function` (``say`` gets what was
    found), a name kept as it is (``--aligner NAME`` must name an aligner)."""
    from ctcbench.runtime.decoders import check_decoder_names, decoder_names
    names = []
    for role, values in (("decoder", decoders or ()), ("aligner", aligners or ())):
        for value in dict.fromkeys(values):
            if is_function_target(value):
                name, found = add_decoder_function(value, role=role, score=score)
                say(found)
            else:
                name = value
                if role == "aligner":
                    check_decoder_names([name], "--aligner")
                    expect(name in decoder_names("aligner"), "--aligner",
                           "an aligner's name or PKG.MOD:NAME", f"{name!r}, a decoder")
            names.append(name)
    return list(dict.fromkeys(names))


def _describe(target: str, role: str, option: str) -> dict:
    """What the function's worker found: its declared attributes and parameters."""
    register_decoder(target, functools.partial(FunctionDecoder, target=target, role=role,
                                               option=option), replace=True)
    loaded = get_decoder(target)
    loaded.close()  # a worker left from an earlier call holds the module as it was then
    try:
        return loaded.worker.call("describe", {})
    except InputError as exc:
        raise InputError(option, exc.problem) from None
    except (BackendCrashed, BackendTimeout) as exc:
        fail(option, "a function its worker can import", f"{target}: {exc}"[:600])
    finally:
        loaded.close()


def _traits(target: str, role: str, described: dict, score) -> dict:
    """The traits the judge holds the function to: what it declares, checked, then
    ``score`` (``--score``), then the defaults."""
    declared = described["declared"]
    for key, value in declared.items():
        where = f"{target}.{key}"
        if key == "timeout_s":
            expect(isinstance(value, (int, float)) and not isinstance(value, bool)
                   and 0 < value < math.inf, where, "a positive finite number of seconds",
                   repr(value))
        elif key == "exact_beam":
            expect(isinstance(value, bool), where, "True or False", repr(value))
        else:  # a word: a number or a list is refused here, not iterated
            expect(isinstance(value, str), where, f"one of {', '.join(DECLARED[key])}",
                   repr(value))
            one_of(where, value, DECLARED[key])
    if score is not None and "score" in declared and declared["score"] != score:
        fail("--score", f"the score {target} declares ({declared['score']!r}), or no --score",
             repr(score))
    traits = dict(declared)
    if role == "decoder":
        traits.setdefault("search", "beam")
    kind = traits["search"] if role == "decoder" else "aligner"
    traits.setdefault("score", score or DEFAULT_SCORE[kind])
    return traits


def _plain(value):
    """``value`` as JSON: arrays, tensors and NumPy scalars by ``tolist()``, tuples as lists."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value  # not JSON: the worker's reply says what it is


class FunctionDecoder:
    """The function at ``target`` behind the decoder contract, in a worker process;
    ``traits``: what it declares (``score``, ``search``, ...), set as attributes here so that
    ``DecoderTraits.of`` reads them without importing the function."""

    isolated = True

    def __init__(self, target: str, role: str = "decoder", option: str = "--decoder",
                 **traits):
        self.target, self.role, self.option = target, role, option
        for key, value in traits.items():
            setattr(self, key, value)
        self.conventions = f"a plain function, {target}"
        self.fn, self.params = None, []

    # -- in the worker --------------------------------------------------------------------
    def prepare(self) -> None:
        """Import the function (its module and whatever that imports)."""
        module, _, attr = self.target.partition(":")
        try:
            obj = importlib.import_module(module)
        except Exception as exc:  # ImportError, or the module itself raised
            fail(self.option, f"a module {module!r} that imports",
                 f"{type(exc).__name__}: {exc}"[:400])
        for part in attr.split("."):
            expect(hasattr(obj, part), self.option, f"a function {attr!r} in {module}",
                   f"no attribute {part!r}")
            obj = getattr(obj, part)
        expect(callable(obj), self.option, f"a {self.role} function",
               f"{self.target} is a {type(obj).__name__}")
        self.fn = obj
        try:
            self.params = list(inspect.signature(obj).parameters.values())
        except (TypeError, ValueError):  # no signature to read: pass everything
            self.params = None

    def _takes(self, name: str) -> bool:
        return self.params is None or any(
            p.name == name or p.kind is p.VAR_KEYWORD for p in self.params)

    def describe(self) -> dict:
        """The attributes the function declares, and whether it takes ``blank``."""
        declared = {k: getattr(self.fn, k) for k in DECLARED if hasattr(self.fn, k)}
        declared = {k: v if isinstance(v, (str, bool, int, float)) else repr(v)
                    for k, v in declared.items()}
        return {"declared": declared, "takes_blank": self._takes("blank")}

    def _kwargs(self, blank: int, **more) -> dict:
        if not self._takes("blank"):
            if blank != 0:
                raise UnsupportedProblem(f"{self.target} takes no blank argument, so it is "
                                         f"tried on blank 0 only (this case's blank is {blank})")
            return {k: v for k, v in more.items() if self._takes(k)}
        return {"blank": blank, **{k: v for k, v in more.items() if self._takes(k)}}

    def decode(self, log_probs, lengths, *, blank: int, beam: int):
        return _plain(self.fn(log_probs, lengths, **self._kwargs(blank, beam=beam)))

    def align(self, log_probs, target, *, blank: int):
        return _plain(self.fn(log_probs, target, **self._kwargs(blank)))
