"""Measuring a pair: held-out prompts through the engine, tau (accepted tokens per round, bonus included)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.real.drafter import Drafter
from simlab.config import EngineConfig
from simlab.real.engine import DecodingConfig, EngineResult, Request, SpeculativeEngine
from simlab.real.target import TargetModel
from simlab.schedulers import Scheduler


def heldout_requests(
    tokens: np.ndarray, *, num_prompts: int, prompt_len: int, max_new_tokens: int, seed: int = 0
) -> list[Request]:
    """Requests whose prompts are ``prompt_len``-token windows of ``tokens`` at seeded random offsets."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(tokens) - prompt_len, size=num_prompts)
    return [Request(id=i, prompt_ids=tuple(int(t) for t in tokens[s: s + prompt_len]), max_new_tokens=max_new_tokens,
                    domain="code") for i, s in enumerate(starts)]


@dataclass(frozen=True)
class TauReport:
    """tau with its standard error over ``num_rounds`` request-rounds; by position: accepted / verified
    (the contract's per-position acceptance), the conditional acceptance c_k (accepted / judged) and the
    confidence head's mean c_k on the same rounds; output tokens per second of the run."""

    tau: float
    standard_error: float
    num_rounds: int
    per_position_acceptance: tuple[float, ...]
    conditional_acceptance: tuple[float, ...]
    mean_confidence: tuple[float, ...]
    tokens_per_s: float
    result: EngineResult

    def to_dict(self) -> dict:
        """JSON-ready numbers (without the records)."""
        return {"tau": self.tau, "standard_error": self.standard_error, "num_rounds": self.num_rounds,
                "per_position_acceptance": list(self.per_position_acceptance),
                "conditional_acceptance": list(self.conditional_acceptance),
                "mean_confidence": list(self.mean_confidence), "tokens_per_s": self.tokens_per_s}


def measure_tau(
    target: TargetModel,
    drafter: Drafter | None,
    tokens: np.ndarray,
    *,
    gamma: int = 7,
    temperature: float = 1.0,
    num_prompts: int = 32,
    prompt_len: int = 64,
    max_new_tokens: int = 128,
    seed: int = 0,
    max_num_seqs: int = 16,
    scheduler: Scheduler | None = None,
) -> TauReport:
    """Run held-out prompts through the engine (fixed gamma unless ``scheduler``) and report tau."""
    requests = heldout_requests(tokens, num_prompts=num_prompts, prompt_len=prompt_len,
                                max_new_tokens=max_new_tokens, seed=seed)
    decoding = DecodingConfig(gamma=gamma, temperature=temperature, seed=seed, arm=f"gamma{gamma}")
    limits = EngineConfig(max_num_seqs=max_num_seqs)
    result = SpeculativeEngine(target, drafter, scheduler, decoding, limits).run(requests)
    return TauReport(
        tau=result.tau, standard_error=result.tau_standard_error, num_rounds=result.num_rounds,
        per_position_acceptance=tuple(float(x) for x in result.per_position_acceptance()),
        conditional_acceptance=tuple(float(x) for x in result.conditional_acceptance()),
        mean_confidence=tuple(float(x) for x in result.mean_confidence()),
        tokens_per_s=result.output_tokens_per_s, result=result,
    )


__all__ = ["TauReport", "heldout_requests", "measure_tau"]
