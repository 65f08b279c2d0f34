"""The engine against closed forms: tokens per round, speedup, M/G/1 (Pollaczek-Khinchine) and Little's law.

Tolerances are derived from the sample sizes: Z standard errors, with Z chosen for a two-sided false-alarm
probability of about 1e-6 (the seeds are fixed, so each test is deterministic; the bound is what makes it fair).
"""

import numpy as np
import pytest

from helpers import flat_table, simulate, write_scenario

Z = 5.0


def truncated_geometric(alpha: float, max_len: int) -> np.ndarray:
    """P(emitted = j), j = 1..max_len+1, for i.i.d. acceptance alpha and max_len verified drafts."""
    j = np.arange(1, max_len + 2)
    p = alpha ** (j - 1) * (1 - alpha)
    p[-1] = alpha**max_len
    return p


def decode_steps_moments(alpha: float, gamma: int, tokens: int) -> tuple[float, float]:
    """Exact mean and variance of the number of decode steps to emit ``tokens`` tokens when a step verifies
    min(gamma, remaining - 1) drafts (the engine never drafts past the request's end)."""
    first = np.zeros(tokens + 1)
    second = np.zeros(tokens + 1)
    for n in range(1, tokens + 1):
        p = truncated_geometric(alpha, min(gamma, n - 1))
        rest = n - np.arange(1, len(p) + 1)
        first[n] = 1 + p @ first[rest]
        second[n] = p @ (1 + 2 * first[rest] + second[rest])
    return first[tokens], second[tokens] - first[tokens] ** 2


def closed_loop_scenario(alpha, gamma, *, method="eagle3", num_requests=150, output_tokens=500,
                         verify_s=0.010, draft_s=0.001):
    arms = [{"name": "no-spec", "method": "none"}]
    if gamma:
        arms.append({"name": "spec", "method": method, "gamma": gamma, "scheduler": {"kind": "fixed"}})
    return {
        "name": "closed-form",
        "seed": 17,
        "workload": {"kind": "closed_loop", "concurrency": 1, "num_requests": num_requests,
                     "prompt_tokens": 32, "output_tokens": output_tokens},
        "hardware": flat_table(verify_s, autoregressive_s=draft_s),
        "engine": {"max_num_seqs": 8, "max_batch_tokens": 4096},
        "acceptance": {"kind": "iid", "alpha": alpha},
        "arms": arms,
    }


@pytest.mark.parametrize("alpha,gamma", [(0.6, 3), (0.8, 5), (0.9, 7)])
def test_mean_tokens_per_round_matches_closed_form(tmp_path, alpha, gamma):
    outcomes = simulate(write_scenario(tmp_path, closed_loop_scenario(alpha, gamma)))
    steps = outcomes["spec"].steps
    full = steps[(steps.decode_requests == 1) & (steps.verify_tokens == gamma)]
    p = truncated_geometric(alpha, gamma)
    j = np.arange(1, gamma + 2)
    mean, var = p @ j, p @ j**2 - (p @ j) ** 2
    assert mean == pytest.approx((1 - alpha ** (gamma + 1)) / (1 - alpha))
    n = len(full)
    assert n > 10_000
    assert abs(full.emitted_tokens.mean() - mean) < Z * np.sqrt(var / n)
    # accepted drafts: a step verifying gamma accepts emitted - 1 of them
    assert np.array_equal(full.accepted_tokens, full.emitted_tokens - 1)


@pytest.mark.parametrize("alpha,gamma", [(0.7, 4), (0.85, 6)])
def test_speedup_over_no_spec_matches_closed_form(tmp_path, alpha, gamma):
    verify_s, draft_s, tokens = 0.010, 0.001, 500
    outcomes = simulate(write_scenario(tmp_path, closed_loop_scenario(alpha, gamma, output_tokens=tokens,
                                                                      verify_s=verify_s, draft_s=draft_s)))
    req = {name: o.requests for name, o in outcomes.items()}
    decode_s = {name: (r.finish_s - r.first_token_s).to_numpy() for name, r in req.items()}
    # no speculation: every decode step emits one token at verify_s
    assert np.allclose(decode_s["no-spec"], (tokens - 1) * verify_s, rtol=1e-9)
    # speculation: decode time = steps x (gamma draft steps + one verify), steps known exactly in distribution
    step_s = gamma * draft_s + verify_s
    assert np.allclose(decode_s["spec"] / step_s, req["spec"].steps, rtol=1e-9)
    mean_steps, var_steps = decode_steps_moments(alpha, gamma, tokens - 1)
    n = len(decode_s["spec"])
    assert abs(req["spec"].steps.mean() - mean_steps) < Z * np.sqrt(var_steps / n)
    measured_speedup = decode_s["no-spec"].mean() / decode_s["spec"].mean()
    exact_speedup = (tokens - 1) * verify_s / (mean_steps * step_s)
    c = draft_s / verify_s
    closed_form = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))
    # the closed form ignores the last steps, which verify fewer drafts: within 1% for 499 tokens
    assert exact_speedup == pytest.approx(closed_form, rel=0.01)
    # delta method: relative error of the speedup equals the relative error of the mean step count
    assert abs(measured_speedup / exact_speedup - 1) < Z * np.sqrt(var_steps / n) / mean_steps


def test_mg1_mean_latency_matches_pollaczek_khinchine(tmp_path):
    verify_s, prefill_per_token_s, prompt = 0.010, 1e-5, 100
    low, high = 2, 40
    outputs = np.arange(low, high + 1)
    service = prompt * prefill_per_token_s + (outputs - 1) * verify_s  # prefill emits the first token
    mean_s, second_s = service.mean(), (service**2).mean()
    rho = 0.7
    rate = rho / mean_s
    expected_latency_s = rate * second_s / (2 * (1 - rho)) + mean_s
    num_requests, warmup, num_batches = 40_000, 2_000, 38
    data = {
        "name": "mg1",
        "seed": 5,
        "workload": {"kind": "poisson", "rate": float(rate), "num_requests": num_requests,
                     "prompt_tokens": prompt, "output_tokens": {"dist": "uniform", "low": low, "high": high}},
        "hardware": flat_table(verify_s, prefill_per_token_s=prefill_per_token_s),
        "engine": {"max_num_seqs": 1, "max_batch_tokens": 4096},
        "acceptance": {"kind": "iid", "alpha": 0.5},
        "arms": [{"name": "no-spec", "method": "none"}],
    }
    outcome = simulate(write_scenario(tmp_path, data))["no-spec"]
    latency = (outcome.requests.finish_s - outcome.requests.arrival_s).to_numpy()[warmup:]
    # waiting times are autocorrelated: use batch means (batches of 1,000 requests, far longer than the
    # correlation time at rho = 0.7) for the standard error; t with 37 dof at 1e-6 two-sided is ~6.1
    batch_means = latency[: num_batches * 1000].reshape(num_batches, 1000).mean(axis=1)
    stderr = batch_means.std(ddof=1) / np.sqrt(num_batches)
    assert abs(batch_means.mean() - expected_latency_s) < 6.1 * stderr
    assert stderr < 0.02 * expected_latency_s  # the check is tight enough to mean something
    m = outcome.metrics
    assert m["little_mean_in_system"] == pytest.approx(m["little_arrival_rate_x_mean_e2el"], rel=1e-9)
    # utilisation: the server is busy rho of the time. Relative standard error of busy/duration is about
    # sqrt(Var(S)/E[S]^2/n + 1/n) = 0.006 for n = 40,000 (service cv ~0.55, Poisson count): 5 SE = 3 %
    busy_s = outcome.steps.step_s.sum()
    assert busy_s / m["duration_s"] == pytest.approx(rho, rel=0.03)


def test_per_position_rates_match_closed_forms(tmp_path):
    """With i.i.d. acceptance and fixed gamma, accepted-at-k over verified-at-k is alpha**k (survival) and
    accepted-at-k over reached-k is alpha (conditional); binomial tolerances from the counts."""
    alpha, gamma = 0.7, 5
    m = simulate(write_scenario(tmp_path, closed_loop_scenario(alpha, gamma)))["spec"].metrics
    verified = m["spec_decode_num_verified_per_position"]
    reached = m["spec_decode_num_reached_per_position"]
    accepted = m["spec_decode_num_accepted_per_position"]
    assert len(verified) == gamma and verified[0] > 10_000
    for k in range(1, gamma + 1):
        survival, conditional = alpha**k, alpha
        rate = m["spec_decode_per_position_acceptance_rates"][k - 1]
        assert rate == accepted[k - 1] / verified[k - 1]
        assert abs(rate - survival) < Z * np.sqrt(survival * (1 - survival) / verified[k - 1]), k
        rate = m["spec_decode_conditional_acceptance_rates"][k - 1]
        assert abs(rate - conditional) < Z * np.sqrt(conditional * (1 - conditional) / reached[k - 1]), k
        assert reached[k - 1] <= verified[k - 1] and accepted[k - 1] <= reached[k - 1]
