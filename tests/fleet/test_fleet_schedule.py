"""The pair schedule (Acceptance 2): every pair exactly once, no host twice in a round, byes for odd counts."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError
from tensorfabric.fleet.schedule import ring, round_robin, schedule


def _disjoint(rounds: tuple[tuple[tuple[int, int], ...], ...]) -> bool:
    return all(len({h for p in r for h in p}) == 2 * len(r) for r in rounds)


@pytest.mark.parametrize("n", range(2, 65))
def test_round_robin_measures_every_pair_once_in_the_fewest_rounds(n: int) -> None:
    sched = round_robin(n)
    pairs = sched.pairs
    assert sorted(pairs) == list(itertools.combinations(range(n), 2))  # every pair, exactly once
    assert all(a < b for a, b in pairs)
    assert _disjoint(sched.rounds)  # no host in two pairs of one round
    # n-1 rounds of n/2 pairs; an odd count cannot do better than n rounds of (n-1)/2 (one bye each)
    assert len(sched.rounds) == (n - 1 if n % 2 == 0 else n)
    assert all(len(r) == n // 2 for r in sched.rounds)
    if n % 2:
        assert all(len(b) == 1 for b in sched.byes)
        assert sorted(b[0] for b in sched.byes) == list(range(n))  # everyone sits out exactly once
    else:
        assert all(b == () for b in sched.byes)


@given(n=st.integers(2, 64), mode=st.sampled_from(["all", "ring"]))
@settings(max_examples=25, deadline=None)
def test_partner_is_symmetric_and_byes_are_idle(n: int, mode: str) -> None:
    sched = schedule(n, mode)
    for index, (pairs, byes) in enumerate(zip(sched.rounds, sched.byes, strict=True)):
        for a, b in pairs:
            assert sched.partner(index, a) == b and sched.partner(index, b) == a
        assert all(sched.partner(index, h) is None for h in byes)
        assert set(byes) | {h for p in pairs for h in p} == set(range(n))


@pytest.mark.parametrize("n", range(2, 65))
def test_ring_pairs_each_host_with_its_neighbours(n: int) -> None:
    sched = ring(n)
    expected = {(0, 1)} if n == 2 else {tuple(sorted((i, (i + 1) % n))) for i in range(n)}
    assert sorted(sched.pairs) == sorted(expected) and len(sched.pairs) == len(expected)
    assert _disjoint(sched.rounds)
    assert len(sched.rounds) == (1 if n == 2 else 2 if n % 2 == 0 else 3)


def test_small_and_empty_schedules() -> None:
    assert round_robin(1).rounds == () and ring(1).rounds == ()
    assert schedule(5, "none").pairs == ()
    assert round_robin(3).to_dict() == {"mode": "all", "hosts": 3, "rounds": [[[1, 2]], [[0, 2]], [[0, 1]]],
                                        "byes": [[0], [1], [2]]}


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_bad_counts_and_modes_are_input_errors(bad: object) -> None:
    with pytest.raises(InputError):
        round_robin(bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="all, ring, none"):
        schedule(4, "star")
