"""The case library: edge cases with known answers, one data file per family."""
