"""The self-fuzz suite: generated input for every file, tensor, option and run folder ctcbench reads."""
