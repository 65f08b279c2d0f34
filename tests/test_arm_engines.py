"""Each arm's engine is resolved once (simlab.arm_engines): the policy the engine runs reads that object's
scheduler, the cost its scheduler reads and the cost its steps are timed on, not copies made elsewhere."""

from pathlib import Path

from simlab.config.loading import load_scenario
from simlab.hardware.sps_view import scheduler_view
from simlab.runner import build

ROOT = Path(__file__).resolve().parents[1]


def test_the_policy_reads_the_arms_resolved_engine():
    built = build(load_scenario(ROOT / "scenarios" / "quickstart.yaml"))
    by_name = {prepared.arm.name: (prepared.policy, resolved) for prepared, resolved in
               zip(built.arms, built.engines.arms)}
    policy, resolved = by_name["no-spec"]
    assert resolved.scheduler is None and policy.scheduler is None
    assert policy.verify_priced_by is resolved.step_cost is built.cost  # no speculation: the scenario's model

    policy, resolved = by_name["dspark-hw"]  # reads the verify cost: its engine's (vLLM's) monotone view
    assert policy.scheduler is resolved.scheduler
    assert policy.cost is resolved.scheduler_cost is not resolved.step_cost
    assert policy.verify_priced_by is resolved.step_cost
    assert resolved.step_cost.buckets.sizes != resolved.scheduler_cost.buckets.sizes  # steps pad; the view does not
    again = scheduler_view(resolved.step_cost, resolved.scheduler.sps)
    assert again.buckets.sizes == resolved.scheduler_cost.buckets.sizes

    policy, resolved = by_name["dspark-fixed"]  # reads no cost: the steps' own model
    assert policy.cost is resolved.scheduler_cost is resolved.step_cost
