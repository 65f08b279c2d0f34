"""``simlab plan``: the cheapest deployment that serves a workload within an SLA, with speculative decoding in
the search (docs/planning.md, "Planning a deployment").

The plan file is read and checked (:mod:`plan_config`), its layouts and families enumerated with their bounds
(:mod:`plan_space`), the search run on an executor (:mod:`plan_search`), and the folder (``kind: plan``)
written: ``plan.json`` (the contract's document), ``plan.csv`` (every deployment evaluated or skipped, and why it
lost), ``best.yaml`` (the chosen deployment as a scenario for ``simlab run``), ``launch_vllm.sh`` and
``launch_sglang.sh`` (its launch commands), ``probes/`` (each simulated deployment, for resuming) and
``report.html``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError
from simlab.studies.plan_config import PlanSpec, read_plan
from simlab.studies.plan_ranking import PREFERENCES, Evaluated, headroom_fields
from simlab.studies.plan_verdict import RULES, verdict
from simlab.studies.plan_search import PlanSearch, SearchResult
from simlab.studies.plan_space import Family, build_families, enumerate_layouts, plan_load
from simlab.studies.progress import StudyProgress
from simlab.studies.table_csv import csv_text, metric_columns
from simlab.studies.labels import layout_label

PLAN_KIND = "plan"
NUM_LAUNCHED = 5  # launch commands for the top deployments


@dataclass
class PlanOutcome:
    out: Path
    document: dict
    result: SearchResult


def run_plan(plan_file: str | Path, out=None, *, executor: str = "local", workers: Optional[int] = None,
             address: Optional[str] = None, budget_s: Optional[float] = None, report: bool = True,
             progress: Optional[StudyProgress] = None, command: Optional[str] = None,
             exhaustive: bool = False, prefer: Optional[str] = None) -> PlanOutcome:
    """Answer a plan and write its folder (default ``results/<name>-plan/``); a folder of an earlier run of the
    plan is resumed. ``exhaustive`` simulates every deployment without bounds (for tests and checks); ``prefer``
    replaces the plan's tie-break at equal cost (:data:`simlab.studies.plan_ranking.PREFERENCES`)."""
    from simlab.common.outputs import check_out_dir, open_resumable_dir
    from simlab.studies.executors import make_executor

    if budget_s is not None and not budget_s > 0:
        raise InputError("must be a positive number of seconds", field="--budget-s", value=budget_s,
                         valid="e.g. 120")
    if prefer is not None and prefer not in PREFERENCES:
        raise InputError("is not a preference", field="--prefer", value=prefer, valid=" or ".join(PREFERENCES))
    spec = read_plan(plan_file)
    if prefer is not None:
        spec.block = spec.block.model_copy(update={"prefer": prefer})
    load = plan_load(spec)
    layouts, skipped = enumerate_layouts(spec, load)
    families = build_families(spec, layouts, load)
    if all(f.unserved for f in families):
        raise InputError(f"no release of plan.stack serves these drafters ({families[0].unserved})",
                         file=str(spec.file), field="arms", value=", ".join(a.label for a in spec.arms),
                         valid="an arm with method none, or a plan.stack whose release serves the drafter")
    out_dir = check_out_dir(Path(out) if out is not None else Path("results") / f"{spec.name}-plan", kind=PLAN_KIND,
                            inputs=[spec.file], resume=True)
    progress = progress or StudyProgress()
    with make_executor(executor, workers=workers, address=address) as pool:
        open_resumable_dir(out_dir, kind=PLAN_KIND, command=command)
        search = PlanSearch(spec, families, load, pool, progress, out_dir / "probes", budget_s, exhaustive)
        result = search.run()
    from simlab.studies.plan_sensitivity import sensitivity

    spread = sensitivity(spec, families, search.ranking, result.evaluated,
                         lambda f, units, value: layout_fields(spec, f, units, value, search))
    document = plan_document(spec, families, search, result, skipped, command, spread)
    write_plan_folder(out_dir, spec, families, search, result, document, report)
    return PlanOutcome(out_dir, document, result)


def layout_fields(spec: PlanSpec, family: Family, units: int, value: Any, search: PlanSearch) -> dict:
    """What a deployment is, before it runs: layout, replicas (or split), arm, GPUs, price, moving parts."""
    layout = family.layout
    split = value if family.disaggregated else None
    return {
        "gpu": layout.gpu, "stack": layout.stack, "precision": layout.precision,
        "tensor_parallel": layout.tensor_parallel, "expert_parallel": layout.expert_parallel,
        "replicas": units, "disaggregation": dict(split) if split else None, "arm": spec.arms[family.arm].label,
        "num_gpus": family.num_gpus(units), "usd_per_hour": round(family.usd_per_hour(units), 6),
        "moving_parts": search.ranking.moving_parts(family),
    }


def deployment(spec: PlanSpec, family: Family, e: Evaluated, search: PlanSearch) -> dict:
    """The contract's DEPLOYMENT of an evaluated deployment."""
    fields = layout_fields(spec, family, e.units, e.value, search)
    moving_parts = fields.pop("moving_parts")
    return {
        **fields,
        "meets_sla": e.meets, "metrics": e.metrics,
        "engine": e.data.get("engine", {}),
        "objective": search.ranking.objective(family, e.units, e.metrics) if e.metrics else None,
        "failing": [] if e.meets else explain(spec, e),
        "moving_parts": moving_parts,
        "headroom": headroom_fields(spec.sla, e.metrics),
    }


def explain(spec: PlanSpec, e: Evaluated) -> list[str]:
    """The SLA conditions a deployment misses, each with its value (or its error)."""
    if e.metrics is None:
        return list(e.failing)
    out = []
    for c in spec.sla.conditions:
        if not c.holds(e.metrics):
            value = e.metrics.get(c.metric)
            out.append(f"{c} ({c.metric}={readable(value)})" if isinstance(value, (int, float)) else f"{c} ({value})")
    return out


def readable(value: float) -> str:
    """A metric's value as a person reads it: 12,202.8 rather than 1.22e+04, 6.348 rather than 6.34812."""
    return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.4g}"


def closest(spec: PlanSpec, evaluated: list[Evaluated]) -> Optional[Evaluated]:
    """The simulated deployment nearest to meeting the SLA: the least summed relative miss."""
    def miss(e: Evaluated) -> float:
        total = 0.0
        for c in spec.sla.conditions:
            value = e.metrics.get(c.metric)
            if not isinstance(value, (int, float)):
                total += 1e9
            elif not c.holds(e.metrics):
                total += abs(value - c.value) / max(abs(c.value), 1e-12)
        return total

    ran = [e for e in evaluated if e.metrics is not None]
    return min(ran, key=miss) if ran else None


def plan_document(spec: PlanSpec, families: list[Family], search: PlanSearch, result: SearchResult,
                  skipped: list[tuple[dict, str]], command: Optional[str],
                  spread: Optional[dict] = None) -> dict:
    """plan.json: the contract's ``sla``, ``objective``, ``best`` and ``candidates``, and how the search went."""
    from simlab.common.version import __version__
    from simlab.common.yaml_file import read_yaml
    from simlab.hardware.specs import get_model
    from simlab.studies.grid import data_sha256
    from simlab.studies.launch import launch_commands

    candidates = [deployment(spec, families[e.family], e, search) for e in result.evaluated]
    best = candidates[0] if result.best is not None else None
    hf_id = get_model(spec.model).hf_id
    launched = 0
    for c, e in zip(candidates, result.evaluated):
        if c["meets_sla"] and launched < NUM_LAUNCHED:
            c["launch"] = launch_commands(c, e.data, hf_id, spec.arms[families[e.family].arm].drafter)
            launched += 1
    by_arm: dict[str, Any] = {}
    for index, arm in enumerate(spec.arms):
        mine = next((c for c, e in zip(candidates, result.evaluated)
                     if c["meets_sla"] and families[e.family].arm == index), None)
        by_arm[arm.label] = {key: mine[key] for key in ("arm", "gpu", "stack", "precision", "tensor_parallel",
                                                        "expert_parallel", "replicas", "disaggregation",
                                                        "num_gpus", "usd_per_hour", "objective", "metrics",
                                                        "moving_parts", "headroom")} if mine else None
    near = None
    if best is None:
        e = closest(spec, result.evaluated)
        if e is not None:
            near = next(c for c, x in zip(candidates, result.evaluated) if x is e)
    space = sum(f.max_units - f.min_units + 1 for f in families)
    document = {
        "generator": f"simlab {__version__}", "name": spec.name, "model": spec.model,
        "plan_file": str(spec.file), "plan_sha256": data_sha256(read_yaml(spec.file, what="plan file")),
        "command": command,
        "sla": spec.sla.document(), "objective": spec.block.objective, "prefer": spec.block.prefer,
        "complete": result.complete,
        "best": best, "best_by_arm": by_arm, "closest": near,
        "arm_moving_parts": {arm.label: parts for arm, parts in zip(spec.arms, search.ranking.arm_parts)},
        "sensitivity": spread,
        "prices": {name: {"usd_per_hour": p.usd_per_hour, "source": p.source, "date": p.date}
                   for name, p in spec.prices.items()},
        "acceptance": acceptance_source(spec),
        "search": {"num_layouts": len({f.layout for f in families}), "num_families": len(families),
                   "num_candidate_deployments": space, "num_simulated": result.num_simulated,
                   "num_from_earlier_run": result.num_cached, "wall_s": round(result.wall_s, 3),
                   "exhaustive": search.exhaustive,
                   "families": [{"layout": f.layout.label, "arm": spec.arms[f.arm].label,
                                 "disaggregated": f.disaggregated, "max_replicas": f.max_units,
                                 "start": f.start, **vars(result.outcomes[f.index])} for f in families],
                   "layouts_skipped": [{"layout": layout_label(**what), **what, "why": why} for what, why in skipped]},
        "candidates": candidates,
    }
    document["verdict"] = verdict(document)
    return {"verdict": document.pop("verdict"), **document}


def acceptance_source(spec: PlanSpec) -> dict:
    """Where the plan's acceptance comes from, as a run's summary says it (simlab's shipped curves of the other
    drafters named for the methods its arms draft with)."""
    from simlab.acceptance import build_acceptance
    from simlab.runner import acceptance_source as summary_source

    built = build_acceptance(spec.probe.acceptance, file=spec.file)
    return summary_source(built.source, {arm.method for arm in spec.probe.arms})


def csv_rows(spec: PlanSpec, families: list[Family], document: dict) -> tuple[list[str], list[list[Any]]]:
    """plan.csv: every deployment simulated (best first) with why it lost, then every family or count skipped."""
    candidates = document["candidates"]
    head = ["rank", "status", "why", "gpu", "stack", "precision", "tensor_parallel", "expert_parallel", "replicas",
            "prefill_replicas", "decode_replicas", "arm", "num_gpus", "usd_per_hour", "objective", "meets_sla"]
    metrics = [k for k in metric_columns(c["metrics"] for c in candidates if c["metrics"]) if k not in head]
    rows = []
    best = document["best"]
    for rank, c in enumerate(candidates, 1):
        split = c["disaggregation"] or {}
        if c is best:
            status, why = "chosen", "meets the SLA at the lowest " + spec.block.objective
        elif c["meets_sla"] and c["objective"] <= best["objective"] * (1 + 1e-9):
            status, why = "tie", (f"meets the SLA at the same {spec.block.objective} as the chosen; ranked below it: "
                                  f"{RULES[spec.block.prefer]}")
        elif c["meets_sla"]:
            status, why = "dearer", (f"meets the SLA; {spec.block.objective} {c['objective']:.4g} vs the chosen "
                                     f"{best['objective']:.4g}")
        else:
            status, why = "misses", "; ".join(c["failing"])
        rows.append([rank, status, why, c["gpu"], c["stack"], c["precision"], c["tensor_parallel"],
                     c["expert_parallel"], c["replicas"], split.get("prefill_replicas"), split.get("decode_replicas"),
                     c["arm"], c["num_gpus"], c["usd_per_hour"], c["objective"], c["meets_sla"],
                     *((c["metrics"] or {}).get(k) for k in metrics)])
    for f, info in zip(families, document["search"]["families"]):
        if info["status"] == "answer":
            continue
        low = info["dearer_from"] or f.min_units
        if info["status"] == "misses":
            continue  # its simulated counts are rows above
        rows.append(["", "not simulated" if info["status"] != "dearer" or low == f.min_units else "dearer",
                     info["reason"], f.layout.gpu, f.layout.stack, f.layout.precision, f.layout.tensor_parallel,
                     f.layout.expert_parallel, f"{low}-{f.max_units}", "", "", spec.arms[f.arm].label,
                     "", "", "", False, *([""] * len(metrics))])
    for item in document["search"]["layouts_skipped"]:
        rows.append(["", "does not fit", item["why"], item["gpu"], item["stack"], item["precision"],
                     item["tensor_parallel"], item["expert_parallel"],
                     "", "", "", "", "", "", "", False, *([""] * len(metrics))])
    return [*head, *metrics], rows


def write_plan_folder(out_dir: Path, spec: PlanSpec, families: list[Family], search: PlanSearch,
                      result: SearchResult, document: dict, report: bool) -> None:
    """Write the plan's files, each atomically (the folder and its probes/ stay for a rerun)."""
    import yaml

    from simlab.common.outputs import write_file_atomic
    from simlab.studies.launch import launch_file_text

    write_file_atomic(out_dir / "plan.json", json.dumps(document, indent=2) + "\n")
    write_file_atomic(out_dir / "plan.csv", csv_text(*csv_rows(spec, families, document)))
    best = document["best"]
    for name in ("best.yaml", "launch_vllm.sh", "launch_sglang.sh"):
        (out_dir / name).unlink(missing_ok=True)  # an earlier run's answer must not outlive this one's
    if best is not None:
        scenario = _portable(result.best.data, spec)
        text = yaml.safe_dump(scenario, sort_keys=False)
        write_file_atomic(out_dir / "best.yaml", "# written by simlab plan: the chosen deployment; "
                                                 "re-run it with `simlab run best.yaml`\n" + text)
        from simlab.hardware.specs import get_model
        from simlab.studies.launch import launch_notes

        arm = result.best.data["arms"][0]
        drafter = spec.arms[families[result.best.family].arm].drafter
        for engine in ("vllm", "sglang"):
            notes = launch_notes(engine, best, arm, drafter, get_model(spec.model).hf_id)
            write_file_atomic(out_dir / f"launch_{engine}.sh",
                              launch_file_text(engine, best, best["launch"][engine], notes))
    if report:
        from simlab.studies.plan_report import write_plan_report

        write_plan_report(out_dir, document)


def _portable(data: dict, spec: PlanSpec) -> dict:
    """A deployment's scenario whose relative paths (a trace, an acceptance file) hold from any folder."""
    from simlab.common.resources import is_bare_name

    data = json.loads(json.dumps(data))
    base = Path(spec.file).resolve().parent
    workload = data.get("workload") or {}
    if isinstance(workload.get("path"), str) and not is_bare_name(workload["path"]):
        workload["path"] = str((base / workload["path"]).resolve())
    if isinstance(data.get("acceptance"), str) and not is_bare_name(data["acceptance"]):
        data["acceptance"] = str((base / data["acceptance"]).resolve())
    return data
