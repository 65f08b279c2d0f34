"""A cost table read from aiconfigurator-core's silicon database (``kind: aiconfigurator``, the ``aic`` extra).

At build, the database's compiled step estimator is queried once over a grid (batch tokens x total context tokens)
and the result is a :class:`TableCostModel`, so the compiled engine path runs unchanged. A cell at B batch tokens and
C total context tokens is ``decode_step_latency(B, isl=max(1, C // B), osl=2)``: B decode sequences of C / B tokens
each. Prefill is the per-token cost of one 1,024-token prompt. Drafter costs are not in the database: they are the
roofline's (same GPU, model, TP), tabulated per drafter shape, and so is the KV cache capacity.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from simlab.common.errors import InputError
from simlab.config.hardware import AicHardware, TableHardware
from simlab.hardware.roofline_tables import drafter_curves, kv_source, roofline_for
from simlab.hardware.roofline_tables import kv_tokens as roofline_kv_tokens
from simlab.hardware.table import TableCostModel

BATCH_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
CONTEXT_TOKENS = (0, 1024, 4096, 16384, 65536, 262144)
PREFILL_PROMPT_TOKENS = 1024
GPU_NAMES = {"h100-sxm": "h100_sxm", "h200-sxm": "h200_sxm", "a100-sxm": "a100_sxm", "b200-sxm": "b200_sxm",
             "gb200": "gb200", "h100-pcie": "h100_pcie", "l40s": "l40s"}
MODEL_NAMES = {"qwen3-8b": "Qwen/Qwen3-8B", "qwen3-32b": "Qwen/Qwen3-32B", "qwen3-0.6b": "Qwen/Qwen3-0.6B",
               "qwen3-1.7b": "Qwen/Qwen3-1.7B"}


def aic_engine(cfg: AicHardware, file: Optional[str]):
    """The database's compiled engine for ``cfg``; InputError (exit 2) naming what is valid otherwise."""
    try:
        from aiconfigurator_core.sdk.engine import EngineHandle
    except ImportError:
        raise InputError("kind: aiconfigurator needs aiconfigurator-core", file=file, field="hardware.kind",
                         value="aiconfigurator", valid="pip install 'simlab[aic]'") from None
    system = GPU_NAMES.get(cfg.gpu, cfg.gpu)
    model = MODEL_NAMES.get(cfg.model, cfg.model)
    try:
        return EngineHandle.compile(model, system, cfg.stack, backend_version=cfg.stack_version,
                                    tp_size=cfg.tensor_parallel)
    except Exception as exc:  # the database raises its own errors for an unknown system/backend/version/model
        raise InputError(f"aiconfigurator's database cannot build this combination ({exc})", file=file,
                         field="hardware", value=f"{cfg.gpu}/{cfg.model}/{cfg.stack} {cfg.stack_version}",
                         valid=f"gpu in {sorted(set(GPU_NAMES) | set(available_systems()))}, "
                               f"model in {sorted(MODEL_NAMES)}, stack in vllm/sglang/trtllm") from None


def available_systems() -> list[str]:
    """The systems the installed database holds data for (empty when the package is absent)."""
    try:
        import aiconfigurator_core
    except ImportError:
        return []
    from pathlib import Path
    data = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return sorted(p.name for p in data.iterdir() if p.is_dir())


@lru_cache(maxsize=16)
def table_config(cfg: AicHardware, file: Optional[str] = None) -> TableHardware:
    """The ``kind: table`` config the database gives for ``cfg`` (cached per process)."""
    engine = aic_engine(cfg, file)
    rows = [[engine.decode_step_latency(b, max(1, c // b), 2) / 1e3 for b in BATCH_TOKENS] for c in CONTEXT_TOKENS]
    roofline = roofline_for(cfg.gpu, cfg.model, cfg.stack, cfg.tensor_parallel)
    kv_tokens = roofline_kv_tokens(roofline)
    prefill_s = engine.predict_prefill_latency(1, PREFILL_PROMPT_TOKENS) / 1e3
    return TableHardware(
        kind="table",
        name=f"aic:{cfg.gpu}_{cfg.model}_{cfg.stack}-{cfg.stack_version}_tp{cfg.tensor_parallel}",
        verify={"batch_tokens": list(BATCH_TOKENS), "context_tokens": list(CONTEXT_TOKENS), "step_s": rows},
        prefill={"per_token_s": prefill_s / PREFILL_PROMPT_TOKENS},
        kv_cache_tokens=kv_tokens,
        draft=drafter_curves(roofline),
        provenance={
            "source": "aiconfigurator-core silicon database",
            "drafter": "the roofline's drafter costs (the database has no drafter)",
            "kv_cache_tokens": "the roofline's for the same GPU, model and tensor parallelism",
            "kv_roofline": kv_source(roofline),
            "cell": "decode_step_latency(B, C // B, 2) ms / 1e3",
        },
    )


def build_aiconfigurator(cfg: AicHardware, *, file: Optional[str] = None) -> TableCostModel:
    """A :class:`TableCostModel` from the database's step estimates for ``cfg``."""
    return TableCostModel(table_config(cfg, file), source=file)
