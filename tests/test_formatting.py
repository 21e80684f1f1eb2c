"""The report's number filters: missing values are empty strings, never None or nan."""
import math

import pytest

from ctcbench.formatting import ms, num, ratio, sig, sort_key


@pytest.mark.parametrize("value", [None, math.nan, "", "nan", "None"])
def test_missing_values_are_empty(value):
    """None, NaN and their JSON spellings render as '' in every filter."""
    assert num(value) == ms(value) == ratio(value) == sig(value) == sort_key(value) == ""


def test_numbers_for_people():
    """Closed forms: 0.00123 s is 1.23 ms, 1234.5 is 1,234 (3 digits, no exponent), inf is ∞."""
    assert ms(0.00123) == "1.23" and ms(0.25) == "250"
    assert sig(1234.5) == "1,234" and sig(0.031234) == "0.0312"
    assert ratio(0.5) == "0.50×" and num(math.inf) == "∞" and num("inf") == "∞"
    assert num(7, "d") == "7" and float(sort_key(2.5)) == 2.5
