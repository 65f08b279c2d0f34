"""Tree verification, enumerated exactly: a round drafts a tree (each node's children drawn independently from
the draft chain after the node's token) and verifies it by recursive rejection sampling, SpecInfer's multi-draft
speculative sampling (docs/audit.md, "Draft trees").

At a node whose token is ``s`` (the anchor at the root), with target residual ``p`` (the target's next
distribution after ``s`` on arrival), the children ``x_1 .. x_k`` are tried in order: ``x_i`` is accepted with
probability ``min(1, p(x_i) / q(x_i))`` (``q``: the draft's distribution after ``s``) and the round descends into
its subtree; a rejection replaces ``p`` by ``norm(max(0, p - q))`` before the next child. When every child is
rejected the round emits one token from the last residual; a leaf that is accepted emits the target's bonus
token. With ``residual=False`` a rejection leaves ``p`` unchanged: the naive rule, not lossless.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from functools import lru_cache
from typing import Optional

from simlab.audit.problem import AuditProblem, ExactChain

Branch = tuple[tuple[int, ...], Fraction]  # (tokens emitted by the round, probability)


def _residual(p: tuple[Fraction, ...], q: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
    left = [max(Fraction(0), a - b) for a, b in zip(p, q)]
    mass = sum(left, Fraction(0))
    return tuple(x / mass for x in left)


class TreeRoundEnumerator:
    """Every branch of one tree round: ``branching[d]`` children per node at depth d (the root's first)."""

    def __init__(self, target: ExactChain, draft: ExactChain, branching: tuple[int, ...], *, residual: bool = True
                 ) -> None:
        self.target, self.draft, self.branching, self.residual = target, draft, tuple(branching), residual
        self.round = lru_cache(maxsize=None)(self._node)

    def _node(self, token: Optional[int], depth: int) -> tuple[Branch, ...]:
        """What the round emits from a node whose token is ``token`` (None: the start), ``depth`` levels deep."""
        p = tuple(self.target.next(token))
        if depth == len(self.branching):  # an accepted leaf: the bonus token
            return tuple(((y,), w) for y, w in enumerate(p) if w > 0)
        return self._children(token, depth, p, 0)

    def _children(self, token: Optional[int], depth: int, p: tuple[Fraction, ...], i: int) -> tuple[Branch, ...]:
        """Children i.. of the node, tried in order against the residual ``p``."""
        if i == self.branching[depth]:  # every child rejected: a token from the last residual
            return tuple(((y,), w) for y, w in enumerate(p) if w > 0)
        q = tuple(self.draft.next(token))
        out: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
        rejected = Fraction(0)  # the probability that child i is drafted and rejected
        for x, qx in enumerate(q):
            if qx == 0:
                continue
            accept = min(Fraction(1), p[x] / qx)
            if accept > 0:
                for tokens, w in self.round(x, depth + 1):
                    out[(x,) + tokens] += qx * accept * w
            rejected += qx * (1 - accept)
        if rejected > 0:  # what follows a rejection does not depend on which child was rejected
            after_rejection = _residual(p, q) if self.residual else p
            for tokens, w in self._children(token, depth, after_rejection, i + 1):
                out[tokens] += rejected * w
        return tuple(out.items())


def tree_distribution(problem: AuditProblem, branching: tuple[int, ...], *, residual: bool = True
                      ) -> dict[tuple[int, ...], Fraction]:
    """The exact joint distribution of the first N tokens when every round drafts and verifies the tree."""
    rounds = TreeRoundEnumerator(problem.target, problem.draft, branching, residual=residual)
    n = problem.num_output_tokens
    finished: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    frontier: dict[tuple[int, ...], Fraction] = {(): Fraction(1)}
    while frontier:
        following: dict[tuple[int, ...], Fraction] = defaultdict(Fraction)
        for emitted, p_state in frontier.items():
            for tokens, p in rounds.round(emitted[-1] if emitted else None, 0):
                out = (emitted + tokens)[:n]
                (finished if len(out) == n else following)[out] += p_state * p
        frontier = following
    return dict(finished)


def tree_label(branching: tuple[int, ...]) -> str:
    return "tree(" + "x".join(str(b) for b in branching) + ")"
