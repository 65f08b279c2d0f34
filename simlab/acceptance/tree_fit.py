"""The draft-tree rank model calibrated on published EAGLE-3 tokens per round of chains and trees on one target,
Llama-3.1-8B-Instruct on MT-bench at temperature 0 (docs/acceptance.md, "Draft trees").

1. The chain's conditional acceptance, ``alpha_d = alpha_inf + (alpha_1 - alpha_inf) rho^(d - 1)``, is fitted by
   least squares to vLLM's EAGLE-3 chains of 2..7 drafts (``CHAIN``).
2. ``catch`` (tree.py) is solved so that the dynamic tree of ``FITTED`` gives its measured tokens per round.
3. ``HELD_OUT`` are predicted, not fitted: another depth of the same tree settings, and EAGLE-1's static tree
   against its own chain fit (another drafter of the same target, so a check of ``catch`` across drafters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simlab.acceptance.tree import build_tree, chain_tokens_per_round, static_tree

MAX_DEPTH = 16


@dataclass(frozen=True)
class TreePoint:
    """A measured tokens per round (accepted + 1) of one tree setting, with its source."""

    name: str
    tokens_per_round: float
    source: str
    depth: int = 0  # a dynamic tree: depth (SGLang num_steps), topk and num_draft_tokens (the root included)
    topk: int = 0
    num_draft_tokens: int = 0
    paths: tuple = ()  # a static tree: its nodes' rank paths (vLLM speculative_token_tree)
    chain: str = "eagle3"  # which chain fit its alpha comes from


EAGLE3_CHAIN = (2.36, 2.79, 3.08, 3.32, 3.46, 3.54)  # chains of 2..7 drafts
EAGLE1_CHAIN = (2.10, 2.29, 2.39, 2.43, 2.45, 2.47)
CHAIN_SOURCE = ("vllm-project/vllm issue #20780: Llama-3.1-8B-Instruct, MT-bench, vLLM V1, batch 1, acceptance "
                "length of EAGLE-1 / EAGLE-3 chains for K = 2..7")
FITTED = TreePoint(
    "eagle3-steps8", 5.39, depth=8, topk=8, num_draft_tokens=64,
    source="sgl-project/sglang PR #4247: Llama-3.1-8B-Instruct + EAGLE-3, MT-bench (80 questions), num_steps 8: "
           "accept length 5.39; topk 8 and 64 draft tokens are SGLang's example settings of the time (PR #2150, "
           "issue #3883), not stated in the PR")
HELD_OUT = (
    TreePoint("eagle3-steps5", 4.68, depth=5, topk=8, num_draft_tokens=64,
              source="sgl-project/sglang PR #4247: as above, num_steps 5: accept length 4.68"),
    TreePoint("eagle1-static-tree", 2.37, paths=((1,), (2,), (1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (2, 3)),
              chain="eagle1",
              source="vllm-project/vllm PR #22752: Llama-3.1-8B-Instruct + EAGLE-1, MT-bench, tree attention, "
                     "batch 1: acceptance length 2.37 against 2.05 for the chain (the PR's test tree of 2 roots x 3 "
                     "children is assumed to be the benchmarked one)"),
)


@dataclass(frozen=True)
class TreeCalibration:
    alpha: dict  # chain name -> [MAX_DEPTH] conditional acceptance
    alpha_params: dict  # chain name -> (alpha_1, alpha_inf, rho)
    chain_residuals: dict  # chain name -> [6] fitted minus measured tokens per round, K = 2..7
    catch: float

    def predict(self, point: TreePoint) -> float:
        alpha = self.alpha[point.chain]
        if point.paths:
            return static_tree(list(point.paths), alpha, self.catch).expected_tokens_per_round()
        return build_tree(alpha, self.catch, point.topk, point.num_draft_tokens,
                          point.depth).expected_tokens_per_round()


def chain_alpha(params, num_positions: int = MAX_DEPTH) -> np.ndarray:
    alpha_1, alpha_inf, rho = params
    powers = np.cumprod(np.concatenate([[1.0], np.full(max(num_positions - 1, 0), float(rho))]))[:num_positions]
    return alpha_inf + (alpha_1 - alpha_inf) * powers  # rho^d as products: the same bits on every CPU


def fit_chain(tokens_per_round) -> tuple[np.ndarray, np.ndarray]:
    """(alpha_1, alpha_inf, rho) and the residuals of the fit to chains of 2, 3, ... drafts."""
    from scipy.optimize import least_squares

    measured = np.asarray(tokens_per_round, dtype=float)
    lengths = np.arange(2, 2 + len(measured))

    def residuals(params):
        return chain_tokens_per_round(chain_alpha(params))[lengths - 1] - measured

    fit = least_squares(residuals, [0.8, 0.5, 0.8], bounds=([0.01, 0.01, 0.0], [0.999, 0.999, 1.0]))
    return fit.x, residuals(fit.x)


CATCH = 0.454881781
"""``catch`` of :func:`calibrate`, stored to 9 significant digits. The fit runs through LAPACK and a root finder
whose last bits differ between CPUs (1e-11 here); the simulator reads this constant so that a seed gives the same
trees on every machine, and tests/test_acceptance_tree.py checks that :func:`calibrate` still gives it."""


def calibrated_catch() -> float:
    """The calibrated ``catch`` (:data:`CATCH`), the one the simulator's trees use."""
    return CATCH


def calibrate() -> TreeCalibration:
    """Fit both chains, then ``catch`` to :data:`FITTED` (tokens per round rise with ``catch``)."""
    from scipy.optimize import brentq

    params, residuals, alpha = {}, {}, {}
    for name, measured in (("eagle3", EAGLE3_CHAIN), ("eagle1", EAGLE1_CHAIN)):
        params[name], residuals[name] = fit_chain(measured)
        alpha[name] = chain_alpha(params[name])

    def gap(catch: float) -> float:
        calibration = TreeCalibration(alpha, params, residuals, catch)
        return calibration.predict(FITTED) - FITTED.tokens_per_round

    catch = brentq(gap, 0.0, 1.0, xtol=1e-12)
    return TreeCalibration(alpha, params, residuals, catch)
