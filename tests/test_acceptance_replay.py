"""Replaying recorded acceptance (acceptance kind trace): outcomes come from the recording, position by position."""

from __future__ import annotations

import json

import numpy as np
import pytest

import simlab
from helpers import flat_table, run_cli, write_scenario


def _recording(tmp_path, acc_lens: list[list[int]], name="bench.jsonl"):
    path = tmp_path / name
    lines = [json.dumps({"id": f"r{i}", "prompt_token_ids": [1, 2, 3], "generated_token_ids": list(range(len(a))),
                         "acc_eagle": {"acc_len": a}}) for i, a in enumerate(acc_lens)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _scenario(path, arms, output_tokens=401, num_requests=40):
    return {"name": "replay", "seed": 2,
            "workload": {"kind": "closed_loop", "concurrency": 4, "num_requests": num_requests, "prompt_tokens": 100,
                         "output_tokens": output_tokens},
            "hardware": flat_table(0.01, parallel_s=0.001),
            "engine": {"max_num_seqs": 16, "max_batch_tokens": 2048},
            "acceptance": {"kind": "trace", "path": str(path), "format": "specdecode-bench", "proposer": "eagle"},
            "arms": arms}


@pytest.mark.parametrize("acc_len", [1, 3, 5])
def test_a_constant_acceptance_length_gives_the_tau_computed_by_hand(tmp_path, acc_len):
    """Every round emits min(acc_len, gamma + 1) tokens; 400 decode tokens are a multiple of each, so no round is
    cut at a request's end and tau is exactly that."""
    path = _recording(tmp_path, [[acc_len] * 50, [acc_len] * 70])
    arms = [{"name": f"g{g}", "method": "dflash", "gamma": g, "scheduler": {"kind": "fixed"}} for g in (1, 3, 4, 7)]
    results = simlab.run_scenario(_scenario(path, arms), plot=False)
    for gamma in (1, 3, 4, 7):
        tau = min(acc_len, gamma + 1)
        if 400 % tau:
            continue
        metrics = results.arms[f"g{gamma}"]
        assert metrics["spec_decode_acceptance_length"] == tau
        verified = accepted = 0  # one request by hand: near its end a round verifies at most remaining - 1
        remaining = 400
        while remaining > 0:
            length = min(gamma, remaining - 1)
            verified, accepted = verified + length, accepted + min(tau - 1, length)
            remaining -= min(tau - 1, length) + 1
        assert metrics["spec_decode_acceptance_rate"] == pytest.approx(accepted / verified, rel=1e-12)
        assert (results.requests[results.requests.arm == f"g{gamma}"].steps == 400 // tau).all()


def test_outcomes_follow_the_position_in_the_recording(tmp_path):
    """One recording alternating 4, 1, 4, 1, ...: with gamma = 3 a round at an even position emits 4 tokens and
    the next starts at an odd... position i + 4, also even: every round emits 4; starting odd would emit 1."""
    path = _recording(tmp_path, [[4, 1] * 300])
    arms = [{"name": "g3", "method": "dspark", "gamma": 3, "scheduler": {"kind": "fixed"}}]
    results = simlab.run_scenario(_scenario(path, arms, output_tokens=401), plot=False)
    # the first decode round starts at generated position 1 (the prefill emitted position 0): acc_len[1] = 1,
    # then position 2: 4 tokens, position 6: 4, ... : 1 + 4 x 99 + 3 = 400 tokens in 101 rounds
    assert (results.requests.steps == 101).all()


def test_blocks_of_steps_equal_single_steps_with_recorded_acceptance(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    path = _recording(tmp_path, [rng.integers(1, 9, size=int(n)).tolist() for n in rng.integers(50, 400, size=30)])
    arms = [{"name": "hw", "method": "dspark", "gamma": 7, "scheduler": {"kind": "hardware_aware"}},
            {"name": "fixed", "method": "dspark", "gamma": 5},
            {"name": "oracle", "method": "dspark", "gamma": 7, "scheduler": {"kind": "oracle"}}]
    data = _scenario(path, arms, output_tokens=300, num_requests=60)
    data["hardware"] = "h100-sxm_qwen3-8b"
    data["workload"] = {"kind": "poisson", "rate": 8.0, "num_requests": 120,
                        "prompt_tokens": {"dist": "uniform", "low": 50, "high": 1500},
                        "output_tokens": {"dist": "uniform", "low": 1, "high": 600}}
    blocked = simlab.run_scenario(data, plot=False)
    import simlab.engine.replica as replica_module

    monkeypatch.setattr(replica_module, "MAX_BLOCK_STEPS", 1)
    single = simlab.run_scenario(data, plot=False)
    assert blocked.steps.equals(single.steps) and blocked.requests.equals(single.requests)


def test_bad_recordings_are_one_line(tmp_path):
    path = _recording(tmp_path, [[3, 0, 2]])
    scenario = write_scenario(tmp_path, _scenario(path, [{"method": "dflash", "gamma": 3}]))
    code, _, err = run_cli("run", str(scenario), "--out", str(tmp_path / "out"), "-q")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "acc_len" in err
    data = _scenario(tmp_path / "missing.jsonl", [{"method": "dflash", "gamma": 3}])
    code, _, err = run_cli("run", str(write_scenario(tmp_path, data, "b.yaml")), "--out", str(tmp_path / "o"), "-q")
    assert code == 2 and "acceptance.path" in err
    data = _scenario(path, [{"method": "dflash", "gamma": 3}])
    data["acceptance"]["heterogeneity"] = {"request_logit_sd": 0.5}
    code, _, err = run_cli("run", str(write_scenario(tmp_path, data, "c.yaml")), "--out", str(tmp_path / "p"), "-q")
    assert code == 2 and "heterogeneity" in err
