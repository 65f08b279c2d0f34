"""Public figures the shipped presets are fitted to (DSpark paper, Cheng et al. 2026, arXiv:2607.05147).

Table 1: accepted tokens per round tau (bonus included), temperature 1, gamma = 7, confidence scheduler off,
all drafters trained with the same framework and data. Fig. 2 and the ablation: per-position acceptance on
Qwen3-4B as quoted in the paper's text. Section on STS: the confidence head on Alpaca. See docs/acceptance.md.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPER = ("Cheng et al., DSpark: Confidence-Scheduled Speculative Decoding with Semi-Autoregressive Generation, "
         "arXiv:2607.05147 (2026)")

MODELS = ("qwen3-4b", "qwen3-8b", "qwen3-14b")
TABLE_METHODS = ("eagle3", "dflash", "dspark")
DOMAINS = ("math", "code", "chat")
BENCHMARKS = {
    "math": ("GSM8K", "MATH", "AIME25"),
    "code": ("MBPP", "HumanEval", "LCB"),
    "chat": ("MT-Bench", "Alpaca", "Arena-Hard"),
}
TABLE1_GAMMA = 7

# tau per benchmark, in the order math (GSM8K, MATH, AIME25), code (MBPP, HumanEval, LCB),
# chat (MT-Bench, Alpaca, Arena-Hard).
TABLE1_TAU: dict[str, dict[str, tuple[float, ...]]] = {
    "qwen3-4b": {
        "eagle3": (5.14, 4.62, 3.92, 3.69, 4.16, 3.77, 2.39, 2.26, 2.55),
        "dflash": (5.40, 4.85, 4.15, 4.40, 4.74, 4.18, 3.07, 2.96, 2.83),
        "dspark": (6.11, 5.70, 4.89, 5.13, 5.38, 4.86, 3.64, 3.54, 3.29),
    },
    "qwen3-8b": {
        "eagle3": (5.30, 4.77, 3.91, 3.96, 4.33, 4.17, 2.66, 2.54, 2.54),
        "dflash": (5.33, 4.91, 4.07, 4.36, 4.64, 4.39, 3.11, 2.98, 2.81),
        "dspark": (6.17, 5.78, 5.01, 5.16, 5.52, 5.17, 3.72, 3.58, 3.21),
    },
    "qwen3-14b": {
        "eagle3": (5.24, 4.60, 3.71, 3.81, 4.14, 4.01, 2.62, 2.47, 2.48),
        "dflash": (5.41, 4.84, 3.98, 4.44, 4.59, 4.33, 3.10, 2.94, 2.72),
        "dspark": (6.21, 5.74, 4.94, 5.26, 5.43, 5.02, 3.70, 3.58, 3.13),
    },
}


def domain_mean_tau(model: str, method: str, domain: str) -> float:
    """Mean of Table 1's three benchmarks of ``domain`` for one target model and drafter."""
    values = TABLE1_TAU[model][method]
    start = 3 * DOMAINS.index(domain)
    return sum(values[start : start + 3]) / 3.0


@dataclass(frozen=True)
class PositionQuote:
    """Measured conditional acceptance at ``position`` (accepted at k / reached k), Qwen3-4B, Fig. 2 text."""

    method: str
    domain: str
    position: int
    value: float
    text: str


# Each quoted number once (0.72 and 0.53 appear twice in the text). "Along the block" is read as position 1
# to position 7, the block the paper's comparisons use (gamma = 7).
FIG2_QUOTES: tuple[PositionQuote, ...] = (
    PositionQuote("dflash", "math", 1, 0.88, "position 1: DFlash 0.88 vs EAGLE-3 0.81 on math"),
    PositionQuote("eagle3", "math", 1, 0.81, "position 1: DFlash 0.88 vs EAGLE-3 0.81 on math"),
    PositionQuote("dflash", "chat", 1, 0.72, "position 1: DFlash 0.72 vs EAGLE-3 0.53 on chat"),
    PositionQuote("eagle3", "chat", 1, 0.53, "position 1: DFlash 0.72 vs EAGLE-3 0.53 on chat"),
    PositionQuote("dflash", "code", 1, 0.87, "DFlash decays 0.87 -> 0.78 (code) along the block"),
    PositionQuote("dflash", "code", 7, 0.78, "DFlash decays 0.87 -> 0.78 (code) along the block"),
    PositionQuote("dflash", "chat", 7, 0.63, "DFlash decays 0.72 -> 0.63 (chat) along the block"),
    PositionQuote("eagle3", "chat", 7, 0.74, "EAGLE-3 rises 0.53 -> 0.74 on chat"),
    PositionQuote("dspark", "math", 1, 0.93, "DSpark starts at 0.93 on math"),
)
QUOTE_MODEL = "qwen3-4b"

# DSpark's tau over DFlash's tau, Qwen3-4B, at gamma = 7 and gamma = 15 (ablation; +16/15/18 % and +30/26/22 %).
# The gamma = 7 values follow from Table 1 itself; gamma = 15 is a fitting target.
DSPARK_GAIN = {7: {"math": 1.16, "code": 1.15, "chat": 1.18}, 15: {"math": 1.30, "code": 1.26, "chat": 1.22}}

# Confidence head on Alpaca (chat), positions 1, 3, 5, 7: raw ECE and after STS (fractions), and AUC.
CONFIDENCE_POSITIONS = (1, 3, 5, 7)
ECE_RAW = (0.057, 0.082, 0.058, 0.033)
ECE_STS = (0.020, 0.017, 0.008, 0.004)
AUC = (0.818, 0.812, 0.864, 0.907)
# Static-threshold sweep: acceptance rate of verified tokens from the loosest to the strictest threshold.
THRESHOLD_SWEEP_RATE = {"math": (0.769, 0.925), "code": (0.676, 0.920), "chat": (0.457, 0.957)}
CONFIDENCE_MODEL, CONFIDENCE_METHOD, CONFIDENCE_DOMAIN = "qwen3-4b", "dspark", "chat"
