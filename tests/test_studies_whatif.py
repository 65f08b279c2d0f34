"""SLA what-if: thresholds computed by hand found exactly, the bisection itself against brute force, SLA
expressions, and bad questions rejected before anything runs."""

import json
import math

import pytest
from helpers import run_cli, write_scenario
from hypothesis import given, settings
from hypothesis import strategies as st
from studies_scenarios import closed_loop_throughput, linear_scenario, tpot_ms

from simlab.common.errors import InputError
from simlab.runner import run_scenario
from simlab.studies.search import SearchRange, threshold_search
from simlab.studies.sla import parse_sla
from simlab.studies.whatif import prepare_whatif, run_whatif

LIMIT_MS = 30.25  # between TPOT at 40 and 41 users without speculation, at 54 and 55 with gamma = 3


def largest_meeting(limit_ms, gamma, top=128):
    return max(c for c in range(1, top + 1) if tpot_ms(c, gamma) <= limit_ms)


def test_whatif_finds_the_largest_concurrency_computed_by_hand(tmp_path):
    assert (largest_meeting(LIMIT_MS, 0), largest_meeting(LIMIT_MS, 3)) == (40, 54)
    path = write_scenario(tmp_path, linear_scenario())
    out = tmp_path / "whatif"
    code, stdout, stderr = run_cli("whatif", str(path), "--sla", f"p90_tpot_ms<={LIMIT_MS}", "--vary",
                                   "workload.concurrency", "--high", "128", "--out", str(out), "--workers", "2",
                                   "--no-report", "-q")
    assert code == 0, stderr
    doc = json.loads((out / "whatif.json").read_text())
    assert doc["sla"] == {"p90_tpot_ms": ["<=", LIMIT_MS]} and doc["vary"] == "workload.concurrency"
    assert doc["find"] == "largest" and doc["range"] == [1, 128] and doc["baseline"] == "no-spec"
    no_spec, dflash = doc["arms"]["no-spec"], doc["arms"]["dflash-3"]
    assert (no_spec["load"], dflash["load"]) == (40, 54)
    assert no_spec["metrics"]["p90_tpot_ms"] == pytest.approx(tpot_ms(40), rel=1e-12)
    assert dflash["metrics"]["p90_tpot_ms"] == pytest.approx(tpot_ms(54, 3), rel=1e-12)
    expected_gain = closed_loop_throughput(54, 400, gamma=3) / closed_loop_throughput(40, 400) - 1
    assert dflash["gain_vs_baseline"] == pytest.approx(expected_gain, rel=1e-9)
    assert no_spec["gain_vs_baseline"] == 0.0
    assert dflash["metrics"]["output_throughput_per_gpu"] == pytest.approx(closed_loop_throughput(54, 400, 3), rel=1e-9)
    assert not no_spec["at_bound"] and no_spec["monotone"] and dflash["monotone"]
    probes = (out / "probes.csv").read_text().splitlines()
    assert probes[0].startswith("probe,workload.concurrency,arm,meets,")
    assert len(probes) - 1 == no_spec["num_probes"] + dflash["num_probes"]


def test_whatif_finds_the_fewest_replicas_computed_by_hand(tmp_path):
    # 60 users spread evenly by least_loaded: ceil(60 / R) per replica. Limit between 12 and 13 users per
    # replica without speculation (R = 5), between 26 and 27 with gamma = 3 (R = 3: 20 each; R = 2: 30 each).
    limit = tpot_ms(12.5)
    assert max(n for n in range(1, 61) if tpot_ms(n, 3) <= limit) == 26
    scenario = linear_scenario(concurrency=60, num_requests=240)
    scenario["engine"]["router"] = "least_loaded"
    question = prepare_whatif(write_scenario(tmp_path, scenario), sla=f"p90_tpot_ms<={limit}",
                              vary="engine.replicas", low=1, high=16)
    outcome = run_whatif(question, tmp_path / "capacity", workers=2, report=False)
    arms = outcome.document["arms"]
    assert outcome.document["find"] == "smallest"
    assert (arms["no-spec"]["load"], arms["dflash-3"]["load"]) == (5, 3)
    assert arms["no-spec"]["metrics"]["p90_tpot_ms"] == pytest.approx(tpot_ms(12), rel=1e-12)
    assert arms["no-spec"]["metrics"]["num_gpus"] == 5 and arms["dflash-3"]["metrics"]["num_gpus"] == 3
    for entry in arms.values():
        m = entry["metrics"]
        assert m["output_throughput_per_gpu"] == pytest.approx(m["output_throughput"] / m["num_gpus"], rel=1e-12)
    base = arms["no-spec"]["metrics"]["output_throughput_per_gpu"]
    assert arms["dflash-3"]["gain_vs_baseline"] == pytest.approx(
        arms["dflash-3"]["metrics"]["output_throughput_per_gpu"] / base - 1, rel=1e-12)


def test_at_one_load_says_which_arms_meet_the_sla(tmp_path):
    path = write_scenario(tmp_path, linear_scenario())
    for users, no_spec_meets in ((40, True), (41, False)):
        question = prepare_whatif(path, sla=f"p90_tpot_ms<={LIMIT_MS},median_user_tok_s>=30",
                                  at=f"workload.concurrency={users}")
        doc = run_whatif(question, tmp_path / f"at{users}", workers=1, report=False).document
        assert doc["at"] == {"field": "workload.concurrency", "value": users}
        assert doc["arms"]["no-spec"]["meets"] is no_spec_meets
        assert doc["arms"]["no-spec"]["failing"] == ([] if no_spec_meets else [f"p90_tpot_ms<={LIMIT_MS:g}"])
        assert doc["arms"]["dflash-3"]["meets"] is True
        assert doc["arms"]["no-spec"]["median_user_tok_s"] == pytest.approx(1e3 / tpot_ms(users), rel=1e-9)


def test_an_arm_that_meets_the_sla_nowhere_is_null_not_an_error(tmp_path):
    question = prepare_whatif(write_scenario(tmp_path, linear_scenario()), sla="p90_tpot_ms<=10.4",
                              vary="workload.concurrency", low=1, high=8)
    doc = run_whatif(question, tmp_path / "w", workers=1, report=False).document
    assert doc["arms"]["no-spec"]["load"] is None and doc["arms"]["no-spec"]["metrics"] is None
    assert doc["arms"]["dflash-3"]["load"] == 8 and doc["arms"]["dflash-3"]["at_bound"]  # (10+16+2)/4 = 7 ms
    assert doc["arms"]["dflash-3"]["gain_vs_baseline"] is None  # the baseline has no answer


def test_an_arm_simulated_alone_gives_the_numbers_it_gives_beside_others(tmp_path):
    """Probes run only the arms that asked for a value; common random numbers make that exact."""
    scenario = linear_scenario(concurrency=12, num_requests=60)
    scenario["acceptance"] = {"kind": "iid", "alpha": 0.7}
    scenario["arms"].append({"name": "dflash-hw", "method": "dflash", "gamma": 5,
                             "scheduler": {"kind": "hardware_aware"}})
    together = run_scenario(scenario, plot=False).arms
    alone = run_scenario({**scenario, "arms": [scenario["arms"][2]]}, plot=False).arms
    drop = lambda m: {k: v for k, v in m.items() if k != "sim_wall_s"}  # noqa: E731
    assert drop(alone["dflash-hw"]) == drop(together["dflash-hw"])


@settings(max_examples=200, deadline=None)
@given(low=st.integers(1, 50), span=st.integers(1, 300), start=st.integers(1, 400), threshold=st.integers(-5, 400),
       find=st.sampled_from(["largest", "smallest"]))
def test_integer_search_matches_brute_force(low, span, start, threshold, find):
    high = low + span
    meets = (lambda v: v <= threshold) if find == "largest" else (lambda v: v >= threshold)
    search = threshold_search(start, SearchRange(low, high, True, find))
    probes = 0
    try:
        value = next(search)
        while True:
            assert low <= value <= high and isinstance(value, int)
            probes += 1
            value = search.send(meets(value))
    except StopIteration as stop:
        answer = stop.value
    good = [v for v in range(low, high + 1) if meets(v)]
    expected = (max(good) if find == "largest" else min(good)) if good else None
    assert answer.value == expected
    assert answer.at_bound == (expected == (high if find == "largest" else low))
    assert probes <= 2 * math.ceil(math.log2(high - low + 2)) + 3


@settings(max_examples=100, deadline=None)
@given(threshold=st.floats(0.2, 900.0), start=st.floats(0.5, 500.0), rtol=st.sampled_from([0.02, 0.005]))
def test_float_search_answers_on_the_safe_side_within_the_tolerance(threshold, start, rtol):
    search = threshold_search(start, SearchRange(0.1, 1000.0, False, "largest", rtol))
    try:
        value = next(search)
        while True:
            value = search.send(value <= threshold)
    except StopIteration as stop:
        answer = stop.value
    assert answer.value <= threshold
    assert threshold - answer.value <= rtol * answer.value * 1.0000001


def test_sla_expressions():
    sla = parse_sla("p90_tpot_ms<=12.5, p99_ttft_ms <= 2000,median_user_tok_s>=80")
    assert sla.document() == {"p90_tpot_ms": ["<=", 12.5], "p99_ttft_ms": ["<=", 2000.0],
                              "median_user_tok_s": [">=", 80.0]}
    assert sla.meets({"p90_tpot_ms": 12.5, "p99_ttft_ms": 10, "median_user_tok_s": 80})
    assert sla.failing({"p90_tpot_ms": 13, "p99_ttft_ms": None, "median_user_tok_s": 81}) == [
        "p90_tpot_ms<=12.5", "p99_ttft_ms<=2000"]


@pytest.mark.parametrize("text", ["", "p90_tpot_ms<12", "p90_tpot_ms<=", "p90_tpot_ms<=fast", "<=3",
                                  "p90_tpot_ms<=1,,p99_ttft_ms<=2", "p90_tpot_ms<=inf", "a<=1,a>=0", "x==1"])
def test_malformed_sla_is_an_input_error(text):
    with pytest.raises(InputError) as info:
        parse_sla(text)
    assert info.value.field == "--sla"


WHATIF_ERRORS = [
    (["--sla", "p90_tpot_ms<12", "--vary", "workload.concurrency"], "--sla: 'p90_tpot_ms<12': is not a condition"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurency"], "--vary: 'workload.concurency'"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurrency", "--low", "64", "--high", "8"],
     "the range is empty or inverted"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurrency", "--low", "8", "--high", "8"],
     "the range is empty or inverted"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurrency", "--baseline", "mtp-1"],
     "--baseline: 'mtp-1': is not an arm"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurrency", "--low", "0"],
     "workload.concurrency: 0: input should be greater than 0 (with workload.concurrency=0 from --low)"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurrency", "--low", "1.5"], "an integer field"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.num_requests"],
     "--vary: 'workload.num_requests': has no known direction"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "workload.concurrency", "--find", "most"],
     "--find: 'most': is not a direction"),
    (["--sla", "p90_tpot_ms<=12", "--vary", "arms[0].name"], "not a number"),
    (["--sla", "p90_tpot_ms<=12"], "give exactly one of --vary FIELD"),
    (["--sla", "p90_tpot_ms<=12", "--at", "workload.concurrency"], "--at: 'workload.concurrency': is not FIELD=VALUE"),
    (["--sla", "p90_tpot_mss<=12", "--vary", "workload.concurrency", "--high", "16"],
     "--sla: 'p90_tpot_mss': is not a numeric METRICS key"),
]


@pytest.mark.parametrize("args, message", WHATIF_ERRORS)
def test_bad_questions_exit_2_with_one_line_and_write_nothing(tmp_path, args, message):
    path = write_scenario(tmp_path, linear_scenario(num_requests=40))
    out = tmp_path / "out"
    code, _, stderr = run_cli("whatif", str(path), *args, "--out", str(out), "--workers", "1", "-q")
    assert code == 2, stderr
    assert stderr.startswith("error: ") and stderr.strip().count("\n") == 0, stderr
    assert message in stderr
    assert not out.exists()
