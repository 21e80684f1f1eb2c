"""`python -m ctcbench`: the command line, as the `ctcbench` script runs it."""
from ctcbench.cli import main

if __name__ == "__main__":
    main()
