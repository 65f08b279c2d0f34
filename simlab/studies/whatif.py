"""SLA what-if: per arm, the largest load (or the smallest capacity) at which every SLA condition holds, and
the inverse question: at a given load, which arms meet the SLA and with what speed per user and per GPU.

Every probe simulates the scenario with one field changed, on the same random streams (the scenario's seed),
and only the arms that asked for that value: an arm's results do not depend on which other arms run beside it.
Probes of one round run in parallel on an executor. The folder written (``kind: whatif``) holds
``whatif.json`` (the contract's document), ``probes.csv`` (every probe: value, arm, whether it met the SLA,
its metrics) and, by default, ``report.html``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError
from simlab.common.outputs import check_out_dir, staged_dir
from simlab.studies.executors import make_executor
from simlab.studies.paths import check_path, get_path, set_path
from simlab.studies.progress import StudyProgress
from simlab.studies.search import FIND_DEFAULTS, Answer, SearchRange, threshold_search
from simlab.studies.sla import SLA, check_metrics_known, parse_sla
from simlab.studies.split_whatif import (DEFAULT_HIGH_FACTOR, SPLIT_FIELD, splits, total_of)
from simlab.studies.table_csv import csv_text
from simlab.studies.tasks import ScenarioTask, outcome, run_task
from simlab.studies.labels import split_label
from simlab.studies.whatif_document import Probe, probe_rows, whatif_document
from simlab.studies.whatif_verdict import answer_rates, with_verdict

WHATIF_KIND = "whatif"
RANGE_FACTOR = 64  # without --low/--high: [start / 64, start x 64] (integers from 1)
DEFAULT_RTOL = 0.02


@dataclass
class WhatIf:
    """A checked what-if question (everything the search needs, nothing run yet)."""

    file: Path
    data: dict
    sla: SLA
    field: str
    parts: list
    arm_labels: list[str]
    baseline: str
    start: Any = None
    range: Optional[SearchRange] = None
    at_value: Any = None
    split: bool = False  # --vary engine.disaggregation: values are {prefill_replicas, decode_replicas}

    @property
    def name(self) -> str:
        return str(self.data.get("name", "whatif"))

    def point(self, value: Any, arm_indices: Optional[list[int]] = None) -> dict:
        if self.split:  # the pools' sizes change; the link and the rest stay
            value = {**get_path(self.data, self.parts), **value}
        data = set_path(self.data, self.parts, value)
        if arm_indices is not None:
            data["arms"] = [data["arms"][i] for i in arm_indices]
        return data


def prepare_whatif(scenario: str | Path, *, sla: str, vary: Optional[str] = None, at: Optional[str] = None,
                   low: Optional[float] = None, high: Optional[float] = None, baseline: Optional[str] = None,
                   find: Optional[str] = None, rtol: float = DEFAULT_RTOL) -> WhatIf:
    """Check the question before anything runs; every problem is an :class:`InputError`."""
    from simlab.common.yaml_file import read_yaml
    from simlab.config.loading import scenario_from_data

    path = Path(scenario)
    condition = parse_sla(sla)
    if (vary is None) == (at is None):
        raise InputError("give exactly one of --vary FIELD (search) and --at FIELD=VALUE (one load)",
                         field="--vary", value=vary or at or "", valid="--vary workload.concurrency, or "
                         "--at workload.concurrency=64")
    data = read_yaml(path, what="scenario file")
    if isinstance(data, dict) and "sweep" in data:
        raise InputError("holds sweep:; a what-if varies one field of a plain scenario", file=path,
                         field="sweep", valid="remove sweep: (or run the grid with `simlab sweep`)")
    loaded = scenario_from_data(data, file=path)
    labels = [arm.label for arm in loaded.scenario.arms]
    base = baseline or next((a.label for a in loaded.scenario.arms if a.method == "none"), labels[0])
    if base not in labels:
        raise InputError("is not an arm of the scenario", file=path, field="--baseline", value=base,
                         valid=", ".join(labels))
    resolved = loaded.scenario.model_dump(mode="json")
    if at is not None:
        field, equals, text = at.partition("=")
        if not equals or not text.strip():
            raise InputError("is not FIELD=VALUE", field="--at", value=at, valid="e.g. workload.concurrency=64")
        import yaml

        parts = check_path(data, field.strip(), file=path, field="--at")
        value = yaml.safe_load(text)
        _validate_point(WhatIf(path, data, condition, field.strip(), parts, labels, base), value, "--at")
        return WhatIf(path, data, condition, field.strip(), parts, labels, base, at_value=value)
    parts = check_path(data, vary, file=path, field="--vary")
    if vary == SPLIT_FIELD:
        return _prepare_split(WhatIf(path, data, condition, vary, parts, labels, base, split=True), resolved,
                              low, high)
    start = get_path(resolved, parts)
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise InputError(f"is {start!r}, not a number; a what-if searches a numeric field", file=path,
                         field="--vary", value=vary, valid="a numeric field such as workload.concurrency, or "
                         "vary other fields with `simlab sweep`")
    direction = find or FIND_DEFAULTS.get(vary)
    if direction not in ("largest", "smallest"):
        if find is not None:
            raise InputError("is not a direction", field="--find", value=find, valid="largest or smallest")
        raise InputError("has no known direction: say whether the largest or the smallest value meeting the SLA "
                         "is wanted", field="--vary", value=vary,
                         valid=f"--find largest or --find smallest (known: {', '.join(FIND_DEFAULTS)})")
    if not 0 < rtol < 1:
        raise InputError("must be between 0 and 1", field="--rtol", value=rtol, valid="e.g. 0.02 (2 %)")
    integer = isinstance(start, int)
    lo = low if low is not None else (1 if integer else start / RANGE_FACTOR)
    hi = high if high is not None else (max(1, start) * RANGE_FACTOR)
    for name, bound in (("--low", lo), ("--high", hi)):
        if integer and float(bound) != int(bound):
            raise InputError(f"{vary} is an integer field", field=name, value=bound, valid="an integer")
        if not math.isfinite(float(bound)):
            raise InputError("is not a finite number", field=name, value=bound, valid="a number")
    if not lo < hi:
        raise InputError("the range is empty or inverted", field="--low", value=lo,
                         valid=f"--low below --high ({hi})")
    rng = SearchRange(int(lo) if integer else float(lo), int(hi) if integer else float(hi), integer, direction,
                      rtol)
    question = WhatIf(path, data, condition, vary, parts, labels, base, start=start, range=rng)
    for name, bound in (("--low", rng.low), ("--high", rng.high)):
        _validate_point(question, bound, name)
    return question


def _prepare_split(question: WhatIf, resolved: dict, low, high) -> WhatIf:
    """The fewest replicas P + D meeting the SLA, over every split of each total tried."""
    current = get_path(resolved, question.parts)
    if not isinstance(current, dict):
        raise InputError("needs a scenario whose engine is disaggregated", file=question.file, field="--vary",
                         value=question.field, valid="a scenario with engine.disaggregation (its pools and link)")
    start = total_of(current)
    lo = 2 if low is None else low
    hi = max(start * DEFAULT_HIGH_FACTOR, 3) if high is None else high
    for name, bound in (("--low", lo), ("--high", hi)):
        if float(bound) != int(bound) or bound < 2:
            raise InputError("counts replicas of both pools", field=name, value=bound, valid="an integer >= 2")
    if not lo < hi:
        raise InputError("the range is empty or inverted", field="--low", value=lo, valid=f"--low below --high ({hi})")
    question.start, question.range = start, SearchRange(int(lo), int(hi), True, "smallest")
    for name, bound in (("--low", int(lo)), ("--high", int(hi))):
        _validate_point(question, {"prefill_replicas": 1, "decode_replicas": bound - 1}, name)
    return question


def _show(question: WhatIf, value: Any) -> str:
    return split_label(value) if question.split else repr(value)


def _validate_point(question: WhatIf, value: Any, option: str) -> None:
    from simlab.config.loading import scenario_from_data

    try:
        scenario_from_data(question.point(value), file=question.file)
    except InputError as err:
        raise InputError(f"{err.problem} (with {question.field}={_show(question, value)} from {option})",
                         file=err.file,
                         field=err.field, value=err.value, valid=err.valid) from None


@dataclass
class WhatIfOutcome:
    out: Path
    document: dict


def run_whatif(question: WhatIf, out=None, *, executor: str = "local", workers: Optional[int] = None,
               address: Optional[str] = None, report: bool = True, progress: Optional[StudyProgress] = None,
               command: Optional[str] = None) -> WhatIfOutcome:
    """Answer a prepared what-if and write its folder (default ``results/<name>-whatif/``)."""
    out_dir = check_out_dir(Path(out) if out is not None else Path("results") / f"{question.name}-whatif",
                            kind=WHATIF_KIND, inputs=[question.file])
    progress = progress or StudyProgress()
    with make_executor(executor, workers=workers, address=address) as pool:
        progress.start(0, label="probes")
        try:
            if question.range:
                probes, answers = _search(question, pool, progress)
            else:
                probes, answers = _at(question, pool, progress), {}
        finally:
            progress.close()
    document = with_verdict(whatif_document(question, probes, answers, command), question.data, question.file,
                            answer_rates(question, answers))
    with staged_dir(out_dir, kind=WHATIF_KIND, command=command) as staging:
        (staging / "whatif.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        (staging / "probes.csv").write_text(csv_text(*probe_rows(question, probes)), encoding="utf-8")
        if report:
            from simlab.studies.report_html import write_report

            write_report(staging)
    return WhatIfOutcome(out_dir, document)


def _run_pairs(question: WhatIf, pool, progress: StudyProgress, pairs: list[tuple[int, Any]]) -> list[Probe]:
    """Simulate each (arm, value) pair, arms sharing a value in one run."""
    groups: dict[str, tuple[Any, list[int]]] = {}
    for arm, value in pairs:
        groups.setdefault(json.dumps(value), (value, []))[1].append(arm)
    order = list(groups.values())
    tasks = [ScenarioTask(question.point(value, arms), str(question.file.resolve())) for value, arms in order]
    progress.add(len(tasks))
    results: dict[int, Any] = {}
    for index, result in pool.run(run_task, tasks):
        results[index] = result = outcome(result)
        value, arms = order[index]
        failed = result["arms"] is None
        progress.done(f"{question.field}={_show(question, value)} ({len(arms)} arm{'s' if len(arms) != 1 else ''})",
                      failed=failed)
    probes: list[Probe] = []
    for index in sorted(results):  # probes.csv in a fixed order, whatever order the probes finished in
        result = results[index]
        value, arms = order[index]
        if result["arms"] is None:
            problem = f"the probe {question.field}={_show(question, value)} failed: {result['error']}"
            if result["input_error"]:
                raise InputError(problem, file=question.file)
            raise RuntimeError(problem)
        metrics_by_arm = list(result["arms"].values())
        check_metrics_known(question.sla, metrics_by_arm[0])
        for arm, metrics in zip(arms, metrics_by_arm):
            probes.append(Probe(value, arm, question.sla.meets(metrics), metrics))
    return probes


def _search(question: WhatIf, pool, progress: StudyProgress) -> tuple[list[Probe], dict[int, Answer]]:
    """Every arm's threshold search, a round of probes at a time. A split search's value is a total of replicas,
    probed at each of its splits, and it meets the SLA when one of them does (split_whatif.py)."""
    expand = splits if question.split else (lambda value: [value])
    searches = {arm: threshold_search(question.start, question.range) for arm in range(len(question.arm_labels))}
    wanted = {arm: next(search) for arm, search in searches.items()}
    probes: list[Probe] = []
    known: dict[tuple[int, str], Probe] = {}
    answers: dict[int, Answer] = {}
    while wanted:
        todo = [(arm, v) for arm, value in wanted.items() for v in expand(value) if (arm, json.dumps(v)) not in known]
        for probe in _run_pairs(question, pool, progress, todo) if todo else []:
            known[(probe.arm, json.dumps(probe.value))] = probe
            probes.append(probe)
        following: dict[int, Any] = {}
        for arm, value in wanted.items():
            try:
                meets = any(known[(arm, json.dumps(v))].meets for v in expand(value))
                following[arm] = searches[arm].send(meets)
            except StopIteration as stop:
                answers[arm] = stop.value
        wanted = following
    return probes, answers


def _at(question: WhatIf, pool, progress: StudyProgress) -> list[Probe]:
    return _run_pairs(question, pool, progress, [(arm, question.at_value) for arm in range(len(question.arm_labels))])
