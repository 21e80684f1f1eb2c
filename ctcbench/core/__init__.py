"""The core every driver shares: the problem, the CTC math, the reductions, the float64
reference forward–backward and the independent oracles it is checked against."""
