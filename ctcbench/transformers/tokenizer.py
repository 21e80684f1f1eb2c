"""A Transformers CTC tokenizer's decode held against CTC's: ``check_tokenizer``.

``check_tokenizer(processor, logits, lengths)`` runs ``batch_decode`` (with the settings the
caller uses) on each sample's argmax, as a ``*ForCTC`` model's output is decoded, and compares
the text, read back through the vocabulary, with the collapse of the argmax path (the pad token
as the blank). What the tokenizer's conventions make of that answer (the word delimiter
written as a space and stripped at the ends; ``group_tokens=False``) comes back as a note with
the setting to change; what is wrong for CTC output (``skip_special_tokens=True``, which drops
the blank before repeats are merged; a ``blank`` that is not the pad token) as a finding. It is
:func:`ctcbench.check_decoder` with a tokenizer in place of a function, batch-major values.

The decoder adapters ``transformers-ctc*`` (``ctcbench compare --decoder``) run the same decode
on the decoder case library: ``ctcbench.backends.decoders.wav2vec2``.
"""
from __future__ import annotations

import functools

from ctcbench.backends.decoders.wav2vec2 import tokenizer_from_vocab, vocab_for
from ctcbench.doctor.decoder import DecoderCheck, check_decoder
from ctcbench.errors import expect

__all__ = ["check_tokenizer", "tokenizer_from_vocab", "vocab_for"]


def check_tokenizer(processor, logits, lengths=None, *, blank: int | None = None,
                    layout: str = "NTC", **settings) -> DecoderCheck:
    """Check ``processor`` (a ``Wav2Vec2Processor`` or ``Wav2Vec2CTCTokenizer``) decoding
    ``logits (N, T, C)`` (a ``*ForCTC`` model's ``.logits``; ``layout="TNC"`` for time-major),
    ``lengths (N,)`` the frames of each sample (default: all). ``settings`` are the keyword
    arguments the caller passes to ``batch_decode`` (``group_tokens``,
    ``skip_special_tokens``, ...). ``blank``: the model's blank, default the pad token's id."""
    tokenizer = getattr(processor, "tokenizer", processor)
    expect(hasattr(tokenizer, "batch_decode") and hasattr(tokenizer, "pad_token_id"),
           "processor", "a Transformers CTC tokenizer or processor", type(processor).__name__)
    decode = functools.partial(processor.batch_decode, **settings)
    return check_decoder(decode, logits, lengths, blank=blank, layout=layout)
