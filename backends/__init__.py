"""Built-in CTC backends, one module each; installed as ``ctcbench.backends``."""
