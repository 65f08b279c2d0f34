"""The gain of speculative decoding, simulated against measured: every pair of public engine runs with and without
speculation on the same engine, GPUs, model, lengths and load (docs/calibration.md, "Speculation's gain").

Pairs come from two files of hw_profiles/calibration/: ``engine_measurements.csv`` (runs that share a source,
engine, GPUs, model, precision, dataset, lengths and concurrency) and ``spec_load_measurements.csv`` (runs at load,
grouped by its ``pair`` column). A run of the second file is replayed on the roofline of its engine *release*
(``stack_version``: the release simlab knows at or before the one it ran, else the oldest): the engine fields the
source leaves out take that release's defaults, per arm, as the engine would have set them. A chain replays its
drafter at its draft length, a tree its steps, topk and draft tokens, each with the per-position acceptance
that gives its measured acceptance length. The gain is output throughput with speculation over without; its
error ``simulated / measured - 1``; the sign agrees when both gains are on the same side of 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np
import pandas as pd

from simlab.calibration.stages.serving import ServingRecord, optional_int, optional_float, optional_text
from simlab.calibration.profile_check import fitted_ids, load_records, record_scenario, simulate_record, users_class

LOAD_FILE = "spec_load_measurements.csv"
SIGN_BAND = 0.1  # a measured gain within 1 +- this is "no clear sign": counted apart
# acceptance lengths a source does not state, from a public figure for the same drafter (noted on each pair)
ASSUMED_ACCEPTANCE = {
    ("deepseek-v3", "mtp", 1): (1.875, "DeepSeek-V3 technical report (arXiv 2412.19437) section 5.4.3: the second "
                                       "token's acceptance rate is 85-90 %, taken as 87.5 %"),
}
# lengths a harness's runs do not state: SpecForge's bench_eagle3 (as engine_measurements.csv's SpecForge rows)
ASSUMED_LENGTHS = {"bench_eagle3": (256, 512)}
# a run that names no release: its engine's scheduler did not overlap a speculative round (every such run of the
# file predates the releases that keep overlap with speculation, SGLang 0.5.23 and vLLM's async scheduling; the
# newest of them, AngelSlim #163, is from 2025-12-08)
NO_RELEASE_OVERLAP = (False, "overlap scheduler off under speculation (no release stated; the run predates the "
                             "releases that keep it)")
# models simlab simulates as another: (as, the longest context, prompt + output, for which that is exact)
SIMULATED_AS = {"deepseek-v3.2": ("deepseek-v3", 2048)}  # DSA attends its 2,048 top tokens: all of a short context


@dataclass(frozen=True)
class LoadRecord(ServingRecord):
    """A run of spec_load_measurements.csv: a :class:`ServingRecord` whose engine limits may be unstated (the
    release's defaults then), with its release, its pair and, for a draft tree, its shape."""

    pair: str = ""
    assumed: str = ""  # what was assumed where the source is silent (an acceptance length, another model)
    tree_topk: Optional[int] = None
    tree_num_draft_tokens: Optional[int] = None
    stated_max_num_seqs: Optional[int] = None
    stated_max_batch_tokens: Optional[int] = None


@dataclass(frozen=True)
class GainRow:
    """One speculative run against its baseline: measured and simulated gains of output throughput."""

    pair: str
    spec: ServingRecord
    base: ServingRecord
    measured: float
    simulated: float
    role: str  # fitted | held out (either run used by a fit: fitted)

    @property
    def error(self) -> float:
        return self.simulated / self.measured - 1.0

    @property
    def signs_agree(self) -> bool:
        return (self.simulated > 1.0) == (self.measured > 1.0)

    @property
    def sign_matters(self) -> bool:
        return abs(self.measured - 1.0) > SIGN_BAND


def load_path() -> Path:
    from simlab.common.resources import shipped_dir

    return shipped_dir("hw_profiles") / "calibration" / LOAD_FILE


def read_load_records(path: Optional[Path] = None) -> tuple[list[LoadRecord], list[tuple[str, str]]]:
    """The replayable runs of ``path`` (default: the shipped file) and, for the others, (id, why not)."""
    import io

    lines = Path(path or load_path()).read_text(encoding="utf-8").splitlines(keepends=True)
    frame = pd.read_csv(io.StringIO("".join(line for line in lines if not line.startswith("#"))))
    records, skipped = [], []
    for row in frame.to_dict("records"):
        why = _unreplayable(row)
        if why:
            skipped.append((str(row["id"]), why))
            continue
        method = optional_text(row.get("spec_method"))
        assumed = []
        model = str(row["model"])
        if model in SIMULATED_AS:
            model = SIMULATED_AS[model][0]
            assumed.append(f"simulated as {model}")
        tree = optional_int(row.get("spec_topk")) not in (None, 1) and method is not None
        if method is not None and optional_text(row.get("engine_version")) is None:
            assumed.append(NO_RELEASE_OVERLAP[1])
        input_tokens, output_tokens = _lengths(row, assumed)
        gamma = optional_int(row.get("spec_steps")) if tree else optional_int(row.get("num_speculative_tokens"))
        records.append(
            LoadRecord(
                id=str(row["id"]),
                source=str(row["source"]),
                engine=str(row["engine"]),
                gpu=str(row["gpu"]),
                tensor_parallel=int(row["tensor_parallel"]),
                model=model,
                precision=optional_text(row.get("precision")) or "bf16",
                kv_precision=optional_text(row.get("kv_precision")) or "bf16",
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                concurrency=int(row["concurrency"]),
                num_prompts=int(optional_int(row.get("num_prompts")) or 4 * int(row["concurrency"])),
                max_num_seqs=optional_int(row.get("max_num_seqs")) or 0,
                max_batch_tokens=optional_int(row.get("max_batch_tokens")) or 0,
                mean_tpot_ms=optional_float(row.get("mean_tpot_ms")),
                output_throughput_tok_s=optional_float(row.get("output_throughput_tok_s")),
                url=str(row["url"]),
                spec_method=method,
                num_draft_tokens=gamma,
                acceptance_length=_acceptance(row, model, method, gamma, assumed),
                expert_parallel=optional_int(row.get("expert_parallel")) or 1,
                dataset=optional_text(row.get("dataset")),
                checkpoint=optional_text(row.get("checkpoint")),
                engine_version=optional_text(row.get("engine_version")),
                pair=str(row["pair"]),
                tree_topk=optional_int(row.get("spec_topk")) if tree else None,
                tree_num_draft_tokens=optional_int(row.get("spec_num_draft_tokens")) if tree else None,
                stated_max_num_seqs=optional_int(row.get("max_num_seqs")),
                stated_max_batch_tokens=optional_int(row.get("max_batch_tokens")),
                assumed="; ".join(assumed),
            )
        )
    return records, skipped


def _lengths(row: dict, assumed: list) -> Optional[tuple[int, int]]:
    """(prompt, output) tokens: the source's, else its harness's assumed lengths (noted), else None."""
    stated = optional_int(row.get("input_tokens")), optional_int(row.get("output_tokens"))
    if None not in stated:
        return stated
    for harness, lengths in ASSUMED_LENGTHS.items():
        if harness in str(row.get("notes") or ""):
            assumed.append(f"{lengths[0]}/{lengths[1]} tokens ({harness} states none)")
            return lengths
    return None


def _acceptance(row: dict, model: str, method: Optional[str], gamma: Optional[int], assumed: list) -> Optional[float]:
    stated = optional_float(row.get("acceptance_length"))
    if stated is not None or method is None:
        return stated
    value, source = ASSUMED_ACCEPTANCE[(model, method, gamma)]
    assumed.append(f"acceptance length {value} ({source})")
    return value


def _unreplayable(row: dict) -> str:
    from simlab.hardware.specs import GPUS, MODELS

    for name in ("concurrency", "output_throughput_tok_s"):
        if optional_float(row.get(name)) is None:
            return f"no {name}"
    if _lengths(row, []) is None:
        return "no input_tokens and output_tokens"
    if str(row["gpu"]) not in GPUS:
        return f"GPU {row['gpu']} is not in simlab's catalogue"
    model = str(row["model"])
    if model in SIMULATED_AS:
        model, longest = SIMULATED_AS[model]
        if sum(_lengths(row, [])) > longest:
            return f"model {row['model']} is simulated as {model} only up to {longest} tokens a request"
    if model not in MODELS:
        return f"model {row['model']} is not in simlab's catalogue"
    if str(row["engine"]) not in ("vllm", "sglang", "trtllm"):
        return f"engine {row['engine']}"
    method = optional_text(row.get("spec_method"))
    if method is not None:
        if method not in ("mtp", "eagle3", "dflash", "dspark"):
            return f"drafter {method} is not simulated"
        tree = optional_int(row.get("spec_topk")) not in (None, 1)
        gamma = optional_int(row.get("spec_steps")) if tree else optional_int(row.get("num_speculative_tokens"))
        if gamma is None:
            return "no draft length"
        if optional_float(row.get("acceptance_length")) is None and (model, method, gamma) not in ASSUMED_ACCEPTANCE:
            return "no acceptance length"
    return ""


def release_for(stack: str, version: Optional[str]) -> Optional[str]:
    """The release simlab knows that a run's ``version`` (a tag such as ``v0.5.6.post2``) is, or the newest known
    before it, else the oldest known; None without a version (the newest, by leaving it out)."""
    from simlab.hardware.releases import version_key, known_versions

    known = known_versions(stack)
    if not version or not known:
        return None
    if version.lstrip("v") in known:
        return version.lstrip("v")
    key = version_key(version)
    at_or_before = [v for v in known if version_key(v) <= key]
    return at_or_before[-1] if at_or_before else known[0]


def _tree_acceptance(acceptance_length: float, depth: int, topk: int, num_draft_tokens: int) -> tuple[float, float]:
    """(alpha, catch) of the tree (simlab.acceptance.tree) that emits ``acceptance_length`` tokens a round on
    average: both scaled by one factor t from 0 (nothing accepted) to 1 (alpha 1, the calibrated catch), along
    which the expected tokens rise (bisection on t)."""
    from simlab.acceptance.tree import build_tree
    from simlab.acceptance.tree_fit import calibrated_catch

    catch = calibrated_catch()

    def tokens(t: float) -> float:
        return build_tree(np.full(depth, t), catch * t, topk, num_draft_tokens, depth).expected_tokens_per_round()

    if not 1.0 <= acceptance_length <= tokens(1.0):
        raise ValueError(f"an acceptance length of {acceptance_length} cannot come from this tree")
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if tokens(mid) < acceptance_length else (low, mid)
    t = (low + high) / 2
    return t, catch * t


def load_scenario(record: LoadRecord) -> dict[str, Any]:
    """The scenario replaying a run at load: its release's engine defaults where the source states no limit."""
    scenario = record_scenario(record)
    version = release_for(record.engine, record.engine_version)
    if version is not None:
        scenario["hardware"]["stack_version"] = version
    engine = {k: v for k, v in (("max_num_seqs", record.stated_max_num_seqs),
                                ("max_batch_tokens", record.stated_max_batch_tokens)) if v is not None}
    if version is None and record.speculative:
        engine["overlap_schedule"] = NO_RELEASE_OVERLAP[0]
    scenario["engine"] = engine
    if record.tree_topk is not None:
        depth, topk, tokens = record.num_draft_tokens, record.tree_topk, record.tree_num_draft_tokens
        alpha, catch = _tree_acceptance(float(record.acceptance_length), depth, topk, tokens)
        scenario["arms"] = [{"name": "tree", "method": record.spec_method, "gamma": depth,
                             "tree": {"topk": topk, "num_draft_tokens": tokens, "catch": catch}}]
        scenario["acceptance"] = {"kind": "iid", "alpha": alpha}
    return scenario


def simulate_load_record(record: ServingRecord) -> float:
    """Simulated output throughput of a run (either file)."""
    if isinstance(record, LoadRecord):
        from simlab.runner import run_scenario

        metrics = next(iter(run_scenario(load_scenario(record), plot=False).arms.values()))
        return float(metrics["output_throughput"])
    return float(simulate_record(record)["output_throughput_tok_s"])


def pairs(records: Iterable[ServingRecord]) -> list[tuple[str, ServingRecord, ServingRecord]]:
    """(pair, speculative run, its baseline) for every speculative run with exactly one baseline."""
    groups: dict[str, list[ServingRecord]] = {}
    for r in records:
        key = r.pair if isinstance(r, LoadRecord) else "|".join(map(str, (
            r.source, r.engine, r.gpu, r.tensor_parallel, r.expert_parallel, r.model, r.precision, r.kv_precision,
            r.dataset, r.input_tokens, r.output_tokens, r.concurrency)))
        groups.setdefault(key, []).append(r)
    out = []
    for key, runs in groups.items():
        bases = [r for r in runs if not r.speculative]
        if len(bases) == 1:
            out += [(key, r, bases[0]) for r in runs if r.speculative]
    return out


def check_gains(records: Optional[list[ServingRecord]] = None, on_pair=None,
                simulated: Optional[dict[str, float]] = None) -> list[GainRow]:
    """Every pair simulated: measured and simulated gains (each run simulated once). ``simulated`` holds output
    throughputs already simulated by id (``simlab profiles check`` passes its own runs' on their own hardware)."""
    if records is None:
        records = load_records() + read_load_records()[0]
    used = fitted_ids()
    simulated = dict(simulated or {})
    rows = []
    for i, (key, spec, base) in enumerate(pairs(records)):
        for r in (spec, base):
            if r.id not in simulated:
                simulated[r.id] = simulate_load_record(r)
        role = "fitted" if spec.id in used or base.id in used else "held out"
        rows.append(GainRow(key, spec, base, spec.output_throughput_tok_s / base.output_throughput_tok_s,
                            simulated[spec.id] / simulated[base.id], role))
        if on_pair is not None:
            on_pair(i + 1)
    return rows


def gain_summary(rows: Iterable[GainRow]) -> list[dict[str, Any]]:
    """Per role, target (dense or a mixture of experts) and users band (1, 2-31, 32+): pairs, median and worst
    |gain error|, and the signs that agree where the measured gain is below 1 - 0.1 or above 1 + 0.1."""
    from simlab.hardware.specs import get_model

    groups: dict[tuple[str, str, str], list[GainRow]] = {}
    for row in rows:
        target = "moe" if get_model(row.spec.model).is_moe else "dense"
        groups.setdefault((row.role, target, users_class(row.spec.concurrency)), []).append(row)
    order = {"1": 0, "2-31": 1, "32+": 2}
    out = []
    for (role, target, users), members in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                                  order[kv[0][2]])):
        errors = [abs(r.error) for r in members]
        clear = [r for r in members if r.sign_matters]
        out.append({"role": role, "target": target, "users": users, "pairs": len(members),
                    "median_abs_error": round(float(np.median(errors)), 3), "max_abs_error": round(max(errors), 3),
                    "signs_clear": len(clear), "signs_agree": sum(r.signs_agree for r in clear)})
    return out


GAIN_FILE = "gain_error.yaml"


def gain_document(rows: list[GainRow]) -> dict[str, Any]:
    """What hw_profiles/calibration/gain_error.yaml holds (``scripts/gain_error.py`` writes it): every pair's
    gains and the summary per role and users band."""
    pairs_out = [{"pair": r.pair, "speculative": r.spec.id, "baseline": r.base.id, "users": r.spec.concurrency,
                  "measured": round(r.measured, 4), "simulated": round(r.simulated, 4), "error": round(r.error, 4),
                  "signs_agree": bool(r.signs_agree), "role": r.role,
                  **({"assumed": r.spec.assumed} if getattr(r.spec, "assumed", "") else {})} for r in rows]
    return {"generator": "scripts/gain_error.py (simlab profiles check, speculation's gain)", "pairs": pairs_out,
            "summary": gain_summary(rows)}


def markdown_table(document: dict[str, Any]) -> str:
    """The table of docs/calibration.md, "Speculation's gain", from gain_error.yaml's summary."""
    rows = [
        "| role | target | users | pairs | median error | worst error | signs agree (measured gain < 0.9 or > 1.1) |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in document["summary"]:
        rows.append(f"| {e['role']} | {e['target']} | {e['users']} | {e['pairs']} | {e['median_abs_error']:.1%} | "
                    f"{e['max_abs_error']:.1%} | {e['signs_agree']} of {e['signs_clear']} |")
    return "\n".join(rows)


__all__ = [
    "GAIN_FILE",
    "gain_document",
    "markdown_table",
    "GainRow",
    "LoadRecord",
    "check_gains",
    "gain_summary",
    "load_scenario",
    "pairs",
    "read_load_records",
    "release_for",
]
