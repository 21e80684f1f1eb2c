"""Decoders ``keras-{jax,tf,torch}-{greedy,beam}``: Keras 3's ``keras.ops.ctc_decode``.

``keras.ops.ctc_decode(inputs, sequence_lengths, strategy="greedy", beam_width=100,
top_paths=1, merge_repeated=True, mask_index=0)`` takes batch-major ``inputs (N, T, C)``
(logits; cast to float32) and the blank as ``mask_index``, and returns the labels padded
with -1, ``(top_paths, N, T)``, with a score per sample and path, ``(N, top_paths)``:

- ``strategy="greedy"``: the per-frame argmax, ``merge_repeated=True`` (its default: CTC's
  map), scored by "the negative of the sum of the probability logits": minus the sum of
  each frame's top input. Given log-probabilities, minus it is the best path's: ``path``.
- ``strategy="beam_search"``: the log-probability of each labelling; ``merge_repeated`` is
  not passed on (the JAX and torch backends run keras' own prefix beam search on the
  log-softmax of the inputs, the TF one ``tf.nn.ctc_beam_search_decoder`` with our blank
  moved last by keras).

What runs depends on ``KERAS_BACKEND``, read once when keras is imported, so each adapter
runs isolated, in its own worker, and sets it in ``prepare()`` before the import (as
``keras_ctc`` does for the loss). ``top_paths`` stays 1, its default: one hypothesis each.
"""
from __future__ import annotations

import os

import numpy as np

from ctcbench.runtime.threads import requested

from .._thirdparty import import_tensorflow, jax_threads, require
from .tf import check_beam, valid_frames
from ..keras_ctc import import_keras

_FRAMEWORK = {"jax": ("jax",), "tensorflow": ("tensorflow",), "torch": ("torch",)}
_EXTRA = {"jax": "keras,jax", "tensorflow": "keras,tf", "torch": "keras"}


class _KerasDecoder:
    keras_backend = ""  # KERAS_BACKEND
    search = "greedy"
    score = "path"
    ties = "first"  # argmax over our classes: keras takes the blank where it is
    blank = "any"
    dtype = "float32"  # what it computes in
    isolated = True
    conventions = ("mask_index=blank; merge_repeated=True: CTC's map; score: minus keras' "
                   "score, the sum of each frame's top log-probability (best path)")

    def __init__(self):
        framework = _FRAMEWORK[self.keras_backend]
        require(("keras",) + framework, extra=_EXTRA[self.keras_backend])
        self.packages = ("keras",) + framework
        self.keras = None

    def prepare(self) -> None:
        """Set up the framework's threads, then import keras on it."""
        n = requested()
        if self.keras_backend == "jax":
            jax_threads()
        elif self.keras_backend == "tensorflow":
            import_tensorflow()
        else:
            os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # keras' torch takes a GPU
            import torch
            if n is not None:
                torch.set_num_threads(n)
        self.keras = import_keras(self.keras_backend)

    def decode(self, log_probs, lengths, *, blank: int, beam: int = 1):
        if self.keras is None:
            self.prepare()
        ops = self.keras.ops
        x = np.ascontiguousarray(valid_frames(log_probs, lengths).transpose(1, 0, 2),
                                 dtype=np.float32)  # (N, T, C)
        decoded, scores = ops.ctc_decode(x, np.asarray(lengths, dtype=np.int32),
                                         **self._options(blank, beam))
        decoded = np.asarray(ops.convert_to_numpy(decoded))  # (top_paths, N, T)
        scores = np.asarray(ops.convert_to_numpy(scores), dtype=np.float64)  # (N, top_paths)
        return [[[[int(k) for k in decoded[0, n] if k != -1], self._score(scores[n, 0])]]
                for n in range(len(lengths))]

    def _options(self, blank: int, beam: int) -> dict:
        return {"strategy": "greedy", "mask_index": blank}

    @staticmethod
    def _score(value) -> float:
        return -float(value)


class _KerasBeamDecoder(_KerasDecoder):
    search = "beam"
    score = "labelling"
    conventions = ("mask_index=blank; merge_repeated not passed to the beam search (repeats "
                   "merged once, CTC's map); score: keras' log probability of the labelling")

    def _options(self, blank: int, beam: int) -> dict:
        check_beam(beam)
        return {"strategy": "beam_search", "beam_width": beam, "mask_index": blank}

    @staticmethod
    def _score(value) -> float:
        return float(value)


class KerasJaxGreedy(_KerasDecoder):
    name = "keras-jax-greedy"
    keras_backend = "jax"


class KerasTFGreedy(_KerasDecoder):
    name = "keras-tf-greedy"
    keras_backend = "tensorflow"


class KerasTorchGreedy(_KerasDecoder):
    name = "keras-torch-greedy"
    keras_backend = "torch"


class KerasJaxBeam(_KerasBeamDecoder):
    name = "keras-jax-beam"
    keras_backend = "jax"
    exact_beam = True


class KerasTFBeam(_KerasBeamDecoder):
    name = "keras-tf-beam"
    keras_backend = "tensorflow"
    exact_beam = True


class KerasTorchBeam(_KerasBeamDecoder):
    name = "keras-torch-beam"
    keras_backend = "torch"
    exact_beam = True
