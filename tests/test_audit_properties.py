"""Random small audits: every non-anticipating scheduler is exactly lossless; every scheduler's
distribution sums to exactly 1."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simlab.audit import build_problem, run_audit

SYMBOLS = ["A", "B", "C"]
NOT_LOSSLESS = {"retrospective", "goodput(lag_steps=0)"}


@st.composite
def rows(draw, vocab):
    """An exact distribution over ``vocab`` written as fraction strings (zeros allowed, some left out)."""
    weights = draw(st.lists(st.integers(0, 6), min_size=len(vocab), max_size=len(vocab)).filter(any))
    total = sum(weights)
    return {s: f"{w}/{total}" for s, w in zip(vocab, weights) if w or draw(st.booleans())}


def chains(vocab):
    return st.fixed_dictionaries(
        {"start": rows(vocab), "after": st.fixed_dictionaries({s: rows(vocab) for s in vocab})}
    )


unit = st.one_of(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]), st.floats(0.0, 1.0))


@st.composite
def sps_curves(draw, gamma):
    """Monotone (decreasing steps/s) or jagged curves over B = 1..gamma+1, sometimes with missing B > 1."""
    sizes = [1] + [b for b in range(2, gamma + 2) if draw(st.booleans()) or draw(st.booleans())]
    values = draw(st.lists(st.floats(0.05, 2.0), min_size=len(sizes), max_size=len(sizes)))
    if draw(st.booleans()):
        values = sorted(values, reverse=True)
    return dict(zip(sizes, values))


@st.composite
def audits(draw):
    vocab = SYMBOLS[: draw(st.integers(2, 3))]
    gamma = draw(st.integers(1, 3))
    data = {
        "vocab": vocab,
        "gamma": gamma,
        "target": draw(chains(vocab)),
        "draft": draw(chains(vocab)),
        "confidence": {"start": draw(unit), "after": {s: draw(unit) for s in vocab}},
        "sps": draw(sps_curves(gamma)),
        "num_output_tokens": draw(st.integers(1, 3)),
        "schedulers": [
            "fixed",
            {"kind": "threshold", "threshold": draw(st.floats(0.01, 0.99))},
            {"kind": "threshold", "threshold": draw(st.floats(0.01, 0.99)), "cumulative": True},
            "hardware_aware",
            {"kind": "async_topk", "lag_steps": 1},
            {"kind": "async_topk", "lag_steps": 2},
            {"kind": "goodput", "lag_steps": 1},
            {"kind": "goodput", "lag_steps": 0},
            "retrospective",
        ],
    }
    prior = draw(st.one_of(st.none(), unit, st.lists(unit, min_size=gamma, max_size=gamma)))
    if prior is not None:
        data["prior_confidence"] = prior
    return data


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(audits())
def test_non_anticipating_schedulers_are_exactly_lossless(data):
    result = run_audit(build_problem(data, file="generated.yaml"))
    for verdict in result.verdicts:
        assert sum(verdict.distribution.values(), Fraction(0)) == 1, verdict.label
        if verdict.label not in NOT_LOSSLESS:
            assert verdict.tv == Fraction(0), (verdict.label, verdict.distribution, result.target)
    assert sum(result.target.values(), Fraction(0)) == 1


@st.composite
def anticipation_traps(draw):
    """Appendix-A-shaped audits with random chains: c_2 is high only after x_1 = A, and the SPS curve makes
    Theta dip at l = 1 but rise above Theta(0) at l = 2 only when x_1 = A."""
    vocab = SYMBOLS[: draw(st.integers(2, 3))]
    c1 = draw(st.floats(0.3, 0.95))
    c2 = draw(st.floats(0.3, 1.0))
    low, high = 1 / (1 + c1 + c1 * c2), 1 / (1 + c1)
    s3 = draw(st.floats(low + (high - low) * 0.05, high - (high - low) * 0.05))
    s2 = draw(st.floats(0.01, high * 0.95))
    return {
        "vocab": vocab,
        "gamma": 2,
        "target": draw(chains(vocab)),
        "draft": draw(chains(vocab)),
        "confidence": {"start": c1, "after": {s: (c2 if s == "A" else 0.0) for s in vocab}},
        "sps": {1: 1.0, 2: s2, 3: s3},
        "num_output_tokens": draw(st.integers(1, 2)),
        "schedulers": ["hardware_aware", "retrospective"],
    }


def first_token_under_retrospective(problem) -> list[Fraction]:
    """Independent formula: the argmax verifies x_1 (and x_2) exactly when x_1 = A, else verifies nothing."""
    p_t, p_d = problem.target.start, problem.draft.start
    accept = min(Fraction(1), p_t[0] / p_d[0]) if p_d[0] else Fraction(1)
    residual = [max(Fraction(0), t - d) for t, d in zip(p_t, p_d)]
    mass = sum(residual, Fraction(0))
    after_a = [(accept if y == 0 else 0) + ((1 - accept) * residual[y] / mass if mass else 0) for y in range(len(p_t))]
    return [p_d[0] * after_a[y] + (1 - p_d[0]) * p_t[y] for y in range(len(p_t))]


@settings(max_examples=40, deadline=None)
@given(anticipation_traps())
def test_retrospective_argmax_is_caught_whenever_it_anticipates(data):
    problem = build_problem(data, file="generated.yaml")
    early, retro = run_audit(problem).verdicts
    assert early.tv == 0
    first = [
        sum((p for seq, p in retro.distribution.items() if seq[0] == y), Fraction(0)) for y in range(len(problem.vocab))
    ]
    assert first == first_token_under_retrospective(problem)
    p_t, p_d = problem.target.start, problem.draft.start
    if 0 < p_d[0] < 1 and 0 < p_t[0] < 1 and p_d[0] != p_t[0]:  # otherwise verifying x_1 = A changes nothing
        assert retro.tv > 0
