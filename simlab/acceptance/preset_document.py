"""Turn a :class:`~simlab.acceptance.derive.Derivation` into preset files (YAML text with provenance)."""

from __future__ import annotations

from typing import Any

import numpy as np
import yaml

from simlab.acceptance import targets
from simlab.acceptance.derive import CONFIDENCE_FIT_SAMPLES, GAIN_GAMMA, NUM_POSITIONS, STEP_CORRELATION, Derivation
from simlab.acceptance.expected import measured_conditional_from_logits, tokens_per_round_from_logits

LOGIT_DECIMALS = 5
HEADER = (
    "# Acceptance preset written by scripts/derive_presets.py from public figures (see provenance).\n"
    "# Do not edit by hand: change the derivation and re-run the script. The simulator reads only\n"
    "# methods.<method>.<domain>.base_logit, heterogeneity and confidence; the rest documents the fit.\n"
)
PRESET_METHODS = ("mtp", "eagle3", "dflash", "dspark")
DISPLAY = {"qwen3-4b": "Qwen3-4B", "qwen3-8b": "Qwen3-8B", "qwen3-14b": "Qwen3-14B"}


def preset_document(derivation: Derivation, model: str) -> dict[str, Any]:
    """The YAML mapping of one preset; base logits rounded to LOGIT_DECIMALS."""
    het = derivation.heterogeneity
    methods: dict[str, Any] = {}
    for method in PRESET_METHODS:
        methods[method] = {}
        for domain in targets.DOMAINS:
            logits = np.round(derivation.logits(model, method, domain), LOGIT_DECIMALS)
            entry: dict[str, Any] = {}
            if method == "mtp":
                entry["copy_of"] = "eagle3"
            else:
                entry["level_logit"] = round(derivation.levels[model][method][domain], LOGIT_DECIMALS)
                entry["tau_gamma7"] = {
                    "target": round(targets.domain_mean_tau(model, method, domain), 4),
                    "fitted": round(tokens_per_round_from_logits(logits[: targets.TABLE1_GAMMA], het, pooled=True), 4),
                }
            for gamma in (targets.TABLE1_GAMMA, NUM_POSITIONS):
                measured = measured_conditional_from_logits(logits[:gamma], het, pooled=True)
                entry[f"measured_acceptance_gamma{gamma}"] = [round(float(v), 3) for v in measured]
            entry["base_logit"] = [float(v) for v in logits]
            methods[method][domain] = entry
    return {
        "name": model,
        "description": (
            f"{DISPLAY[model]} target with EAGLE-3, DFlash and DSpark drafters (and MTP, extrapolated), "
            "domains math, code and chat, draft positions 1-16."
        ),
        "provenance": {
            "source": targets.PAPER,
            "tau": (
                "Table 1 (temperature 1, gamma 7, confidence scheduler off): the curve level of each method and "
                "domain is solved so that tau(7) pooled over rounds (as benchmarks and the simulator measure it: "
                "hard requests take more rounds) equals the domain mean, math = mean(GSM8K, MATH, AIME25), "
                "code = mean(MBPP, HumanEval, LCB), chat = mean(MT-Bench, Alpaca, Arena-Hard)."
            ),
            "measured_acceptance": (
                "measured_acceptance_gammaG: accepted at k / reached k, pooled over rounds with G drafts verified "
                "(documentation only)."
            ),
            "shapes": (
                "one curve shape per method, L_k = level + offset_logit * exp(-(k-1)/length_scale_positions), "
                "least squares on the Qwen3-4B per-position acceptance quoted from Fig. 2 and the gamma-15 "
                "DSpark/DFlash gains of the block-length ablation; the same shapes serve every target model."
            ),
            "heterogeneity_and_confidence": (
                "fitted on Qwen3-4B DSpark chat to the paper's confidence-head figures on Alpaca (AUC, ECE before "
                f"and after STS at positions 1, 3, 5, 7; {CONFIDENCE_FIT_SAMPLES} Monte Carlo rounds); the split "
                f"of the logit variance and step_correlation {STEP_CORRELATION} are assumptions (docs)."
            ),
            "derived_by": "scripts/derive_presets.py",
            "documentation": "docs/acceptance.md",
        },
        "extrapolated": {
            "positions_8_to_16": (
                f"Table 1 measures gamma = 7 only; positions 8-{NUM_POSITIONS} follow the fitted shapes, "
                f"constrained only by the Qwen3-4B gamma-{GAIN_GAMMA} DSpark/DFlash gains."
            ),
            "mtp": (
                "no public Qwen3 MTP figures: a copy of the EAGLE-3 curve (a one-layer autoregressive head), "
                "meant for gamma = 1."
            ),
            "shapes_for_other_models": "the Fig. 2 quotes are for Qwen3-4B; 8B and 14B reuse its shapes.",
            "confidence_head_for_eagle3_dflash_mtp": (
                "only DSpark has a confidence head in the paper; the other methods get the same head error."
            ),
        },
        "heterogeneity": het.model_dump(),
        "confidence": derivation.confidence.model_dump(),
        "shapes": {
            m: {"offset_logit": s.offset_logit, "length_scale_positions": s.length_scale_positions}
            for m, s in derivation.shapes.items()
        },
        "methods": methods,
    }


class _Dumper(yaml.SafeDumper):
    """Lists of numbers on one line; everything else block style."""


def _represent_list(dumper: yaml.SafeDumper, data: list) -> yaml.Node:
    flow = all(isinstance(v, (int, float)) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def dump_preset(document: dict[str, Any]) -> str:
    """YAML text of a preset document, with the header comment."""
    return HEADER + yaml.dump(document, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
