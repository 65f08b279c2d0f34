"""A real run's outputs and records, its summary by the simulator's :func:`simlab.results.metrics.summarise`, and the
results folder it writes through the simulator's writer (:func:`simlab.results.folder.write_results`)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from simlab.results.records import ArmRecords, PositionTotals, RequestTimes

ROUNDS_FILE = "rounds.csv.gz"


@dataclass
class EngineResult:
    """Output tokens per request id; the ``requests``, ``steps`` and ``rounds`` tables of the results folder;
    ``step_times`` and ``round_details`` (row-aligned with ``steps`` and ``rounds``, see
    :mod:`simlab.real.record_book`); the run's wall seconds; the arm's gamma and name; the KV tokens its accounting
    held, its seats and whether requests arrived on their own (open loop)."""

    outputs: dict[int, list[int]]
    requests: pd.DataFrame
    steps: pd.DataFrame
    rounds: pd.DataFrame
    step_times: pd.DataFrame
    round_details: pd.DataFrame
    wall_s: float
    gamma: int
    arm: str
    kv_capacity: int = 0
    max_num_seqs: int = 1
    open_loop: bool = True
    engine: Optional[dict] = None  # METRICS ``engine``: the settings the real engine ran with

    @property
    def num_rounds(self) -> int:
        """Request-rounds (one request in one decode step)."""
        return len(self.rounds)

    @property
    def tau(self) -> float:
        """Mean tokens emitted per request-round, bonus included (the acceptance length)."""
        return float(self.round_details["emitted_tokens"].mean()) if self.num_rounds else float("nan")

    @property
    def tau_standard_error(self) -> float:
        """Standard error of :attr:`tau` over request-rounds (treating rounds as independent)."""
        emitted = self.round_details["emitted_tokens"].to_numpy(dtype=float)
        return float(emitted.std(ddof=1) / np.sqrt(len(emitted))) if len(emitted) > 1 else float("nan")

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens per wall second over the whole run."""
        return float(self.requests["output_tokens"].sum() / self.wall_s) if self.wall_s > 0 else float("nan")

    def _judged(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[rounds, G] masks: verified at k, judged at k (verified, and 1..k-1 accepted), accepted at k."""
        positions = np.arange(self.gamma)[None, :]
        verified = self.rounds["verified"].to_numpy(dtype=np.int64)[:, None] > positions
        accepted_len = self.rounds["accepted"].to_numpy(dtype=np.int64)[:, None]
        return verified, verified & (accepted_len >= positions), accepted_len > positions

    def per_position_acceptance(self) -> np.ndarray:
        """Accepted at position k / verified at position k, k = 1..G (the contract's metric; NaN where never
        verified). With every position verified this is the survival a_k."""
        verified, _, accepted = self._judged()
        with np.errstate(invalid="ignore", divide="ignore"):
            return accepted.sum(0) / verified.sum(0)

    def conditional_acceptance(self) -> np.ndarray:
        """Accepted at k / judged at k (verified with positions 1..k-1 accepted): the conditional c_k."""
        _, judged, accepted = self._judged()
        with np.errstate(invalid="ignore", divide="ignore"):
            return accepted.sum(0) / judged.sum(0)

    def mean_confidence(self) -> np.ndarray:
        """The confidence head's mean c_k over the rounds where position k was judged (compare with
        :meth:`conditional_acceptance` for calibration)."""
        _, judged, _ = self._judged()
        conf = self.rounds[[f"conf_{k + 1}" for k in range(self.gamma)]].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(judged, conf, 0.0).sum(0) / judged.sum(0)

    def records(self) -> ArmRecords:
        """The plain records :func:`simlab.results.metrics.summarise` reads (requests in id order)."""
        requests = self.requests
        arrival, finish = requests["arrival_s"].to_numpy(float), requests["finish_s"].to_numpy(float)
        steps = {name: self.steps[name].to_numpy() for name in self.steps.columns if name != "arm"}
        positions = PositionTotals.count(self.rounds["verified"].to_numpy(np.int64),
                                         self.rounds["accepted"].to_numpy(np.int64), self.gamma)
        return ArmRecords(
            log=RequestTimes(arrival, requests["first_token_s"].to_numpy(float), finish), steps=steps,
            positions=positions, time_in_system_area=float(np.sum(finish - arrival)), sim_wall_s=self.wall_s,
        )

    def metrics(self, slo=None, *, lossless: bool = True) -> dict:
        """The contract's METRICS of this arm, from the simulator's own summary code."""
        from simlab.results.metrics import summarise

        requests = self.requests
        metrics = summarise(self.records(), requests["prompt_tokens"].to_numpy(np.int64),
                            requests["output_tokens"].to_numpy(np.int64), self.gamma, slo,
                            kv_capacity=self.kv_capacity or None)
        metrics["realisable"] = True
        metrics["lossless"] = lossless
        if self.engine is not None:
            metrics["engine"] = self.engine
        from simlab.results.overload import overload_warnings

        times = self.records().log
        metrics["warnings"] = overload_warnings(times.arrival_s, times.first_token_s, times.finish_s,
                                                np.zeros(len(requests), dtype=np.int64),
                                                max_num_seqs=self.max_num_seqs, open_loop=self.open_loop)
        return metrics

    def write(self, out_dir, *, scenario: Optional[dict] = None, command: Optional[str] = None,
              plot: bool = True) -> Path:
        """Write this run as a results folder (see :func:`write_real_results`)."""
        return write_real_results(out_dir, [self], scenario=scenario, command=command, plot=plot)


def rounds_csv(results: Sequence[EngineResult]) -> bytes:
    """``rounds.csv.gz`` of several arms (confidence columns up to the largest gamma; empty where none)."""
    from simlab.results.records import round_columns

    gamma = max((r.gamma for r in results), default=0)
    columns = list(round_columns(gamma))
    frame = pd.concat([r.rounds.reindex(columns=columns) for r in results], ignore_index=True) \
        if results else pd.DataFrame(columns=columns)
    buffer = io.BytesIO()
    frame.to_csv(buffer, index=False, float_format="%.9g",
                 compression={"method": "gzip", "compresslevel": 1, "mtime": 0})
    return buffer.getvalue()


def summary_document(results: Sequence[EngineResult], scenario: dict, metrics: Optional[dict] = None,
                     **extra) -> dict:
    """The ``summary.json`` document of a real run: the scenario (or what stands for it) and each arm's METRICS
    (computed unless given)."""
    from simlab.common.version import __version__

    arms = metrics if metrics is not None else {r.arm: r.metrics() for r in results}
    return {"scenario": scenario, "arms": arms, "mode": "real", **extra, "simlab_version": __version__}


def write_real_results(out_dir, results: Sequence[EngineResult], *, scenario: Optional[dict] = None,
                       metrics: Optional[dict] = None, command: Optional[str] = None, plot: bool = True,
                       **extra) -> Path:
    """A results folder, as ``simlab run`` writes it (``summary.json``, ``requests.csv``, ``steps.csv.gz``,
    ``report.png``), plus ``rounds.csv.gz``. The caller checks ``out_dir`` first
    (:func:`simlab.common.outputs.check_out_dir`, kind ``run``)."""
    from simlab.results.folder import write_results

    summary = summary_document(results, scenario or {"name": "real"}, metrics, **extra)
    requests = pd.concat([r.requests for r in results], ignore_index=True)
    steps = pd.concat([r.steps for r in results], ignore_index=True)
    files = {ROUNDS_FILE: rounds_csv(results)}
    if plot:
        from simlab.results.figure import render_png

        files["report.png"] = render_png(summary, requests, steps)
    return write_results(Path(out_dir), summary, requests, steps, extra_files=files, command=command)


__all__ = ["EngineResult", "ROUNDS_FILE", "rounds_csv", "summary_document", "write_real_results"]
