"""simlab plan: the contract's plan file runs; the bounded search finds what exhaustive search finds, and the
chosen deployment re-run with simlab run meets the SLA; resume, budget, bad input, an SLA nothing meets."""

import json

import pytest
import yaml

from helpers import CONTRACT_DIR, run_cli

DEPLOYMENT_KEYS = {"gpu", "stack", "precision", "tensor_parallel", "expert_parallel", "replicas", "disaggregation",
                   "arm", "num_gpus", "usd_per_hour", "meets_sla", "metrics", "engine"}


def small_plan(tmp_path, name="plan.yaml", **plan):
    """The contract's plan, shrunk: fewer requests, one or two GPUs, a few replicas."""
    data = yaml.safe_load((CONTRACT_DIR / "plan.yaml").read_text())
    data["workload"].update(num_requests=300, rate=40.0)
    data["arms"] = data["arms"][:2]
    data["plan"].update({"gpus": [{"gpu": "h100-sxm", "usd_per_hour": 2.5}, {"gpu": "h200", "usd_per_hour": 3.6}],
                         "precision": ["bf16", "fp8"], "tensor_parallel": [1, 2], "max_gpus": 6,
                         "sla": "p90_tpot_ms<=22,p90_ttft_ms<=1500"})
    data["plan"].update(plan)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_contract_plan_file_runs_as_given(tmp_path):
    out = tmp_path / "plan"
    code, stdout, stderr = run_cli("plan", str(CONTRACT_DIR / "plan.yaml"), "--out", str(out), "--workers", "2",
                                   "--quiet")
    assert code == 0, stderr
    doc = json.loads((out / "plan.json").read_text())
    assert set(doc) >= {"sla", "objective", "best", "candidates"}
    assert doc["sla"] == {"p90_tpot_ms": ["<=", 25.0], "p90_ttft_ms": ["<=", 2000.0]}
    assert doc["objective"] == "usd_per_hour"
    assert doc["best"] is not None and doc["best"] == doc["candidates"][0]
    for c in doc["candidates"]:
        assert DEPLOYMENT_KEYS <= set(c)
    keys = [(not c["meets_sla"], c["objective"]) for c in doc["candidates"]]
    assert keys == sorted(keys, key=lambda k: (k[0], k[1] if k[1] is not None else float("inf")))
    vllm = [p for p in out.iterdir() if "vllm" in p.name]
    assert vllm and vllm[0].read_text().startswith("vllm serve")
    assert doc["search"]["num_simulated"] < doc["search"]["num_candidate_deployments"]


def test_bounded_search_equals_exhaustive_and_the_answer_reruns(tmp_path):
    from simlab.studies.plan import run_plan
    from simlab.studies.sla import parse_sla

    path = small_plan(tmp_path)
    bounded = run_plan(path, tmp_path / "bounded", workers=2, report=False).document
    exhaustive = run_plan(path, tmp_path / "all", workers=2, report=False, exhaustive=True).document
    assert exhaustive["search"]["num_simulated"] == exhaustive["search"]["num_candidate_deployments"]
    assert bounded["search"]["num_simulated"] < exhaustive["search"]["num_simulated"]
    assert bounded["best"] is not None
    identity = ("gpu", "stack", "precision", "tensor_parallel", "expert_parallel", "replicas", "arm", "usd_per_hour")
    assert {k: bounded["best"][k] for k in identity} == {k: exhaustive["best"][k] for k in identity}
    def timeless(m):
        return {k: v for k, v in m.items() if k != "sim_wall_s"}

    assert timeless(bounded["best"]["metrics"]) == timeless(exhaustive["best"]["metrics"])
    for arm, best in exhaustive["best_by_arm"].items():  # every arm's cheapest, too
        assert (best and best["usd_per_hour"]) == (bounded["best_by_arm"][arm] and
                                                   bounded["best_by_arm"][arm]["usd_per_hour"])
    # the chosen deployment as a scenario: simlab run gives its metrics, and they meet the SLA
    rerun = tmp_path / "rerun"
    code, _, stderr = run_cli("run", str(tmp_path / "bounded" / "best.yaml"), "--out", str(rerun), "--no-plot", "-q")
    assert code == 0, stderr
    metrics = next(iter(json.loads((rerun / "summary.json").read_text())["arms"].values()))
    sla = parse_sla(bounded["best"] and "p90_tpot_ms<=22,p90_ttft_ms<=1500")
    assert sla.meets(metrics)
    assert metrics["p90_tpot_ms"] == bounded["best"]["metrics"]["p90_tpot_ms"]
    assert metrics["num_gpus"] == bounded["best"]["num_gpus"]


def test_rerun_resumes_and_budget_stops_early(tmp_path):
    from simlab.studies.plan import run_plan

    path = small_plan(tmp_path, max_gpus=4)
    first = run_plan(path, tmp_path / "p", workers=1, report=False).document
    again = run_plan(path, tmp_path / "p", workers=1, report=False).document
    assert again["search"]["num_simulated"] == 0
    assert again["search"]["num_from_earlier_run"] == first["search"]["num_simulated"]
    assert again["best"] == first["best"]
    short = run_plan(path, tmp_path / "b", workers=1, report=False, budget_s=1e-6).document
    assert short["complete"] is False
    assert short["search"]["num_simulated"] <= 1


def test_an_sla_nothing_meets_exits_0_naming_the_closest(tmp_path):
    path = small_plan(tmp_path, sla="p90_tpot_ms<=1", max_gpus=2, tensor_parallel=[1], precision="fp8")
    path_text = yaml.safe_load(path.read_text())
    path_text["plan"]["sla"] = "p90_tpot_ms<=9,p90_ttft_ms<=1500"
    path.write_text(yaml.safe_dump(path_text))
    code, _, stderr = run_cli("plan", str(path), "--out", str(tmp_path / "none"), "-q", "--workers", "1")
    assert code == 0, stderr
    doc = json.loads((tmp_path / "none" / "plan.json").read_text())
    assert doc["best"] is None
    assert "closest" in stderr and "p90_tpot_ms<=9" in stderr
    assert not (tmp_path / "none" / "launch_vllm.sh").exists()


@pytest.mark.parametrize("edit, field, valid", [
    (lambda d: d["plan"]["gpus"].append({"gpu": "tpu-v9"}), "plan.gpus[2].gpu", "h100-sxm"),
    (lambda d: d["plan"]["gpus"][0].update(usd_per_hour=0), "plan.gpus[0].usd_per_hour", ""),
    (lambda d: d["plan"]["gpus"][0].update(usd_per_hour=-2.5), "plan.gpus[0].usd_per_hour", ""),
    (lambda d: d["arms"].append({"name": "x", "gamma": 3}), "arms[3].method", "eagle3"),
    (lambda d: d["arms"].append({"vllm": {"num_speculative_tokens": 3}}), "arms[3].vllm.method", "eagle3"),
    (lambda d: d.update(model="deepseek-v3"), "model", "max_gpus"),
    (lambda d: d["plan"].update(sla="p90_tpot_ms<25"), "plan.sla", "METRIC<=VALUE"),
    (lambda d: d["plan"].update(sla="p90_tpot<=25"), "plan.sla", "p90_tpot_ms"),
    (lambda d: d["plan"].update(objective="usd"), "plan.objective", "usd_per_hour"),
])
def test_bad_plans_exit_2_naming_the_field(tmp_path, edit, field, valid):
    data = yaml.safe_load((CONTRACT_DIR / "plan.yaml").read_text())
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, stderr = run_cli("plan", str(path), "--out", str(tmp_path / "out"), "-q")
    assert code == 2, stderr
    assert field in stderr and valid in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_arms_as_vllm_and_sglang_flags_translate_both_ways(tmp_path):
    from simlab.studies.launch import sglang_command, vllm_command
    from simlab.studies.plan_arms import read_arm

    vllm = read_arm({"name": "e", "vllm": {"method": "eagle3", "model": "org/drafter", "num_speculative_tokens": 4}},
                    0, file="p.yaml")
    assert vllm.arm == {"name": "e", "method": "eagle3", "gamma": 4} and vllm.drafter == "org/drafter"
    tree = read_arm({"sglang": "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 4 "
                               "--speculative-num-draft-tokens 8 --speculative-draft-model-path org/d"}, 1,
                    file="p.yaml")
    assert tree.arm == {"method": "eagle3", "gamma": 3, "tree": {"topk": 4, "num_draft_tokens": 8}}
    mtp = read_arm({"sglang": {"speculative_algorithm": "NEXTN", "speculative_num_steps": 2}}, 2, file="p.yaml")
    assert mtp.arm == {"method": "mtp", "gamma": 2}
    hw = {"tensor_parallel": 2, "expert_parallel": 1, "precision": "fp8"}
    line = vllm_command(hw, vllm.arm, {}, "Qwen/Qwen3-8B", vllm.drafter)
    config = json.loads(line.split("--speculative-config ")[1].strip("'"))
    assert config == {"method": "eagle3", "model": "org/drafter", "num_speculative_tokens": 4}
    assert line.startswith("vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2")
    back = sglang_command(hw, tree.arm, {}, "Qwen/Qwen3-8B", tree.drafter)
    flags = back.split("--speculative-algorithm")[1]
    again = read_arm({"sglang": "--speculative-algorithm" + flags}, 3, file="p.yaml")
    assert again.arm == tree.arm and again.drafter == "org/d"


def test_disaggregated_splits_are_searched_and_launch_per_pool(tmp_path):
    from simlab.studies.launch import launch_commands
    from simlab.studies.plan import run_plan

    path = small_plan(tmp_path, gpus=[{"gpu": "h100-sxm", "usd_per_hour": 2.5}], precision="fp8",
                      tensor_parallel=[1], max_gpus=4, disaggregation=True)
    doc = run_plan(path, tmp_path / "pd", workers=2, report=False).document
    splits = [c for c in doc["candidates"] if c["disaggregation"]]
    assert splits, "no prefill:decode split was simulated"
    for c in splits:
        d = c["disaggregation"]
        assert c["replicas"] == d["prefill_replicas"] + d["decode_replicas"]
        assert c["num_gpus"] == c["replicas"]
        assert c["engine"]["disaggregation"]["prefill_replicas"] == d["prefill_replicas"]
    scenario = {"hardware": {"tensor_parallel": 1, "expert_parallel": 1, "precision": "fp8"},
                "arms": [{"method": "eagle3", "gamma": 3}], "engine": {}}
    commands = launch_commands(splits[0], scenario, "Qwen/Qwen3-8B", None)
    assert len(commands["vllm"]) == 2 and all(c.startswith("vllm serve") for c in commands["vllm"])
    assert "--speculative-config" not in commands["vllm"][0] and "--speculative-config" in commands["vllm"][1]
    assert "--disaggregation-mode prefill" in commands["sglang"][0]


def test_simlab_report_redraws_a_plan_folder(tmp_path):
    from simlab.studies.plan import run_plan

    path = small_plan(tmp_path, max_gpus=2, tensor_parallel=[1], precision="fp8")
    out = run_plan(path, tmp_path / "p", workers=1).out
    first = (out / "report.html").read_text()
    (out / "report.html").unlink()
    code, stdout, stderr = run_cli("report", str(out))
    assert code == 0, stderr
    page = (out / "report.html").read_text()
    assert page == first and "data:image/png;base64," in page and "vllm serve" in page
