"""Decoders ``transformers-ctc*``: Hugging Face Transformers' ``Wav2Vec2CTCTokenizer.batch_decode``
(and ``Wav2Vec2Processor.batch_decode``, which calls it) on the per-frame argmax, as its
documentation decodes a ``*ForCTC`` model: ``processor.batch_decode(logits.argmax(-1))``.

What the tokenizer does with a sequence of ids (transformers 5.x, ``_decode`` and
``convert_tokens_to_string``):

1. ids to tokens; with ``skip_special_tokens=True`` every special token except the word
   delimiter is dropped here, the pad token (the CTC blank) included;
2. ``group_tokens=True`` (the default): runs of one token become one (``itertools.groupby``);
3. the pad token is removed (the blank);
4. the word delimiter token (``"|"``) is written as ``replace_word_delimiter_char`` (``" "``);
5. the tokens are joined and the text ``.strip()``-ped (a delimiter at either end is lost).

Steps 2 and 3 in that order are CTC's collapse with the pad token as the blank. Step 1 before
them removes the blanks first, so a label repeated across a blank is merged ("hello" comes out
"helo"): a fault of ``skip_special_tokens=True``, not a convention. ``group_tokens=False``
keeps repeats (it is for label ids, not CTC output), and step 5 is text normalisation.

The adapter builds a tokenizer for the case's classes from a vocabulary written to a temporary
folder (no download): the blank is ``<pad>``, every other class one letter; the ``-words``
variant makes the last class that is not the blank the word delimiter. The text comes back to
class indices through the vocabulary (:func:`text_to_labels`), the delimiter's character as
its class. Each sample's own frames are decoded: ``batch_decode`` takes no lengths, so the
adapter passes each sample's ids cut to its length, as a caller must.
"""
from __future__ import annotations

import functools
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ctcbench.errors import expect, fail

from .._thirdparty import require

PAD = "<pad>"  # the tokenizer's default pad token: the CTC blank
DELIMITER = "|"  # its default word delimiter token
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "".join(chr(c) for c in range(0x4E00, 0x9FA6))
# one character per class: Latin capitals, then CJK ideographs (none special, none whitespace)


def vocab_for(C: int, blank: int, *, words: bool = False) -> dict[str, int]:
    """``{token: class}`` for ``C`` classes: the blank ``<pad>``, the others a letter each; with
    ``words`` the last class that is not the blank is the word delimiter ``|``."""
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    labels = [k for k in range(C) if k != blank]
    expect(len(labels) <= len(LETTERS), "C", f"at most {len(LETTERS) + 1} classes for a "
           "vocabulary of single letters", C)
    vocab = {PAD: blank, **{LETTERS[i]: k for i, k in enumerate(labels)}}
    if words and labels:
        del vocab[LETTERS[len(labels) - 1]]
        vocab[DELIMITER] = labels[-1]
    return vocab


def tokenizer_from_vocab(vocab: dict[str, int], **kwargs):
    """A ``Wav2Vec2CTCTokenizer`` of ``vocab`` (written to a temporary ``vocab.json``, read at
    once); ``kwargs`` go to its constructor (``pad_token``, ``word_delimiter_token``, ...)."""
    require(("transformers",), extra="transformers")
    from transformers import Wav2Vec2CTCTokenizer
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "vocab.json"
        path.write_text(json.dumps(vocab), encoding="utf-8")
        return Wav2Vec2CTCTokenizer(str(path), **kwargs)


def tokenizer_of(obj):
    """``(tokenizer, decode keyword arguments)`` when ``obj`` is a CTC tokenizer, a processor
    holding one, or ``functools.partial`` of their ``batch_decode``/``decode`` with keywords;
    else None. Read by what they have, so transformers is not imported to ask."""
    kwargs = {}
    if isinstance(obj, functools.partial) and not obj.args:
        method = obj.func
        if getattr(method, "__name__", "") in ("batch_decode", "decode"):
            obj, kwargs = getattr(method, "__self__", None), dict(obj.keywords)
        else:
            return None
    tokenizer = getattr(obj, "tokenizer", obj)
    if all(hasattr(tokenizer, a) for a in ("batch_decode", "convert_tokens_to_string",
                                          "pad_token_id", "word_delimiter_token")):
        return tokenizer, kwargs
    return None


@dataclass
class TokenizerDecode:
    """The tokenizer's decode as a decoder: ``labels(ids)`` per sample, and what its settings
    do to CTC output (``conventions``; ``fault``: a setting whose output is wrong for CTC)."""

    tokenizer: object
    kwargs: dict = field(default_factory=dict)

    @property
    def blank(self) -> int:
        return int(self.tokenizer.pad_token_id)

    @property
    def delimiter(self) -> int | None:
        """The word delimiter's class, where the vocabulary holds it."""
        token = self.tokenizer.word_delimiter_token
        return self.tokenizer.get_vocab().get(token) if token is not None else None

    def texts(self, ids) -> list[str]:
        """``batch_decode`` as the caller set it up, on per-sample id lists."""
        out = self.tokenizer.batch_decode([[int(k) for k in row] for row in ids], **self.kwargs)
        return list(out.text if hasattr(out, "text") else out)

    def labels(self, ids) -> list[tuple[int, ...]]:
        return [text_to_labels(text, self.tokenizer, n) for n, text in enumerate(self.texts(ids))]

    def __call__(self, values, lengths):
        """``check_decoder``'s form: ``values (N, T, C)`` as the caller's model gives them
        (batch-major), ``lengths (N,)``: each sample's argmax, cut to its length."""
        best = np.asarray(values).argmax(-1)  # (N, T)
        return self.labels([best[n, :int(k)] for n, k in enumerate(lengths)])

    def fault(self) -> str | None:
        """A setting that makes the text wrong for CTC output, with its fix."""
        if self.kwargs.get("skip_special_tokens"):
            return ("skip_special_tokens=True drops the pad token (the CTC blank) before "
                    "repeated tokens are grouped, so a label repeated across a blank is merged "
                    "('hello' decodes as 'helo'): leave skip_special_tokens=False (the pad "
                    "token is removed after grouping anyway)")
        return None

    def conventions(self) -> list[tuple[str, object]]:
        """``(what, fn)``: the tokenizer's conventions that change CTC's labelling, each with
        ``fn(exact labels, frames' argmax) -> what the convention makes of them``."""
        out = []
        if not self.kwargs.get("group_tokens", True):
            out.append(("group_tokens=False keeps a token repeated on consecutive frames "
                        "(it is for label ids, not CTC output): pass group_tokens=True, the "
                        "default, to decode a model's frames",
                        lambda want, argmax: tuple(k for k in argmax if k != self.blank)))
        delim = self.delimiter
        if delim is not None and self.tokenizer.replace_word_delimiter_char.strip() == "":
            out.append((f"the word delimiter {self.tokenizer.word_delimiter_token!r} (class "
                        f"{delim}) is written as "
                        f"{self.tokenizer.replace_word_delimiter_char!r} and the text "
                        "strip()-ped, so a delimiter at either end is dropped: compare words, "
                        "or build the tokenizer with replace_word_delimiter_char='|' to keep it",
                        lambda want, argmax: _strip(want, delim)))
        return out


def _strip(labels, delimiter: int) -> tuple[int, ...]:
    labels = list(labels)
    while labels and labels[0] == delimiter:
        labels.pop(0)
    while labels and labels[-1] == delimiter:
        labels.pop()
    return tuple(labels)


def text_to_labels(text: str, tokenizer, n: int = 0) -> tuple[int, ...]:
    """The class indices of ``text`` as the tokenizer wrote it: the longest vocabulary token at
    each place, the delimiter's replacement character read as the delimiter's class."""
    vocab = dict(tokenizer.get_vocab())
    delim = tokenizer.word_delimiter_token
    if delim in vocab:
        vocab[tokenizer.replace_word_delimiter_char] = vocab[delim]
    lower = bool(getattr(tokenizer, "do_lower_case", False))
    table = {(t.lower() if lower else t): k for t, k in vocab.items() if t}
    widths = sorted({len(t) for t in table}, reverse=True)
    out, i = [], 0
    while i < len(text):
        match = next((text[i:i + w] for w in widths if text[i:i + w] in table), None)
        if match is None:
            fail(f"decoder output[{n}]", "text of the tokenizer's vocabulary",
                 f"{text!r} ({text[i]!r} at {i} is no token)")
        out.append(int(table[match]))
        i += len(match)
    return tuple(out)


class TransformersCTCDecoder:
    """``batch_decode`` with its defaults on the frames' argmax; no class is the delimiter."""

    name = "transformers-ctc"
    search = "greedy"
    score = "none"  # text: no score
    ties = "first"  # argmax, as torch.argmax and numpy's: the first of equal classes
    packages = ("transformers",)
    conventions = ("the pad token is the blank; group_tokens=True: repeats merged, then the "
                   "pad removed (CTC's map); no score")
    words = False
    decode_kwargs: dict = {}

    def __init__(self):
        require(("transformers",), extra="transformers")
        self._made: dict = {}

    def decode(self, log_probs, lengths, *, blank: int, beam: int = 1):
        T, N, C = log_probs.shape
        if (C, blank) not in self._made:
            tokenizer = tokenizer_from_vocab(vocab_for(C, blank, words=self.words))
            self._made[(C, blank)] = TokenizerDecode(tokenizer, dict(self.decode_kwargs))
        call = self._made[(C, blank)]
        best = np.asarray(log_probs).argmax(-1)  # (T, N)
        return [[[list(labels), None]] for labels in
                call.labels([best[:int(k), n] for n, k in enumerate(lengths)])]


class TransformersCTCWordsDecoder(TransformersCTCDecoder):
    """The same, with the last class that is not the blank the word delimiter ``|``."""

    name = "transformers-ctc-words"
    words = True
    conventions = ("the pad token is the blank; the last other class is the word delimiter "
                   "'|', written as ' ' and stripped at both ends of the text; no score")


class TransformersCTCSkipSpecialDecoder(TransformersCTCDecoder):
    """``batch_decode(ids, skip_special_tokens=True)``: the pad dropped before grouping."""

    name = "transformers-ctc-skip-special"
    decode_kwargs = {"skip_special_tokens": True}
    conventions = ("skip_special_tokens=True: special tokens, the pad (blank) among them, "
                   "dropped before repeats are grouped; no score")
