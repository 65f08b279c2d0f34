"""The batched speculative engine: lossless (greedy equality, sampling distribution), records, errors."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
from scipy import stats  # noqa: E402

from simlab.config import EngineConfig  # noqa: E402
from simlab.real.engine import DecodingConfig, Request, SpeculativeEngine  # noqa: E402
from simlab.real.generate import plain_generate  # noqa: E402
from simlab.results.records import REQUEST_COLUMNS, STEP_COLUMNS, round_columns  # noqa: E402
from simlab.schedulers import make_scheduler  # noqa: E402

from .models import build_pair  # noqa: E402

ALPHA = 1e-6


def step_cost(batch_tokens):
    """A jagged verify cost (a step every 4 tokens), like CUDA-graph buckets."""
    return 0.01 + 0.002 * np.ceil(np.asarray(batch_tokens, dtype=float) / 4.0)


def _requests(seed=0, num=5, vocab=259):
    gen = torch.Generator().manual_seed(seed)
    lengths = [3, 11, 1, 7, 5, 9, 2][:num]
    budgets = [17, 6, 23, 1, 12, 9, 30][:num]
    return [Request(id=10 + i, prompt_ids=tuple(torch.randint(0, vocab, (n,), generator=gen).tolist()),
                    max_new_tokens=b) for i, (n, b) in enumerate(zip(lengths, budgets))]


SCHEDULERS = [
    ("fixed", {}),
    ("threshold", {"threshold": 0.45}),
    ("threshold", {"threshold": 0.3, "cumulative": True}),
    ("hardware_aware", {}),
    ("async_topk", {"lag_steps": 2}),
    ("goodput", {"lag_steps": 0}),
    ("goodput", {"lag_steps": 1}),
]


@pytest.mark.parametrize("kind,params", SCHEDULERS, ids=[f"{k}{p}" for k, p in SCHEDULERS])
def test_greedy_engine_output_is_the_targets_greedy_output(pair64, kind, params):
    target, drafter = pair64
    requests = _requests()
    reference = plain_generate(target, [r.prompt_ids for r in requests], [r.max_new_tokens for r in requests])
    engine = SpeculativeEngine(target, drafter, make_scheduler(kind, **params),
                               DecodingConfig(gamma=4, max_seq_len=48), EngineConfig(max_num_seqs=3),
                               verify_cost=step_cost, prior_conf=[0.6] * 4)
    result = engine.run(requests)
    for request, expected in zip(requests, reference):
        assert result.outputs[request.id] == expected
    rounds, details = result.rounds, result.round_details
    assert rounds["accepted"].sum() > 0  # drafts were accepted, not only bonus tokens
    if kind != "fixed":  # the policy really cut some blocks short
        assert (rounds["verified"] < details["max_len"]).any()
    assert (rounds["verified"] <= details["max_len"]).all()


@pytest.mark.parametrize("layout", ["dspark", "dflash"])
def test_greedy_equality_for_both_layouts_and_plain_decoding(layout):
    target, drafter = build_pair(7, layout=layout, drafter_changes={} if layout == "dspark"
                                 else {"markov_rank": 0, "confidence_head": False})
    requests = _requests(seed=1, num=4)
    reference = plain_generate(target, [r.prompt_ids for r in requests], [r.max_new_tokens for r in requests])
    decoding = DecodingConfig(gamma=6)
    for engine in (SpeculativeEngine(target, drafter, decoding=decoding, limits=EngineConfig(max_num_seqs=4)),
                   SpeculativeEngine(target, None, decoding=decoding, limits=EngineConfig(max_num_seqs=2))):
        result = engine.run(requests)
        assert [result.outputs[r.id] for r in requests] == reference


def test_eos_stops_a_request(pair64):
    target, drafter = pair64
    requests = _requests(seed=2, num=3)
    reference = plain_generate(target, [r.prompt_ids for r in requests], [r.max_new_tokens for r in requests])
    eos = reference[0][min(4, len(reference[0]) - 1)]
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=4, eos_token_id=eos)).run(
        requests)
    for request, expected in zip(requests, reference):
        cut = expected[: expected.index(eos) + 1] if eos in expected else expected
        assert result.outputs[request.id] == cut


def test_records(pair64, tmp_path):
    target, drafter = pair64
    requests = [Request(r.id, r.prompt_ids, r.max_new_tokens, arrival_s=0.01 * i, domain="code")
                for i, r in enumerate(_requests(seed=3))]
    engine = SpeculativeEngine(target, drafter, make_scheduler("hardware_aware"),
                               DecodingConfig(gamma=4, arm="hw"), EngineConfig(max_num_seqs=2),
                               verify_cost=step_cost)
    result = engine.run(requests)
    assert list(result.requests.columns) == list(REQUEST_COLUMNS)
    assert list(result.steps.columns) == list(STEP_COLUMNS)
    assert list(result.rounds.columns) == list(round_columns(4))
    assert (result.requests["arm"] == "hw").all() and (result.steps["arm"] == "hw").all()
    rounds, details = result.rounds, result.round_details
    by_request = rounds.groupby("id")
    frame = result.requests.set_index("id")
    for request in requests:
        row = frame.loc[request.id]
        assert row["output_tokens"] == len(result.outputs[request.id]) == request.max_new_tokens
        assert row["prompt_tokens"] == len(request.prompt_ids) and row["domain"] == "code"
        assert row["arrival_s"] <= row["first_token_s"] <= row["finish_s"]
        emitted = details["emitted_tokens"].groupby(rounds["id"]).sum().get(request.id, 0)
        assert emitted == row["output_tokens"] - 1  # the prefill emitted the first token
        assert row["steps"] == by_request.size().get(request.id, 0)
        assert by_request["step"].get_group(request.id).tolist() == list(range(row["steps"])) if row["steps"] else True
    # emitted = accepted + 1 (no EOS here); steps aggregate their request rows
    assert (details["emitted_tokens"] == rounds["accepted"] + 1).all()
    assert (rounds["drafted"] == 4).all()
    decode = result.steps[result.steps["decode_requests"] > 0].reset_index(drop=True)
    per_step = rounds.groupby(details["t_s"], sort=True)[["verified", "accepted"]].sum().reset_index(drop=True)
    assert decode["verify_tokens"].tolist() == per_step["verified"].tolist()
    assert decode["accepted_tokens"].tolist() == per_step["accepted"].tolist()
    steps = result.steps
    assert (steps["batch_tokens"] == steps["decode_requests"] + steps["verify_tokens"] + steps["prefill_tokens"]).all()
    assert steps["prefill_tokens"].sum() == sum(len(r.prompt_ids) for r in requests)
    assert (steps["num_requests"] >= steps["decode_requests"]).all()
    assert (steps["step_s"] > 0).all() and steps["t_s"].is_monotonic_increasing
    # a busy stretch's steps follow each other: each starts where the previous one ended
    back_to_back = np.isclose(steps["t_s"].to_numpy()[1:], (steps["t_s"] + steps["step_s"]).to_numpy()[:-1],
                              rtol=0, atol=1e-12)
    assert back_to_back.mean() > 0.5
    # per-position columns: confidences in (0, 1); analytic acceptance in [0, 1] exactly where verified
    gamma = 4
    conf = rounds[[f"conf_{k + 1}" for k in range(gamma)]].to_numpy()
    prob = details[[f"accept_prob_{k + 1}" for k in range(gamma)]].to_numpy()
    assert ((conf > 0) & (conf < 1)).all()
    verified = np.arange(gamma)[None, :] < rounds["verified"].to_numpy()[:, None]
    assert np.isnan(prob[~verified]).all() and ((prob[verified] >= 0) & (prob[verified] <= 1)).all()
    # at temperature 0 the analytic acceptance of a verified position is 1 exactly when the draft matched
    accepted_at = np.arange(gamma)[None, :] < rounds["accepted"].to_numpy()[:, None]
    assert (prob[accepted_at] == 1).all()
    result.write(tmp_path / "out", plot=False)
    for name in ("requests.csv", "steps.csv.gz", "rounds.csv.gz"):
        back = pd.read_csv(tmp_path / "out" / name)
        assert len(back) == len({"requests.csv": result.requests, "steps.csv.gz": result.steps,
                                 "rounds.csv.gz": result.rounds}[name])


def test_token_budget_caps_batch_tokens(pair64):
    target, drafter = pair64
    budget = 9
    result = SpeculativeEngine(target, drafter, make_scheduler("fixed"),
                               DecodingConfig(gamma=4), EngineConfig(max_num_seqs=4, max_batch_tokens=budget)
                               ).run(_requests(seed=4, num=4))
    steps = result.steps
    assert (steps["batch_tokens"] <= budget).all() and (steps["batch_tokens"] == budget).any()
    decode = steps[steps["decode_requests"] > 0]
    assert (decode["decode_requests"] + decode["verify_tokens"] <= budget).all()


def test_sampled_outputs_do_not_depend_on_the_batch():
    target, drafter = build_pair(8, logit_scale=3.0)
    requests = _requests(seed=5, num=4)
    config = DecodingConfig(gamma=4, temperature=1.0, seed=3)
    limits = EngineConfig(max_num_seqs=4)
    together = SpeculativeEngine(target, drafter, decoding=config, limits=limits).run(requests).outputs
    for request in requests:
        alone = SpeculativeEngine(target, drafter, decoding=config, limits=limits).run([request]).outputs
        assert alone[request.id] == together[request.id]
    other_seed = SpeculativeEngine(target, drafter, decoding=dataclasses.replace(config, seed=4), limits=limits).run(
        requests)
    assert other_seed.outputs != together


def _pooled_chi_square_p(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> float:
    """Chi-square p-value with the cells expected below ``min_expected`` pooled into one."""
    n = counts.sum()
    expected = n * probs / probs.sum()
    small = expected < min_expected
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    assert observed[~keep].sum() == 0
    return float(stats.chisquare(observed[keep], expected[keep]).pvalue)


def test_sampled_engine_output_follows_the_target_distribution():
    """4000 requests of 4 new tokens on an 8-token vocabulary: the first four output tokens are distributed
    as the target's own sampling (computed exactly by enumerating all 8^3 prefixes)."""
    vocab, num_requests, num_new = 8, 4000, 4
    target, drafter = build_pair(9, target_changes={"vocab_size": vocab}, drafter_changes={"markov_rank": 8},
                                 logit_scale=2.5)
    prompt = (3, 5)
    with torch.no_grad():
        prefixes = torch.tensor(list(itertools.product(range(vocab), repeat=num_new - 1)))
        ids = torch.cat([torch.tensor(prompt).expand(len(prefixes), -1), prefixes], dim=1)
        probs = torch.softmax(target.logits(target(ids).hidden), dim=-1).numpy()  # [512, 5, V]
    # joint law of (t1, t2, t3, t4)
    p1 = probs[0, 1]
    joint = np.zeros((vocab,) * num_new)
    for index, (a, b, c) in enumerate(prefixes.tolist()):
        joint[a, b, c, :] = p1[a] * probs[index, 2, b] * probs[index, 3, c] * probs[index, 4]
    assert joint.sum() == pytest.approx(1.0)
    requests = [Request(id=i, prompt_ids=prompt, max_new_tokens=num_new) for i in range(num_requests)]
    result = SpeculativeEngine(target, drafter, decoding=DecodingConfig(gamma=3, temperature=1.0, seed=11),
                               limits=EngineConfig(max_num_seqs=num_requests, max_batch_tokens=8 * num_requests)
                               ).run(requests)
    outputs = np.array([result.outputs[i] for i in range(num_requests)])
    rounds = result.rounds
    assert 0 < rounds["accepted"].sum() < rounds["verified"].sum()  # both acceptances and rejections
    p_values = {}
    for axes in [(1,), (2,), (3,), (1, 2), (2, 3)]:
        marginal = joint.sum(axis=tuple(a for a in range(num_new) if a not in axes)).ravel()
        cells = np.ravel_multi_index(tuple(outputs[:, a] for a in axes), (vocab,) * len(axes))
        counts = np.bincount(cells, minlength=vocab ** len(axes))
        p_values[axes] = _pooled_chi_square_p(counts, marginal)
    assert min(p_values.values()) > ALPHA, p_values


def test_engine_errors(pair64):
    target, drafter = pair64
    with pytest.raises(ValueError, match="true outcomes"):
        SpeculativeEngine(target, drafter, make_scheduler("oracle"), verify_cost=step_cost)
    with pytest.raises(ValueError, match="verify_cost"):
        SpeculativeEngine(target, drafter, make_scheduler("hardware_aware"))
    _, no_head = build_pair(0, drafter_changes={"markov_rank": 0, "confidence_head": False})
    with pytest.raises(ValueError, match="confidence head"):
        SpeculativeEngine(target, no_head, make_scheduler("threshold", threshold=0.5))
    engine = SpeculativeEngine(target, drafter, decoding=DecodingConfig(max_seq_len=8))
    with pytest.raises(ValueError, match="prompt"):
        engine.run([Request(id=0, prompt_ids=tuple(range(8)), max_new_tokens=2)])


def test_plain_engine_samples_like_plain_generation(pair64):
    target, _ = pair64
    requests = _requests(seed=6, num=3)
    config = DecodingConfig(gamma=0, temperature=0.8, seed=5)
    result = SpeculativeEngine(target, None, decoding=config, limits=EngineConfig(max_num_seqs=2)).run(requests)
    reference = plain_generate(target, [r.prompt_ids for r in requests], [r.max_new_tokens for r in requests],
                               temperature=0.8, seed=5, request_ids=[r.id for r in requests])
    assert [result.outputs[r.id] for r in requests] == reference
