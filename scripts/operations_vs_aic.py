"""The operations' GPU time of one decode step against aiconfigurator-core's own step estimate over the same
database (docs/operations.md, "Measured: the operations' step against the database's own step estimate"): a
1,000-token prompt a quarter of the way through 250 output tokens (1,125 tokens of context a request), per GPU and
model, on the GPU's own curves and on the H100's carried to its datasheet. Needs the ``aic`` extra.

    python scripts/operations_vs_aic.py        # dense models under vLLM
    python scripts/operations_vs_aic.py --ep   # DeepSeek-V3 (fp8) on 8 H200s under SGLang, with expert parallelism
"""

from __future__ import annotations

import dataclasses
import logging
import sys

CONTEXT = 1125
BATCHES = (1, 8, 32, 64, 128)
CASES = (("h100-sxm", "h100_sxm", "qwen3-8b", "Qwen/Qwen3-8B", 1),
         ("h100-sxm", "h100_sxm", "qwen3-32b", "Qwen/Qwen3-32B", 2),
         ("h200", "h200_sxm", "qwen3-8b", "Qwen/Qwen3-8B", 1),
         ("h200", "h200_sxm", "qwen3-32b", "Qwen/Qwen3-32B", 1),
         ("b200", "b200_sxm", "qwen3-8b", "Qwen/Qwen3-8B", 1),
         ("a100-80g", "a100_sxm", "qwen3-8b", "Qwen/Qwen3-8B", 1))


def main() -> None:
    from aiconfigurator_core.sdk.engine import EngineHandle

    from simlab.hardware.gpu_files import shipped_gpus
    from simlab.hardware.kernel_curves import load_curves
    from simlab.hardware.operations import decode_operations, price
    from simlab.hardware.specs import get_model

    gpus = shipped_gpus()
    print("| GPU, model | requests | aiconfigurator ms | operations | operations, H100 curves |\n|---|---|---|---|---|")
    for gpu, system, name, hf_id, tp in CASES:
        logging.disable(logging.WARNING)
        try:
            version = "0.14.0" if gpu == "a100-80g" else "0.24.0"
            engine = EngineHandle.compile(hf_id, system, "vllm", backend_version=version, tp_size=tp)
        finally:
            logging.disable(logging.NOTSET)
        model, own = get_model(name), load_curves(gpus[gpu], tp)
        h100 = dataclasses.replace(load_curves(gpus["h100-sxm"], tp), hbm_bytes_per_s=own.hbm_bytes_per_s,
                                   bf16_flop_per_s=own.bf16_flop_per_s, link_bytes_per_s=own.link_bytes_per_s)
        database, mine, carried = [], [], []
        for batch in BATCHES:
            ops = decode_operations(model, num_requests=batch, context_per_request=float(CONTEXT), tensor_parallel=tp)
            db_ms = engine.decode_step_latency(batch, CONTEXT, 2)
            database.append(f"{db_ms:.2f}")
            mine.append(f"{price(ops, own)['total'] * 1e3 / db_ms - 1:+.0%}")
            carried.append(f"{price(ops, h100)['total'] * 1e3 / db_ms - 1:+.0%}")
        label = f"{gpu}{f' x{tp}' if tp > 1 else ''}, {name}"
        print(f"| {label} | {' / '.join(map(str, BATCHES))} | {' / '.join(database)} | {' / '.join(mine)} | "
              f"{' / '.join(carried) if gpu != 'h100-sxm' else '(its own)'} |", flush=True)


EP_CONTEXT = 2000
EP_BATCHES = (1, 8, 64, 256)  # requests per attention group
EP_LAYOUTS = ((8, 1), (8, 8), (1, 8))  # (tensor parallel, expert parallel); E > T: E / T data-parallel groups


def expert_parallel() -> None:
    """DeepSeek-V3 in fp8 on 8 H200s, SGLang 0.5.14's database: TP8, TP8 with expert parallelism, and data-parallel
    attention with EP8 (aiconfigurator's ``decode_step_latency`` counts requests per attention group)."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    from simlab.hardware.gpu_files import shipped_gpus
    from simlab.hardware.kernel_curves import load_curves
    from simlab.hardware.operations import decode_operations, price
    from simlab.hardware.specs import get_model

    model = get_model("deepseek-v3")
    print("| layout | requests per attention group | aiconfigurator ms | operations |\n|---|---|---|---|")
    for tp, ep in EP_LAYOUTS:
        groups = ep // tp if ep > tp else 1
        logging.disable(logging.WARNING)
        try:
            engine = EngineHandle.compile("deepseek-ai/DeepSeek-V3", "h200_sxm", "sglang", backend_version="0.5.14",
                                          tp_size=tp, attention_dp_size=groups, moe_tp_size=tp if ep == 1 else 1,
                                          moe_ep_size=ep)
        finally:
            logging.disable(logging.NOTSET)
        curves = load_curves(shipped_gpus()["h200"], tp, "sglang")
        database, mine = [], []
        for batch in EP_BATCHES:
            db_ms = engine.decode_step_latency(batch, EP_CONTEXT, 2)
            ops = decode_operations(model, num_requests=batch * groups, context_per_request=float(EP_CONTEXT),
                                    tensor_parallel=tp, expert_parallel=ep, precision="fp8")
            database.append(f"{db_ms:.2f}")
            ms = price(ops, curves)["total"] * 1e3
            mine.append(f"{ms:.2f} ({ms / db_ms - 1:+.0%})")
        print(f"| TP{tp} EP{ep} | {' / '.join(map(str, EP_BATCHES))} | {' / '.join(database)} | {' / '.join(mine)} |",
              flush=True)


if __name__ == "__main__":
    expert_parallel() if "--ep" in sys.argv else main()
