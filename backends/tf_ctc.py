"""Backends ``tf`` and ``tf-dense``: ``tf.nn.ctc_loss``, each run in a worker process.

``tf``: sparse labels select TensorFlow's C++ ``CTCLoss`` kernel (softmax inside, gradient
w.r.t. the logits; ``tf.nn.ctc_loss`` moves a blank other than the last class into place for
it). float32 runs as a ``tf.function``, float64 eagerly (recorded in the notes).

``tf-dense``: dense padded labels select TensorFlow's pure-TF ``ctc_loss_dense`` (log-space,
custom gradient), float32 only.

Both want logits time-major ``(T, N, C)`` (log_softmax applied inside), ``blank_index``,
int32 labels and ``logit_length``; padded frames are zeroed, since the kernel reads them.
Problems TensorFlow would answer wrongly or not at all (an empty target for the C++ kernel,
an infeasible target for both) are refused with ``UnsupportedProblem``; what it gets wrong
on cases of the library is in ``cases/known_issues.toml``.
"""
from __future__ import annotations


import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendResult, UnsupportedProblem

from ._thirdparty import (check_dtype, import_tensorflow, padded_labels, refuse_infeasible,
                          refuse_neg_inf, require)


class TFBackend:
    """tf.nn.ctc_loss with sparse labels: TensorFlow's C++ CTCLoss kernel."""

    name = "tf"
    clears_padded_frames = True  # its framework gets logit 0 there (clean_logits)
    isolated = True
    dtypes = ("float32", "float64")
    packages = ("tensorflow",)  # import names whose versions a run records
    dense = False

    def __init__(self):
        require(("tensorflow",), extra="tf")
        self.tf = None

    def prepare(self) -> None:
        """Import TensorFlow (quietly) and build the traced float32 loss-and-gradient."""
        self.tf = tf = import_tensorflow()
        self._traced = tf.function(self._loss_and_grad, reduce_retracing=True)

    def _loss_and_grad(self, logits, labels, label_length, logit_length, weights, blank):
        tf = self.tf
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = tf.nn.ctc_loss(labels=labels, logits=logits, label_length=label_length,
                                  logit_length=logit_length, logits_time_major=True,
                                  blank_index=blank)  # (N,)
        return loss, tape.gradient(loss, logits, output_gradients=weights)

    def _labels(self, problem: CTCProblem):
        """Sparse labels, and None for label_length (the sparse form carries the lengths)."""
        if (problem.target_lengths == 0).any():
            raise UnsupportedProblem(
                f"{self.name} (TF's C++ CTCLoss kernel) rejects an empty target (samples "
                f"{np.flatnonzero(problem.target_lengths == 0)[:5].tolist()}): "
                f"'Labels length is zero in batch n'")
        tf = self.tf
        labels, mask = padded_labels(problem)  # (N, L')
        indices = np.argwhere(mask).astype(np.int64)  # (K, 2) (sample, position)
        return tf.SparseTensor(indices, labels[mask], labels.shape), None

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        """``grad_weights (N,)``: upstream gradient per loss (default 1)."""
        args = self._inputs(problem, grad_weights)
        notes = []
        compute_dtype = problem.dtype
        if problem.dtype == "float32":
            loss, grad = self._traced(*args)
        else:
            notes.append(f"{self.name} float64 computed eagerly (not as a tf.function)")
            loss, grad = self._loss_and_grad(*args)
            if not self.dense:
                # ctc_loss_util.h: LogSumExp<T> returns a + log1pf(expf(b - a)), float32 math
                compute_dtype = "float64 (float32 log-sum-exp)"
                notes.append("TF's CTCLoss kernel adds log-probabilities with log1pf/expf even "
                             "for float64: expect ~1e-8 loss and ~1e-7 gradient error")
        return BackendResult(loss.numpy(), grad.numpy(), compute_dtype=compute_dtype,
                             notes=notes)

    def kernel(self, problem: CTCProblem):
        """What `bench` times: the loss and gradient of tensors built once, as a user's step
        runs it: float32 a ``tf.function`` of the logits that captures the labels and lengths
        (traced on the first call), float64 eagerly; returns NumPy ``(loss, grad)``."""
        logits, *rest = self._inputs(problem, None)

        def step(x):
            return self._loss_and_grad(x, *rest)
        fn = self.tf.function(step) if problem.dtype == "float32" else step

        def call():
            loss, grad = fn(logits)
            return loss.numpy(), grad.numpy()
        return call

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """This backend's own call (``_loss_and_grad``, eagerly) on the arrays as given: the
        logits time-major with no zeroing of padded frames, ``blank_index=blank``, the
        gradient of the summed loss w.r.t. the logits. Labels and lengths go as int32, as the
        adapter hands them over (TF's CTCLoss op takes nothing else): ``tf-dense`` (and its
        subclasses) the padded labels and both lengths, ``tf`` sparse labels (each row's first
        ``target_lengths[n]``) and the input lengths. A value outside int32, or for ``tf`` a
        target length < 0 or > S (sparse labels cannot say it), is UnsupportedProblem."""
        if self.tf is None:
            self.prepare()
        tf = self.tf
        targets, target_lengths = np.asarray(targets), np.asarray(target_lengths)
        input_lengths = np.asarray(input_lengths)
        if not self.dense:
            bad = np.flatnonzero((target_lengths < 0) | (target_lengths > targets.shape[1]))
            if len(bad):
                raise UnsupportedProblem(
                    f"{self.name}: sparse labels cannot express a target length < 0 or > the "
                    f"padded width {targets.shape[1]} (samples {bad[:5].tolist()})")
        mask = (np.arange(targets.shape[1])[None, :] < target_lengths[:, None]  # (N, S)
                if not self.dense else np.ones(targets.shape, bool))
        int32 = np.iinfo(np.int32)
        for what, values in (("label", targets[mask]), ("input length", input_lengths),
                             ("target length", target_lengths if self.dense else mask[:0])):
            if values.size and (values.min() < int32.min or values.max() > int32.max):
                raise UnsupportedProblem(f"{self.name}: TF's CTC takes int32, and one {what} "
                                         "does not fit in int32")
        logit_length = tf.constant(input_lengths.astype(np.int32))  # (N,)
        if self.dense:
            labels = tf.constant(targets.astype(np.int32))  # (N, S)
            label_length = tf.constant(target_lengths.astype(np.int32))  # (N,)
        else:
            labels = tf.SparseTensor(np.argwhere(mask).astype(np.int64),
                                     targets[mask].astype(np.int32), targets.shape)
            label_length = None  # the sparse form carries the lengths
        x = tf.constant(np.asarray(logits))  # (T, N, C)
        weights = tf.ones([x.shape[1]], x.dtype)  # (N,) d sum(loss) / d loss
        loss, grad = self._loss_and_grad(x, labels, label_length, logit_length, weights, blank)
        return loss.numpy(), None if grad is None else grad.numpy()

    def _inputs(self, problem: CTCProblem, grad_weights) -> tuple:
        """The arguments of ``_loss_and_grad``, as TensorFlow objects."""
        check_dtype(problem, self.name, self.dtypes)
        if self._neg_inf_behaviour is not None:  # None: -inf logits are handled right
            refuse_neg_inf(problem, self.name, self._neg_inf_behaviour)
        if self._infeasible_behaviour is not None:  # None: the loss is inf, as it should be
            refuse_infeasible(problem, self.name, self._infeasible_behaviour)
        if self.tf is None:
            self.prepare()
        tf = self.tf
        labels, label_length = self._labels(problem)
        logits = tf.constant(problem.clean_logits(np.dtype(problem.dtype)))  # (T, N, C)
        logit_length = tf.constant(problem.input_lengths.astype(np.int32))  # (N,)
        blank = problem.blank  # a Python int: the dense path branches on it while tracing
        weights = tf.constant(np.ones(problem.shape[1]) if grad_weights is None
                              else np.asarray(grad_weights, np.float64), logits.dtype)  # (N,)
        return logits, labels, label_length, logit_length, weights, blank

    _infeasible_behaviour = "TF's C++ kernel raises 'Not enough time for target transition sequence'"
    _neg_inf_behaviour = ("TensorFlow gives a gradient to a sample whose target passes through a "
                          "probability-0 label (the dense path: a NaN loss)")


class TFDenseBackend(TFBackend):
    """tf.nn.ctc_loss with dense labels: TensorFlow's pure-TF ctc_loss_dense (float32 only)."""

    name = "tf-dense"
    dense = True
    timeout_s = 60.0  # its Python-level loop is slow on long inputs; fail those, do not wait
    dtypes = ("float32",)  # float64 fails inside TF on an internal float32 constant
    _infeasible_behaviour = "the dense path returns a finite loss (hundreds) with a gradient"

    def _labels(self, problem: CTCProblem):
        labels, _ = padded_labels(problem)  # (N, L')
        return (self.tf.constant(labels),
                self.tf.constant(problem.target_lengths.astype(np.int32)))
