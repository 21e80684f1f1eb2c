"""``ctcbench datasheet``: one page per CTC implementation: its limits, worst precision, bad input, speed."""
