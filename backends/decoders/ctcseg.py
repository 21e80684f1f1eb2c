"""Aligner ``ctc-segmentation``: the ``ctc-segmentation`` package's CTC segmentation.

``ctc_segmentation(config, lpz, ground_truth)`` (Kürzinger et al., "CTC-Segmentation of Large
Corpora for German End-to-end Speech Recognition", 2020, arXiv:2007.09127) aligns a text to
log-probabilities ``lpz (T, C)`` for cutting long audio into utterances. Its ground truth,
from ``prepare_token_list(config, [target])``, is ``[-1, blank, l1, ..., lL, blank]``: a
start state (``#``), then one state per token, the blanks being states of their own (one
before, one after; none for an empty target's end), none between the labels. Its table (a
max-plus recursion, float32) enters a state at a frame with that state's log-probability
and stays in it at the best of the blank's and the state's own; the start state holds frame
0 and stays for free (the preamble), and the alignment ends at the frame where the last
state's table value is highest. It returns the time of each token, ``state_list (T,)``: the
name of the state entered at each frame, ``"ε"`` for a stay (the preamble's after frame 0
included), ``""`` for frame 0 and the frames past the end; and ``char_probs (T,)``, what its
backtracking gives each frame: the entered state's log-probability, a stay's best of the
blank's and the state's, the blank's in the preamble, 0 at frame 0 and past the end.

That is no CTC alignment, and this adapter does not make one of it: the path it returns has,
at each frame where a state is entered, that state's class (so the blank for the two blank
states), and the blank at every other frame (a stay, whose class ctc-segmentation does not
say, the preamble, the tail). Its score is ``char_probs.sum()``, not a path's
log-probability (score ``none``). Two repeated labels may be entered on consecutive frames,
a path CTC's map reads as one label. The parameters are ctc-segmentation's defaults
(``CtcSegmentationParameters()``; its window, 8000 frames, holds a shorter input whole), its
``char_list`` the class numbers. It refuses a ground truth longer than the input
(``AssertionError: Audio is shorter than text!``): fewer than ``len(target) + 3`` frames (2
for an empty target), where CTC needs ``len(target)`` plus one per adjacent repeat; the
adapter raises that as a ValueError naming the target.
"""
from __future__ import annotations

import numpy as np

from .._thirdparty import require


class CTCSegmentationAligner:
    """ctc_segmentation.ctc_segmentation with its default parameters."""

    name = "ctc-segmentation"
    role = "aligner"
    score = "none"
    blank = "any"
    dtype = "float32"  # what it computes in
    packages = ("ctc_segmentation",)
    conventions = ("config.blank=blank; a state path: the class of the state entered at each "
                   "frame, else blank (a stay, the free preamble from frame 0, past the end); "
                   "score: the sum of its char_probs, not a path's log-probability")

    def __init__(self):
        require(("ctc_segmentation",), extra="decoders")

    def align(self, log_probs, target, *, blank: int):
        import ctc_segmentation as cs
        T, C = log_probs.shape
        names = [str(c) for c in range(C)]  # never its "ε" (a stay) nor "" (no state)
        config = cs.CtcSegmentationParameters(char_list=names, blank=blank)
        ground_truth, _ = cs.prepare_token_list(config, [np.asarray(target, dtype=np.int64)])
        try:
            _, char_probs, states = cs.ctc_segmentation(config, np.asarray(log_probs),
                                                        ground_truth)
        except AssertionError as exc:  # "Audio is shorter than text!"
            labels = [int(k) for k in target]
            raise ValueError(f"target: ctc-segmentation refuses {labels} in {T} frames ({exc} "
                             f"its ground truth has {len(ground_truth)} states)") from None
        index = {name: c for c, name in enumerate(names)}
        path = [index.get(state, blank) for state in states]  # "ε" and "" -> blank
        return [path, float(np.sum(char_probs))]
