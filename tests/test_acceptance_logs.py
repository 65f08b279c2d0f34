"""Each log format parses a small fixture written from its field description, with the conversions done by hand,
and malformed logs are one-line input errors naming the file and the place."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import run_cli

from simlab.acceptance.logs import read_logs
from simlab.acceptance.logs.specdecode_bench import read_acc_len, replay_rounds
from simlab.common.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures" / "acceptance_logs"


def counts(log):
    return {k: (v.reached.tolist(), v.accepted.tolist(), v.kind) for k, v in log.counts.items()}


def test_vllm_metrics_converts_unconditional_counters_to_conditional_rates():
    log = read_logs([FIXTURES / "vllm_metrics.prom"], "vllm-metrics")
    # two engines summed: 160 drafts; accepted at positions 0, 1, 2: 110, 75, 45 (over all drafts)
    assert counts(log) == {("", "*"): ([160.0, 110.0, 75.0], [110.0, 75.0, 45.0], "exact")}
    rates = log.counts[("", "*")].rates
    np.testing.assert_allclose(rates, [110 / 160, 75 / 110, 45 / 75])
    assert rates[2] == pytest.approx(0.6) and 45 / 160 == pytest.approx(0.28125)  # not the unconditional reading
    assert any("unconditional" in n for n in log.notes)


def test_vllm_metrics_without_total_suffix_or_labels():
    log = read_logs([FIXTURES / "vllm_metrics_plain.prom"], "vllm-metrics")
    assert counts(log) == {("", "*"): ([50.0, 30.0], [30.0, 15.0], "exact")}


def test_deepspec_prefix_survival_to_conditional():
    log = read_logs([FIXTURES / "deepspec"], "deepspec")
    # survival 0.8, 0.6, 0.45, 0.3 over 200 full-length proposals: reached S_(k-1), accepted S_k
    assert counts(log) == {("", "gsm8k"): ([200.0, 160.0, 120.0, 90.0], [160.0, 120.0, 90.0, 60.0], "exact")}
    np.testing.assert_allclose(log.counts[("", "gsm8k")].rates, [0.8, 0.75, 0.75, 60 / 90])


def test_deepspec_results_rows_reconstructed_or_rates_only():
    log = read_logs([FIXTURES / "deepspec_results.json"], "deepspec")
    got = counts(log)
    # humaneval: (410 output tokens - 10 samples) / 2.0 tokens per proposal = 200 proposals
    assert got[("", "humaneval")] == ([200.0, 140.0], [140.0, 60.0], "reconstructed")
    # mt-bench has no counts: survival 0.4, 0.1 (null beyond) -> conditional 0.4, 0.25 and no interval
    assert got[("", "mt-bench")][2] == "rates"
    np.testing.assert_allclose(log.counts[("", "mt-bench")].rates, [0.4, 0.25])


def test_specdecode_bench_replays_a_run_with_gamma():
    np.testing.assert_array_equal(replay_rounds(np.array([3, 1, 2, 4, 2, 1, 2, 1]), 2), [[2, 2, 1], [2, 2, 1]])
    np.testing.assert_array_equal(replay_rounds(np.array([1, 1, 3, 2, 1]), 2), [[2, 2, 2], [0, 0, 2]])
    log = read_logs([FIXTURES / "specdecode_bench.jsonl"], "specdecode-bench", proposer="eagle", gamma=2)
    # code: rounds (2,2) (2,2) (1,1) and (2,0) (2,0) (2,2); request 7 (no domain): (2,1), then one that runs out
    assert counts(log) == {("eagle", "code"): ([6.0, 3.0], [4.0, 3.0], "exact"),
                           ("eagle", "*"): ([1.0, 1.0], [1.0, 0.0], "exact")}
    assert log.rounds.has_sequences and not log.rounds.has_confidence


def test_specdecode_bench_acc_len_for_trace_replay():
    acc = read_acc_len(FIXTURES / "specdecode_bench.jsonl", "dflash")
    assert list(acc) == ["a", "b", "7"]
    np.testing.assert_array_equal(acc["b"], [1, 2, 1, 2, 1])
    with pytest.raises(InputError, match="several proposers"):
        read_acc_len(FIXTURES / "specdecode_bench.jsonl")


def test_csv_rounds_with_confidences():
    log = read_logs([FIXTURES / "rounds.csv"], "csv")
    assert counts(log) == {("dspark", "chat"): ([3.0, 2.0, 2.0], [2.0, 2.0, 1.0], "exact"),
                           ("dspark", "math"): ([3.0, 2.0, 1.0], [3.0, 1.0, 1.0], "exact")}
    rounds = log.rounds
    assert rounds.has_sequences and rounds.has_confidence
    # r1's rounds in position order; the empty conf_3 is missing
    first = rounds.select(rounds.cluster == "r1")
    np.testing.assert_array_equal(first.accepted, [2, 3, 0])
    assert np.isnan(first.conf[2, 2]) and first.conf[1, 2] == 0.85


def test_csv_minimal_uses_gamma_and_position_order():
    log = read_logs([FIXTURES / "rounds_minimal.csv"], "csv", gamma=4)
    # rounds ordered by position: accepted 4, 0, 1 with 4 verified each
    assert counts(log) == {("", "*"): ([3.0, 2.0, 1.0, 1.0], [2.0, 1.0, 1.0, 1.0], "exact")}
    np.testing.assert_array_equal(log.rounds.accepted, [4, 0, 1])


def test_simlab_folder_rounds_and_summary():
    log = read_logs([FIXTURES / "simlab_run"], "simlab")
    # the no-spec arm's rows (drafted 0) are ignored; the method comes from the scenario in summary.json
    assert counts(log) == {("dspark", "chat"): ([3.0, 2.0, 1.0], [2.0, 2.0, 0.0], "exact"),
                           ("dspark", "math"): ([3.0, 2.0, 1.0], [2.0, 1.0, 1.0], "exact")}
    assert len(log.rounds) == 6 and log.rounds.has_confidence
    summary = read_logs([FIXTURES / "simlab_run" / "summary.json"], "simlab")
    assert counts(summary) == {("dspark", "*"): ([6.0, 4.0, 2.0], [4.0, 2.0, 1.0], "exact")}
    assert summary.rounds is None


def test_sglang_sts_shards():
    pytest.importorskip("torch")
    log = read_logs([FIXTURES / "sglang_sts"], "sglang-sts")
    # accepted prefixes 2, 3, 0, 1 and 1, 2 with gamma 3 verified
    assert counts(log) == {("dspark", "*"): ([6.0, 5.0, 3.0], [5.0, 3.0, 1.0], "exact")}
    assert not log.rounds.has_sequences
    np.testing.assert_allclose(log.rounds.conf[0], 1 / (1 + np.exp(-np.array([2.0, 1.0, -1.0]))))


# ------------------------------------------------------------------------------------------------ malformed logs
def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


BAD_CASES = [
    ("vllm-metrics", "m.prom", "vllm:spec_decode_num_drafts_total 10\nthis is not a sample\n", "line 2"),
    ("vllm-metrics", "m.prom", 'vllm:spec_decode_num_drafts_total 10\n'
     'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 12\n', "exceeds the drafts"),
    ("vllm-metrics", "m.prom", 'vllm:spec_decode_num_drafts_total 10\n'
     'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 2\n', "positions 0..gamma-1"),
    ("deepspec", "metrics.json", '{"spec": {"dataset": "x", "accept_rates_by_position": [0.5, 0.7]}}', "rises"),
    ("deepspec", "metrics.json", '{"spec": {"dataset": "x", "accept_rates_by_position": [1.5]}}', "accept_rates"),
    ("deepspec", "metrics.json", "{not json", "not valid JSON"),
    ("specdecode-bench", "s.jsonl", '{"id": 1, "generated_token_ids": [1, 2], "acc_e": {"acc_len": [1]}}\n', "line 1"),
    ("specdecode-bench", "s.jsonl", '{"id": 1, "generated_token_ids": [1], "acc_e": {"acc_len": [0]}}\n', ">= 1"),
    ("specdecode-bench", "s.jsonl", '{"id": 1, "generated_token_ids": [1], "acc_e": {"acc_len": [1]}}\n[1]\n',
     "line 2"),
    ("csv", "r.csv", "request,domain,position,accepted,verified\nq,*,0,3,2\n", "line 2: accepted"),
    ("csv", "r.csv", "request,domain,position,accepted,verified\nq,*,zero,1,2\n", "line 2: position"),
    ("csv", "r.csv", "request,domain,position,accepted,verified,colour\nq,*,0,1,2,red\n", "unknown column"),
    ("csv", "r.csv", "request,domain,position,accepted,verified,conf_1\nq,*,0,1,2,1.7\n", "line 2: conf_1"),
    ("csv", "r.csv", "request,domain,position,accepted,verified\nq,*,0,1,2\nq,*,0,1,2\n", "line 3: position"),
    ("csv", "r.csv", "request,domain,position\nq,*,0\n", "missing column"),
]


@pytest.mark.parametrize("fmt,name,text,where", BAD_CASES, ids=[f"{c[0]}-{c[3]}" for c in BAD_CASES])
def test_malformed_log_is_one_line_exit_2(tmp_path, fmt, name, text, where):
    path = _write(tmp_path, name, text)
    out = tmp_path / "fit.yaml"
    code, stdout, stderr = run_cli("acceptance", "fit", str(path), "--format", fmt, "--method", "dspark",
                                   "--out", str(out), "-q")
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert str(path) in stderr and where in stderr
    assert not out.exists()


def test_malformed_rounds_table_in_results_folder(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    with gzip.open(folder / "rounds.csv.gz", "wt") as fh:
        fh.write("arm,id,domain,step,drafted,verified,accepted\na,0,chat,0,3,4,1\n")
    code, _, stderr = run_cli("acceptance", "fit", str(folder), "--format", "simlab", "--method", "dspark",
                              "--out", str(tmp_path / "f.yaml"))
    assert code == 2 and "rounds.csv.gz: line 2: verified" in stderr and "drafted" in stderr


def test_sglang_shard_that_is_not_a_prefix(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "shard.pt"
    torch.save({"logits": torch.zeros(2, 3), "prefix_mask": torch.tensor([[1, 0, 1], [1, 1, 0]])}, path)
    code, _, stderr = run_cli(
        "acceptance", "fit", str(path), "--format", "sglang-sts", "--out", str(tmp_path / "f.yaml")
    )
    assert code == 2 and "prefix_mask[0]" in stderr and "not a prefix" in stderr


def test_options_that_do_not_apply_and_unknown_format(tmp_path):
    code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "vllm_metrics.prom"), "--format", "vllm-metrics",
                              "--proposer", "x", "--out", str(tmp_path / "f.yaml"))
    assert code == 2 and "--proposer" in stderr and "specdecode-bench" in stderr
    code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "vllm_metrics.prom"), "--format", "prometheus",
                              "--out", str(tmp_path / "f.yaml"))
    assert code == 2 and "--format" in stderr and "vllm-metrics" in stderr


def test_unnamed_drafter_needs_method(tmp_path):
    code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "vllm_metrics.prom"), "--format", "vllm-metrics",
                              "--out", str(tmp_path / "f.yaml"))
    assert code == 2 and "--method" in stderr and "dspark" in stderr


def test_several_models_in_one_scrape(tmp_path):
    text = (FIXTURES / "vllm_metrics.prom").read_text()
    path = _write(tmp_path, "two.prom", text + text.replace("Qwen/Qwen3-8B", "other"))
    code, _, stderr = run_cli("acceptance", "fit", str(path), "--format", "vllm-metrics", "--method", "eagle3",
                              "--out", str(tmp_path / "f.yaml"))
    assert code == 2 and "--model" in stderr
    code, _, stderr = run_cli("acceptance", "fit", str(path), "--format", "vllm-metrics", "--method", "eagle3",
                              "--model", "other", "--out", str(tmp_path / "f.yaml"), "-q")
    assert code == 0, stderr
    fitted = yaml.safe_load((tmp_path / "f.yaml").read_text())
    assert fitted["methods"] == {"eagle3": {"*": [0.6875, 0.681818, 0.6]}}


def test_sglang_shards_without_torch_say_how_to_get_it(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    code, _, stderr = run_cli("acceptance", "fit", str(FIXTURES / "sglang_sts"), "--format", "sglang-sts",
                              "--out", str(tmp_path / "f.yaml"))
    assert code == 2 and "needs PyTorch" in stderr and "simlab[real]" in stderr
