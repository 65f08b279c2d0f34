"""``kind: operations``: the operation model tabulated for the engine (simlab.hardware.operations_table;
docs/operations.md): its cells against the operations in closed form, a verify's queries, CUDA-graph padding, its
stack's release, expert-parallel layouts and the layouts its roofline refuses."""

from __future__ import annotations

import pytest

from simlab.hardware.kernel_curves import load_curves
from simlab.hardware.operations import decode_operations, price
from simlab.hardware.specs import GPUS, get_model


def test_kind_operations_tabulates_the_operations_and_the_engines_time(tmp_path):
    from helpers import run_cli
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware import build_cost_model
    from simlab.hardware.operations_table import BATCH_TOKENS, CONTEXT_TOKENS, engine_time

    cfg = OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b")
    cost = build_cost_model(cfg, base_dir=tmp_path, file=tmp_path / "s.yaml")
    curves, model = load_curves(GPUS["h100-sxm"]), get_model("qwen3-8b")
    batch, context = BATCH_TOKENS[5], CONTEXT_TOKENS[2]
    gpu_s = price(decode_operations(model, num_requests=batch, context_per_request=context / batch), curves)["total"]
    fitted = engine_time("vllm")
    expected = gpu_s + fitted["step_overhead_s"] + fitted["request_overhead_s"] * batch
    assert cost.verify_s(batch, float(context), batch) == pytest.approx(expected, rel=1e-9)  # a grid point
    own = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b",
                                              step_overhead_s=0.0, request_overhead_s=0.0),
                           base_dir=tmp_path, file=tmp_path / "s.yaml")
    assert own.verify_s(batch, float(context), batch) == pytest.approx(gpu_s, rel=1e-9)
    assert cost.kv_cache_tokens() > 0 and cost.draft_s("dspark", 7, 8) > 0  # the roofline's, same GPU and model
    from simlab.hardware.roofline_tables import roofline_for

    roofline = roofline_for("h100-sxm", "qwen3-8b", "vllm", 1)
    # an autoregressive round pays its once-per-round cost once, whatever its length: linear in gamma
    one, two, five = (cost.draft_s("eagle3", gamma, 8) for gamma in (1, 2, 5))
    assert five - one == pytest.approx(4 * (two - one), rel=1e-9)
    assert one - (two - one) > roofline.params.spec_round_overhead_s  # the round: the fusion and its host time
    scenario = tmp_path / "s.yaml"
    scenario.write_text("""name: ops
workload: {kind: closed_loop, concurrency: 4, num_requests: 16, prompt_tokens: {dist: constant, value: 256},
           output_tokens: {dist: constant, value: 32}}
hardware: {kind: operations, gpu: mi300x, model: qwen3-8b}
acceptance: {kind: iid, alpha: 0.7}
arms: [{name: no-spec, method: none}, {name: dspark, method: dspark, gamma: 7}]
""", encoding="utf-8")
    code, _, stderr = run_cli("run", str(scenario), "--out", str(tmp_path / "out"), "--no-plot")
    assert code == 0, stderr
    scenario.write_text(scenario.read_text().replace("gpu: mi300x", "gpu: h800"), encoding="utf-8")
    code, _, stderr = run_cli("run", str(scenario), "--out", str(tmp_path / "bad"), "--no-plot")
    assert code == 2 and "hardware.gpu" in stderr and "h800" in stderr and not (tmp_path / "bad").exists()


def test_a_verify_is_priced_as_its_requests_queries_over_their_context(tmp_path):
    from simlab.arm_engines import arm_engines
    from simlab.config.arms import Arm
    from simlab.config.hardware import OperationsHardware
    from simlab.config.scenario import EngineConfig
    from simlab.hardware import build_cost_model
    from simlab.hardware.operations_table import BATCH_TOKENS, CONTEXT_TOKENS, engine_time, with_verify_queries

    cfg = OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b")
    cost = build_cost_model(cfg, base_dir=tmp_path, file=None)
    curves, model = load_curves(GPUS["h100-sxm"]), get_model("qwen3-8b")
    fitted = engine_time("vllm")
    batch, context, q = BATCH_TOKENS[7], CONTEXT_TOKENS[4], 8  # 128 tokens: 16 requests of 8 queries, 4,096 each
    requests = batch // q
    gpu_s = price(decode_operations(model, num_requests=requests, queries_per_request=q,
                                    context_per_request=context / requests), curves)["total"]
    verify = with_verify_queries(cost, q)
    expected = gpu_s + fitted["step_overhead_s"] + fitted["request_overhead_s"] * requests
    assert verify.verify_s(batch, float(context), requests) == pytest.approx(expected, rel=1e-9)  # a grid point
    plain = cost.verify_s(batch, float(context), batch)
    # the same KV read, q-fold attention FLOPs, the engine's time per request over 16 requests instead of 128
    assert verify.verify_s(batch, float(context), requests) < plain
    engines = arm_engines(EngineConfig(), [Arm(method="none"), Arm(method="dflash", gamma=7)], cost)
    assert engines.arms[0].step_cost is cost
    assert engines.arms[1].step_cost.config.name.endswith("_q8")
    assert with_verify_queries(cost, 1) is cost


def test_operations_pad_steps_to_the_stacks_graphs_and_schedulers_read_the_engines_view(tmp_path):
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware import build_cost_model
    from simlab.hardware.sps_view import default_view, scheduler_view
    from simlab.hardware.stacks import get_stack

    for stack, view in (("vllm", "monotone"), ("sglang", "smooth")):
        cost = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b", stack=stack),
                                base_dir=tmp_path, file=None)
        assert cost.buckets.sizes == list(get_stack(stack).capture_sizes)
        assert cost.verify_s(33, 33_000.0) == cost.verify_s(40, 33_000.0)  # 33 tokens run the graph of 40
        # a load-aware scheduler reads its engine's view, not the staircase (it would stop at the first bucket edge)
        assert default_view(cost) == view and not scheduler_view(cost, None).buckets.enabled


def test_kind_operations_under_expert_parallelism_counts_every_gpu_and_refuses_what_cannot_be_laid_out():
    from simlab.common.errors import InputError
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware.gpus import gpus_per_replica
    from simlab.hardware.operations_table import build_operations

    def build(**fields):
        return build_operations(OperationsHardware(kind="operations", gpu="h200", **fields))

    groups = build(model="deepseek-v3", tensor_parallel=1, expert_parallel=8, precision="fp8", stack="sglang")
    described = groups.describe()
    assert gpus_per_replica(described) == 8 and described["provenance"]["attention_groups"] == 8
    assert described["provenance"]["priced_by"]["all-to-all"] == "hw_profiles/kernels/h200.yaml"
    # per request, eight groups of one request each step faster than one group of eight
    whole = build(model="deepseek-v3", tensor_parallel=8, precision="fp8", stack="sglang")
    assert groups.verify_s(8, 8 * 2000.0) < 8 * groups.verify_s(1, 2000.0)
    assert gpus_per_replica(whole.describe()) == 8 and "all-to-all" not in whole.describe()["provenance"]["priced_by"]
    # a tensor-parallel table counts its GPUs (it counted one before)
    assert gpus_per_replica(build(model="qwen3-32b", tensor_parallel=2).describe()) == 2
    assert OperationsHardware(kind="operations", gpu="h200", model="qwen3-8b").model_dump().get(
        "expert_parallel") is None  # a dump without expert parallelism is as it was
    for model, ep, why in (("qwen3-8b", 2, "dense"), ("deepseek-v3", 3, "does not divide")):
        with pytest.raises(InputError) as err:
            build(model=model, tensor_parallel=1, expert_parallel=ep)
        assert err.value.field == "hardware.expert_parallel" and why in str(err.value)


def test_kind_operations_runs_on_its_stacks_release():
    """The operation model's table carries its stack's release (stack_version, else the newest): its arms take the
    release's engine defaults, and a speculative arm's CUDA graphs follow the release's rule on the arm's own
    table of 1 + gamma queries a request (before, the rule rebuilt the plain decode table)."""
    from simlab.arm_engines import arm_engines
    from simlab.common.errors import InputError
    from simlab.config.arms import Arm
    from simlab.config.hardware import OperationsHardware
    from simlab.config.scenario import EngineConfig
    from simlab.hardware.graph_sizes import spec_decode_sizes
    from simlab.hardware.operations_table import build_operations
    from simlab.hardware.releases import get_release

    def build(**fields):
        return build_operations(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b", **fields))

    cost = build(stack="vllm")
    newest = get_release("vllm", None)
    assert cost.release is newest and not cost.release_named
    arms = [Arm.model_validate({"name": "plain", "method": "none"}),
            Arm.model_validate({"name": "e3", "method": "eagle3", "gamma": 3})]
    plain, eagle = arm_engines(EngineConfig(), arms, cost).arms
    assert plain.config.max_num_seqs == newest.default("max_num_seqs", "h100-sxm").value
    assert plain.settings.origin["max_num_seqs"] == f"{newest.label} default"
    assert eagle.step_cost.name.endswith("_q4")  # the verify's own queries, kept under the release's graph rule
    rule = newest.speculative["cuda_graph_sizes"].value
    assert list(eagle.step_cost.buckets.sizes) == spec_decode_sizes(cost.buckets.sizes, 4, rule)
    assert eagle.step_cost.release is newest
    older = build(stack="vllm", stack_version="0.13.0")
    assert older.release.version == "0.13.0" and older.release_named
    with pytest.raises(InputError) as err:
        arm_engines(EngineConfig(), [Arm.model_validate({"name": "d", "method": "dspark", "gamma": 5})], older)
    assert err.value.field == "arms[0].method"
    with pytest.raises(InputError) as err:
        build(stack="vllm", stack_version="9.9")
    assert err.value.field == "hardware.stack_version"


def test_kind_operations_refuses_a_layout_its_roofline_refuses():
    """The table takes its KV capacity and its drafters' host times from the roofline of the same layout: a model
    that does not fit is the roofline's refusal (before, the table priced its drafters at 0 and held no KV)."""
    from simlab.common.errors import InputError
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware.operations_table import build_operations

    with pytest.raises(InputError) as err:
        build_operations(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-235b-a22b"))
    assert "does not fit" in str(err.value) and err.value.field.startswith("hardware")
