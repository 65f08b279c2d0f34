"""One speculative round, enumerated exactly: the blocks the drafter may propose and, for a verify length,
every accept / reject / resample / bonus branch of standard speculative sampling with its probability."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Optional

from simlab.audit.problem import ExactChain

Branch = tuple[tuple[int, ...], Fraction]  # (tokens, probability)


class RoundEnumerator:
    """The exact branches of one round for a target and a draft chain (results are memoised)."""

    def __init__(self, target: ExactChain, draft: ExactChain, gamma: int) -> None:
        self.target = target
        self.draft = draft
        self.gamma = gamma
        self.blocks = lru_cache(maxsize=None)(self._blocks)
        self.verify = lru_cache(maxsize=None)(self._verify)

    def _blocks(self, anchor: Optional[int]) -> tuple[Branch, ...]:
        """Every block x_1..x_gamma the drafter can propose after ``anchor``, with its probability.

        x_1 follows the anchor (the last emitted token; ``start`` when nothing has been emitted), and each
        x_k follows x_{k-1}. Blocks of probability 0 are left out.
        """
        blocks: list[Branch] = [((), Fraction(1))]
        for _ in range(self.gamma):
            grown: list[Branch] = []
            for tokens, p in blocks:
                row = self.draft.next(tokens[-1] if tokens else anchor)
                grown += [(tokens + (x,), p * q) for x, q in enumerate(row) if q > 0]
            blocks = grown
        return tuple(blocks)

    def _verify(self, anchor: Optional[int], verified: tuple[int, ...]) -> tuple[Branch, ...]:
        """What the round emits when the target verifies the drafted tokens ``verified`` (the first l of
        the block): the accepted prefix, then one token from the residual norm(max(0, p_t - p_d)) at the first
        rejection, or the bonus token from the target's next distribution when all l are accepted. With
        l = 0 the round emits one token drawn from the target."""
        branches: list[Branch] = []
        survive = Fraction(1)
        previous = anchor
        for k, x in enumerate(verified):
            p_t, p_d = self.target.next(previous), self.draft.next(previous)
            accept = min(Fraction(1), p_t[x] / p_d[x])  # p_d[x] > 0: x was drafted
            if accept < 1:
                residual = [max(Fraction(0), t - d) for t, d in zip(p_t, p_d)]
                mass = sum(residual, Fraction(0))
                for y, r in enumerate(residual):
                    if r > 0:
                        branches.append((verified[:k] + (y,), survive * (1 - accept) * r / mass))
            survive *= accept
            if survive == 0:
                return tuple(branches)
            previous = x
        bonus = self.target.next(previous)
        branches += [(verified + (y,), survive * q) for y, q in enumerate(bonus) if q > 0]
        return tuple(branches)
