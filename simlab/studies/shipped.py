"""The studies shipped with simlab (``scenarios/studies/``) and their committed reports (``reports/<study>/``).

:func:`make_report` runs a study and copies what its report needs into ``reports/<study>/`` (the page, its
PNGs, the tables and ``study.json``: the command, the scenario's hash); point folders stay behind.
:func:`check_report` says why a committed report is stale: its scenario changed, or simulating again one cheap
point (a probe, for a what-if) does not give the committed row exactly. ``scripts/make_reports.py`` drives
both; the tests call :func:`check_report`.
"""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from simlab.studies.grid import data_sha256

REPORT_KIND = "study-report"
FILES = {
    "sweep": ("report.html", "sweep.csv", "sweep.json", "positions.csv", "timing.csv"),
    "whatif": ("report.html", "whatif.json", "probes.csv"),
    "plan": ("report.html", "plan.json", "plan.csv"),
}
OPTIONAL_FILES = {"plan": ("best.yaml", "launch_vllm.sh", "launch_sglang.sh")}  # absent when nothing meets the SLA


@dataclass(frozen=True)
class Study:
    """A shipped study: a ``simlab sweep``, ``simlab whatif`` or ``simlab plan`` of one scenario (or plan) file;
    a name with a slash (``plan/qwen3-8b-strict``) is a file in a folder of scenarios/studies/ and a folder of
    reports/."""

    name: str
    kind: str  # "sweep", "whatif" or "plan"
    options: dict[str, Any] = field(default_factory=dict)  # whatif: sla, vary, low, high, baseline

    @property
    def scenario(self) -> str:
        return f"scenarios/studies/{self.name}.yaml"

    @property
    def command(self) -> str:
        args = ["simlab", self.kind, self.scenario]
        for key, value in self.options.items():
            args += [f"--{key}", str(value)]
        return " ".join(shlex.quote(a) for a in args)


STUDIES: tuple[Study, ...] = (
    Study("crossover", "sweep"),
    Study("deepseek-sla", "sweep"),
    Study("deepseek-concurrency", "sweep"),
    Study("capacity", "whatif", {"vary": "engine.replicas", "low": 1, "high": 16,
                                 "sla": "p90_ttft_ms<=1000,p90_tpot_ms<=15"}),
    Study("gpus", "sweep"),
    Study("miscalibration", "sweep"),
    Study("disaggregation", "sweep"),
    Study("lookup-code-editing", "sweep"),
    Study("lookup-chat", "sweep"),
    Study("plan/qwen3-8b-strict", "plan"),
    Study("plan/qwen3-8b-loose", "plan"),
    Study("plan/qwen3-30b-a3b-strict", "plan"),
    Study("plan/qwen3-30b-a3b-loose", "plan"),
)


def study(name: str) -> Study:
    for item in STUDIES:
        if item.name == name:
            return item
    raise KeyError(f"no shipped study {name!r}; shipped: {', '.join(s.name for s in STUDIES)}")


def scenario_sha256(repo: Path, item: Study) -> str:
    from simlab.common.yaml_file import read_yaml

    return data_sha256(read_yaml(repo / item.scenario, what="scenario file"))


def make_report(item: Study, repo: Path, *, workers: Optional[int] = None, executor: str = "local",
                progress=None) -> Path:
    """Run ``item`` (from ``repo``, so that the paths it records are relative) and write ``reports/<name>/``."""
    import os

    from simlab.common.outputs import check_out_dir, staged_dir

    target = check_out_dir(repo / "reports" / item.name, kind=REPORT_KIND)
    started = time.perf_counter()
    previous = Path.cwd()
    work = Path(tempfile.mkdtemp(prefix=f"simlab-study-{item.name.replace('/', '-')}-"))
    (work / item.name).parent.mkdir(parents=True, exist_ok=True)
    try:
        os.chdir(repo)
        folder = _run(item, work / item.name, workers=workers, executor=executor, progress=progress)
        wall_s = time.perf_counter() - started
        with staged_dir(target, kind=REPORT_KIND, command=item.command) as staging:
            for name in FILES[item.kind]:
                shutil.copy2(folder / name, staging / name)
            for name in OPTIONAL_FILES.get(item.kind, ()):
                if (folder / name).is_file():
                    shutil.copy2(folder / name, staging / name)
            for png in sorted([*folder.glob("report*.png"), *folder.glob("plan-*.png")]):
                shutil.copy2(png, staging / png.name)
            (staging / "study.json").write_text(json.dumps(_study_document(item, repo, wall_s, workers, executor),
                                                           indent=2) + "\n", encoding="utf-8")
    finally:
        os.chdir(previous)
        shutil.rmtree(work, ignore_errors=True)
    return target


def _run(item: Study, out: Path, *, workers, executor, progress) -> Path:
    if item.kind == "sweep":
        from simlab.studies.sweep import run_sweep

        outcome = run_sweep(Path(item.scenario), out, executor=executor, workers=workers, report=True,
                            progress=progress, command=item.command)
        if outcome.num_failed:
            raise RuntimeError(f"{item.name}: {outcome.num_failed} points failed: {outcome.errors}")
        return outcome.out
    if item.kind == "plan":
        from simlab.studies.plan import run_plan

        return run_plan(Path(item.scenario), out, executor=executor, workers=workers, report=True, progress=progress,
                        command=item.command).out
    from simlab.studies.whatif import prepare_whatif, run_whatif

    question = prepare_whatif(Path(item.scenario), **item.options)
    return run_whatif(question, out, executor=executor, workers=workers, report=True, progress=progress,
                      command=item.command).out


def _study_document(item: Study, repo: Path, wall_s: float, workers, executor) -> dict:
    from simlab.common.version import __version__

    return {"generator": f"simlab {__version__}", "study": item.name, "command": item.command,
            "scenario": item.scenario, "scenario_sha256": scenario_sha256(repo, item),
            "made_by": f"python scripts/make_reports.py {item.name}", "wall_s": round(wall_s, 1),
            "executor": executor, "workers": workers}


# ---------------------------------------------------------------------------------------------- staleness
def check_report(item: Study, repo: Path) -> list[str]:
    """Why ``reports/<name>/`` no longer matches the code and the scenario (empty when it is current)."""
    folder = repo / "reports" / item.name
    missing = [n for n in ("study.json", *FILES[item.kind]) if not (folder / n).is_file()]
    if missing:
        return [f"reports/{item.name}/ lacks {', '.join(missing)}"]
    document = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    problems = []
    if document.get("scenario_sha256") != scenario_sha256(repo, item):
        problems.append(f"{item.scenario} changed since reports/{item.name}/ was made")
    if document.get("command") != item.command:
        problems.append(f"reports/{item.name}/ was made by {document.get('command')!r}, not {item.command!r}")
    if not problems:
        recheck = {"sweep": recheck_sweep_point, "whatif": recheck_probe, "plan": recheck_plan}[item.kind]
        problems += recheck(item, repo)
    return problems


def _read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def cheapest_point(folder: Path) -> str:
    """The committed point with the fewest engine steps over its arms (a proxy of simulation time that, unlike
    a wall time, does not depend on how busy the machine was)."""
    header, rows = _read_csv(folder / "sweep.csv")
    steps: dict[str, int] = {}
    for row in rows:
        record = dict(zip(header, row))
        if not record["error"] and record.get("num_steps"):
            steps[record["point"]] = steps.get(record["point"], 0) + int(record["num_steps"])
    document = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    return min(steps, key=steps.get) if steps else document["points"][0]["id"]


def recheck_sweep_point(item: Study, repo: Path) -> list[str]:
    """Simulate the cheapest committed point again, in-process, and compare its sweep.csv rows exactly."""
    from simlab.common.json_text import dumps
    from simlab.config.loading import scenario_from_data
    from simlab.runner import run_scenario
    from simlab.studies.grid import load_sweep
    from simlab.studies.sweep import SweepState

    folder = repo / "reports" / item.name
    committed = json.loads((folder / "sweep.json").read_text(encoding="utf-8"))
    chosen = cheapest_point(folder)
    values = next(p["values"] for p in committed["points"] if p["id"] == chosen)
    sweep = load_sweep(repo / item.scenario)
    point = next((p for p in sweep.points if p.values == values), None)
    if point is None:
        return [f"{item.scenario} no longer has the point {values}"]
    results = run_scenario(scenario_from_data(point.data, file=sweep.file), jobs=1, plot=False)
    state = SweepState(sweep, arms={point.id: json.loads(dumps(results.arms))})
    header, rows = state.rows()
    old_header, old_rows = _read_csv(folder / "sweep.csv")
    from simlab.studies.table_csv import csv_text

    new_rows = [row[1:] for row in list(csv.reader(csv_text(header, rows).splitlines()))[1:]]
    old_rows = [row[1:] for row in old_rows if row[0] == chosen]
    if header != old_header:
        return [f"reports/{item.name}/sweep.csv has other columns than the code writes now"]
    if new_rows != old_rows:
        return [f"simulating the point {values} again gives other numbers than reports/{item.name}/sweep.csv"]
    return []


def recheck_probe(item: Study, repo: Path) -> list[str]:
    """Simulate the first committed probe of a what-if again (its arm alone) and compare its row exactly."""
    from simlab.studies.table_csv import csv_text
    from simlab.studies.tasks import ScenarioTask, run_task
    from simlab.studies.whatif import Probe, prepare_whatif
    from simlab.studies.whatif_document import probe_rows

    folder = repo / "reports" / item.name
    header, rows = _read_csv(folder / "probes.csv")
    first = dict(zip(header, rows[0]))
    question = prepare_whatif(repo / item.scenario, **item.options)
    arm = question.arm_labels.index(first["arm"])
    value = json.loads(first[question.field])
    result = run_task(ScenarioTask(question.point(value, [arm]), str(question.file)))
    if result["arms"] is None:
        return [f"the probe {question.field}={value} of {item.name} failed: {result['error']}"]
    metrics = next(iter(result["arms"].values()))
    probe = Probe(value, arm, question.sla.meets(metrics), metrics)
    new_header, new_rows = probe_rows(question, [probe])
    text = list(csv.reader(csv_text(new_header, new_rows).splitlines()))
    if text[0] != header or text[1][1:] != rows[0][1:]:
        return [f"simulating the probe {question.field}={value} ({first['arm']}) again gives other numbers than "
                f"reports/{item.name}/probes.csv"]
    return []


def recheck_plan(item: Study, repo: Path) -> list[str]:
    """Simulate the committed plan's first candidate (its chosen deployment, when one meets the SLA) again and
    compare its metrics exactly (but the wall time)."""
    from simlab.studies.plan_search import deployment_result
    from simlab.studies.tasks import ScenarioTask, run_task
    from simlab.studies.plan_config import read_plan
    from simlab.studies.plan_space import deployment_scenario, build_families, enumerate_layouts, plan_load

    folder = repo / "reports" / item.name
    document = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
    if not document["candidates"]:
        return []
    first = document["candidates"][0]
    spec = read_plan(repo / item.scenario)
    load = plan_load(spec)
    families = build_families(spec, enumerate_layouts(spec, load)[0], load)
    labels = [a.label for a in spec.arms]
    family = next((f for f in families if f.layout.gpu == first["gpu"] and f.layout.stack == first["stack"]
                   and f.layout.precision == first["precision"] and f.layout.tensor_parallel == first["tensor_parallel"]
                   and f.layout.expert_parallel == first["expert_parallel"] and labels[f.arm] == first["arm"]
                   and f.disaggregated == (first["disaggregation"] is not None)), None)
    if family is None:
        return [f"{item.scenario} no longer has the layout and arm of reports/{item.name}/plan.json's first candidate"]
    value = first["disaggregation"] or first["replicas"]
    result = deployment_result(run_task(ScenarioTask(deployment_scenario(spec, family, value), str(spec.file.resolve()),
                                                     shared_cost=True)))

    def timeless(metrics):
        return {k: v for k, v in (metrics or {}).items() if k != "sim_wall_s"}

    if timeless(result["metrics"]) != timeless(first["metrics"]):
        return [f"simulating the first candidate of reports/{item.name}/plan.json again gives other numbers"]
    return []
