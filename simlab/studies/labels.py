"""How a study writes a layout and a prefill:decode split, in one place: ``tp2 ep2``, ``h100 vllm bf16 tp2 ep2``,
``3:5``. Nothing reads these back; documents keep the fields themselves."""

from __future__ import annotations


def parallel_label(tensor_parallel: int, expert_parallel: int = 1) -> str:
    """``tp2``, or ``tp2 ep4`` where experts are split too."""
    return f"tp{tensor_parallel}" + (f" ep{expert_parallel}" if expert_parallel > 1 else "")


def layout_label(gpu: str, stack: str, precision: str, tensor_parallel: int, expert_parallel: int = 1) -> str:
    """A replica's layout: ``h100-sxm vllm bf16 tp2 ep2``."""
    return f"{gpu} {stack} {precision} {parallel_label(tensor_parallel, expert_parallel)}"


def deployment_label(d: dict) -> str:
    """:func:`layout_label` of a mapping with the fields a plan's candidates hold."""
    return layout_label(d["gpu"], d["stack"], d["precision"], d["tensor_parallel"], d["expert_parallel"])


def split_label(split: dict) -> str:
    """A disaggregated engine's pools, prefill:decode: ``3:5``."""
    return f"{split['prefill_replicas']}:{split['decode_replicas']}"


def replicas_label(d: dict) -> str:
    """A deployment's replicas in words: ``1 replica``, ``3 replicas``, ``2 prefill + 6 decode replicas``."""
    split = d.get("disaggregation")
    if split:
        return f"{split['prefill_replicas']} prefill + {split['decode_replicas']} decode replicas"
    return f"{d['replicas']} replica{'s' if d['replicas'] != 1 else ''}"


def gpus_label(d: dict) -> str:
    """A deployment's GPUs in words: ``1 GPU``, ``8 GPUs``."""
    return f"{d['num_gpus']} GPU{'s' if d['num_gpus'] != 1 else ''}"
