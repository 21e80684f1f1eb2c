"""The limit search alone: doubling then bisection finds a planted cliff to the step."""
from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from ctcbench.datasheet.search import Outcome, largest_correct


def cliff_at(k: int, how: str = "wrong"):
    """A probe right up to ``k`` and ``how`` past it, and the sizes it was asked."""
    asked = []

    def probe(p):
        asked.append(p)
        return Outcome("ok") if p <= k else Outcome(how, f"past {k}")
    return probe, asked


@settings(max_examples=200, deadline=None)
@given(start=st.integers(1, 64), k=st.integers(0, 10**6))
def test_a_planted_cliff_is_found_to_the_step(start, k):
    """Right up to k, failing from k + 1: the search says exactly that, doubling once per bit
    of k / start and bisecting once per bit of the gap left (at most k)."""
    probe, asked = cliff_at(k)
    limit = largest_correct("T", probe, start=start, cap=2**22, deadline=time.monotonic() + 60)
    if k < start:
        assert limit.correct is None and limit.failing == start and asked == [start]
    else:
        assert (limit.correct, limit.failing) == (k, k + 1)
    assert limit.exact and limit.past.status == "wrong" and limit.stopped is None
    assert len(asked) <= ((k + 1) // start).bit_length() + 1 + k.bit_length() + 1


def test_no_cliff_below_the_cap_is_at_least_the_cap():
    """A probe that is always right: correct up to at least the cap, said so."""
    probe, asked = cliff_at(10**9)
    limit = largest_correct("N", probe, start=3, cap=1000, deadline=time.monotonic() + 60)
    assert (limit.correct, limit.failing) == (1000, None)
    assert asked == [3, 6, 12, 24, 48, 96, 192, 384, 768, 1000]
    assert "largest size searched (1000)" in limit.stopped and not limit.exact


def test_a_size_that_does_not_fit_is_never_run():
    """``fits`` false from 300 on: the search stops before it, naming memory."""
    probe, asked = cliff_at(10**9)
    limit = largest_correct("C", probe, start=2, cap=10**6, deadline=time.monotonic() + 60,
                            fits=lambda p: p < 300)
    assert max(asked) == 256 and limit.correct == 256 and limit.failing is None
    assert "memory" in limit.stopped


def test_the_deadline_stops_doubling_but_a_bisection_under_way_may_finish():
    """Past the doubling deadline no larger size is tried; the bisection goes on until its
    own deadline, so the cliff is exact."""
    probe, asked = cliff_at(1000)
    limit = largest_correct("L", probe, start=1, cap=2**20, deadline=time.monotonic() - 1)
    assert asked == [] and limit.correct is None and limit.failing is None
    slow_asked = []

    def slow(p):  # each probe "takes" the rest of the doubling budget
        slow_asked.append(p)
        return Outcome("ok") if p <= 1000 else Outcome("crashes")
    end = time.monotonic() + 60
    limit = largest_correct("L", slow, start=1024, cap=2**20, deadline=time.monotonic() - 1,
                            bisect_until=end)
    assert slow_asked == []  # the deadline had passed before the first size
    limit = largest_correct("L", slow, start=512, cap=2**20, deadline=time.monotonic() + 60,
                            bisect_until=end)
    assert (limit.correct, limit.failing, limit.past.status) == (1000, 1001, "crashes")


def test_the_clock_stands_still_while_paused():
    """Time spent inside ``paused()`` (a worker's restart) is not on the clock."""
    from ctcbench.datasheet.search import Clock
    clock = Clock()
    before = clock.now()
    with clock.paused():
        time.sleep(0.3)
    assert clock.now() - before < 0.1
