"""simlab plan's answer a person acts on (issue 48): a predictable tie-break at equal cost (no speculation and fewer
moving parts first, then headroom; or the faster user with --prefer fastest), the verdict in words, its cautions."""

import json
import math

import pytest
import yaml

from helpers import CONTRACT_DIR, run_cli
from pathlib import Path
from simlab.studies.plan_ranking import headroom, least_headroom
from simlab.studies.plan_verdict import plan_warnings, usd_per_million_tokens, verdict
from simlab.studies.sla import parse_sla

REPO = Path(__file__).resolve().parents[1]


def test_headroom_is_the_relative_slack_of_each_condition():
    sla = parse_sla("p90_tpot_ms<=25,output_throughput>=1000")
    room = headroom(sla, {"p90_tpot_ms": 20.0, "output_throughput": 1500.0})
    assert room == {"p90_tpot_ms<=25": pytest.approx(0.2), "output_throughput>=1000": pytest.approx(0.5)}
    assert least_headroom(sla, {"p90_tpot_ms": 30.0, "output_throughput": 1500.0}) == pytest.approx(-0.2)
    assert least_headroom(sla, {"p90_tpot_ms": 20.0}) == -math.inf  # a metric not simulated: no headroom


@pytest.fixture(scope="module")
def contract_plans(tmp_path_factory):
    """The contract's plan (three arms that all need 2 H100s at $5.00/h), with the default tie-break and with
    --prefer fastest."""
    out = tmp_path_factory.mktemp("plans")
    docs = {}
    for prefer in ("simplest", "fastest"):
        folder = out / prefer
        code, stdout, stderr = run_cli("plan", str(CONTRACT_DIR / "plan.yaml"), "--out", str(folder), "--workers",
                                       "2", "--prefer", prefer)
        assert code == 0, stderr
        docs[prefer] = (json.loads((folder / "plan.json").read_text()), stdout, folder)
    return docs


def test_at_equal_cost_no_speculation_is_chosen_and_the_verdict_says_what_speculation_would_buy(contract_plans):
    doc, stdout, folder = contract_plans["simplest"]
    best = doc["best"]
    tied = [c for c in doc["candidates"] if c["meets_sla"] and c["usd_per_hour"] == best["usd_per_hour"]]
    assert {c["arm"] for c in tied} >= {"no-spec", "eagle3"}  # the tie the rule breaks
    # vLLM serves no DSpark drafter (engine_releases/vllm.yaml): the arm is in no deployment, and the plan says so
    assert "dspark-adaptive" not in {c["arm"] for c in doc["candidates"]}
    assert {f["status"] for f in doc["search"]["families"] if f["arm"] == "dspark-adaptive"} == {"not served"}
    (caution,) = [w for w in plan_warnings(doc) if "dspark-adaptive" in w]
    assert caution.startswith("dspark-adaptive is not in this plan: vllm 0.34.0 does not serve dspark")
    assert "dspark-adaptive is not in this plan" in (folder / "report.html").read_text()  # on the page too
    assert best["arm"] == "no-spec" and best["moving_parts"] == []
    assert doc["prefer"] == "simplest"
    # among the tied, nothing ranked above another has more moving parts
    parts = [len(c["moving_parts"]) for c in tied]
    assert parts == sorted(parts)
    text = doc["verdict"]
    assert text.startswith("Run qwen3-8b on 2 replicas of h100-sxm") and "without speculation" in text
    assert f"${best['usd_per_hour']:,.2f}/h" in text
    assert f"${usd_per_million_tokens(best):,.3f} per million output tokens" in text
    tpot = best["metrics"]["p90_tpot_ms"]
    assert f"p90_tpot_ms {tpot:,.4g} against <= 25, {(25 - tpot) / 25:.0%} headroom" in text
    assert "costs the same" in text and "saves nothing at this load" in text
    fastest_spec = min((d for d in doc["best_by_arm"].values() if d and d["moving_parts"]),
                       key=lambda d: (d["usd_per_hour"], d["metrics"]["p90_tpot_ms"]))
    assert f"it would buy p90_tpot_ms {fastest_spec['metrics']['p90_tpot_ms']:,.4g}" in text
    # the command ends with the verdict and the launch files
    tail = " ".join(stdout.split())
    assert " ".join(text.split()) in tail
    assert tail.rstrip().endswith(f"{folder / 'launch_vllm.sh'}, {folder / 'launch_sglang.sh'}")
    page = (folder / "report.html").read_text()
    assert page.index("Which deployment of") < page.index("Run qwen3-8b") < page.index("made by")


def test_prefer_fastest_takes_the_faster_user_at_equal_cost(contract_plans):
    simplest, fastest = contract_plans["simplest"][0], contract_plans["fastest"][0]
    assert fastest["prefer"] == "fastest"
    assert fastest["best"]["usd_per_hour"] == simplest["best"]["usd_per_hour"]
    tied = [c for c in fastest["candidates"] if c["meets_sla"] and c["usd_per_hour"] == fastest["best"]["usd_per_hour"]]
    assert fastest["best"]["metrics"]["median_user_tok_s"] == max(c["metrics"]["median_user_tok_s"] for c in tied)
    assert fastest["best"]["moving_parts"]  # speculation is the faster one here
    assert "the faster median user first" in fastest["verdict"]


def test_a_bad_preference_exits_2_naming_it(tmp_path):
    code, _, stderr = run_cli("plan", str(CONTRACT_DIR / "plan.yaml"), "--out", str(tmp_path / "p"), "--prefer",
                              "cheapest")
    assert code == 2 and "--prefer" in stderr and "simplest or fastest" in stderr
    assert not (tmp_path / "p").exists()


def test_a_plan_file_sets_the_preference(tmp_path):
    data = yaml.safe_load((CONTRACT_DIR / "plan.yaml").read_text())
    data["plan"]["prefer"] = "quickest"
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, stderr = run_cli("plan", str(path), "--out", str(tmp_path / "p"))
    assert code == 2 and "plan.prefer" in stderr


def _doc(model: str, parts: dict) -> dict:
    return {"model": model, "arm_moving_parts": parts}


def test_a_mixture_of_experts_plan_with_speculation_carries_the_gain_checks_caution():
    notice, caution = plan_warnings(_doc("qwen3-30b-a3b", {"no-spec": [], "eagle3": ["an eagle3 drafter"]}))
    assert "mixture of experts" in notice and "MoE latency calibration" in notice  # at the top of every MoE page
    assert "mixture of experts" in caution and "upper bound" in caution
    assert "32+ users: median error" in caution
    only = plan_warnings(_doc("qwen3-30b-a3b", {"no-spec": []}))  # no speculation: the notice, no gain caution
    assert len(only) == 1 and "upper bound" not in only[0]
    assert plan_warnings(_doc("qwen3-8b", {"eagle3": ["an eagle3 drafter"]})) == []  # dense gains hold (2-5 %)


def test_the_verdict_without_an_answer_names_the_closest():
    near = {"replicas": 4, "disaggregation": None, "gpu": "h100-sxm", "stack": "vllm", "precision": "bf16",
            "tensor_parallel": 1, "expert_parallel": 1, "num_gpus": 4, "usd_per_hour": 10.0, "arm": "no-spec",
            "moving_parts": [], "failing": ["p90_tpot_ms<=5 (p90_tpot_ms=9.1)"]}
    text = verdict({"best": None, "closest": near, "complete": True})
    assert text.startswith("No deployment within the plan's max_gpus meets the SLA.")
    assert "4 replicas of h100-sxm vllm bf16 tp1 without speculation (4 GPUs, $10.00/h)" in text
    assert "misses p90_tpot_ms<=5 (p90_tpot_ms=9.1)" in text


def test_the_progress_ends_with_what_ran():
    """A plan's total is an estimate that shrinks as bounds rule deployments out: the last line says what ran."""
    import io

    from simlab.studies.progress import PlainProgress

    stream = io.StringIO()
    progress = PlainProgress(stream)
    progress.start(28, label="deployments")
    progress.add(-6)
    for name in ("a", "b"):
        progress.done(name)
    progress.done("c", failed=True)
    progress.close()
    assert stream.getvalue().splitlines()[-1] == "finished: 3 deployments in 0:00, 1 failed"


def test_launch_files_say_what_was_simulated_and_what_to_fill_in(contract_plans):
    """--prefer fastest chooses eagle3 (no drafter named in the contract's plan): the vLLM file is the release
    simulated, with the drafter to fill in; the SGLang file is the newest SGLang release, says it was not simulated,
    and takes EAGLE's topk flag; SGLang chunks as the simulation did."""
    from simlab.hardware.releases import known_versions

    doc, _, folder = contract_plans["fastest"]
    assert doc["best"]["arm"] == "eagle3"
    vllm = (folder / "launch_vllm.sh").read_text()
    sglang = (folder / "launch_sglang.sh").read_text()
    assert vllm.startswith("vllm serve")
    release = doc["best"]["metrics"]["engine"]["stack_version"]
    assert f"# simulated on {release}" in vllm and "NOT SIMULATED" not in vllm and "NOT IN" not in vllm
    assert '"method":"eagle3"' in vllm and "# FILL IN: <eagle3 drafter for Qwen/Qwen3-8B>" in vllm
    newest = f"sglang {known_versions('sglang')[-1]}"
    assert f"# NOT SIMULATED: simlab planned this deployment on {release}; this is the same deployment in {newest}" \
        in sglang
    assert "# FILL IN: <eagle3 drafter for Qwen/Qwen3-8B>" in sglang and "--speculative-eagle-topk 1" in sglang
    engine = doc["best"]["metrics"]["engine"]
    chunk = engine.get("prefill_chunk_tokens") or engine["max_batch_tokens"]
    assert f"--chunked-prefill-size {chunk} " in sglang


def test_a_launch_file_for_a_release_without_the_drafter_says_so_and_serves_without_it():
    """A DSpark deployment planned on SGLang 0.5.23: its vLLM file (the newest vLLM, which serves no DSpark
    drafter) says so and leaves speculation out; the SGLang file has no EAGLE tree flag and says the engine has no
    flag for the adaptive scheduler."""
    from simlab.hardware.releases import get_release
    from simlab.studies.launch import launch_notes, sglang_command, vllm_command

    deployment = {"stack": "sglang", "replicas": 2, "metrics": {"engine": {"stack_version": "sglang 0.5.23"}}}
    arm = {"method": "dspark", "gamma": 7, "scheduler": {"kind": "adaptive"}}
    hardware = {"tensor_parallel": 1, "precision": "bf16"}
    vllm_notes = launch_notes("vllm", deployment, arm, None, "Qwen/Qwen3-8B")
    newest = get_release("vllm", None)
    assert any(n.startswith(f"# NOT IN {newest.label}: it serves the drafters") for n in vllm_notes)
    assert "--speculative-config" not in vllm_command(hardware, arm, {}, "Qwen/Qwen3-8B", None, None, newest)
    sglang_notes = launch_notes("sglang", deployment, arm, None, "Qwen/Qwen3-8B")
    assert "# simulated on sglang 0.5.23" in sglang_notes[0]
    assert any("adaptive scheduler; sglang 0.5.23 has no flag for it" in n for n in sglang_notes)
    command = sglang_command(hardware, arm, {}, "Qwen/Qwen3-8B", None, None, get_release("sglang", "0.5.23"))
    assert "--speculative-algorithm DSPARK" in command and "--speculative-eagle-topk" not in command


@pytest.mark.parametrize("plan", sorted(p.name for p in (REPO / "reports" / "plan").iterdir() if p.is_dir()))
def test_shipped_launch_files_name_the_release_simulated_and_every_named_drafter(plan):
    """Each shipped plan's launch files name plan.json's release, and a drafter the plan names is in the command
    (no placeholder where a public checkpoint exists)."""
    from simlab.studies.plan_arms import read_arm

    folder = REPO / "reports" / "plan" / plan
    doc = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    if doc["best"] is None:
        return
    release = doc["best"]["metrics"]["engine"]["stack_version"]
    spec = yaml.safe_load((REPO / "scenarios" / "studies" / "plan" / f"{plan}.yaml").read_text(encoding="utf-8"))
    arms = [read_arm(raw, i, file=f"{plan}.yaml") for i, raw in enumerate(spec["arms"])]
    chosen = next(a for a in arms if a.arm.get("name", a.arm["method"]) == doc["best"]["arm"] or
                  json.dumps(a.arm).find(doc["best"]["arm"]) >= 0)
    for engine in ("vllm", "sglang"):
        text = (folder / f"launch_{engine}.sh").read_text(encoding="utf-8")
        assert f"simulated on {release}" in text or f"planned this deployment on {release}" in text
        if chosen.drafter:
            assert "drafter for" not in text and (chosen.drafter in text or "# NOT IN" in text)


def test_a_load_scales_the_way_its_kind_carries_load():
    from simlab.studies.plan_sensitivity import scaled_workload

    assert scaled_workload({"kind": "poisson", "rate": 30.0}, 1.2)["rate"] == pytest.approx(36.0)
    assert scaled_workload({"kind": "gamma", "rate": 10.0, "cv": 2.0}, 0.8)["rate"] == pytest.approx(8.0)
    assert scaled_workload({"kind": "trace", "path": "x", "time_scale": 0.5}, 1.25)["time_scale"] == pytest.approx(0.4)
    assert scaled_workload({"kind": "closed_loop", "concurrency": 64}, 1.2)["concurrency"] == 77
    assert scaled_workload({"kind": "closed_loop", "concurrency": 1}, 0.8)["concurrency"] == 1


def test_the_answer_is_resimulated_at_20_percent_less_and_more_load(contract_plans):
    """The contract's answer (no speculation, 11 % TPOT headroom) misses at 20 % more load; the page, plan.json
    and the verdict say so and name the cheapest deployment that holds there, simulated at that load."""
    doc, _, folder = contract_plans["simplest"]
    spread = doc["sensitivity"]
    assert set(spread["load_factors"]) == {"0.8", "1.2"}
    lower, higher = spread["load_factors"]["0.8"], spread["load_factors"]["1.2"]
    tpot = doc["best"]["metrics"]["p90_tpot_ms"]
    assert lower["metrics"]["p90_tpot_ms"] < tpot < higher["metrics"]["p90_tpot_ms"]  # more load, slower
    assert lower["meets_sla"] and lower["headroom"]["p90_tpot_ms<=25"] > doc["best"]["headroom"]["p90_tpot_ms<=25"]
    assert not higher["meets_sla"] and higher["headroom"]["p90_tpot_ms<=25"] < 0
    other = spread["at_higher_load"]
    assert other["meets_sla"] and other["metrics"]["p90_tpot_ms"] <= 25
    assert other["usd_per_hour"] >= doc["best"]["usd_per_hour"]
    assert "At 20% more load it misses p90_tpot_ms<=25; the cheapest that holds there is" in doc["verdict"]
    page = (folder / "report.html").read_text()
    assert "The chosen deployment at other loads" in page
