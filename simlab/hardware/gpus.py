"""How many GPUs one replica of a cost model occupies: the figure per-GPU metrics divide by."""

from __future__ import annotations

from typing import Any


def gpus_per_replica(description: dict[str, Any]) -> int:
    """The GPUs a cost model's ``describe()`` records (``num_gpus`` of an expert-parallel roofline, else the
    tensor-parallel degree), else 1.

    A roofline records ``tensor_parallel``; a table records it where its provenance says so (the shipped
    ``*-tp4``/``*-tp8`` profiles were exported from a roofline and keep its ``source.tensor_parallel``; a
    measured profile may give ``tensor_parallel`` at the top of its provenance). A table that says nothing ran
    on one GPU as far as simlab can tell.
    """
    if description.get("kind") == "roofline":  # with expert parallelism, every GPU of the layout
        return _positive_int(description.get("num_gpus", description.get("tensor_parallel")))
    provenance = description.get("provenance")
    if not isinstance(provenance, dict):
        return 1
    source = provenance.get("source")
    for holder in (provenance, source if isinstance(source, dict) else {}):
        for key in ("num_gpus", "tensor_parallel"):  # an expert-parallel roofline's export records num_gpus
            if key in holder:
                return _positive_int(holder[key])
    return 1


def _positive_int(value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return 1
    return number if number >= 1 else 1
