"""The case library's format: loading case files, building their problems, their known answers.

The case files themselves live in the top-level ``cases/`` folder (installed as ``ctcbench.cases``).
"""
