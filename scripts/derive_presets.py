#!/usr/bin/env python
"""Derive the acceptance presets from the DSpark paper's public figures and document the fit.

    python scripts/derive_presets.py            # write simlab/acceptance/presets/*.yaml and the tables in docs
    python scripts/derive_presets.py --dry-run  # print the tables, write nothing

Deterministic (fixed seeds); about a minute on one core. The fitted-versus-target tables between the
``<!-- BEGIN derived -->`` and ``<!-- END derived -->`` markers of docs/acceptance.md are regenerated from the
preset files as written, so they show what users get.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simlab.acceptance import targets  # noqa: E402
from simlab.acceptance.build import build_acceptance  # noqa: E402
from simlab.acceptance.derive import GAIN_GAMMA, confidence_scores, derive  # noqa: E402
from simlab.acceptance.expected import expected_conditional_acceptance, expected_tokens_per_round  # noqa: E402
from simlab.acceptance.head_quality import confidence_report, threshold_sweep  # noqa: E402
from simlab.acceptance.preset_document import DISPLAY, dump_preset, preset_document  # noqa: E402
from simlab.acceptance.presets import PRESET_DIR  # noqa: E402
from simlab.acceptance.warmup import warmup_sample  # noqa: E402
from simlab.config.acceptance import PresetAcceptance  # noqa: E402

DOCS = ROOT / "docs" / "acceptance.md"
BEGIN, END = "<!-- BEGIN derived -->", "<!-- END derived -->"
REPORT_SAMPLES = 400_000
REPORT_SEED = 7
SWEEP_THRESHOLDS = (0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95)
NAMES = {"eagle3": "EAGLE-3", "dflash": "DFlash", "dspark": "DSpark", "mtp": "MTP"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--dry-run", action="store_true", help="print the tables; write no file")
    args = parser.parse_args()
    start = time.time()
    derivation = derive()
    texts = {model: dump_preset(preset_document(derivation, model)) for model in targets.MODELS}
    if args.dry_run:
        out_dir = Path(_tmpdir())
    else:
        out_dir = PRESET_DIR
    for model, text in texts.items():
        (out_dir / f"{model}.yaml").write_text(text, encoding="utf-8")
    specs = {
        model: build_acceptance(PresetAcceptance(kind="preset", name=str(out_dir / f"{model}.yaml")), file=None)
        for model in targets.MODELS
    }
    tables = derived_tables(derivation, specs)
    if args.dry_run:
        print(tables)
    else:
        _replace_section(DOCS, tables)
    print(f"derived in {time.time() - start:.0f} s; presets in {out_dir}", file=sys.stderr)
    return 0


def _tmpdir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="simlab-presets-")


def _replace_section(path: Path, body: str) -> None:
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{BEGIN}\n{body}\n{END}{tail}", encoding="utf-8")


def derived_tables(derivation, specs) -> str:
    """Markdown: defaults, tau fit, quotes, gains, per-position values, confidence and threshold sweep."""
    parts = [_defaults(derivation), _tau_table(specs), _quotes_table(specs), _gains_table(specs),
             _positions_table(specs), _confidence_table(specs), _sweep_table(specs["qwen3-4b"])]
    return "\n\n".join(parts)


def _defaults(d) -> str:
    h, c = d.heterogeneity, d.confidence
    rows = [
        "#### Fitted defaults (shared by the three presets)",
        "",
        "| parameter | value |",
        "|---|---|",
        f"| `heterogeneity.request_logit_sd` | {h.request_logit_sd} |",
        f"| `heterogeneity.step_logit_sd` | {h.step_logit_sd} |",
        f"| `heterogeneity.step_correlation` | {h.step_correlation} (assumed) |",
        f"| `heterogeneity.token_logit_sd` | {h.token_logit_sd} |",
        f"| `confidence.noise_logit_sd` | {c.noise_logit_sd} |",
        f"| `confidence.bias_logit` | {c.bias_logit} |",
    ]
    if d.history:
        rows.append(
            "| confidence fit: weighted sum of squared residuals (Monte Carlo) | "
            f"{d.history[-1]['sum_of_squares']:.2e} |"
        )
    for method, s in d.shapes.items():
        rows.append(f"| shape {NAMES[method]}: `offset_logit`, `length_scale_positions` | "
                    f"{s.offset_logit:+.4f}, {s.length_scale_positions:.4f} |")
    return "\n".join(rows)


def _tau_table(specs) -> str:
    rows = [
        "#### Tokens per round at γ = 7: Table 1 domain mean vs preset (τ pooled over rounds, by quadrature)",
        "",
        "| target | drafter | math: paper / preset | code: paper / preset | chat: paper / preset | largest error |",
        "|---|---|---|---|---|---|",
    ]
    for model, spec in specs.items():
        for method in targets.TABLE_METHODS:
            cells, worst = [], 0.0
            for domain in targets.DOMAINS:
                paper = targets.domain_mean_tau(model, method, domain)
                fitted = expected_tokens_per_round(spec, method, domain, targets.TABLE1_GAMMA, pooled=True)
                worst = max(worst, abs(fitted / paper - 1))
                cells.append(f"{paper:.3f} / {fitted:.3f}")
            rows.append(f"| {DISPLAY[model]} | {NAMES[method]} | " + " | ".join(cells) + f" | {100 * worst:.4f} % |")
    return "\n".join(rows)


def _quotes_table(specs) -> str:
    spec = specs[targets.QUOTE_MODEL]
    rows = [
        "#### Per-position acceptance on Qwen3-4B: Fig. 2 quote vs preset (accepted at k ÷ reached k)",
        "",
        "| quote | drafter | domain | position | paper | preset | preset − paper |",
        "|---|---|---|---|---|---|---|",
    ]
    for q in targets.FIG2_QUOTES:
        fitted = expected_conditional_acceptance(spec, q.method, q.domain, targets.TABLE1_GAMMA, pooled=True)[
            q.position - 1
        ]
        rows.append(f"| {q.text} | {NAMES[q.method]} | {q.domain} | {q.position} | {q.value:.2f} | {fitted:.3f} | "
                    f"{fitted - q.value:+.3f} |")
    return "\n".join(rows)


def _gain(spec, domain, gamma) -> float:
    dspark = expected_tokens_per_round(spec, "dspark", domain, gamma, pooled=True)
    return dspark / expected_tokens_per_round(spec, "dflash", domain, gamma, pooled=True) - 1


def _gains_table(specs) -> str:
    rows = [
        "#### DSpark's gain in pooled τ over DFlash (fixed γ)",
        "",
        "| target | domain | γ = 7 paper | γ = 7 preset | γ = 15 paper | γ = 15 preset |",
        "|---|---|---|---|---|---|",
    ]
    for model, spec in specs.items():
        for domain in targets.DOMAINS:
            p7 = targets.DSPARK_GAIN[7][domain] - 1 if model == targets.QUOTE_MODEL else None
            p15 = targets.DSPARK_GAIN[GAIN_GAMMA][domain] - 1 if model == targets.QUOTE_MODEL else None
            table7 = (
                targets.domain_mean_tau(model, "dspark", domain) / targets.domain_mean_tau(model, "dflash", domain) - 1
            )
            rows.append(
                f"| {DISPLAY[model]} | {domain} | "
                + (f"+{100 * p7:.0f} %" if p7 is not None else f"(Table 1: +{100 * table7:.1f} %)")
                + f" | +{100 * _gain(spec, domain, 7):.1f} % | "
                + (f"+{100 * p15:.0f} %" if p15 is not None else "–")
                + f" | +{100 * _gain(spec, domain, GAIN_GAMMA):.1f} % |"
            )
    return "\n".join(rows)


def _positions_table(specs) -> str:
    rows = [
        "#### Measured per-position acceptance (pooled, γ = 15 verified) at positions 1 / 7 / 15 (15 is extrapolated)",
        "",
        "| target | drafter | math | code | chat |",
        "|---|---|---|---|---|",
    ]
    for model, spec in specs.items():
        for method in ("eagle3", "dflash", "dspark"):
            cells = []
            for domain in targets.DOMAINS:
                c = expected_conditional_acceptance(spec, method, domain, 15, pooled=True)
                cells.append(f"{c[0]:.3f} / {c[6]:.3f} / {c[14]:.3f}")
            rows.append(f"| {DISPLAY[model]} | {NAMES[method]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _fmt(values, scale=1.0, digits=3) -> str:
    return " / ".join("–" if v is None else f"{scale * v:.{digits}f}" for v in values)


def _confidence_table(specs) -> str:
    picks = [k - 1 for k in targets.CONFIDENCE_POSITIONS]
    rows = [
        "#### Confidence head on chat, DSpark, positions 1 / 3 / 5 / 7 (STS fitted on one half, scored on the other)",
        "",
        "| | rounds (fit + eval) | AUC | ECE raw (%) | ECE after STS (%) | STS temperatures T1..T7 |",
        "|---|---|---|---|---|---|",
        f"| paper (Alpaca) | – | {_fmt(targets.AUC)} | {_fmt(targets.ECE_RAW, 100, 1)} | "
        f"{_fmt(targets.ECE_STS, 100, 1)} | – |",
    ]
    for model, spec in specs.items():
        s = confidence_scores(spec, REPORT_SAMPLES, REPORT_SEED)
        rows.append(
            f"| {DISPLAY[model]} preset | {REPORT_SAMPLES:,} | {_fmt(s['auc'])} | {_fmt(s['ece_raw'], 100, 1)} | "
            f"{_fmt(s['ece_calibrated'], 100, 1)} | {_fmt(s['temperatures'], 1, 2)} |"
        )
    spec = specs[targets.CONFIDENCE_MODEL]
    r = confidence_report(spec, "dspark", {"chat": 1.0}, 7, calibrate=True, seed=0)
    rows.append(
        f"| {DISPLAY[targets.CONFIDENCE_MODEL]}, default `calibration_samples` | {spec.calibration_samples:,} | "
        f"{_fmt([r['auc'][i] for i in picks])} | {_fmt([r['ece_raw'][i] for i in picks], 100, 1)} | "
        f"{_fmt([r['ece_calibrated'][i] for i in picks], 100, 1)} | {_fmt(r['temperatures'], 1, 2)} |"
    )
    return "\n".join(rows)


def _sweep_table(spec) -> str:
    header = " | ".join(f"{t:.2f}" for t in SWEEP_THRESHOLDS)
    rows = [
        "#### Static-threshold sweep, Qwen3-4B DSpark, γ = 7, raw head: acceptance rate of verified drafts",
        "",
        f"| domain | paper (loosest → strictest) | {header} |",
        "|---|---|" + "---|" * len(SWEEP_THRESHOLDS),
    ]
    for i, domain in enumerate(targets.DOMAINS):
        sample = warmup_sample(spec, "dspark", {domain: 1.0}, 7, REPORT_SAMPLES // 2, REPORT_SEED + i)
        sweep = threshold_sweep(sample, SWEEP_THRESHOLDS)
        lo, hi = targets.THRESHOLD_SWEEP_RATE[domain]
        cells = " | ".join(f"{100 * r['acceptance_rate']:.1f} % ({r['verified_per_round']:.1f})" for r in sweep)
        rows.append(f"| {domain} | {100 * lo:.1f} → {100 * hi:.1f} % | {cells} |")
    rows.append("")
    rows.append("Each cell: accepted ÷ verified drafts (mean verified drafts per round in brackets).")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
