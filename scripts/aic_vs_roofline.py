"""One decode step, aiconfigurator's database vs the calibrated roofline's verify_s (Qwen3-8B, H100 SXM, vLLM, TP1).

``PYTHONPATH=. python scripts/aic_vs_roofline.py``: per batch and context per request, both in ms and their ratio.
"""

from __future__ import annotations

from pathlib import Path

from simlab.config.hardware import AicHardware, RooflineHardware
from simlab.hardware.aiconfigurator import aic_engine
from simlab.hardware.profiles import build_cost_model


def main() -> None:
    """Print the table."""
    cfg = AicHardware(kind="aiconfigurator", gpu="h100-sxm", model="qwen3-8b")
    engine = aic_engine(cfg, None)
    roofline = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                                base_dir=Path("."), file=None)
    print("| batch | context/request | database ms | roofline ms | roofline/database |\n|---|---|---|---|---|")
    for context in (1024, 4096):
        for batch in (1, 8, 32, 128, 256):
            db_ms = engine.decode_step_latency(batch, context, 2)
            rf_ms = roofline.verify_s(batch, context_tokens=batch * context, num_requests=batch) * 1e3
            print(f"| {batch} | {context} | {db_ms:.2f} | {rf_ms:.2f} | {rf_ms / db_ms:.2f} |")


if __name__ == "__main__":
    main()
