"""The validation procedure (docs/validation.md).

1. **Real run, calibration part**: the scenario's requests (the same prompts and arrivals) served by the real
   engine with every drafted position verified (a ``fixed`` arm at the largest gamma), on random streams of their
   own (the seed + 1): its rounds are what the acceptance model is fitted on. The held-out runs never feed the
   fit; sharing the prompts keeps the two parts' difference down to the model's error and token sampling.
2. **Fit**: the acceptance model (positional, per domain, request and step heterogeneity, the head's error) from
   the calibration part's ``rounds.csv.gz`` (:mod:`.acceptance`).
3. **Real run, held-out part**: the scenario's own workload, every arm, on the device's wall clock. Every arm's
   scheduler reads the same verify-cost curve, measured before the runs (or the one of ``--profile``).
4. **Cost curves**: each arm's from its own held-out steps (:mod:`.costs`), or the given profile.
5. **Simulation** of the held-out part: the same arrivals, lengths and arms; the fitted acceptance; each arm's
   fitted cost curve for time, the real scheduler's curve for its decisions; the head's raw confidences (no STS,
   as real mode) and the real engine's prior for requests younger than a lag. Several acceptance seeds, averaged.
6. **Comparison** per arm (:mod:`.compare`).
"""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from simlab.common.errors import InputError

SIMULATED_SEEDS = 4


@dataclass(frozen=True)
class ValidateSettings:
    """How to validate: the pair (None: the shipped one), the device, the sampling temperature of the real runs,
    torch threads (None: torch's choice), a profile to use instead of the fitted cost curves, the number of
    acceptance seeds the simulation averages, and the cap on requests the acceptance fit reads."""

    pair: Optional[Path] = None
    device: str = "cpu"
    temperature: float = 1.0
    threads: Optional[int] = 1
    profile: Optional[Path] = None
    simulated_seeds: int = SIMULATED_SEEDS
    max_fit_requests: Optional[int] = None


def check_scenario(loaded, method: str) -> None:
    """Input errors for what the real engine cannot run: another drafter than the pair's, more than one replica,
    a scheduler real mode cannot run."""
    from simlab.schedulers import REGISTRY

    sc, file = loaded.scenario, loaded.file
    if sc.engine.replicas != 1:
        raise InputError("the real engine serves one replica", file=file, field="engine.replicas",
                         value=sc.engine.replicas, valid="1")
    if sc.engine.disaggregation is not None:
        raise InputError("the real engine serves one co-located replica, not prefill and decode pools", file=file,
                         field="engine.disaggregation", value="given", valid="no disaggregation (leave it out)")
    for i, arm in enumerate(sc.arms):
        if arm.tree is not None:
            raise InputError("the real engine drafts chains, not trees", file=file, field=f"arms[{i}].tree",
                             value="given", valid="an arm without tree")
        if arm.method not in ("none", method):
            raise InputError(f"the pair's drafter is a {method} drafter", file=file, field=f"arms[{i}].method",
                             value=arm.method, valid=f"{method} or none")
        kind = arm.scheduler_kind
        if kind != "none" and not REGISTRY[kind].real:
            raise InputError("real mode cannot run this scheduler (it needs the true outcomes)", file=file,
                             field=f"arms[{i}].scheduler.kind", value=kind,
                             valid=", ".join(k for k, e in REGISTRY.items() if e.real))


def validate(loaded, out_dir: Path, settings: ValidateSettings, *, command: Optional[str] = None,
             log: Callable[[str], None] = lambda line: None) -> dict:
    """Run the procedure and write ``out_dir`` (checked by the caller with ``check_out_dir(kind="validate")``);
    returns the ``validation.json`` document."""
    from simlab.common.outputs import staged_dir

    torch = _prepare_torch(settings)
    from simlab.real.pair import load_pair

    started = time.perf_counter()
    try:
        pair = load_pair(settings.pair, device=settings.device)
    except (FileNotFoundError, ValueError) as error:
        raise InputError(str(error), field="--pair", value=str(settings.pair or "the shipped pair"),
                         valid="a pair folder (target/ and drafter/)") from None
    method = pair.drafter.config.layout
    check_scenario(loaded, method)
    with staged_dir(out_dir, kind="validate", command=command) as staging:
        document = _Validation(loaded, pair, method, settings, staging, command, log).run()
        document["wall_s"] = time.perf_counter() - started
        document["device"] = _describe_device(torch, settings)
        from simlab.common.json_text import dumps
        from simlab.real.validate.plots import render_validation_png

        (staging / "validation.json").write_text(dumps(document), encoding="utf-8")
        (staging / "validation.png").write_bytes(render_validation_png(document))
    return document


class _Validation:
    def __init__(self, loaded, pair, method: str, settings: ValidateSettings, staging: Path,
                 command: Optional[str], log: Callable[[str], None]) -> None:
        self.loaded, self.sc, self.pair, self.method = loaded, loaded.scenario, pair, method
        self.settings, self.staging, self.command, self.log = settings, staging, command, log
        self.calibration = None
        self.sim_runs: dict[str, list[dict]] = {}

    def run(self) -> dict:
        from simlab.real.corpus import load_corpus
        from simlab.workload import build_workload

        sc, file = self.sc, self.loaded.file
        held_out = build_workload(sc.workload, base_dir=self.loaded.base_dir, seed=sc.seed, file=file)
        corpus = load_corpus().validation
        self.scheduler_curve, curve_source = self._scheduler_curve(held_out)
        gammas = [arm.draft_len for arm in sc.arms if arm.draft_len]
        fit_doc = rates_doc = None
        if gammas:
            fit_doc, rates_doc = self._calibrate(held_out, corpus, max(gammas))
        results = self._real_runs(held_out, corpus)
        costs = self._costs(results, held_out)
        simulated = self._simulate(held_out, fit_doc, costs)
        rates_only = self._simulate(held_out, rates_doc, costs, quiet=True) if rates_doc is not None else {}
        from simlab.real.validate.compare import arm_comparison, relative_error

        arms = {}
        for arm in sc.arms:
            real_metrics = results[arm.label].metrics(sc.slo)
            arms[arm.label] = arm_comparison(real_metrics, simulated[arm.label],
                                             noise=self._noise(results[arm.label], arm))
            if arm.label in rates_only and arm.draft_len:
                part = arms[arm.label]
                diagnostic = {key: rates_only[arm.label].get(key) for key in part["simulated"]}
                part["diagnostic_measured_rates"] = {
                    "simulated": diagnostic,
                    "error": {key: relative_error(diagnostic[key], part["real"][key]) for key in diagnostic},
                }
        return {
            "generator": "simlab validate",
            "scenario": sc.model_dump(mode="json"),
            "arms": arms,
            "settings": {"pair": str(self.settings.pair or "shipped"), "device": self.settings.device,
                         "temperature": self.settings.temperature, "threads": self.settings.threads,
                         "simulated_seeds": self.settings.simulated_seeds,
                         "cost_curves": str(self.settings.profile) if self.settings.profile else "fitted per arm "
                         "from its own held-out steps", "scheduler_verify_curve": curve_source},
            "files": {"real": "real/", "calibration": "calibration/" if gammas else None,
                      "acceptance": "acceptance.yaml" if gammas else None,
                      "acceptance_measured_rates": "acceptance_measured_rates.yaml" if gammas else None,
                      "profiles": "profiles/"},
            "diagnostic_measured_rates": "each arm simulated again with the calibration part's measured conditional "
                                         "rates alone (no heterogeneity, a perfect head): its errors show what the "
                                         "rest of the model (steps, costs, scheduling) contributes",
        }

    def _noise(self, result, arm) -> dict[str, float]:
        """Relative standard errors that sampling alone gives each bounded error (see :mod:`.noise`)."""
        from simlab.real.validate.noise import combine, paired_tau_relative_se, simulated_relative_se

        runs = self.sim_runs.get(arm.label, [])

        def spread(key: str) -> float:
            return simulated_relative_se([r.get(key) for r in runs])

        tau = 0.0
        if arm.draft_len and self.calibration is not None:
            cal = self.calibration
            tau = paired_tau_relative_se(result.rounds["id"], result.round_details["emitted_tokens"],
                                         cal.rounds["id"], cal.round_details["emitted_tokens"])
        return {key: combine(tau, spread(key)) for key in ("spec_decode_acceptance_length", "output_throughput",
                                                            "mean_tpot_ms")}

    # ------------------------------------------------------------------------------------------ real runs
    def _engine(self, arm_label: str, gamma: int, scheduler, *, prior: bool, seed: Optional[int] = None):
        from simlab.real.engine import DecodingConfig, SpeculativeEngine

        decoding = DecodingConfig(gamma=gamma, temperature=self.settings.temperature,
                                  seed=self.sc.seed if seed is None else seed, arm=arm_label)
        prior_conf = self.pair.prior_confidence(self.settings.temperature, gamma) if prior and gamma else None
        return SpeculativeEngine(self.pair.target, self.pair.drafter if gamma else None, scheduler, decoding,
                                 self.sc.engine, verify_cost=self.scheduler_curve, prior_conf=prior_conf)

    def _calibrate(self, workload, corpus, gamma: int) -> dict:
        from simlab.real.result import write_real_results
        from simlab.real.validate.acceptance import fit_acceptance
        from simlab.real.validate.workload import closed_loop_users, real_requests
        from simlab.schedulers import make_scheduler

        label = "calibration"
        requests = real_requests(workload, corpus, seed=self.sc.seed)
        self.log(f"calibration run: {len(requests)} requests, {self.method} gamma {gamma}, every position verified")
        result = self._engine(label, gamma, make_scheduler("fixed"), prior=False, seed=self.sc.seed + 1).run(
            requests, closed_loop=closed_loop_users(workload))
        self.calibration = result
        arm = {"name": label, "method": self.method, "gamma": gamma, "scheduler": {"kind": "fixed"}}
        scenario = {**self.sc.model_dump(mode="json"), "name": f"{self.sc.name}-calibration", "arms": [arm]}
        folder = self.staging / "calibration"
        write_real_results(folder, [result], scenario=scenario, command=self.command, plot=False,
                           workload={"seed": self.sc.seed, "streams_seed": self.sc.seed + 1, "part": "calibration"})
        self.log(f"  {result.num_rounds} rounds, tau {result.tau:.3f} in {result.wall_s:.1f} s; fitting acceptance")
        document = fit_acceptance(folder, method=self.method, max_requests=self.settings.max_fit_requests,
                                  seed=self.sc.seed, command=self.command)
        rates = fit_acceptance(folder, method=self.method, heterogeneity=False, seed=self.sc.seed,
                               command=self.command)
        from simlab.real.validate.files import write_yaml

        write_yaml(self.staging / "acceptance.yaml", document)
        write_yaml(self.staging / "acceptance_measured_rates.yaml", rates)
        return document, rates

    def _real_runs(self, workload, corpus) -> dict:
        from simlab.real.result import write_real_results
        from simlab.real.validate.workload import closed_loop_users, real_requests
        from simlab.schedulers import from_config

        requests = real_requests(workload, corpus, seed=self.sc.seed)
        results = {}
        for arm in self.sc.arms:
            self.log(f"real run {arm.label}: {len(requests)} requests")
            engine = self._engine(arm.label, arm.draft_len, from_config(arm.scheduler), prior=True)
            result = engine.run(requests, closed_loop=closed_loop_users(workload))
            self.log(f"  {result.output_tokens_per_s:.0f} tok/s, tau {result.tau:.3f}, {len(result.steps)} steps in "
                     f"{result.wall_s:.1f} s")
            results[arm.label] = result
        write_real_results(self.staging / "real", list(results.values()), scenario=self.sc.model_dump(mode="json"),
                           command=self.command, workload={"seed": self.sc.seed, "part": "held-out"},
                           device=self.settings.device, temperature=self.settings.temperature)
        return results

    # ------------------------------------------------------------------------------------------ costs
    def _scheduler_curve(self, workload):
        """The verify-cost curve every real arm's scheduler reads (and the simulated arms' schedulers too)."""
        if self.settings.profile is not None:
            from simlab.hardware import build_cost_model

            cost = build_cost_model(str(Path(self.settings.profile).resolve()), base_dir=Path.cwd(), file=None,
                                    field="--profile")
            return cost, f"the profile {self.settings.profile}"
        from simlab.real.profiler.verify_cost import profile_verify_cost

        engine = self.sc.engine
        requests = workload.requests
        top = min(engine.max_batch_tokens, engine.max_num_seqs * (1 + max([a.draft_len for a in self.sc.arms])))
        context = int(np.mean(requests.prompt_tokens) + np.mean(requests.output_tokens) / 2)
        curve = profile_verify_cost(self.pair.target, max_num_seqs=engine.max_num_seqs, max_batch_tokens=top,
                                    context_tokens=context, repeats=5)
        self.log("scheduler verify curve (ms): " + ", ".join(f"{int(x)}: {y * 1e3:.1f}" for x, y in
                                                             zip(curve.xs, curve.ys)))
        return curve, (f"measured before the runs (simlab.real.profiler.verify_cost, {context} context tokens per "
                       f"request, median of 5): " + ", ".join(f"{int(x)}: {y:.6f}" for x, y in zip(curve.xs, curve.ys)))

    def _costs(self, results: dict, workload) -> dict:
        """The cost model each simulated arm is timed with."""
        from simlab.config.hardware import TableHardware
        from simlab.hardware.table import TableCostModel
        from simlab.real.validate.costs import fit_cost_table
        from simlab.real.validate.files import write_yaml

        costs = {}
        for arm in self.sc.arms:
            result = results[arm.label]
            if self.settings.profile is not None:
                costs[arm.label] = self.scheduler_curve
                continue
            table = fit_cost_table(
                result.steps, result.step_times, method=arm.method, gamma=arm.draft_len, name=f"{arm.label}-fitted",
                max_batch_tokens=self.sc.engine.max_batch_tokens, max_context_tokens=self._max_context(workload),
                kv_cache_tokens=self._kv_capacity(workload),
                source=f"simlab validate: the real held-out run of arm {arm.label}")
            write_yaml(self.staging / "profiles" / f"{arm.label}.yaml", table)
            costs[arm.label] = TableCostModel(TableHardware.model_validate(table), source="fitted")
        return costs

    def _max_context(self, workload) -> int:
        requests = workload.requests
        return int(self.sc.engine.max_num_seqs * int(np.max(requests.prompt_tokens + requests.output_tokens)))

    def _kv_capacity(self, workload) -> int:
        """What the real engine's KV accounting held (its ``auto``: the slots it allocated)."""
        engine = self.sc.engine
        if engine.kv_cache_tokens != "auto":
            return int(engine.kv_cache_tokens)
        requests = workload.requests
        slots = max(1, min(engine.max_num_seqs, len(requests)))
        return slots * int(np.max(requests.prompt_tokens + requests.output_tokens))

    # ------------------------------------------------------------------------------------------ simulation
    def _simulate(self, workload, fit_doc: Optional[dict], costs: dict, *, quiet: bool = False) -> dict:
        from simlab.acceptance import build_acceptance
        from simlab.arm_engines import arm_scheduler
        from simlab.arms import domain_weights, prepare_arm
        from simlab.config.acceptance import IIDAcceptance, PositionalAcceptance
        from simlab.engine import simulate_arm
        from simlab.hardware.curves import Curve
        from simlab.real.validate.acceptance import scenario_acceptance
        from simlab.real.validate.costs import SchedulerCost
        from simlab.results.metrics import summarise

        sc = self.sc
        requests = workload.requests
        if fit_doc is not None:
            spec = build_acceptance(PositionalAcceptance.model_validate(scenario_acceptance(fit_doc)),
                                    file=self.staging / "acceptance.yaml")
        else:  # no arm drafts: acceptance is never read
            spec = build_acceptance(IIDAcceptance(kind="iid", alpha=0.5), file=None)
        weights = domain_weights(requests.domain, requests.domain_names)
        out = {}
        for arm in sc.arms:
            timing = costs[arm.label]
            curve = self.scheduler_curve
            if not isinstance(curve, Curve):  # a given profile: the scheduler reads it as the simulator does
                decisions = timing
            else:
                decisions = SchedulerCost(timing, curve)
            runs = []
            for offset in range(max(1, self.settings.simulated_seeds if arm.draft_len else 1)):
                seed = sc.seed + 1000 * offset
                scheduler, scheduler_cost = arm_scheduler(arm, decisions)
                prepared = prepare_arm(arm.model_copy(update={"calibration": "none"}), spec, scheduler,
                                       scheduler_cost, timing, domain_names=requests.domain_names, weights=weights,
                                       max_batch_tokens=sc.engine.max_batch_tokens, seed=seed)
                policy = prepared.policy
                if arm.draft_len and policy.lag_steps:  # the real engine's stand-in for young requests
                    prior = self.pair.prior_confidence(self.settings.temperature, arm.draft_len)
                    policy = dataclasses.replace(policy, prior_conf=np.asarray(prior, dtype=float))
                result = simulate_arm(workload, timing, sc.engine, policy, self._kv_capacity(workload))
                runs.append(summarise(result, requests.prompt_tokens, requests.output_tokens, arm.draft_len, sc.slo,
                                      kv_capacity=self._kv_capacity(workload)))
            out[arm.label] = _average(runs)
            if not quiet:
                self.sim_runs[arm.label] = runs
                self.log(f"simulated {arm.label}: {out[arm.label]['output_throughput']:.0f} tok/s, tau "
                         f"{out[arm.label]['spec_decode_acceptance_length'] or 1.0:.3f} ({len(runs)} seeds)")
        return out


def _average(runs: list[dict]) -> dict:
    """Metric by metric mean over simulated seeds (lists element by element; None stays None)."""
    out = {}
    for key, first in runs[0].items():
        values = [r.get(key) for r in runs]
        if isinstance(first, bool) or isinstance(first, str):
            out[key] = first
        elif isinstance(first, (int, float)) and all(isinstance(v, (int, float)) for v in values):
            out[key] = float(np.mean(values))
        elif isinstance(first, list) and all(isinstance(v, list) and len(v) == len(first) for v in values):
            columns = list(zip(*values))
            out[key] = [None if any(x is None for x in col) else float(np.mean(col)) for col in columns]
        else:
            out[key] = first
    return out


def _prepare_torch(settings: ValidateSettings):
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
    except ImportError:
        raise InputError("validation runs the real engine, which needs torch", field="--device",
                         value=settings.device, valid="install the real extra: pip install 'simlab[real]'") from None
    if settings.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError("no CUDA device is available", field="--device", value=settings.device, valid="cpu")
    if settings.threads:
        torch.set_num_threads(settings.threads)
    return torch


def _describe_device(torch, settings: ValidateSettings) -> dict:
    out = {"type": settings.device, "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
           "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
           "cpu_count": os.cpu_count()}
    if settings.device.startswith("cuda"):
        out["name"] = torch.cuda.get_device_name(0)
    return out


__all__ = ["ValidateSettings", "check_scenario", "validate"]
