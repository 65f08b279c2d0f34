"""Trace replay against the shipped files, parsed independently here with the standard library."""

import csv
import gzip
import json
import time
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from pydantic import TypeAdapter
from scipy import stats

from simlab.common.resources import shipped_dir
from simlab.config.workload import WorkloadConfig
from simlab.workload import build_workload, read_trace, shipped_traces

TRACES = shipped_dir("traces")
ALPHA = 1e-6
Z = stats.norm.isf(ALPHA / 2)
_workload = TypeAdapter(WorkloadConfig)


def build(spec, base_dir=Path("."), seed=0):
    return build_workload(_workload.validate_python(spec), base_dir=base_dir, seed=seed, file="scenario.yaml")


def azure_truth(file_name):
    """(arrival seconds as exact fractions, prompts, outputs) via csv + datetime, without pandas."""
    with (TRACES / file_name).open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    ticks = []
    for row in rows:
        whole, _, fraction = row["TIMESTAMP"].partition(".")
        start = datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
        ticks.append(int(start.timestamp()) + Fraction(int(fraction or 0), 10 ** len(fraction)))
    first = min(ticks)
    arrival = np.array([float(t - first) for t in ticks])
    prompt = np.array([int(row["ContextTokens"]) for row in rows])
    output = np.array([int(row["GeneratedTokens"]) for row in rows])
    return arrival, prompt, output


def test_shipped_index_lists_the_four_traces():
    traces = shipped_traces()
    assert set(traces) == {"azure-conv-2023", "azure-code-2023", "mooncake-conv-2025", "mooncake-synthetic-2025"}
    assert traces["mooncake-conv-2025"].path.name == "conversation_trace.jsonl"
    assert traces["mooncake-synthetic-2025"].path.name == "synthetic_trace.jsonl"
    assert {t.licence for t in traces.values()} == {"CC-BY-4.0", "Apache-2.0"}
    for trace in traces.values():
        assert trace.path.is_file() and trace.source and trace.description


def test_azure_conv_matches_independent_parse_and_documented_stats():
    workload = build({"kind": "trace", "path": "azure-conv-2023"})
    requests = workload.requests
    arrival, prompt, output = azure_truth("AzureLLMInferenceTrace_conv.csv")
    assert len(requests) == 19_366 == workload.source["rows_read"]
    np.testing.assert_allclose(requests.arrival_s, arrival, rtol=0, atol=1e-9)
    assert np.array_equal(requests.prompt_tokens, prompt) and np.array_equal(requests.output_tokens, output)
    assert requests.arrival_s[0] == 0.0 and np.all(np.diff(requests.arrival_s) >= 0)
    # the provenance README documents mean prompt ~1155 and mean output ~211 (max 1000)
    assert round(requests.prompt_tokens.mean()) == 1155 and round(requests.output_tokens.mean()) == 211
    assert requests.output_tokens.max() == 1000
    assert workload.source["trace"] == "azure-conv-2023" and workload.source["format"] == "azure"
    assert workload.source["sorted_on_read"] is False


def test_azure_code_documented_stats():
    requests = build({"kind": "trace", "path": "azure-code-2023"}).requests
    assert len(requests) == 8_819
    assert round(requests.output_tokens.mean()) == 28 and np.median(requests.output_tokens) == 13
    assert round(requests.prompt_tokens.mean()) == 2048


@pytest.mark.parametrize(
    "name, file_name, rows, mean_input, mean_output",
    [("mooncake-conv-2025", "conversation_trace.jsonl", 12_031, 12_035, 343),
     ("mooncake-synthetic-2025", "synthetic_trace.jsonl", 3_993, 15_325, 149)],
)
def test_mooncake_matches_independent_parse(name, file_name, rows, mean_input, mean_output):
    with (TRACES / file_name).open() as fh:
        objects = [json.loads(line) for line in fh if line.strip()]
    requests = build({"kind": "trace", "path": name}).requests
    assert len(requests) == rows == len(objects)
    first_ms = objects[0]["timestamp"]
    np.testing.assert_array_equal(requests.arrival_s, [(o["timestamp"] - first_ms) / 1000 for o in objects])
    assert np.array_equal(requests.prompt_tokens, [o["input_length"] for o in objects])
    assert np.array_equal(requests.output_tokens, [o["output_length"] for o in objects])
    assert round(requests.prompt_tokens.mean()) == mean_input and round(requests.output_tokens.mean()) == mean_output


def test_time_scale_halves_the_span_exactly_and_scales_every_gap():
    normal = build({"kind": "trace", "path": "azure-conv-2023"}).requests.arrival_s
    half = build({"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.5}).requests.arrival_s
    assert half[-1] == normal[-1] / 2
    np.testing.assert_array_equal(half, normal * 0.5)
    slow = build({"kind": "trace", "path": "azure-conv-2023", "time_scale": 3.7}).requests.arrival_s
    np.testing.assert_allclose(np.diff(slow), 3.7 * np.diff(normal), rtol=1e-9, atol=1e-9)


def test_max_requests_and_max_duration_keep_prefixes():
    scaled = build({"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.5}).requests
    by_count = build({"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.5, "max_requests": 3000}).requests
    assert len(by_count) == 3000
    np.testing.assert_array_equal(by_count.arrival_s, scaled.arrival_s[:3000])
    cap_s = 600.0
    by_time = build({"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.5, "max_duration_s": cap_s})
    expected = int(np.sum(scaled.arrival_s < cap_s))
    assert len(by_time.requests) == expected and by_time.requests.arrival_s[-1] < cap_s <= scaled.arrival_s[expected]
    both = build({"kind": "trace", "path": "azure-conv-2023", "time_scale": 0.5, "max_duration_s": cap_s,
                  "max_requests": 10**6})
    assert len(both.requests) == expected


def test_trace_domains_drawn_from_mix_within_binomial_ci():
    mix = {"math": 0.3, "code": 0.3, "chat": 0.4}
    requests = build({"kind": "trace", "path": "azure-conv-2023", "domains": mix}, seed=11).requests
    assert requests.domain_names == ("math", "code", "chat")
    for index, name in enumerate(requests.domain_names):
        p = mix[name]
        assert abs(np.mean(requests.domain == index) - p) <= Z * np.sqrt(p * (1 - p) / len(requests))


def test_reading_is_fast():
    conv, mooncake = TRACES / "AzureLLMInferenceTrace_conv.csv", TRACES / "conversation_trace.jsonl"
    read_trace(TRACES / "synthetic_trace.jsonl")  # warm up imports
    start = time.perf_counter()
    read_trace(conv)
    azure_s = time.perf_counter() - start
    start = time.perf_counter()
    read_trace(mooncake)
    mooncake_s = time.perf_counter() - start
    assert azure_s < 0.5, f"Azure conv read took {azure_s:.3f} s"
    assert mooncake_s < 1.0, f"Mooncake conversation read took {mooncake_s:.3f} s"


def test_unsorted_trace_is_sorted_stably(tmp_path):
    (tmp_path / "t.csv").write_text("t,p,o\n5,1,1\n1,2,2\n5,3,3\n3,4,4\n1,5,5\n")
    workload = build({"kind": "trace", "path": "t.csv", "sort": True,
                      "columns": {"arrival": "t", "prompt_tokens": "p", "output_tokens": "o"}}, base_dir=tmp_path)
    assert workload.requests.arrival_s.tolist() == [0.0, 0.0, 2.0, 4.0, 4.0]
    assert workload.requests.prompt_tokens.tolist() == [2, 5, 4, 1, 3]  # ties keep file order
    assert workload.source["sorted_on_read"] is True


@pytest.mark.parametrize("unit, scale", [("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)])
def test_generic_csv_arrival_units(tmp_path, unit, scale):
    (tmp_path / "t.csv").write_text("when,in,out\n1000,10,20\n1500,11,21\n4000,12,22\n")
    columns = {"arrival": "when", "prompt_tokens": "in", "output_tokens": "out", "arrival_unit": unit}
    requests = build({"kind": "trace", "path": "t.csv", "columns": columns}, base_dir=tmp_path).requests
    np.testing.assert_allclose(requests.arrival_s, np.array([0, 500, 3000]) * scale, rtol=1e-12)
    assert requests.prompt_tokens.tolist() == [10, 11, 12] and requests.output_tokens.tolist() == [20, 21, 22]


def test_generic_csv_datetime_with_time_zones(tmp_path):
    (tmp_path / "t.csv").write_text("ts,p,o\n2024-01-01T10:00:00+01:00,5,6\n2024-01-01T09:00:01.5Z,7,8\n")
    columns = {"arrival": "ts", "prompt_tokens": "p", "output_tokens": "o", "arrival_unit": "datetime"}
    requests = build({"kind": "trace", "path": "t.csv", "columns": columns}, base_dir=tmp_path).requests
    assert requests.arrival_s.tolist() == [0.0, 1.5]


def test_generic_csv_with_domain_column():
    columns = {"arrival": "sent_ms", "prompt_tokens": "prompt_len", "output_tokens": "output_len",
               "arrival_unit": "ms", "domain": "task"}
    workload = build({"kind": "trace", "path": "traces/samples/requests.csv", "columns": columns},
                     base_dir=TRACES.parent)
    with (TRACES / "samples" / "requests.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    requests = workload.requests
    assert requests.domain_names == ("chat", "code", "math")
    assert list(requests.domain_labels()) == [row["task"] for row in rows]
    np.testing.assert_allclose(requests.arrival_s, [int(row["sent_ms"]) / 1000 for row in rows])
    assert workload.source["domains"] == {"column": "task"}


def test_generic_jsonl_with_domain_column_via_domain_column_field(tmp_path):
    lines = ['{"at": 2.0, "in": 3, "out": 4, "kind": "b"}', "", '{"at": 1.0, "in": 5, "out": 6, "kind": "a"}']
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    spec = {"kind": "trace", "path": "t.jsonl", "domain_column": "kind", "sort": True,
            "columns": {"arrival": "at", "prompt_tokens": "in", "output_tokens": "out"}}
    requests = build(spec, base_dir=tmp_path).requests
    assert requests.arrival_s.tolist() == [0.0, 1.0]
    assert requests.prompt_tokens.tolist() == [5, 3] and list(requests.domain_labels()) == ["a", "b"]


def test_format_inferred_from_header_and_gzip(tmp_path):
    source = TRACES / "AzureLLMInferenceTrace_code.csv"
    head = "".join(source.open().readlines()[:101])
    (tmp_path / "azure_like.csv").write_text(head)
    with gzip.open(tmp_path / "mooncake_like.trace.gz", "wt") as fh:
        fh.write('{"timestamp": 10, "input_length": 3, "output_length": 2, "hash_ids": [1, 2]}\n'
                 '{"timestamp": 25, "input_length": 4, "output_length": 1, "hash_ids": [1]}\n')
    azure = build({"kind": "trace", "path": "azure_like.csv"}, base_dir=tmp_path)
    assert azure.source["format"] == "azure" and len(azure.requests) == 100
    mooncake = build({"kind": "trace", "path": "mooncake_like.trace.gz"}, base_dir=tmp_path)
    assert mooncake.source["format"] == "mooncake"
    assert mooncake.requests.arrival_s.tolist() == [0.0, 0.015]


def test_absolute_path_and_relative_path_agree(tmp_path):
    relative = build({"kind": "trace", "path": "../synthetic_trace.jsonl"}, base_dir=TRACES / "samples")
    absolute = build({"kind": "trace", "path": str(TRACES / "synthetic_trace.jsonl")}, base_dir=tmp_path)
    assert relative.source["trace"] is None and relative.source["format"] == "mooncake"
    np.testing.assert_array_equal(relative.requests.arrival_s, absolute.requests.arrival_s)


def test_readme_statistics_match_the_files():
    from simlab.workload import trace_stats

    readme = (TRACES / "README.md").read_text()
    table_rows = [line for line in readme.splitlines() if line.startswith("| `")]
    assert len(table_rows) == len(shipped_traces())
    for line in table_rows:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        entry = shipped_traces()[cells[0].strip("`")]
        trace = read_trace(entry.path, format=entry.format)
        stats = trace_stats(trace.arrival_s, trace.prompt_tokens, trace.output_tokens)
        assert cells[1] == entry.path.name
        assert cells[2] == f"{stats.num_requests:,}"
        assert cells[4] == f"{stats.rate_per_s:.2f}"
        assert cells[6] == f"{stats.mean_prompt_tokens:,.1f}" and cells[9] == f"{stats.mean_output_tokens:,.1f}"
        assert cells[7] == f"{stats.median_prompt_tokens:,.0f}" and cells[11] == f"{stats.max_output_tokens:,}"


def test_column_mapping_overrides_the_registered_format():
    columns = {"arrival": "TIMESTAMP", "prompt_tokens": "GeneratedTokens", "output_tokens": "ContextTokens",
               "arrival_unit": "datetime"}
    swapped = build({"kind": "trace", "path": "azure-code-2023", "columns": columns})
    normal = build({"kind": "trace", "path": "azure-code-2023"})
    assert swapped.source["format"] == "csv"
    assert np.array_equal(swapped.requests.prompt_tokens, normal.requests.output_tokens)
    assert np.array_equal(swapped.requests.arrival_s, normal.requests.arrival_s)
