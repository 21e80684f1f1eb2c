"""Decoder and aligner adapters (the contract: :mod:`ctcbench.runtime.decoders`).

``own``: ctcbench's greedy, prefix beam and Viterbi; the others wrap a third party's decoder
or aligner each (``tf``, ``keras``, ``fastctc``, ``flashlight``, ``ctcseg``).
"""
