"""Fit the calibrated roofline to the measurements in hw_profiles/calibration/ and write its fitted.yaml.

    python scripts/calibrate_hardware.py            # refit; rewrite fitted.yaml if anything changed
    python scripts/calibrate_hardware.py --check    # exit 1 if fitted.yaml is missing or stale
    python scripts/calibrate_hardware.py --summary  # also print each GPU's parameters and stated error
    python scripts/calibrate_hardware.py --markdown # print the tables of docs/roofline.md and docs/calibration.md

``scripts/make_profiles.py`` runs this first, then regenerates the shipped profiles from the fit.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from simlab.calibration.stages import calibrate, dump_fitted

REPO = Path(__file__).resolve().parents[2]

FOLDER = REPO / "hw_profiles" / "calibration"
FITTED = FOLDER / "fitted.yaml"


def refit(folder: Path = FOLDER, fitted: Path = FITTED, *, check: bool = False) -> tuple[dict, bool]:
    """Fit; write ``fitted`` unless ``check`` or unchanged, then the engine check's stated error
    (engine_error.yaml: every engine measurement simulated on the new fit). Returns the fit and whether either
    file was stale."""
    from simlab.common.outputs import write_file_atomic
    from simlab.hardware.calibration import forget_fitted

    data = calibrate(folder)
    old = yaml.safe_load(fitted.read_text(encoding="utf-8")) if fitted.is_file() else None
    stale = old != yaml.safe_load(dump_fitted(data))
    if stale and not check:
        write_file_atomic(fitted, dump_fitted(data))
        forget_fitted()
    if check and stale:
        return data, True
    errors_stale = engine_errors(folder, write=not check)
    return data, stale or errors_stale


def engine_errors(folder: Path = FOLDER, *, write: bool = True) -> bool:
    """Simulate every engine measurement on the fit in force; rewrite engine_error.yaml if it changed (unless
    ``write`` is false). Returns whether it was stale."""
    from simlab.common.outputs import write_file_atomic
    from simlab.calibration.profile_check import (
        ERROR_FILE,
        check_records,
        error_document,
        leave_one_source_out,
        load_records,
    )

    path = folder / ERROR_FILE
    document = error_document(check_records(load_records(folder / "engine_measurements.csv")),
                              leave_one_source_out(folder))
    text = ("# written by simlab scripts/calibrate_hardware.py: every record of engine_measurements.csv simulated "
            "on fitted.yaml (simlab profiles check); do not edit\n"
            + yaml.safe_dump(document, sort_keys=False, width=120))
    old = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    stale = old != yaml.safe_load(text)
    if stale and write:
        write_file_atomic(path, text)
    return stale


def summary(data: dict) -> str:
    lines = []
    for gpu, entry in data["gpus"].items():
        params = ", ".join(f"{k} {v:g}" for k, v in entry["parameters"].items())
        engines = "; ".join(f"{e}: overhead {v['step_overhead_s'] * 1e3:.3g} ms + "
                            f"{v['request_overhead_s'] * 1e6:.3g} us"
                            "/request" for e, v in entry["engines"].items())
        lines.append(f"{gpu}: {params}\n  {engines}")
        for part in ("fitted", "held_out"):
            for item in entry["error"][part]:
                lines.append(f"  {part:8s} {item['subset']:55s} n={item['points']:3d} median "
                             f"{item['median_abs_rel_error']:.1%} max {item['max_abs_rel_error']:.1%}")
        for item in entry["error"].get("reference_checks", []):
            lines.append(f"  check    {item['id']:55s} n={item['points']:3d} median "
                         f"{item['median_abs_rel_error']:.1%} max {item['max_abs_rel_error']:.1%}")
        for what in entry["error"].get("not_measured_on_this_gpu", []):
            lines.append(f"  unknown  {what} (not measured on this GPU)")
    return "\n".join(lines)


def _pct(value: float) -> str:
    return f"{value * 100:.1f} %"


def stacks_markdown(data: dict) -> str:
    """docs/calibration.md's table of the serving stacks' fitted parameters (stage 3), per GPU with its own fit."""
    lines = ["| GPU | stack | step_overhead_s | request_overhead_s | attention_efficiency | prefill_efficiency | "
             "quantized_efficiency | fitted | from |", "|---|---|---|---|---|---|---|---|---|"]
    for gpu, entry in data["gpus"].items():
        for stack, s in (entry.get("stacks") or {}).items():
            if not s["fitted_on"] and all(v.split("/")[0] != gpu for v in (s.get("borrowed") or {}).values()):
                continue  # a GPU that borrows every stack: one line below the table says so
            fitted = ", ".join(s["fitted"]) or "none"
            origin = f"{len(s['fitted_on'])} records" if s["fitted_on"] else "borrowed"
            if s.get("borrowed"):
                origin += "; the rest from " + ", ".join(sorted(set(s["borrowed"].values())))
            lines.append(f"| `{gpu}` | `{stack}` | {s['step_overhead_s'] * 1e3:.2f} ms | "
                         f"{s['request_overhead_s'] * 1e6:.1f} µs | {s['attention_efficiency']:.3f} | "
                         f"{s['prefill_efficiency']:.3f} | {s['quantized_efficiency']:.3f} | {fitted} | {origin} |")
    return "\n".join(lines)


def engine_error_markdown(folder: Path = FOLDER) -> str:
    """docs/calibration.md's table of the error on engine measurements (engine_error.yaml's summary)."""
    document = yaml.safe_load((folder / "engine_error.yaml").read_text(encoding="utf-8"))
    lines = ["| GPU | stack | target | precision | drafter | role | users | points | median error | worst error |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for e in document["summary"]:
        lines.append(f"| `{e['gpu']}` | `{e['stack']}` | {e['target']} | {e['precision']} | {e['drafter']} | "
                     f"{e['role']} | "
                     f"{e['users']} | "
                     f"{e['points']} | "
                     f"{_pct(e['median_abs_error'])} | {_pct(e['max_abs_error'])} |")
    lines += ["", "| GPU | stack | left out | refitted without it | points | median error | worst error |",
              "|---|---|---|---|---|---|---|"]
    for e in document.get("leave_one_source_out", []):
        lines.append(f"| `{e['gpu']}` | `{e['stack']}` | {e['left_out']} | {', '.join(e['refitted'])} | "
                     f"{e['points']} | "
                     f"{_pct(e['median_abs_error'])} | {_pct(e['max_abs_error'])} |")
    return "\n".join(lines)


def markdown(data: dict) -> str:
    """The tables docs/roofline.md and docs/calibration.md show: fitted parameters per GPU, the stated error per
    GPU, the serving stacks' parameters and their error on engine measurements."""
    engines = sorted({e for entry in data["gpus"].values() for e in entry["engines"]})
    head = ("| GPU | bw_efficiency | flop_efficiency | knee_width | corner (tokens) | elementwise_efficiency | "
            "kernel_launch_s | attention_efficiency | " + " | ".join(f"{e} overhead" for e in engines)
            + " | fitted on |")
    lines = [head, "|" + "---|" * (9 + len(engines))]
    for gpu, entry in data["gpus"].items():
        p = entry["parameters"]
        overheads = [f"{entry['engines'][e]['step_overhead_s'] * 1e3:.2f} ms + "
                     f"{entry['engines'][e]['request_overhead_s'] * 1e6:.1f} µs/request" for e in engines]
        ops, e2e = (entry["fitted_on"][k].split(":")[0] for k in ("operators", "end_to_end"))
        origin = "its own measurements" if ops == e2e == gpu else (
            f"operators: {ops}; end to end: {e2e}" if ops == gpu else f"{ops}'s fit (no {gpu} data)")
        lines.append(f"| `{gpu}` | {p['bw_efficiency']:.3f} | {p['flop_efficiency']:.3f} | {p['knee_width']:.2f} | "
                     f"{entry['derived']['corner_tokens']:.0f} | {p['elementwise_efficiency']:.3f} | "
                     f"{p['kernel_launch_s'] * 1e6:.2f} µs | {p['attention_efficiency']:.3f} | "
                     + " | ".join(overheads) + f" | {origin} |")
    lines += ["", "| GPU | measurements | role | points | median error | max error |", "|---|---|---|---|---|---|"]
    for gpu, entry in data["gpus"].items():
        error = entry["error"]
        for role in ("fitted", "held_out"):
            for item in error[role]:
                lines.append(f"| `{gpu}` | {item['source']}: {item['subset']} | {role.replace('_', ' ')} | "
                             f"{item['points']} | {_pct(item['median_abs_rel_error'])} | "
                             f"{_pct(item['max_abs_rel_error'])} |")
        for what in error.get("not_measured_on_this_gpu", []):
            lines.append(f"| `{gpu}` | {what} | not measured on this GPU (borrowed) | – | unknown | unknown |")
        for item in error.get("reference_checks", []):
            lines.append(f"| `{gpu}` | {item['id']} (simlab's own kernels, not an engine) | reference check | "
                         f"{item['points']} | {_pct(item['median_abs_rel_error'])} | "
                         f"{_pct(item['max_abs_rel_error'])} |")
    return ("\n".join(lines) + "\n\n" + stacks_markdown(data) + "\n\n" + moe_markdown(data) + "\n\n"
            + speculative_markdown(data) + "\n\n" + engine_error_markdown())


def moe_markdown(data: dict) -> str:
    """docs/calibration.md's table of the stacks' routed-expert latency (stage 4)."""
    lines = ["| stack | moe_hidden_overhead_s (per 1,024 of the hidden size) | standard error | fitted on | "
             "rms log residual |",
             "|---|---|---|---|---|"]
    for stack, m in (data.get("moe") or {}).items():
        fitted_on = (f"{len(m['fitted_on'])} records" if m["fitted_on"] else f"borrowed from `{m['borrowed']}`")
        error = f"{m['standard_error'] * 1e6:.2f} µs" if "standard_error" in m else "–"
        residual = f"{m['rms_log_residual']:.3f}" if "rms_log_residual" in m else "–"
        lines.append(f"| `{stack}` | {m['moe_hidden_overhead_s'] * 1e6:.2f} µs | {error} | {fitted_on} | {residual} |")
    return "\n".join(lines)


def speculative_markdown(data: dict) -> str:
    """docs/calibration.md's table of the stacks' host time of speculative decoding (stage 5)."""
    lines = ["| stack | spec_round_overhead_s | draft_forward_overhead_s | standard errors | fitted on | "
             "rms log residual |", "|---|---|---|---|---|---|"]
    for stack, m in (data.get("speculative") or {}).items():
        fitted_on = (f"{len(m['fitted_on'])} records" if m["fitted_on"] else f"borrowed from `{m['borrowed']}`")
        errors = m.get("standard_errors")
        error = (f"{errors['spec_round_overhead_s'] * 1e6:.0f} µs, {errors['draft_forward_overhead_s'] * 1e6:.0f} µs"
                 if errors else "–")
        residual = f"{m['rms_log_residual']:.3f}" if "rms_log_residual" in m else "–"
        lines.append(f"| `{stack}` | {m['spec_round_overhead_s'] * 1e6:.0f} µs | "
                     f"{m['draft_forward_overhead_s'] * 1e6:.1f} µs | {error} | {fitted_on} | {residual} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report a stale fit; exit 1 if stale")
    parser.add_argument("--summary", action="store_true", help="print the fitted parameters and errors")
    parser.add_argument("--markdown", action="store_true",
                        help="print the tables of the fit (docs/roofline.md, docs/calibration.md)")
    args = parser.parse_args(argv)
    data, stale = refit(check=args.check or args.markdown)
    if args.markdown:
        print(markdown(data))
        return 0
    if args.summary:
        print(summary(data))
    if stale and args.check:
        print(f"stale or missing: {FITTED} (run scripts/calibrate_hardware.py)", file=sys.stderr)
        return 1
    print(f"wrote {FITTED}" if stale else f"{FITTED} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
