"""One schema: a real run and a simulated run of the same tiny workload give the same record columns and summary
keys, through the same writer; `simlab report` reads a real results folder."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from simlab.config import EngineConfig  # noqa: E402
from simlab.real.engine import DecodingConfig, Request, SpeculativeEngine  # noqa: E402
from simlab.real.result import write_real_results  # noqa: E402
from simlab.results.records import REQUEST_COLUMNS, STEP_COLUMNS, round_columns  # noqa: E402
from simlab.runner import run_scenario  # noqa: E402
from simlab.schedulers import make_scheduler  # noqa: E402

SCENARIO = {
    "name": "tiny-schema",
    "seed": 1,
    "workload": {"kind": "poisson", "rate": 50.0, "num_requests": 6, "prompt_tokens": {"dist": "constant", "value": 6},
                 "output_tokens": {"dist": "constant", "value": 9}, "domains": {"code": 1.0}},
    "hardware": {"kind": "table", "verify": {"batch_tokens": [1, 64], "step_s": [0.001, 0.002]},
                 "kv_cache_tokens": 4096},
    "engine": {"max_num_seqs": 3, "max_batch_tokens": 64},
    "acceptance": {"kind": "iid", "alpha": 0.6},
    "arms": [{"name": "plain", "method": "none"},
             {"name": "dspark-hw", "method": "dspark", "gamma": 4, "scheduler": {"kind": "hardware_aware"}}],
}


def _real_run(pair64):
    target, drafter = pair64
    gen = torch.Generator().manual_seed(2)
    requests = [Request(id=i, prompt_ids=tuple(torch.randint(0, 259, (6,), generator=gen).tolist()), max_new_tokens=9,
                        arrival_s=0.02 * i, domain="code") for i in range(6)]
    limits = EngineConfig(max_num_seqs=3, max_batch_tokens=64)
    plain = SpeculativeEngine(target, None, decoding=DecodingConfig(gamma=0, arm="plain"), limits=limits).run(requests)
    spec = SpeculativeEngine(target, drafter, make_scheduler("hardware_aware"),
                             DecodingConfig(gamma=4, arm="dspark-hw"), limits,
                             verify_cost=lambda b: 0.001 + 0.00002 * np.asarray(b, dtype=float)).run(requests)
    return [plain, spec]


def test_real_and_simulated_runs_share_columns_and_summary_keys(pair64, tmp_path):
    run_scenario(SCENARIO, tmp_path / "sim", plot=False)
    real_folder = write_real_results(tmp_path / "real", _real_run(pair64), scenario=SCENARIO, plot=False)
    real_requests = pd.read_csv(real_folder / "requests.csv")
    real_steps = pd.read_csv(real_folder / "steps.csv.gz")
    sim_requests = pd.read_csv(tmp_path / "sim" / "requests.csv")
    sim_steps = pd.read_csv(tmp_path / "sim" / "steps.csv.gz")
    assert list(real_requests.columns) == list(sim_requests.columns) == list(REQUEST_COLUMNS)
    assert list(real_steps.columns) == list(sim_steps.columns) == list(STEP_COLUMNS)
    real_summary = json.loads((real_folder / "summary.json").read_text())
    sim_summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert set(real_summary["arms"]) == set(sim_summary["arms"]) == {"plain", "dspark-hw"}
    for arm in ("plain", "dspark-hw"):  # the simulator adds what it knows of its modelled head (STS report)
        assert set(real_summary["arms"][arm]) == set(sim_summary["arms"][arm]) - {"confidence"}
    rounds = pd.read_csv(real_folder / "rounds.csv.gz")
    assert list(rounds.columns) == list(round_columns(4))
    plain = rounds[rounds["arm"] == "plain"]
    assert (plain["drafted"] == 0).all() and plain[[f"conf_{k}" for k in range(1, 5)]].isna().all().all()
    spec = rounds[rounds["arm"] == "dspark-hw"]
    assert (spec["drafted"] == 4).all() and spec["conf_1"].between(0, 1).all()
    # the summary's speculation counts are the rounds'
    metrics = real_summary["arms"]["dspark-hw"]
    assert metrics["spec_decode_num_verified_per_position"][0] == int((spec["verified"] >= 1).sum())
    assert metrics["spec_decode_num_accepted_per_position"][0] == int((spec["accepted"] >= 1).sum())
    emitted = real_steps.loc[real_steps["arm"] == "dspark-hw", "emitted_tokens"].sum()
    assert metrics["spec_decode_acceptance_length"] == pytest.approx(emitted / len(spec))
    assert metrics["completed"] == 6 and metrics["output_throughput"] > 0


def test_simlab_report_reads_a_real_results_folder(pair64, tmp_path):
    from typer.testing import CliRunner

    from simlab.cli import _mount_subcommands, app

    folder = write_real_results(tmp_path / "real", _real_run(pair64), scenario=SCENARIO, plot=False)
    _mount_subcommands()
    result = CliRunner().invoke(app, ["report", str(folder)])
    assert result.exit_code == 0, result.output
    written = {p.name for p in folder.iterdir()}
    assert written & {"report.png", "report.html"}
