"""``simlab profiles fit`` on engine benchmark results (vLLM --save-result JSON, SGLang bench_serving JSONL).

The fixtures are files in the engines' formats whose numbers the engine's replay of each run made with a known step
overhead (1.2 ms), request overhead (20 us), attention and prefill efficiencies (0.9, 0.5) on the shipped
operator-level calibration (``replayed_numbers``;
``python tests/test_hardware_benchfit.py`` rewrites them), so the fit can be checked against the truth."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simlab.hardware.profiles import load_profile

BENCH = Path(__file__).parent / "fixtures" / "bench"
FILES = [BENCH / "vllm_c1.json", BENCH / "vllm_c4.json", BENCH / "sglang_runs.jsonl"]
# every parameter the fit may fit, so that the fixtures depend on the shipped calibration's operator-level fit only
TRUTH = {"step_overhead_s": 1.2e-3, "request_overhead_s": 2e-5, "attention_efficiency": 0.9,
         "prefill_efficiency": 0.5}
NUMBERS = ("mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "median_itl_ms", "output_throughput", "duration",
           "request_throughput")


def replayed_numbers(run: dict, label: str) -> dict:
    """``run`` with its measured numbers replaced by the engine's replay of it on H100 x Qwen3-8B x vLLM with the
    shipped operator-level calibration and :data:`TRUTH` (the fit's defaults for --max-num-seqs and
    --max-batch-tokens)."""
    from dataclasses import replace

    from simlab.config.hardware import RooflineHardware
    from simlab.calibration.benchfit import run_record
    from simlab.hardware.roofline_build import build_roofline
    from simlab.calibration.profile_check import replay_record

    record = run_record(run, label=label, gpu="h100-sxm", model="qwen3-8b", stack="vllm", precision="bf16",
                        kv_precision="bf16", max_num_seqs=1024, max_batch_tokens=8192)
    shipped = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"))
    made = replay_record(record, replace(shipped.params, **TRUTH))
    tpot, throughput = round(made["mean_tpot_ms"], 4), round(made["output_throughput_tok_s"], 4)
    duration = run["total_output_tokens"] / throughput
    values = {"mean_tpot_ms": tpot, "median_tpot_ms": tpot, "mean_itl_ms": tpot, "median_itl_ms": tpot,
              "output_throughput": throughput, "duration": duration, "request_throughput": run["completed"] / duration}
    return {**run, **{k: v for k, v in values.items() if k in run}}


def _runs(path: Path) -> list[dict]:
    text = path.read_text()
    return [json.loads(text)] if path.suffix == ".json" else [json.loads(line) for line in text.splitlines()]


def write_fixtures() -> None:
    for path in FILES:
        runs = [replayed_numbers(run, f"{path}#{i + 1}") for i, run in enumerate(_runs(path))]
        path.write_text(json.dumps(runs[0], indent=1) + "\n" if path.suffix == ".json"
                        else "".join(json.dumps(run) + "\n" for run in runs))


def test_the_fixtures_numbers_are_the_engine_replay_at_the_truth():
    for path in FILES:
        for i, run in enumerate(_runs(path)):
            made = replayed_numbers(run, f"{path}#{i + 1}")
            for key in NUMBERS:
                if key in run:
                    assert run[key] == pytest.approx(made[key], rel=1e-6), (path, key)


def fit(*args, out=None):
    cmd = [sys.executable, "-m", "simlab", "profiles", "fit", *map(str, args)]
    if out is not None:
        cmd += ["--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_the_fit_recovers_the_step_overhead_and_writes_a_loadable_profile(tmp_path):
    out = tmp_path / "mine.yaml"
    run = fit(*FILES, "--gpu", "h100-sxm", "--model", "qwen3-8b", out=out)
    assert run.returncode == 0, run.stderr
    assert "4 runs fitted" in run.stdout and "residual median" in run.stdout
    profile = load_profile(out)
    fit_doc = profile.config.provenance["fit"]
    step, se = fit_doc["fitted"]["step_overhead_s"], fit_doc["standard_errors"]["step_overhead_s"]
    assert abs(step - 1.2e-3) <= max(4 * se, 1e-6)  # the truth, within four standard errors
    for key, true in TRUTH.items():  # every fitted parameter, within four of its standard errors
        assert abs(fit_doc["fitted"][key] - true) <= 4 * fit_doc["standard_errors"][key], key
    assert fit_doc["residual_max_abs"] < 0.002 and len(fit_doc["residuals"]) == 8  # TPOT and throughput of 4 runs
    assert fit_doc["residuals_of"] == "engine replay"
    # the file's own error, stated beside the roofline's: what a scenario naming the profile gets on these runs
    from simlab.calibration.benchfit import read_runs, run_record
    from simlab.calibration.profile_check import simulate_record

    errors = []
    for path in FILES:
        for i, one in enumerate(read_runs(path)):
            record = run_record(one, label=f"{path}#{i + 1}", gpu="h100-sxm", model="qwen3-8b", stack="vllm",
                                precision="bf16", kv_precision="bf16", max_num_seqs=1024, max_batch_tokens=8192)
            simulated = simulate_record(record, hardware=str(out))
            errors += [abs(simulated["mean_tpot_ms"] / record.mean_tpot_ms - 1),
                       abs(simulated["output_throughput_tok_s"] / record.output_throughput_tok_s - 1)]
    assert fit_doc["profile_residual_max_abs"] == pytest.approx(max(errors), abs=1e-4)
    assert 0.005 < fit_doc["profile_residual_max_abs"] < 0.05  # the table samples the per-request time
    assert profile.config.provenance["source"]["parameters"]["stack"] == "vllm"
    assert profile.verify_s(1) > 0 and profile.kv_cache_tokens() > 0


def test_two_values_fit_only_the_step_overhead(tmp_path):
    out = tmp_path / "one.yaml"
    run = fit(FILES[0], "--gpu", "h100-sxm", "--model", "qwen3-8b", "--stack", "sglang", out=out)
    assert run.returncode == 0, run.stderr
    fitted = load_profile(out).config.provenance["fit"]["fitted"]
    assert list(fitted) == ["step_overhead_s"]


@pytest.mark.parametrize("content,needle", [
    ("{not json", "not JSON or JSON lines"),
    (json.dumps({"completed": 3, "mean_tpot_ms": 7.0}), "lacks total_input_tokens, total_output_tokens"),
    (json.dumps({"completed": 3, "total_input_tokens": 30, "total_output_tokens": 30, "max_concurrency": 1}),
     "states neither mean_tpot_ms nor output_throughput"),
])
def test_a_file_that_is_not_a_benchmark_result_is_exit_2_naming_it(tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    run = fit(bad, "--gpu", "h100-sxm", "--model", "qwen3-8b", out=tmp_path / "x.yaml")
    assert run.returncode == 2 and needle in run.stderr and str(bad) in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "x.yaml").exists()


def test_too_few_points_and_missing_options_are_exit_2(tmp_path):
    one = tmp_path / "one.json"
    doc = json.loads(FILES[0].read_text())
    doc.pop("output_throughput")
    one.write_text(json.dumps(doc))
    run = fit(one, "--gpu", "h100-sxm", "--model", "qwen3-8b", out=tmp_path / "x.yaml")
    assert run.returncode == 2 and "too few measurements to fit: 1" in run.stderr
    run = fit(FILES[0], "--model", "qwen3-8b", out=tmp_path / "x.yaml")
    assert run.returncode == 2 and "--gpu" in run.stderr
    run = fit(FILES[0], "--gpu", "h100-sxm", "--model", "qwen3-8b", "--precision", "fp4", out=tmp_path / "x.yaml")
    assert run.returncode == 2 and "no FP4 tensor cores" in run.stderr
    run = fit(FILES[0], "--gpu", "h100-sxm", "--model", "qwen3-8b", "--stack", "tgi", out=tmp_path / "x.yaml")
    assert run.returncode == 2 and "--stack" in run.stderr


def test_the_fixtures_are_in_the_engines_formats():
    vllm = json.loads(FILES[0].read_text())
    assert {"max_concurrency", "completed", "total_input_tokens", "mean_tpot_ms", "output_throughput"} <= set(vllm)
    lines = [json.loads(line) for line in FILES[2].read_text().splitlines()]
    assert all(line["backend"] == "sglang" and "random_input_len" in line for line in lines)


def test_an_older_vllm_result_without_max_concurrency_counts_every_request_at_once():
    """vLLM 0.5-0.6's benchmark_serving.py wrote no max_concurrency and request_rate "inf" (every request sent
    at once), with per-request lists beside the totals."""
    from simlab.calibration.benchfit import read_runs, run_record

    doc = {"date": "20240907-082731", "backend": "vllm", "num_prompts": 10, "request_rate": "inf", "duration": 5.37,
           "completed": 10, "total_input_tokens": 1369, "total_output_tokens": 1867, "output_throughput": 347.9,
           "mean_tpot_ms": 11.1, "input_lens": [137] * 10, "output_lens": [187] * 10, "errors": [""] * 10}
    path = Path(__file__).parent / "fixtures" / "bench" / "vllm_c1.json"
    runs = read_runs(path) + [doc]
    record = run_record(runs[-1], label="old.json", gpu="h100-sxm", model="llama-3.1-8b", stack="vllm",
                        precision="bf16", kv_precision="bf16", max_num_seqs=256, max_batch_tokens=8192)
    assert (record.concurrency, record.input_tokens, record.output_tokens) == (10, 137, 187)
    assert record.mean_tpot_ms == 11.1 and record.output_throughput_tok_s == 347.9


def test_a_multi_gpu_mixture_of_experts_fits_on_its_layout_and_a_bad_layout_names_the_option(tmp_path):
    """DeepSeek-V3 on 8 H200s: the runs are fitted on the roofline of that layout (its profile counts 8 GPUs);
    expert parallelism on a dense model is exit 2 naming --expert-parallel."""
    import yaml

    out = tmp_path / "ds.yaml"
    run = fit(*FILES[:2], "--gpu", "h200", "--model", "deepseek-v3", "--precision", "fp8", "--tp", "1", "--ep", "8",
              out=out)
    assert run.returncode == 0, run.stderr
    source = yaml.safe_load(out.read_text())["provenance"]["source"]
    assert (source["tensor_parallel"], source["expert_parallel"], source["num_gpus"]) == (1, 8, 8)
    run = fit(FILES[0], "--gpu", "h100-sxm", "--model", "qwen3-8b", "--ep", "2", out=tmp_path / "x.yaml")
    assert run.returncode == 2 and "--expert-parallel" in run.stderr and "is dense" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "x.yaml").exists()


def _speculative_runs(path: Path, gamma: int, taus: list[float], concurrencies: list[int], truth) -> None:
    """SGLang bench_serving lines of speculative runs, their numbers made by the engine's replay with ``truth``."""
    from simlab.calibration.stages.serving import ServingRecord
    from simlab.calibration.profile_check import replay_record

    lines = []
    for tau, users in zip(taus, concurrencies):
        record = ServingRecord(id="x", source="x", engine="sglang", gpu="h100-sxm", tensor_parallel=1,
                               model="qwen3-8b", precision="bf16", kv_precision="bf16", input_tokens=256,
                               output_tokens=512, concurrency=users, num_prompts=64, max_num_seqs=1024,
                               max_batch_tokens=8192, mean_tpot_ms=None, output_throughput_tok_s=None, url="x",
                               spec_method="eagle3", num_draft_tokens=gamma, acceptance_length=tau)
        made = replay_record(record, truth)
        lines.append(json.dumps({"completed": 64, "total_input_tokens": 64 * 256, "total_output_tokens": 64 * 512,
                                 "max_concurrency": users, "accept_length": tau,
                                 "mean_tpot_ms": made["mean_tpot_ms"],
                                 "output_throughput": made["output_throughput_tok_s"]}))
    path.write_text("\n".join(lines) + "\n")


def test_speculative_runs_fit_the_stacks_host_time_of_speculative_decoding(tmp_path):
    """Runs at draft lengths 3 and 7, made with 0.8 ms a round and 60 us a drafter forward on the shipped SGLang
    calibration: the fit gives both back (no run without speculation: the stack's step costs stay shipped)."""
    from dataclasses import replace

    from simlab.config.hardware import RooflineHardware
    from simlab.hardware.roofline_build import build_roofline

    shipped = build_roofline(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b", stack="sglang"))
    truth = replace(shipped.params, spec_round_overhead_s=8e-4, draft_forward_overhead_s=6e-5)
    k3, k7 = tmp_path / "k3.jsonl", tmp_path / "k7.jsonl"
    _speculative_runs(k3, 3, [2.4, 2.9], [1, 4], truth)
    _speculative_runs(k7, 7, [3.1, 4.2], [1, 4], truth)
    out = tmp_path / "spec.yaml"
    run = fit(k3, k7, "--gpu", "h100-sxm", "--model", "qwen3-8b", "--stack", "sglang", "--draft",
              f"{k3}=eagle3:3", "--draft", f"{k7}=eagle3:7", out=out)
    assert run.returncode == 0, run.stderr
    assert "4 runs (4 speculative) fitted" in run.stdout
    fitted = load_profile(out).config.provenance["fit"]["fitted"]
    assert list(fitted) == ["spec_round_overhead_s", "draft_forward_overhead_s"]
    assert fitted["spec_round_overhead_s"] == pytest.approx(8e-4, rel=1e-3)
    assert fitted["draft_forward_overhead_s"] == pytest.approx(6e-5, rel=1e-2)
    # one draft length: the round and its forwards cannot be told apart, so the round's time alone is fitted
    one = tmp_path / "one.yaml"
    run = fit(k3, "--gpu", "h100-sxm", "--model", "qwen3-8b", "--stack", "sglang", "--draft", "eagle3:3", out=one)
    assert run.returncode == 0, run.stderr
    assert list(load_profile(one).config.provenance["fit"]["fitted"]) == ["spec_round_overhead_s"]


@pytest.mark.parametrize("draft,needle", [
    (None, "whose drafter is not given"),
    ("eagle9:3", "not a drafter"),
    ("eagle3:x", "not a drafter"),
    ("nowhere.jsonl=eagle3:3", "names a file that is not among the results given"),
    ("eagle3:1", "an acceptance length of 3.2 cannot come from 1 drafts"),
])
def test_a_speculative_run_needs_a_valid_drafter(tmp_path, draft, needle):
    runs = tmp_path / "spec.jsonl"
    runs.write_text(json.dumps({"completed": 3, "total_input_tokens": 30, "total_output_tokens": 30,
                                "accept_length": 3.2, "max_concurrency": 1, "mean_tpot_ms": 3.0}) + "\n")
    extra = [] if draft is None else ["--draft", draft]
    run = fit(runs, "--gpu", "h100-sxm", "--model", "qwen3-8b", *extra, out=tmp_path / "x.yaml")
    assert run.returncode == 2 and needle in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "x.yaml").exists()


if __name__ == "__main__":
    write_fixtures()
