"""``ctcbench convergence``: train small line recognisers with CTC and record how they converge.

Modules: ``data`` (offline line images), ``models``, ``ctc`` (the loss through the registry),
``decode`` (greedy and prefix beam search, CER), ``train`` (one run), ``grid`` (many runs in
parallel processes), ``plots``, ``predict``.
"""
