"""An audit file turned into the exact tables the enumeration works on.

:func:`load_audit` reads and validates a YAML file and checks what the schema alone cannot (every symbol
known, every ``after`` table covering the vocabulary, rows summing to 1, sizes small enough to enumerate).
Symbols become indices 0..V-1 in ``vocab`` order; probability rows become tuples of exact fractions.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Optional

from simlab.audit.schema import PROBABILITY_HINT, AuditFile, MarkovTable
from simlab.common.errors import InputError
from simlab.common.schema_errors import validate
from simlab.common.yaml_file import read_yaml
from simlab.schedulers import Scheduler, make_scheduler

SUM_TOLERANCE = Fraction(1, 10**6)
"""How far from 1 a written row may sum; within it the row is rescaled exactly to sum to 1."""

MAX_BRANCHES = 2_000_000
"""Refuse files whose enumeration (estimated by :func:`branch_estimate`) would be larger than this."""

Row = tuple[Fraction, ...]


@dataclass(frozen=True)
class ExactChain:
    """A first-order Markov chain with exact probabilities, indexed by symbol number."""

    start: Row
    after: tuple[Row, ...]

    def next(self, previous: Optional[int]) -> Row:
        """The distribution of the next token given the previous one (None: nothing emitted yet)."""
        return self.start if previous is None else self.after[previous]


@dataclass(frozen=True)
class ConfidenceHead:
    """c_1 = ``start`` in every round; c_k = ``after[x_{k-1}]`` for k >= 2 (x_{k-1}: the previous drafted token)."""

    start: float
    after: tuple[float, ...]

    def block(self, drafted: tuple[int, ...]) -> tuple[float, ...]:
        """The confidences c_1..c_gamma of a drafted block."""
        return (self.start,) + tuple(self.after[x] for x in drafted[:-1])


@dataclass(frozen=True)
class AuditedScheduler:
    """A scheduler from the registry with its parameters bound, and the label it is reported under."""

    label: str
    scheduler: Scheduler


@dataclass(frozen=True)
class AuditProblem:
    """Everything the enumeration needs, exact where it matters."""

    vocab: tuple[str, ...]
    gamma: int
    num_output_tokens: int
    target: ExactChain
    draft: ExactChain
    confidence: ConfidenceHead
    prior_confidence: tuple[float, ...]
    sps: dict[int, float]
    schedulers: tuple[AuditedScheduler, ...]
    draft_s: tuple[float, ...] = ()  # seconds to draft d = 0..gamma positions (empty: free)
    trees: tuple[tuple[int, ...], ...] = ()  # draft trees: children per node at each depth

    def spell(self, sequence: tuple[int, ...]) -> str:
        """A token sequence as text: symbols joined directly when all are one character, else with spaces."""
        joiner = "" if all(len(s) == 1 for s in self.vocab) else " "
        return joiner.join(self.vocab[i] for i in sequence)


def load_audit(path: str | Path) -> AuditProblem:
    """Read, validate and compile an audit file; any problem is an :class:`InputError` naming the field."""
    path = Path(path)
    data = read_yaml(path, what="audit file")
    if not isinstance(data, dict):
        raise InputError(
            "an audit file must be a mapping", file=path, value="empty file" if data is None else type(data).__name__,
            valid="a YAML mapping with vocab, gamma, target, draft, confidence, sps, num_output_tokens, schedulers",
        )
    return build_problem(data, file=path)


def build_problem(data: Any, *, file: str | Path) -> AuditProblem:
    """Validate ``data`` (a parsed audit file) and compile it; ``file`` names it in error messages."""
    audit: AuditFile = validate(AuditFile, data, file=file)
    vocab = tuple(audit.vocab)
    index = {symbol: i for i, symbol in enumerate(vocab)}
    target = _chain(audit.target, "target", index, file)
    draft = _chain(audit.draft, "draft", index, file)
    confidence = ConfidenceHead(
        start=audit.confidence.start,
        after=_cover(audit.confidence.after, "confidence.after", index, file),
    )
    prior = _prior(audit, file)
    if 1 not in audit.sps:
        raise InputError(
            "no entry for B = 1 (a round that verifies nothing still runs one target step)",
            file=file, field="sps", value=dict(audit.sps), valid="a mapping of batch tokens to steps/s that includes 1",
        )
    schedulers = _schedulers(audit, file)
    draft_s: tuple[float, ...] = ()
    if audit.draft_s is not None:
        missing = [d for d in range(1, audit.gamma + 1) if d not in audit.draft_s]
        extra = [d for d in audit.draft_s if d > audit.gamma]
        if missing or extra:
            raise InputError(
                f"needs exactly the draft lengths 1..{audit.gamma}", file=file, field="draft_s",
                value=dict(audit.draft_s), valid=f"a mapping of every d in 1..{audit.gamma} to seconds >= 0",
            )
        draft_s = (0.0,) + tuple(float(audit.draft_s[d]) for d in range(1, audit.gamma + 1))
    problem = AuditProblem(
        vocab=vocab,
        gamma=audit.gamma,
        num_output_tokens=audit.num_output_tokens,
        target=target,
        draft=draft,
        confidence=confidence,
        prior_confidence=prior,
        sps=dict(audit.sps),
        schedulers=schedulers,
        draft_s=draft_s,
        trees=tuple(tuple(t) for t in audit.trees),
    )
    for i, tree in enumerate(problem.trees):
        if tree_estimate(problem, tree) > MAX_BRANCHES:
            raise InputError(
                f"too large to enumerate exactly (about {tree_estimate(problem, tree):,} branches)", file=file,
                field=f"trees[{i}]", value=list(tree),
                valid=f"at most {MAX_BRANCHES:,} branches: a smaller tree, fewer symbols or fewer output tokens")
    estimate = branch_estimate(problem)
    if estimate > MAX_BRANCHES:
        raise InputError(
            f"too large to enumerate exactly (about {estimate:,} branches)",
            file=file,
            field="num_output_tokens",
            value=audit.num_output_tokens,
            valid=f"at most {MAX_BRANCHES:,} branches: fewer symbols, a smaller gamma, fewer output tokens or a "
            "smaller lag",
        )
    return problem


def branch_estimate(problem: AuditProblem) -> int:
    """A rough upper bound on the work of the largest scheduler's enumeration: V^(gamma + N) for the tokens,
    times the distinct lagged-confidence histories a lagged scheduler carries between rounds."""
    v, gamma, n = len(problem.vocab), problem.gamma, problem.num_output_tokens
    lag = max((s.scheduler.lag_steps for s in problem.schedulers), default=0)
    return v ** (gamma + n) * v ** ((gamma - 1) * min(lag, n - 1))


def tree_estimate(problem: AuditProblem, branching: tuple[int, ...]) -> int:
    """A rough upper bound on a tree's enumeration: the emitted prefixes (V^N) times one round's work, which is
    memoised by (token, depth): each depth's children, each of V tokens, each with its subtree's branches."""
    v, n, depth = len(problem.vocab), problem.num_output_tokens, len(branching)
    return v ** n * v * sum(k * v ** (depth - d + 1) for d, k in enumerate(branching))


def _chain(table: MarkovTable, name: str, index: dict[str, int], file: str | Path) -> ExactChain:
    start = _row(table.start, f"{name}.start", index, file)
    unknown = [s for s in table.after if s not in index]
    if unknown:
        raise _unknown_symbol(unknown[0], f"{name}.after.{unknown[0]}", index, file)
    missing = [s for s in index if s not in table.after]
    if missing:
        raise InputError(
            f"no row for symbol {missing[0]!r}", file=file, field=f"{name}.after",
            valid=f"a row for every symbol in vocab: {', '.join(index)}",
        )
    after = tuple(_row(table.after[s], f"{name}.after.{s}", index, file) for s in index)
    return ExactChain(start=start, after=after)


def _row(row: dict[str, Fraction], field: str, index: dict[str, int], file: str | Path) -> Row:
    for symbol in row:
        if symbol not in index:
            raise _unknown_symbol(symbol, f"{field}.{symbol}", index, file)
    total = sum(row.values(), Fraction(0))
    if abs(total - 1) > SUM_TOLERANCE:
        raise InputError(
            f"probabilities sum to {float(total):.9g}, not 1", file=file, field=field,
            valid=f"probabilities summing to 1 (within {float(SUM_TOLERANCE):g}), each {PROBABILITY_HINT}",
        )
    return tuple(row.get(symbol, Fraction(0)) / total for symbol in index)


def _cover(values: dict[str, float], field: str, index: dict[str, int], file: str | Path) -> tuple[float, ...]:
    unknown = [s for s in values if s not in index]
    if unknown:
        raise _unknown_symbol(unknown[0], f"{field}.{unknown[0]}", index, file)
    missing = [s for s in index if s not in values]
    if missing:
        raise InputError(
            f"no value for symbol {missing[0]!r}", file=file, field=field,
            valid=f"a confidence in [0, 1] for every symbol in vocab: {', '.join(index)}",
        )
    return tuple(values[s] for s in index)


def _prior(audit: AuditFile, file: str | Path) -> tuple[float, ...]:
    prior = audit.prior_confidence
    if prior is None:
        return (audit.confidence.start,) * audit.gamma
    if isinstance(prior, float):
        return (prior,) * audit.gamma
    if len(prior) != audit.gamma:
        raise InputError(
            f"{len(prior)} values for gamma = {audit.gamma} positions", file=file, field="prior_confidence",
            value=list(prior), valid=f"one confidence in [0, 1], or a list of exactly {audit.gamma}",
        )
    return tuple(prior)


def _schedulers(audit: AuditFile, file: str | Path) -> tuple[AuditedScheduler, ...]:
    audited: list[AuditedScheduler] = []
    for i, config in enumerate(audit.schedulers):
        label = scheduler_label(config)
        if any(a.label == label for a in audited):
            raise InputError(
                "listed twice", file=file, field=f"schedulers[{i}]", value=label,
                valid="each scheduler (kind and parameters) at most once",
            )
        scheduler = make_scheduler(config.kind, **config.model_dump(exclude={"kind"}))
        audited.append(AuditedScheduler(label=label, scheduler=scheduler))
    return tuple(audited)


def scheduler_label(config: Any) -> str:
    """``kind`` followed by the parameters that differ from their defaults (``lag_steps`` always shown),
    e.g. ``threshold(threshold=0.5)`` or ``async_topk(lag_steps=1)``."""
    params = config.model_dump(exclude={"kind"}, exclude_defaults=True)
    if "lag_steps" in type(config).model_fields:
        params["lag_steps"] = config.lag_steps
    if not params:
        return config.kind
    return f"{config.kind}(" + ", ".join(f"{k}={v}" for k, v in params.items()) + ")"


def _unknown_symbol(symbol: str, field: str, index: dict[str, int], file: str | Path) -> InputError:
    return InputError("unknown symbol", file=file, field=field, value=symbol, valid=f"one of {', '.join(index)}")
