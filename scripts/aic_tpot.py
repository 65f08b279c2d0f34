"""Reproduce issue 41's TPOT figures from aiconfigurator-core's silicon database
(needs ``pip install aiconfigurator-core``).

Qwen3-8B, vLLM 0.24.0, H100 SXM, TP1, 1,024 tokens in and 1,024 out: ``predict_decode_latency`` returns the whole
decode phase in ms; divided by the output length it is the TPOT. ``decode_step_latency`` is one step's ms.
"""

from __future__ import annotations

import sys

OUTPUT_TOKENS = 1024
INPUT_TOKENS = 1024


def main(batches: tuple[int, ...] = (1, 32, 128)) -> None:
    """Print TPOT (ms) per batch, and one decode step's ms at mid-generation context."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    handle = EngineHandle.compile("Qwen/Qwen3-8B", "h100_sxm", "vllm", backend_version="0.24.0")
    print("batch  tpot_ms  step_ms@ctx1536")
    for num_requests in batches:
        decode_ms = handle.predict_decode_latency(num_requests, INPUT_TOKENS, OUTPUT_TOKENS)
        step_ms = handle.decode_step_latency(num_requests, INPUT_TOKENS + OUTPUT_TOKENS // 2, OUTPUT_TOKENS)
        print(f"{num_requests:5d}  {decode_ms / OUTPUT_TOKENS:7.2f}  {step_ms:7.2f}")


if __name__ == "__main__":
    main(tuple(int(x) for x in sys.argv[1:]) or (1, 32, 128))
