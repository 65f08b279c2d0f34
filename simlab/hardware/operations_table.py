"""``kind: operations``: step costs from the model's operations (simlab.hardware.operations) priced by curves fitted on
measured kernels (simlab.hardware.kernel_curves), plus the engine's own time, tabulated as a :class:`TableCostModel`
so that the compiled engine path runs unchanged (docs/operations.md).

A verify cell at B batch tokens and C total context tokens is the GPU time of R = B / q requests of q queries each
over C / R context tokens each, plus ``step_overhead_s`` and ``request_overhead_s`` x R: q = 1 for plain decoding (B
decode sequences), and a speculative arm's table verifies 1 + gamma tokens a request (a tree's nodes: each attends
its request's context, its ancestors under the tree's mask; :func:`with_verify_queries`). A prefill chunk is priced
as part of the forward it joins: the token operations (GEMMs, elementwise kernels) at M = the step's decode + chunk
tokens less those at M = its decode tokens, plus its causal attention's pairs (a pure prefill step carries
``step_overhead_s`` too). The drafters are operations too (simlab.hardware.drafter_operations), with the calibrated
roofline's host times; the KV capacity is the roofline's for the same GPU, model, TP, precisions and ``stack``
(simlab.hardware.roofline_tables).

The engine's own time left out of the scenario is the stack's (:func:`engine_time`): a time a step and a time a
request fitted on the stack's public runs at low load as what the operations' GPU time does not explain
(simlab.calibration.engine_time writes hw_profiles/calibration/engine_time.yaml; docs/operations.md states the runs
and the error). ``eager`` takes vLLM's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from simlab.common.resources import shipped_dir
from simlab.common.yaml_file import read_yaml
from simlab.config.hardware import OperationsHardware, TableHardware
from simlab.hardware.table import TableCostModel

BATCH_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
CONTEXT_TOKENS = (0, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)
PREFILL_TOKENS = (1, 16, 64, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
ENGINE_TIME_FILE = shipped_dir("hw_profiles") / "calibration" / "engine_time.yaml"


def engine_time(stack: str) -> dict:
    """The stack's fitted engine time: ``step_overhead_s``, ``request_overhead_s``, the runs it was fitted on and
    the ``stack`` whose fit it is (vLLM's for a stack without one: ``eager``)."""
    stacks = read_yaml(ENGINE_TIME_FILE, what="engine time file")["stacks"]
    fitted = stack if stack in stacks else "vllm"
    return {**stacks[fitted], "stack": fitted}


@lru_cache(maxsize=16)
def table_config(cfg: OperationsHardware, file: Optional[str] = None, queries_per_request: int = 1) -> TableHardware:
    """The ``kind: table`` config the operation model gives for ``cfg`` (cached per process); its verify cells hold
    ``queries_per_request`` tokens a request."""
    from simlab.hardware.kernel_curves import load_curves, measured_families
    from simlab.hardware.moe_layout import MoeLayout
    from simlab.hardware.operations import decode_operations, forward_token_operations, prefill_pair_s, price
    from simlab.hardware.drafter_operations import drafter_curves
    from simlab.hardware.roofline_tables import kv_source, kv_tokens, required_roofline
    from simlab.hardware.specs import file_label, get_gpu, get_model, gpu_reference

    gpu = get_gpu(cfg.gpu, file=file, field="hardware.gpu")
    model = get_model(cfg.model, file=file, field="hardware.model")
    tp, ep = cfg.tensor_parallel, cfg.expert_parallel
    curves = load_curves(gpu, tp, cfg.stack)
    gemm_rows = None
    if cfg.kernels == "database":  # the database's own GEMM rows where they cover the shape, the curves elsewhere
        from simlab.hardware.kernel_database import with_database_gemms

        curves, gemm_rows = with_database_gemms(curves, gpu.name, file=file)
    if cfg.precision == "fp8" and curves.fp8_floor_s is None:
        from simlab.common.errors import InputError

        raise InputError(f"no fp8 kernel curve for {gpu.name} ({curves.source})", file=file,
                         field="hardware.precision", value="fp8", valid="bf16, or a GPU with fp8 tensor cores")
    # the roofline of the same layout: its KV capacity and drafters' host times; its refusal (a model that does not
    # fit, an expert-parallel degree that does not divide the experts) is this table's (a config's model is named by
    # its path)
    roofline = required_roofline(gpu_reference(gpu), model.name, cfg.stack, tp, cfg.precision, cfg.kv_precision, ep,
                                 file=file)
    given = cfg.step_overhead_s is not None and cfg.request_overhead_s is not None
    fitted = None if given else engine_time(cfg.stack)
    step_s = fitted["step_overhead_s"] if cfg.step_overhead_s is None else cfg.step_overhead_s
    request_s = fitted["request_overhead_s"] if cfg.request_overhead_s is None else cfg.request_overhead_s

    q = queries_per_request

    def cell(batch: int, context: int) -> float:
        requests = batch / q  # (a cell below q tokens: a fraction of a request, read between the grid's points)
        ops = decode_operations(model, num_requests=requests, queries_per_request=q,
                                context_per_request=context / requests, tensor_parallel=tp, expert_parallel=ep,
                                precision=cfg.precision, kv_precision=cfg.kv_precision)
        return price(ops, curves)["total"] + step_s + request_s * requests

    rows = [[cell(b, c) for b in BATCH_TOKENS] for c in CONTEXT_TOKENS]
    forward_s = [step_s + price(forward_token_operations(model, tokens=m, tensor_parallel=tp, expert_parallel=ep,
                                                         precision=cfg.precision, kv_precision=cfg.kv_precision),
                                curves)["total"]
                 for m in PREFILL_TOKENS]
    pair_s, window_pair_s = prefill_pair_s(model, curves, tp)
    window = model.hybrid.window_tokens if model.hybrid is not None and model.hybrid.num_window_layers else None
    layout = MoeLayout.of(model, tp, ep)
    from simlab.hardware.stacks import get_stack

    graphs = list(get_stack(cfg.stack).capture_sizes)  # a decode step pads to the stack's next CUDA graph
    return TableHardware(
        kind="table", cuda_graph_buckets=graphs or None,
        name=f"operations:{gpu.name}_{file_label(model.name)}_{cfg.precision}_tp{tp}" + (f"_ep{ep}" if ep > 1 else "")
                           + (f"_kv{cfg.kv_precision}" if cfg.kv_precision != "bf16" else "")
                           + ("_dbgemm" if gemm_rows else "")
                           + (f"_q{q}" if q > 1 else ""),
        verify={"batch_tokens": list(BATCH_TOKENS), "context_tokens": list(CONTEXT_TOKENS), "step_s": rows},
        prefill={"batch_tokens": list(PREFILL_TOKENS), "step_s": forward_s, "attention_pair_s": pair_s,
                 "window_pair_s": window_pair_s if window else 0.0, "window_tokens": window},
        kv_cache_tokens=kv_tokens(roofline),
        draft=drafter_curves(model, curves, roofline.params, tp, cfg.precision, cfg.kv_precision, ep),
        provenance={"source": "the model's operations priced by kernel curves", "stack": cfg.stack,
                    **({"stack_version": cfg.stack_version} if cfg.stack_version else {}),
                    "tensor_parallel": tp, "num_gpus": layout.num_gpus,
                    **({"expert_parallel": ep, "attention_groups": layout.attention_groups} if ep > 1 else {}),
                    "curves": curves.source,
                    "priced_by": {**measured_families(curves, cfg.precision, cfg.kv_precision,
                                                      layout.uses_alltoall),
                                  **({"gemm": f"aiconfigurator-core's rows ({gemm_rows}), the curves outside them"}
                                     if gemm_rows else {})},
                    "engine_overhead": {"step_overhead_s": step_s, "request_overhead_s": request_s,
                                        "from": "the scenario" if given else
                                        {"stack": fitted["stack"], "fitted_on": list(fitted["fitted_on"])}},
                    "drafter": "the drafters' forwards as the target's layer operations (simlab.hardware."
                                "drafter_operations), with the roofline's host times per forward and round, and "
                                "their layers' attention over the drafting requests' context",
                    "kv_cache_tokens": "the roofline's",
                    "kv_roofline": kv_source(roofline),
                    "cell": f"the GPU time of B / {q} requests of {q} queries over C x {q} / B context tokens each + "
                            f"step + B / {q} x request overhead" if q > 1 else
                            "decode_step GPU time (B sequences of C / B tokens) + step + B x request overhead",
                    "prefill": "a chunk joins its step's forward: the token operations at M = decode + chunk "
                               "tokens, and its attention pairs"})


def build_operations(cfg: OperationsHardware, *, file: Optional[str] = None,
                     queries_per_request: int = 1) -> TableCostModel:
    """A :class:`TableCostModel` from the operation model's step costs for ``cfg`` (verify cells of
    ``queries_per_request`` tokens a request), carrying the stack's release (``stack_version``, else the newest)."""
    from simlab.hardware.releases import get_release
    from simlab.hardware.specs import get_gpu

    release = get_release(cfg.stack, cfg.stack_version, file=file, field="hardware.stack_version")
    cost = TableCostModel(table_config(cfg, file, queries_per_request), source=file)
    cost.operations_config = (cfg, file)
    # the stack's release: its engine defaults and speculative rules, on this GPU (simlab.arm_engines)
    cost.release, cost.release_named = release, cfg.stack_version is not None
    cost.gpu = get_gpu(cfg.gpu, file=file, field="hardware.gpu")
    return cost


def with_verify_queries(cost, queries_per_request: int):
    """``cost`` for an arm whose requests verify ``queries_per_request`` tokens a step: a ``kind: operations`` table
    rebuilt with verify cells of that many queries a request; any other cost model as it is."""
    given = getattr(cost, "operations_config", None)
    if given is None or queries_per_request <= 1:
        return cost
    cfg, file = given
    return build_operations(cfg, file=file, queries_per_request=queries_per_request)
