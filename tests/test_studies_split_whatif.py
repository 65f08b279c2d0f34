"""What-if over a disaggregated engine's split (``--vary engine.disaggregation``): the fewest replicas and the
split, against exact enumeration of every split of every total; bad questions rejected before anything runs."""

import copy
import json

import pytest
from helpers import run_cli, write_scenario

from simlab.runner import run_scenario
from simlab.studies.sla import parse_sla
from simlab.studies.split_whatif import splits
from simlab.studies.whatif import prepare_whatif, run_whatif

SLA = "p90_ttft_ms<=400,p90_tpot_ms<=11"
HIGH = 6


def split_scenario() -> dict:
    """Long prompts at 10 requests/s: a lone prefill replica misses TTFT, a lone decode replica TPOT."""
    return {
        "name": "split", "seed": 2,
        "workload": {"kind": "poisson", "rate": 10, "num_requests": 60,
                     "prompt_tokens": {"dist": "lognormal", "mean": 3000, "sigma": 0.5, "max": 12000},
                     "output_tokens": {"dist": "uniform", "low": 50, "high": 300}},
        "hardware": {"kind": "roofline", "gpu": "h100-sxm", "model": "qwen3-8b"},
        "engine": {"max_num_seqs": 64, "prefill_chunk_tokens": 4096,
                   "disaggregation": {"prefill_replicas": 1, "decode_replicas": 1, "link_bandwidth_GBps": 50,
                                      "link_latency_ms": 0.5}},
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "no-spec", "method": "none"},
                 {"name": "dspark", "method": "dspark", "gamma": 7, "scheduler": {"kind": "goodput", "lag_steps": 1}}],
    }


def enumerate_splits(data: dict) -> dict:
    """(total, split label) -> arm -> metrics, for every split of 2 .. HIGH replicas."""
    out = {}
    for total in range(2, HIGH + 1):
        for split in splits(total):
            point = copy.deepcopy(data)
            point["engine"]["disaggregation"].update(split)
            out[(total, f"{split['prefill_replicas']}:{split['decode_replicas']}")] = \
                run_scenario(point, plot=False).arms
    return out


def test_split_search_equals_exact_enumeration(tmp_path):
    data = split_scenario()
    question = prepare_whatif(write_scenario(tmp_path, data), sla=SLA, vary="engine.disaggregation", high=HIGH)
    assert question.start == 2 and (question.range.low, question.range.high) == (2, HIGH)
    doc = run_whatif(question, tmp_path / "split", workers=2).document
    sla = parse_sla(SLA)
    every = enumerate_splits(data)
    for arm in ("no-spec", "dspark"):
        meeting = {key: metrics[arm] for key, metrics in every.items() if sla.meets(metrics[arm])}
        fewest = min((total for total, _ in meeting), default=None)
        entry = doc["arms"][arm]
        assert entry["load"] == fewest, arm
        assert fewest is not None and fewest > 2, "the case must need more than one replica per pool"
        at_fewest = {label: m for (total, label), m in meeting.items() if total == fewest}
        assert sorted(entry["meeting_splits"]) == sorted(at_fewest)
        chosen = f"{entry['split']['prefill_replicas']}:{entry['split']['decode_replicas']}"
        best = max(at_fewest, key=lambda label: (at_fewest[label]["median_user_tok_s"], -int(label.split(":")[0])))
        assert chosen == best
        for key in ("p90_ttft_ms", "p90_tpot_ms", "median_user_tok_s", "output_throughput_per_gpu"):
            assert entry["metrics"][key] == pytest.approx(every[(fewest, chosen)][arm][key], rel=1e-12)
        assert entry["metrics"]["num_gpus"] == fewest and entry["monotone"]
    assert doc["split_search"] and doc["vary"] == "engine.disaggregation"
    probes = (tmp_path / "split" / "probes.csv").read_text().splitlines()
    assert probes[0].startswith("probe,engine.disaggregation,replicas,prefill_replicas,decode_replicas,arm,meets,")
    assert (tmp_path / "split" / "report.html").is_file() and (tmp_path / "split" / "report-sla.png").is_file()


def test_split_search_from_the_cli(tmp_path):
    path = write_scenario(tmp_path, split_scenario())
    code, stdout, stderr = run_cli("whatif", str(path), "--sla", SLA, "--vary", "engine.disaggregation", "--high",
                                   "4", "--out", str(tmp_path / "w"), "--no-report")
    assert code == 0, stderr
    assert "split P:D" in stdout
    doc = json.loads((tmp_path / "w" / "whatif.json").read_text())
    assert set(doc["arms"]) == {"no-spec", "dspark"}


@pytest.mark.parametrize("args, field", [
    (["--low", "1"], "--low"),
    (["--high", "2"], "--low"),
    (["--high", "3.5"], "--high"),
])
def test_bad_split_ranges_are_exit_2(tmp_path, args, field):
    path = write_scenario(tmp_path, split_scenario())
    code, _, stderr = run_cli("whatif", str(path), "--sla", SLA, "--vary", "engine.disaggregation", *args,
                              "--out", str(tmp_path / "w"))
    assert code == 2 and field in stderr and "Traceback" not in stderr
    assert not (tmp_path / "w").exists()


def test_split_search_needs_a_disaggregated_scenario(tmp_path):
    data = split_scenario()
    del data["engine"]["disaggregation"]
    path = write_scenario(tmp_path, data)
    code, _, stderr = run_cli("whatif", str(path), "--sla", SLA, "--vary", "engine.disaggregation")
    assert code == 2 and "--vary" in stderr and "disaggregat" in stderr
