"""Speculative sampling is lossless: emitted tokens follow the target's distribution (chi-square tests on a
small vocabulary, with a deliberately broken sampler as the negative control that the same test rejects)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from scipy import stats  # noqa: E402

from simlab.real.sampling import analytic_acceptance, sample_from_probs, verify  # noqa: E402

VOCAB = 6
GAMMA = 3
NUM_SAMPLES = 200_000
# Each test is deterministic (seeded); ALPHA bounds the chance that a correct sampler fails at a fresh seed.
ALPHA = 1e-6


def _dirichlet(rng: np.random.Generator, shape, zero_fraction: float = 0.2) -> torch.Tensor:
    p = rng.dirichlet(np.full(VOCAB, 0.7), size=shape)
    p = np.where(rng.random(p.shape) < zero_fraction, 0.0, p)  # some impossible tokens: residual edge cases
    p[..., 0] += 1e-3
    return torch.from_numpy(p / p.sum(-1, keepdims=True))


def _markov_chains(seed: int):
    """Target and draft next-token laws that depend on the previous token (first row: after the anchor)."""
    rng = np.random.default_rng(seed)
    return _dirichlet(rng, ()), _dirichlet(rng, (VOCAB,)), _dirichlet(rng, ()), _dirichlet(rng, (VOCAB,))


def _simulate(seed: int, *, temperature: float = 1.0, broken: bool = False):
    """Draft GAMMA tokens from the draft chain, verify against the target chain; return emitted tokens [N, 3]
    (-1 where the round emitted fewer) and the target chain used (at ``temperature``)."""
    t0, tm, d0, dm = _markov_chains(seed)
    gen = torch.Generator().manual_seed(seed)
    u = torch.rand(NUM_SAMPLES, GAMMA, generator=gen, dtype=torch.float64)
    tokens = torch.empty(NUM_SAMPLES, GAMMA, dtype=torch.long)
    draft_probs = torch.empty(NUM_SAMPLES, GAMMA, VOCAB, dtype=torch.float64)
    previous = None
    for k in range(GAMMA):
        p = d0.expand(NUM_SAMPLES, VOCAB) if k == 0 else dm[previous]
        tokens[:, k] = sample_from_probs(p, u[:, k])
        draft_probs[:, k] = p
        previous = tokens[:, k]
    rows = [t0.expand(NUM_SAMPLES, VOCAB)] + [tm[tokens[:, k]] for k in range(GAMMA)]
    logits = torch.stack(rows, dim=1).clamp_min(1e-300).log()
    accept_u = torch.rand(NUM_SAMPLES, GAMMA, generator=gen, dtype=torch.float64)
    emit_u = torch.rand(NUM_SAMPLES, generator=gen, dtype=torch.float64)
    lengths = torch.full((NUM_SAMPLES,), GAMMA)
    result = verify(tokens, draft_probs, logits, lengths, temperature, accept_u, emit_u)
    next_token = result.next_token
    if broken:  # the classic bug: on rejection, resample from p_t instead of norm(max(0, p_t - p_d))
        rejected = result.num_accepted < lengths
        plain = sample_from_probs(result.target_probs[torch.arange(NUM_SAMPLES), result.num_accepted], emit_u)
        next_token = torch.where(rejected, plain, next_token)
    emitted = torch.full((NUM_SAMPLES, GAMMA), -1, dtype=torch.long)
    for j in range(GAMMA):
        from_draft = result.num_accepted > j
        at_next = result.num_accepted == j
        emitted[:, j] = torch.where(from_draft, tokens[:, j], torch.where(at_next, next_token, emitted[:, j]))
    tempered = lambda p: torch.softmax(p.clamp_min(1e-300).log() / temperature, dim=-1)  # noqa: E731
    return emitted.numpy(), tempered(t0).numpy(), tempered(tm).numpy()


def _chi_square_p(observed_by_row: list[np.ndarray], expected_probs: list[np.ndarray]) -> float:
    """p-value of a pooled chi-square over several categorical samples (cells with zero expectation must be
    empty; they contribute no degrees of freedom)."""
    statistic, dof = 0.0, 0
    for observed, probs in zip(observed_by_row, expected_probs):
        n = observed.sum()
        if n == 0:
            continue
        possible = probs > 0
        assert observed[~possible].sum() == 0, "a zero-probability token was emitted"
        expected = n * probs[possible]
        statistic += float(((observed[possible] - expected) ** 2 / expected).sum())
        dof += int(possible.sum()) - 1
    return float(stats.chi2.sf(statistic, dof))


def _tests(emitted: np.ndarray, t0: np.ndarray, tm: np.ndarray) -> dict[str, float]:
    first = np.bincount(emitted[:, 0], minlength=VOCAB)
    p_values = {"first": _chi_square_p([first], [t0])}
    for j in (1, 2):  # token j+1 given token j, among rounds that emitted it
        has = emitted[:, j] >= 0
        rows = [np.bincount(emitted[has & (emitted[:, j - 1] == a), j], minlength=VOCAB) for a in range(VOCAB)]
        p_values[f"position{j + 1}"] = _chi_square_p(rows, list(tm))
    return p_values


@pytest.mark.parametrize("seed", [0, 1])
def test_emitted_tokens_follow_the_target_chain(seed):
    emitted, t0, tm = _simulate(seed)
    p_values = _tests(emitted, t0, tm)
    assert min(p_values.values()) > ALPHA, p_values
    # the draft is different enough from the target that rejections (and residual draws) really happen
    assert (emitted[:, 1] < 0).mean() > 0.1


def test_tempered_target_is_matched():
    emitted, t0, tm = _simulate(3, temperature=0.6)
    p_values = _tests(emitted, t0, tm)
    assert min(p_values.values()) > ALPHA, p_values


def test_the_test_rejects_a_sampler_without_residual():
    emitted, t0, tm = _simulate(0, broken=True)
    assert min(_tests(emitted, t0, tm).values()) < ALPHA


def test_greedy_verification_accepts_the_matching_prefix_then_emits_the_argmax():
    vocab = 5
    target_argmax = torch.tensor([[1, 2, 3, 4], [1, 2, 3, 4], [0, 0, 0, 0]])
    logits = torch.nn.functional.one_hot(target_argmax, vocab).double() * 3.0
    drafts = torch.tensor([[1, 2, 0], [1, 2, 3], [1, 0, 0]])
    result = verify(drafts, torch.zeros(3, 3, vocab), logits, torch.tensor([3, 2, 3]), 0.0)
    assert result.num_accepted.tolist() == [2, 2, 0]
    # row 0: rejected at 3, emits the target's 3; row 1: all 2 verified accepted, bonus = argmax after them
    assert result.next_token.tolist() == [3, 3, 0]


def test_sample_from_probs_frequencies_and_zero_probabilities():
    probs = torch.tensor([0.0, 0.5, 0.0, 0.3, 0.2, 0.0], dtype=torch.float64)
    n = 100_000
    u = torch.rand(n, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    counts = np.bincount(sample_from_probs(probs.expand(n, -1), u).numpy(), minlength=6)
    assert _chi_square_p([counts], [probs.numpy()]) > ALPHA
    edges = sample_from_probs(probs.expand(3, -1), torch.tensor([0.0, 0.5, 1.0 - 1e-16]))
    assert edges.tolist() == [1, 3, 4]


def test_analytic_acceptance_is_the_overlap():
    p = torch.tensor([0.5, 0.5, 0.0])
    q = torch.tensor([0.0, 0.5, 0.5])
    assert float(analytic_acceptance(p, q)) == pytest.approx(0.5)
    assert float(analytic_acceptance(p, p)) == pytest.approx(1.0)
