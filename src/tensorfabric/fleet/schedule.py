"""Which pairs of hosts the data-path test measures, and in which rounds.

``all``: the round-robin (circle) method. Host 0 stays put while the others rotate one seat per round; in each round
seat ``i`` plays seat ``n-1-i``. For an even count that gives ``n-1`` rounds of ``n/2`` disjoint pairs and every pair
exactly once. For an odd count a phantom host is added and whoever meets it sits the round out (a bye), so ``n``
rounds of ``(n-1)/2`` pairs: ``n(n-1)/2`` pairs cannot fit in fewer rounds when a round holds at most ``(n-1)/2``.

``ring``: host ``i`` with host ``i+1`` (and the last with the first): ``n`` pairs, enough to see a slow host (both its
pairs slow) at a cost linear in ``n``, in two rounds (three when ``n`` is odd: the closing pair would share a host
with the first one).

``none``: no pairs; only the cross-host rules run.

Every pair of one round runs at once, so no host is in two pairs of a round; a pair is ``(a, b)`` with ``a < b``
(ranks, not names), and ``a`` drives the exchange.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tensorfabric.errors import InputError

__all__ = ["PAIR_MODES", "PairMode", "Schedule", "ring", "round_robin", "schedule"]

PairMode = Literal["all", "ring", "none"]
PAIR_MODES: tuple[PairMode, ...] = ("all", "ring", "none")
Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Schedule:
    """Rounds of disjoint pairs over ``hosts`` ranks; ``byes[i]`` are the ranks idle in round ``i``."""

    mode: PairMode
    hosts: int
    rounds: tuple[tuple[Pair, ...], ...]
    byes: tuple[tuple[int, ...], ...]

    @property
    def pairs(self) -> tuple[Pair, ...]:
        return tuple(p for r in self.rounds for p in r)

    def partner(self, round_index: int, rank: int) -> int | None:
        """``rank``'s partner in round ``round_index``, or None when it sits the round out."""
        for a, b in self.rounds[round_index]:
            if rank in (a, b):
                return b if rank == a else a
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "hosts": self.hosts, "rounds": [[list(p) for p in r] for r in self.rounds],
                "byes": [list(b) for b in self.byes]}


def _check(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"hosts: {n!r} must be a positive whole number of hosts")


def _rounds(n: int, rounds: list[list[Pair]]) -> Schedule:
    return Schedule("all", n, tuple(tuple(r) for r in rounds),
                    tuple(tuple(h for h in range(n) if not any(h in p for p in r)) for r in rounds))


def round_robin(n: int) -> Schedule:
    """Every pair of ``n`` ranks exactly once: ``n-1`` rounds for even ``n``, ``n`` (one bye each) for odd."""
    _check(n)
    if n < 2:
        return Schedule("all", n, (), ())
    seats = list(range(n)) + ([-1] if n % 2 else [])  # -1: the phantom whose partner sits out
    m = len(seats)
    rounds: list[list[Pair]] = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = seats[i], seats[m - 1 - i]
            if a >= 0 and b >= 0:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        seats = [seats[0], seats[-1], *seats[1:-1]]  # rotate everyone but seat 0 by one
    return _rounds(n, rounds)


def ring(n: int) -> Schedule:
    """``i`` with ``i+1 mod n``: ``n`` pairs (one for ``n = 2``) in two rounds, three for odd ``n``."""
    _check(n)
    if n < 2:
        return Schedule("ring", n, (), ())
    if n == 2:
        return Schedule("ring", 2, (((0, 1),),), ((),))
    edges = [(i, i + 1) for i in range(n - 1)] + [(0, n - 1)]
    even = [e for k, e in enumerate(edges[:-1]) if k % 2 == 0]
    odd = [e for k, e in enumerate(edges[:-1]) if k % 2 == 1]
    closing = edges[-1]
    rounds = [even, odd]
    if n % 2 == 0:
        odd.append(closing)  # edges 1, 3, .., n-3 never touch 0 or n-1
    else:
        rounds.append([closing])
    sched = _rounds(n, [sorted(r) for r in rounds])
    return Schedule("ring", n, sched.rounds, sched.byes)


def schedule(n: int, mode: str = "all") -> Schedule:
    """The schedule ``--pairs MODE`` asks for over ``n`` ranks."""
    if mode == "all":
        return round_robin(n)
    if mode == "ring":
        return ring(n)
    if mode == "none":
        _check(n)
        return Schedule("none", n, (), ())
    raise InputError(f"--pairs: {mode!r} is not one of {', '.join(PAIR_MODES)}")
