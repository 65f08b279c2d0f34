"""Draft trees (EAGLE-2/3's dynamic trees): the tree a drafter builds, its expected tokens per round, and the
tokens a round accepts given where the target's tokens rank among the drafter's candidates (docs/acceptance.md,
"Draft trees").

**Rank model.** At depth d (1-based), when the path so far was accepted, the target's token is the drafter's
top-1 candidate with probability ``alpha[d-1]`` (the chain's conditional acceptance at position d); of the
tokens the top-1 misses, the 2nd candidate catches the share ``catch``, of those left the 3rd the same share, and
so on: the i-th candidate, i >= 2, with probability ``(1 - alpha) catch (1 - catch)^(i - 2)``. ``catch = 0``: a
tree is worth no more than its chain; ``catch = 1``: the 2nd candidate catches every miss.

**The tree** is built as EAGLE-2/3 and SGLang build it, with a calibrated drafter (its joint scores are the
probabilities that paths are accepted): the root's ``topk`` best children; at each further depth the ``topk`` most
probable nodes of the last depth each propose their ``topk`` best children; every proposed node is a candidate,
and the ``num_draft_tokens - 1`` most probable candidates are verified (a node is never more probable than its
parent, so they form a tree). With ``topk = 1`` it is the chain of ``depth`` tokens.

**A round** accepts the longest path whose every token the target sampled: walking from the root, the child of
the target's rank at each depth, while the tree has it. Tokens per round = accepted + 1 (the target's own).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DraftTree:
    """Nodes 1..n (0 is the root, the last accepted token): ``parent``, ``rank`` (1-based, among the parent's
    candidates), ``depth`` and ``path_prob`` (the probability that the target accepts the path to it)."""

    parent: np.ndarray
    rank: np.ndarray
    depth: np.ndarray
    path_prob: np.ndarray
    max_rank: int

    @property
    def num_nodes(self) -> int:
        """Draft tokens verified per round (the root not counted)."""
        return len(self.parent) - 1

    @property
    def max_depth(self) -> int:
        return int(self.depth.max(initial=0))

    def expected_tokens_per_round(self) -> float:
        """E[accepted + 1] = 1 + the sum over nodes of the probability that the path to it is accepted."""
        return 1.0 + float(self.path_prob[1:].sum())

    def children(self) -> np.ndarray:
        """[n + 1, max_rank + 1]: the node that is ``rank`` child of a node (0: none)."""
        table = np.zeros((len(self.parent), self.max_rank + 1), dtype=np.int64)
        for node in range(1, len(self.parent)):
            table[self.parent[node], self.rank[node]] = node
        return table


def rank_probs(alpha: float, catch: float, max_rank: int) -> np.ndarray:
    """[max_rank] P(the target's token is the drafter's i-th candidate), i = 1..max_rank."""
    # (1 - catch)^(i - 2) as repeated products (exact IEEE operations), not np.power, whose SIMD implementations
    # differ in the last bit between CPUs (docs/architecture.md, "The same answer on every machine")
    powers = np.cumprod(np.concatenate([[1.0], np.full(max(max_rank - 2, 0), 1.0 - catch)]))[:max_rank - 1]
    return np.concatenate([[alpha], (1.0 - alpha) * catch * powers])


def build_tree(alpha, catch: float, topk: int, num_draft_tokens: int, depth: int) -> DraftTree:
    """The dynamic tree of ``num_draft_tokens - 1`` draft tokens, at most ``depth`` deep and ``topk`` wide per node.

    ``alpha``: the conditional acceptance of positions 1..depth (the chain's)."""
    alpha = np.asarray(alpha, dtype=float)
    if len(alpha) < depth:
        raise ValueError(f"alpha gives {len(alpha)} positions, the tree is {depth} deep")
    if not 1 <= num_draft_tokens - 1 <= max_tokens(topk, depth):
        raise ValueError(f"{num_draft_tokens - 1} draft tokens do not fit a tree of depth {depth} and topk {topk} "
                         f"(at most {max_tokens(topk, depth)})")
    # candidates: (parent candidate index or -1 for the root, rank, depth, path probability)
    candidates: list[tuple[int, int, int, float]] = []
    frontier = [(-1, 1.0)]  # (candidate index, path probability) of the nodes expanded next
    for d in range(1, depth + 1):
        q = rank_probs(float(alpha[d - 1]), catch, topk)
        proposed = []
        for parent, prob in frontier:
            for r in range(1, topk + 1):
                candidates.append((parent, r, d, prob * float(q[r - 1])))
                proposed.append(len(candidates) - 1)
        # the topk most probable of this depth's candidates are expanded (ties: the earlier proposed)
        best = heapq.nsmallest(topk, proposed, key=lambda c: (-candidates[c][3], c))
        frontier = [(c, candidates[c][3]) for c in best]
    # the num_draft_tokens - 1 most probable candidates (ties: shallower, then earlier), in that order
    chosen = sorted(range(len(candidates)), key=lambda c: (-candidates[c][3], candidates[c][2], c))
    chosen = sorted(chosen[:num_draft_tokens - 1], key=lambda c: (candidates[c][2], c))
    index = {c: i + 1 for i, c in enumerate(chosen)}
    parent = [0] + [index[candidates[c][0]] if candidates[c][0] >= 0 else 0 for c in chosen]
    if any(candidates[c][0] >= 0 and candidates[c][0] not in index for c in chosen):
        raise AssertionError("the chosen candidates are not a tree")
    return DraftTree(
        parent=np.array(parent, dtype=np.int64),
        rank=np.array([0] + [candidates[c][1] for c in chosen], dtype=np.int64),
        depth=np.array([0] + [candidates[c][2] for c in chosen], dtype=np.int64),
        path_prob=np.array([1.0] + [candidates[c][3] for c in chosen]),
        max_rank=topk,
    )


def static_tree(paths: list[tuple[int, ...]], alpha, catch: float) -> DraftTree:
    """A tree given by its nodes' rank paths (``(1,), (2,), (1, 1), ...``, vLLM's ``speculative_token_tree``)."""
    alpha = np.asarray(alpha, dtype=float)
    order = sorted(set(paths), key=lambda p: (len(p), p))
    index = {(): 0}
    parent, rank, depth, prob = [0], [0], [0], [1.0]
    max_rank = max(max(p) for p in order)
    for path in order:
        if path[:-1] not in index:
            raise ValueError(f"the tree has {path} but not its parent {path[:-1]}")
        d, r = len(path), path[-1]
        index[path] = len(parent)
        parent.append(index[path[:-1]])
        rank.append(r)
        depth.append(d)
        prob.append(prob[index[path[:-1]]] * float(rank_probs(float(alpha[d - 1]), catch, max_rank)[r - 1]))
    return DraftTree(np.array(parent), np.array(rank), np.array(depth), np.array(prob), max_rank)


def max_tokens(topk: int, depth: int) -> int:
    """The most draft tokens a tree of ``depth`` and ``topk`` can hold: topk at depth 1, topk^2 at every deeper."""
    return topk + (depth - 1) * topk * topk


def target_ranks(uniforms: np.ndarray, alpha: np.ndarray, catch: float, max_rank: int) -> np.ndarray:
    """[..., depth] the target's rank at each depth (``max_rank + 1``: beyond every candidate) from uniforms in
    [0, 1): rank 1 when ``u < alpha``, as the chain's acceptance draw."""
    u = np.asarray(uniforms, dtype=float)
    alpha = np.asarray(alpha, dtype=float)
    ranks = np.full(u.shape, max_rank + 1, dtype=np.int64)
    edge = alpha.copy()
    below = np.zeros(u.shape, dtype=bool)
    for r in range(1, max_rank + 1):
        if r > 1:
            edge = edge + (1.0 - alpha) * catch * (1.0 - catch) ** (r - 2)
        hit = (u < edge) & ~below
        ranks[hit] = r
        below |= hit
    return ranks


def accepted(tree: DraftTree, ranks: np.ndarray) -> np.ndarray:
    """[...] draft tokens accepted, walking the tree along the target's ranks [..., depth]."""
    ranks = np.asarray(ranks, dtype=np.int64)
    table = tree.children()
    node = np.zeros(ranks.shape[:-1], dtype=np.int64)
    count = np.zeros(ranks.shape[:-1], dtype=np.int64)
    for d in range(min(ranks.shape[-1], tree.max_depth)):
        r = np.minimum(ranks[..., d], tree.max_rank + 1)
        nxt = np.where(r <= tree.max_rank, table[node, np.minimum(r, tree.max_rank)], 0)
        alive = (nxt > 0) & (node >= 0)
        count += alive
        node = np.where(alive, nxt, -1)
    return count


def chain_tokens_per_round(alpha) -> np.ndarray:
    """[K] tokens per round of chains of 1..K drafts: 1 + sum over positions of the product of acceptances."""
    return 1.0 + np.cumsum(np.cumprod(np.asarray(alpha, dtype=float)))


@dataclass(frozen=True)
class TreeDraws:
    """A tree arm's tree, as the draws and the engine read it: the accepted count of a round from the chain's
    accept uniforms and probabilities, and the tokens verified when a request may verify ``ell`` levels."""

    tree: DraftTree
    catch: float
    topk: int
    depth: int = 0  # levels drafted (the arm's gamma); the tree may be shallower. 0: the tree's own depth

    @property
    def num_nodes(self) -> int:
        return self.tree.num_nodes

    def accepted(self, uniforms: np.ndarray, accept_prob: np.ndarray) -> np.ndarray:
        """[M] draft tokens accepted: ranks from the chain's uniforms [M, G] and probabilities [M, G]."""
        return accepted(self.tree, target_ranks(uniforms, accept_prob, self.catch, self.tree.max_rank))

    def __post_init__(self) -> None:
        # a shallower tree than the levels drafted (few nodes, wide topk) is verified whole beyond its depth
        counts = np.bincount(self.tree.depth[1:], minlength=max(self.tree.max_depth, self.depth) + 1)
        object.__setattr__(self, "_within", np.add.accumulate(counts))

    def nodes_within(self) -> np.ndarray:
        """[depth + 1] draft tokens of depth at most ell, ell = 0..depth (a request near its end verifies the
        tree cut at the levels it may still emit; its KV lookahead slots are as many). ``depth`` is the levels
        drafted, or the tree's own depth if that is more."""
        return self._within
