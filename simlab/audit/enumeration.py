"""Exact output distributions: the target chain's own, and the one speculative decoding produces under a
verify-length scheduler, enumerated over every draft block and every verification branch.

A request runs rounds until N tokens exist. Each round: draft x_1..x_gamma, compute the head's confidences,
let the scheduler pick l, verify x_1..x_l, emit the accepted prefix plus one token, truncate at N. Branches
that reach the same state are merged: the state is the emitted tokens and, for a lagged scheduler, the
confidences of the last ``lag`` rounds (the only things later rounds can depend on).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

from simlab.audit.decisions import Confidences, VerifyLengthChooser
from simlab.audit.problem import AuditedScheduler, AuditProblem, ExactChain
from simlab.audit.rounds import RoundEnumerator
from simlab.audit.tree_rounds import tree_distribution, tree_label

Sequence = tuple[int, ...]
Distribution = dict[Sequence, Fraction]


@dataclass(frozen=True)
class SchedulerVerdict:
    """One scheduler's exact distribution of the first N output tokens and its distance from the target's."""

    label: str
    distribution: Distribution
    tv: Fraction
    registry_lossless: bool

    @property
    def lossless(self) -> bool:
        """True when the distribution is exactly the target's (TV is exactly 0)."""
        return self.tv == 0


@dataclass(frozen=True)
class AuditResult:
    """The verdicts of every audited scheduler, in the file's order, and the target's own distribution."""

    problem: AuditProblem
    target: Distribution
    verdicts: tuple[SchedulerVerdict, ...]


def target_distribution(chain: ExactChain, length: int) -> Distribution:
    """The joint distribution of the chain's first ``length`` tokens."""
    paths: Distribution = {(): Fraction(1)}
    for _ in range(length):
        paths = {
            seq + (x,): p * q
            for seq, p in paths.items()
            for x, q in enumerate(chain.next(seq[-1] if seq else None))
            if q > 0
        }
    return paths


def scheduler_distribution(problem: AuditProblem, audited: AuditedScheduler) -> Distribution:
    """The exact joint distribution of the first N tokens emitted under ``audited``'s verify lengths."""
    rounds = RoundEnumerator(problem.target, problem.draft, problem.gamma)
    choose = VerifyLengthChooser(audited.scheduler, problem.gamma, problem.sps, problem.draft_s,
                                 prior=problem.prior_confidence)
    lag, n = choose.lag, problem.num_output_tokens
    finished: Distribution = defaultdict(Fraction)
    frontier: dict[tuple[Sequence, tuple[Confidences, ...]], Fraction] = {((), ()): Fraction(1)}
    while frontier:
        following: dict[tuple[Sequence, tuple[Confidences, ...]], Fraction] = defaultdict(Fraction)
        for (emitted, history), p_state in frontier.items():
            anchor = emitted[-1] if emitted else None
            lagged = history[0] if lag and len(history) == lag else None  # None: the prior stands in
            for block, p_block in rounds.blocks(anchor):
                conf = problem.confidence.block(block)
                length = choose(conf, lagged)
                kept = (history + (conf,))[-lag:] if lag else ()
                for tokens, p_branch in rounds.verify(anchor, block[:length]):
                    out = (emitted + tokens)[:n]
                    p = p_state * p_block * p_branch
                    if len(out) == n:
                        finished[out] += p
                    else:
                        following[(out, kept)] += p
        frontier = following
    return dict(finished)


def total_variation(p: Distribution, q: Distribution) -> Fraction:
    """Half the L1 distance between two distributions over sequences (exact)."""
    keys = set(p) | set(q)
    return sum((abs(p.get(k, Fraction(0)) - q.get(k, Fraction(0))) for k in keys), Fraction(0)) / 2


def run_audit(problem: AuditProblem) -> AuditResult:
    """Enumerate every scheduler of ``problem`` and compare it with the target chain."""
    target = target_distribution(problem.target, problem.num_output_tokens)
    verdicts = []
    for audited in problem.schedulers:
        dist = scheduler_distribution(problem, audited)
        verdicts.append(
            SchedulerVerdict(
                label=audited.label,
                distribution=dist,
                tv=total_variation(dist, target),
                registry_lossless=audited.scheduler.lossless,
            )
        )
    for tree in problem.trees:  # verified whole: recursive rejection sampling is lossless for any tree
        dist = tree_distribution(problem, tree)
        verdicts.append(SchedulerVerdict(label=tree_label(tree), distribution=dist,
                                         tv=total_variation(dist, target), registry_lossless=True))
    return AuditResult(problem=problem, target=target, verdicts=tuple(verdicts))
