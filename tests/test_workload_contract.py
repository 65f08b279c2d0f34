"""The workload sections of the contract scenarios (copied here with trace paths as shipped bare names)."""

from pathlib import Path

import numpy as np
import yaml

from simlab.common.schema_errors import validate
from simlab.config.base import StrictModel
from simlab.config.workload import WorkloadConfig
from simlab.workload import build_workload

CLOSED_LOOP = """
workload:
  kind: closed_loop
  concurrency: 32
  num_requests: 640
  prompt_tokens: {dist: constant, value: 512}
  output_tokens: {dist: constant, value: 256}
  domains: {math: 0.5, code: 0.5}
"""
FULL = """
workload:
  kind: trace
  path: azure-conv-2023
  format: azure
  time_scale: 0.5            # inter-arrival gaps multiplied by 0.5: twice the recorded load
  max_requests: 3000
  domains: {math: 0.3, code: 0.3, chat: 0.4}   # drawn per request when the trace has no domain
"""
INLINE = """
workload:
  kind: poisson              # or gamma, with cv: the coefficient of variation of the gaps
  rate: 20.0                 # requests per second
  num_requests: 2000
  prompt_tokens: {dist: lognormal, mean: 800, sigma: 0.8, max: 8000}
  output_tokens: {dist: uniform, low: 50, high: 600}
  domains: {chat: 1.0}
"""


class _Holder(StrictModel):
    workload: WorkloadConfig


def build(text, seed):
    cfg = validate(_Holder, yaml.safe_load(text), file="contract.yaml").workload
    return build_workload(cfg, base_dir=Path("."), seed=seed, file="contract.yaml")


def test_contract_closed_loop():
    workload = build(CLOSED_LOOP, seed=5)
    assert workload.closed_loop.concurrency == 32 and len(workload.requests) == 640
    assert set(np.unique(workload.requests.domain)) == {0, 1}


def test_contract_full_trace():
    workload = build(FULL, seed=11)
    requests = workload.requests
    assert len(requests) == 3000 and requests.arrival_s[0] == 0.0
    assert requests.domain_names == ("math", "code", "chat")
    unscaled = build(FULL.replace("time_scale: 0.5", "time_scale: 1.0"), seed=11).requests
    np.testing.assert_array_equal(requests.arrival_s * 2, unscaled.arrival_s)
    assert np.array_equal(requests.domain, unscaled.domain)  # domains do not depend on the time scale


def test_contract_inline_poisson():
    requests = build(INLINE, seed=3).requests
    assert len(requests) == 2000
    assert requests.prompt_tokens.max() <= 8000 and requests.prompt_tokens.min() >= 1
    assert requests.output_tokens.min() >= 50 and requests.output_tokens.max() <= 600
