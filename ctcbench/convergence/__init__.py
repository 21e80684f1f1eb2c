"""``ctcbench convergence``: train small line recognisers with CTC and record how they converge.

Modules: ``config`` (the settings, declared once on the config dataclasses: checks, TOML
files, resume conflicts), ``options`` (the command-line options generated from them),
``data`` (offline line images), ``models``, ``ctc`` (the loss through the registry),
``decode`` (greedy and prefix beam search, CER), ``train`` (one run), ``grid`` (many runs in
parallel processes), ``plots``, ``predict``.
"""
