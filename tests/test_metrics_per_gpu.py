"""Per-GPU figures: num_gpus = replicas x GPUs per replica (the tensor-parallel degree a roofline or a profile
records, else 1), output_throughput_per_gpu = output_throughput / num_gpus."""

import pytest

from simlab.hardware import build_cost_model
from simlab.hardware.gpus import gpus_per_replica
from simlab.config import RooflineHardware
from simlab.runner import run_scenario

from studies_scenarios import linear_scenario, linear_table


@pytest.mark.parametrize("hardware, gpus", [
    ("h200_llama-3-70b-tp8", 8), ("a100-80g_llama-3-70b-tp4", 4), ("h100-sxm_qwen3-8b", 1),
    ("h200_qwen3-8b_measured", 1),
    (RooflineHardware(kind="roofline", gpu="h100", model="llama-3-70b", tensor_parallel=4), 4),
    (RooflineHardware(kind="roofline", gpu="h100", model="qwen3-8b"), 1),
])
def test_gpus_per_replica_of_shipped_profiles_and_rooflines(tmp_path, hardware, gpus):
    assert gpus_per_replica(build_cost_model(hardware, base_dir=tmp_path, file=None).describe()) == gpus


def test_a_table_whose_provenance_records_tensor_parallelism():
    assert gpus_per_replica({"kind": "table", "provenance": {"tensor_parallel": 2}}) == 2
    assert gpus_per_replica({"kind": "table", "provenance": {"source": {"tensor_parallel": 8}}}) == 8
    assert gpus_per_replica({"kind": "table"}) == 1


def test_summary_has_num_gpus_and_throughput_per_gpu():
    scenario = linear_scenario(concurrency=4, num_requests=16)
    scenario["engine"]["replicas"] = 3
    metrics = run_scenario(scenario, plot=False).arms
    for m in metrics.values():
        assert m["num_gpus"] == 3
        assert m["output_throughput_per_gpu"] == pytest.approx(m["output_throughput"] / 3, rel=1e-15)
        assert m["median_user_tok_s"] > 0
    tp8 = {**linear_scenario(concurrency=2, num_requests=4), "hardware": {**linear_table(),
                                                                          "provenance": {"tensor_parallel": 8}}}
    assert run_scenario(tp8, plot=False).arms["no-spec"]["num_gpus"] == 8
