"""Run a sweep: every point of a scenario's ``sweep:`` block, on an executor, into one resumable folder.

``DIR/points/<point id>/`` is each point's results folder, written by the worker exactly as ``simlab run``
writes it (atomically: a point is finished when its folder exists). ``DIR/sweep.csv`` has one row per point ×
arm; it is rewritten atomically as points finish, and rebuilt from the point folders on a rerun, so a killed
sweep loses at most the points in flight. A rerun skips finished points and never rewrites their folders; a
point that failed is recorded with its error (``DIR/failed/<id>.txt`` holds the traceback) and run again on
the next rerun.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from simlab.common.outputs import check_out_dir, open_resumable_dir, read_manifest, write_file_atomic
from simlab.studies.figures import format_value
from simlab.studies.executors import make_executor
from simlab.studies.grid import Point, Sweep, load_sweep, read_sweep
from simlab.studies.progress import StudyProgress
from simlab.studies.tasks import ScenarioTask, outcome, run_task
from simlab.studies.table_csv import WALL_CLOCK_KEYS, csv_text, metric_columns

SWEEP_KIND = "sweep"
CSV_REWRITE_S = 1.0  # at most one sweep.csv rewrite per second while points finish (and one at the end)


@dataclass
class SweepState:
    """What is known about each point: its arms' metrics when finished, its error when it failed."""

    sweep: Sweep
    arms: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    wall_s: dict[str, float] = field(default_factory=dict)

    @property
    def num_failed(self) -> int:
        return len(self.errors)

    def rows(self) -> tuple[list[str], list[list[Any]]]:
        """sweep.csv: point, each varied field, arm, error, then every scalar metric (no wall-clock ones)."""
        sweep = self.sweep
        metrics = metric_columns(m for p in sweep.points for m in (self.arms.get(p.id) or {}).values())
        header = ["point", *sweep.fields, "arm", "error", *metrics]
        rows = []
        for point in sweep.points:
            if point.id not in self.arms and point.id not in self.errors:
                continue
            values = [point.values[f] for f in sweep.fields]
            arms = self.arms.get(point.id)
            for label in (list(arms) if arms else point.arm_labels):
                if arms:
                    row_metrics = [arms[label].get(key) for key in metrics]
                    rows.append([point.id, *values, label, "", *row_metrics])
                else:
                    rows.append([point.id, *values, label, self.errors[point.id], *([None] * len(metrics))])
        return header, rows

    def position_rows(self) -> tuple[list[str], list[list[Any]]]:
        """positions.csv: per point, arm and draft position, the drafts verified and accepted there."""
        header = ["point", "arm", "position", "num_verified", "num_reached", "num_accepted", "acceptance_rate",
                  "conditional_acceptance_rate"]
        rows = []
        for point in self.sweep.points:
            for label, metrics in (self.arms.get(point.id) or {}).items():
                verified = metrics.get("spec_decode_num_verified_per_position") or []
                reached = metrics.get("spec_decode_num_reached_per_position") or []
                accepted = metrics.get("spec_decode_num_accepted_per_position") or []
                rates = metrics.get("spec_decode_per_position_acceptance_rates") or []
                conditional = metrics.get("spec_decode_conditional_acceptance_rates") or []
                for k in range(len(rates)):
                    rows.append([point.id, label, k + 1, _item(verified, k), _item(reached, k), _item(accepted, k),
                                 rates[k], _item(conditional, k)])
        return header, rows

    def timing_rows(self) -> tuple[list[str], list[list[Any]]]:
        """timing.csv: the wall-clock figures sweep.csv leaves out."""
        header = ["point", "arm", *sorted(WALL_CLOCK_KEYS), "point_wall_s"]
        rows = []
        for point in self.sweep.points:
            for label, metrics in (self.arms.get(point.id) or {}).items():
                rows.append([point.id, label, *(metrics.get(k) for k in sorted(WALL_CLOCK_KEYS)),
                             self.wall_s.get(point.id)])
        return header, rows


@dataclass
class SweepOutcome:
    """The result of :func:`run_sweep`."""

    out: Path
    sweep: Sweep
    num_run: int
    num_skipped: int
    num_failed: int
    errors: dict[str, str]
    verdict: str = ""  # the sweep's answer in words (sweep.json's ``verdict``)

    @property
    def csv(self) -> Path:
        return self.out / "sweep.csv"


def point_dir(out: Path, point: Point) -> Path:
    return out / "points" / point.id


def is_finished(folder: Path) -> bool:
    """A point folder that a run finished writing (they appear atomically, with a manifest of kind run)."""
    manifest = read_manifest(folder)
    return manifest is not None and manifest.get("kind") == "run" and (folder / "summary.json").is_file()


def sweep_document(sweep: Sweep, command: Optional[str], scenario_file: Optional[str] = None) -> dict:
    """sweep.json: what the sweep is (the scenario, its hash, the varied fields and every point)."""
    from simlab.common.version import __version__
    from simlab.studies.study_setting import scenario_setting

    return {
        "generator": f"simlab {__version__}",
        "scenario_file": scenario_file or str(sweep.file),
        "scenario_sha256": sweep.scenario_sha256,
        "command": command,
        "name": sweep.name,
        "fields": list(sweep.fields),
        "load": sweep.block.load,
        "baseline": sweep.block.baseline,
        "sla_user_tok_s": list(sweep.block.sla_user_tok_s),
        "arms": list(sweep.arm_labels),
        "arm_kinds": arm_kinds(sweep.points[0].data),
        "points": [{"id": p.id, "values": p.values, "setting": scenario_setting(p.data, sweep.file)}
                   for p in sweep.points],
        "scenario": {**sweep.base, "sweep": sweep.block.model_dump(mode="json", exclude_defaults=True)},
    }


def arm_kinds(data: dict) -> dict[str, dict]:
    """Each arm's method, scheduler kind and gamma, by label (what a report's gain table needs)."""
    from simlab.config import Arm

    kinds = {}
    for raw in data.get("arms", []):
        arm = Arm.model_validate(raw)
        kinds[arm.label] = {"method": arm.method, "scheduler": arm.scheduler_kind, "gamma": arm.draft_len}
    return kinds


def run_sweep(scenario, out=None, *, executor: str = "local", workers: Optional[int] = None,
              address: Optional[str] = None, plot: bool = False, report: bool = True,
              progress: Optional[StudyProgress] = None, command: Optional[str] = None) -> SweepOutcome:
    """Run every point of ``scenario`` (a path to a file holding ``sweep:``, or ``(data, file)``) into ``out``
    (default ``results/<name>/``); returns a :class:`SweepOutcome`. ``plot`` also draws each point's
    report.png; ``report`` writes ``out/report.html`` at the end. Input errors raise :class:`InputError`
    before anything is written."""
    sweep = read_sweep(*scenario) if isinstance(scenario, tuple) else load_sweep(scenario)
    out_dir = Path(out) if out is not None else Path("results") / sweep.name
    out_dir = check_out_dir(out_dir, kind=SWEEP_KIND, inputs=[sweep.file], resume=True)
    progress = progress or StudyProgress()
    with make_executor(executor, workers=workers, address=address) as pool:
        open_resumable_dir(out_dir, kind=SWEEP_KIND, command=command)
        given = None if isinstance(scenario, tuple) else str(scenario)  # the path as the caller gave it
        write_file_atomic(out_dir / "sweep.json", json.dumps(sweep_document(sweep, command, given), indent=2) + "\n")
        state = SweepState(sweep)
        _read_previous(out_dir, state)
        todo = [p for p in sweep.points if p.id not in state.arms]
        _write_tables(out_dir, state)
        tasks = [ScenarioTask(p.data, str(sweep.file), str(point_dir(out_dir, p)), plot, command) for p in todo]
        progress.start(len(todo), skipped=len(sweep.points) - len(todo), label="points")
        last_write = time.perf_counter()
        try:
            for index, result in pool.run(run_task, tasks):
                point = todo[index]
                _record(out_dir, state, point, result)
                label = ", ".join(f"{k}={format_value(v)}" for k, v in point.values.items())
                progress.done(label, failed=point.id in state.errors, note=state.errors.get(point.id, ""))
                if time.perf_counter() - last_write >= CSV_REWRITE_S:
                    _write_tables(out_dir, state)
                    last_write = time.perf_counter()
        finally:
            _write_tables(out_dir, state)
            progress.close()
    verdict = write_verdict(out_dir)
    if report:
        from simlab.studies.report_html import write_report

        write_report(out_dir)
    return SweepOutcome(out_dir, sweep, len(todo), len(sweep.points) - len(todo), state.num_failed,
                        dict(state.errors), verdict)


def write_verdict(out_dir: Path) -> str:
    """Put the sweep's answer (:func:`simlab.studies.sweep_verdict.sweep_verdict`) first in sweep.json, with its
    question and cautions; returns it."""
    from simlab.studies.study_warnings import study_warnings
    from simlab.studies.sweep_data import read_sweep_folder
    from simlab.studies.sweep_verdict import setting_sentence, sweep_question, sweep_verdict

    data = read_sweep_folder(out_dir)
    verdict = sweep_verdict(data)
    doc = {k: v for k, v in data.doc.items() if k not in ("verdict", "question", "setting", "warnings")}
    head = {"verdict": verdict, "question": sweep_question(data), "setting": setting_sentence(data),
            "warnings": study_warnings(data.settings, data.arm_kinds)}
    write_file_atomic(out_dir / "sweep.json", json.dumps({**head, **doc}, indent=2) + "\n")
    return verdict


def _read_previous(out_dir: Path, state: SweepState) -> None:
    """Finished points from the folder (their summaries) and the wall times an earlier run recorded."""
    for point in state.sweep.points:
        folder = point_dir(out_dir, point)
        if is_finished(folder):
            summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
            state.arms[point.id] = summary["arms"]
    timing = out_dir / "timing.csv"
    if timing.is_file():
        import csv

        with timing.open(encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                if row.get("point") in state.arms and row.get("point_wall_s"):
                    state.wall_s[row["point"]] = float(row["point_wall_s"])


def _record(out_dir: Path, state: SweepState, point: Point, result: Any) -> None:
    log = out_dir / "failed" / f"{point.id}.txt"
    result = outcome(result)
    state.wall_s[point.id] = result.get("wall_s")
    if result["arms"] is not None:
        state.arms[point.id] = result["arms"]
        state.errors.pop(point.id, None)
        log.unlink(missing_ok=True)
        return
    state.errors[point.id] = result["error"]
    write_file_atomic(log, f"# written by simlab: sweep point {point.id} failed\n"
                           f"# {json.dumps(point.values)}\n{result.get('traceback') or result['error']}\n")


def _write_tables(out_dir: Path, state: SweepState) -> None:
    write_file_atomic(out_dir / "sweep.csv", csv_text(*state.rows()))
    write_file_atomic(out_dir / "positions.csv", csv_text(*state.position_rows()))
    write_file_atomic(out_dir / "timing.csv", csv_text(*state.timing_rows()))


def _item(values: list, index: int) -> Any:
    return values[index] if index < len(values) else None
