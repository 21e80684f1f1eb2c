"""Decoders ``tf-greedy``, ``tf-beam``, ``tf-beam-v1``: TensorFlow's CTC decoders, in a worker.

``tf.nn.ctc_greedy_decoder(inputs, sequence_length, merge_repeated=True, blank_index=None)``
and ``tf.nn.ctc_beam_search_decoder(inputs, sequence_length, beam_width=100, top_paths=1)``
take time-major ``inputs (T, N, C)`` (logits; the beam search takes their log-softmax, the
greedy decoder their argmax) and int32 lengths, and return the labels as one SparseTensor
per path with a score per sample and path:

- greedy: ``neg_sum_logits (N, 1)``, minus the sum over frames of the top input. Given
  log-probabilities, minus it is the best path's log-probability: score ``path``.
  ``merge_repeated=True`` (its default) is CTC's map: repeats merged, then blanks removed.
- beam: ``log_probabilities (N, top_paths)``, the log of the summed probability of the
  paths the beam kept for the labelling: score ``labelling`` (in float32 it exceeds that by
  the rounding of each frame's softmax normaliser, a running float sum over the classes,
  tensorflow#21187: 3e-4 at C = 2000, T = 60; docs/decoders.md). TF 2's API has no
  ``merge_repeated``: it calls the TF 1 op with ``merge_repeated=False``, under which the op
  merges repeats once, by CTC's map (ctc_ops.py: "merge_repeated is an invalid
  optimization that is removed from the public API").
- ``tf-beam-v1``: ``tf.compat.v1.nn.ctc_beam_search_decoder``, whose ``merge_repeated``
  defaults to True: repeated labels of the beam's answer are merged a second time
  (tensorflow#9550), the score staying the unmerged labelling's.

TF's blank is the last class (the beam search has no ``blank_index``): the adapter moves our
blank there and maps the labels back. Each runs isolated (TensorFlow segfaults beside Paddle),
in float32 (TF's docs: "3-D float Tensor"; a model's output), with ``top_paths=1``, its
default: one hypothesis each (more than the beam's distinct labellings is an error, "Less
leaves in the beam search than requested"). ``keras-tf-greedy`` (``keras``) calls the
greedy decoder with ``blank_index`` instead.
"""
from __future__ import annotations


import numpy as np


from .._thirdparty import import_tensorflow, require


def blank_last(log_probs: np.ndarray, lengths: np.ndarray, blank: int):
    """``(T, N, C)`` float32 with our blank moved to the last class and padded frames zeroed
    (a kernel may read them), and ``order (C,)``: the framework's class k is our ``order[k]``."""
    C = log_probs.shape[-1]
    order = np.array([c for c in range(C) if c != blank] + [blank])
    x = valid_frames(log_probs, lengths)[..., order]
    return np.ascontiguousarray(x, dtype=np.float32), order


def valid_frames(log_probs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``log_probs (T, N, C)`` with the frames past each sample's length set to 0."""
    T = log_probs.shape[0]
    valid = np.arange(T)[:, None] < np.asarray(lengths)[None, :]  # (T, N)
    return np.where(valid[..., None], log_probs, 0.0)


def check_beam(beam: int) -> None:
    if beam < 1:
        raise ValueError(f"beam: expected a positive integer, got {beam}")


class TFGreedyDecoder:
    """tf.nn.ctc_greedy_decoder with its defaults (merge_repeated=True, blank last)."""

    name = "tf-greedy"
    search = "greedy"
    score = "path"
    ties = "any"  # argmax over TF's order, where our blank is last
    blank = "last"
    dtype = "float32"  # what it computes in
    isolated = True
    packages = ("tensorflow",)
    conventions = ("blank last (moved there); merge_repeated=True: CTC's map; score: minus "
                   "neg_sum_logits, the sum of each frame's top log-probability (best path)")

    def __init__(self):
        require(("tensorflow",), extra="tf")
        self.tf = None

    def prepare(self) -> None:
        """Import TensorFlow, quietly, on the requested threads."""
        self.tf = import_tensorflow()

    def decode(self, log_probs, lengths, *, blank: int, beam: int = 1):
        if self.tf is None:
            self.prepare()
        x, order = blank_last(log_probs, lengths, blank)
        decoded, scores = self._call(x, np.asarray(lengths, dtype=np.int32), beam)
        rows = sparse_rows(decoded[0], len(lengths))
        return [[[[int(order[k]) for k in row], self._score(float(s))]]
                for row, s in zip(rows, scores.numpy()[:, 0])]

    def _call(self, x, lengths, beam):
        return self.tf.nn.ctc_greedy_decoder(x, lengths)

    @staticmethod
    def _score(value: float) -> float:
        return -value  # neg_sum_logits


class TFBeamDecoder(TFGreedyDecoder):
    """tf.nn.ctc_beam_search_decoder (TF 2) with beam_width=beam, top_paths=1."""

    name = "tf-beam"
    search = "beam"
    score = "labelling"
    ties = "first"
    exact_beam = True  # at beam_width=prefix_count(T, C): log P to 4e-7, measured
    conventions = ("blank last (moved there); no merge_repeated (TF 2 passes False: repeats "
                   "merged once, CTC's map); score: log_probabilities, log P(labels) of the "
                   "beam's paths")

    def _call(self, x, lengths, beam):
        check_beam(beam)
        return self.tf.nn.ctc_beam_search_decoder(x, lengths, beam_width=beam)

    @staticmethod
    def _score(value: float) -> float:
        return value


class TFBeamV1Decoder(TFBeamDecoder):
    """tf.compat.v1.nn.ctc_beam_search_decoder with its default merge_repeated=True."""

    name = "tf-beam-v1"
    conventions = ("blank last (moved there); merge_repeated=True (TF 1's default): the "
                   "answer's repeated labels merged again after CTC's map (tensorflow#9550); "
                   "score: log_probabilities, log P of the labels before that second merge")

    def _call(self, x, lengths, beam):
        check_beam(beam)
        return self.tf.compat.v1.nn.ctc_beam_search_decoder(x, lengths, beam_width=beam)


def sparse_rows(st, N: int) -> list[list[int]]:
    """The rows of a 2-D SparseTensor of labels (indices (sample, position)), in order."""
    rows: list[list[tuple[int, int]]] = [[] for _ in range(N)]
    for (n, position), value in zip(st.indices.numpy().tolist(), st.values.numpy().tolist()):
        rows[n].append((position, int(value)))
    return [[value for _, value in sorted(row)] for row in rows]
