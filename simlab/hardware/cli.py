"""``simlab profiles``: list the shipped hardware profiles, GPUs and models; export any cost model as a file (``fit``
and ``check`` are mounted by simlab/cli.py from :mod:`simlab.calibration.cli`:
they run the engine).

Mounted by the main command line as ``simlab profiles``. Bad input raises :class:`InputError` (exit 2 there).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from simlab.common.errors import InputError

if TYPE_CHECKING:
    from simlab.config.hardware import HardwareConfig
    from simlab.hardware.base import CostModel

# the cost-model modules (numpy, pydantic) are imported inside the commands, so that `simlab --help` stays fast

ROOFLINE_PREFIX = "roofline:"
SOURCE_HELP = (
    "What to export: a shipped profile name (h100-sxm_qwen3-8b), a path to a profile or scenario file, "
    "or a roofline as roofline:GPU:MODEL (roofline:h100-sxm:qwen3-8b)."
)

profiles_app = typer.Typer(
    name="profiles",
    help="Hardware cost profiles: list what ships, export any cost model as a table or an SGLang SPS table, fit "
         "your own measurements.",
    no_args_is_help=True,
    add_completion=False,
)


class ExportFormat(str, Enum):
    table = "table"
    sglang_sps = "sglang-sps"


@profiles_app.command("list")
def list_command() -> None:
    """Show the shipped profiles, and the GPUs and models a roofline can combine."""
    from rich.console import Console
    from rich.table import Table

    from simlab.hardware.calibration import fit_gpu
    from simlab.hardware.catalog import SHIPPED_GPUS
    from simlab.hardware.profiles import load_profile, shipped_profiles
    from simlab.hardware.specs import GPUS, MODELS

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    profiles = Table(title="Shipped profiles (hw_profiles/; use the name as `hardware:`)")
    profiles.add_column("name", no_wrap=True)
    for column in ("stack", "weights / KV", "B=1 step ms", "kv_cache_tokens", "source"):
        profiles.add_column(column)
    for name, path in shipped_profiles().items():
        try:
            cm = load_profile(path)
        except InputError as err:
            profiles.add_row(name, "-", "-", "-", "-", f"unreadable: {err}")
            continue
        provenance = cm.config.provenance or {}
        stack, precision = _stack_and_precision(provenance)
        profiles.add_row(name, stack, precision, f"{cm.verify_s(1) * 1e3:.2f}", str(cm.kv_cache_tokens() or "-"),
                         _source(provenance))
    console.print(profiles)
    gpus = Table(title="GPUs (hardware: {kind: roofline, gpu: NAME, model: NAME}; hw_profiles/gpus/, or gpu: FILE)")
    gpus.add_column("gpu", no_wrap=True)
    for column in ("HBM TB/s", "bf16 TFLOP/s", "fp8", "fp4", "memory GiB", "link GB/s/dir", "profiles", "fit",
                   "description"):
        gpus.add_column(column)
    for spec in GPUS.values():
        gpus.add_row(spec.name, f"{spec.hbm_bytes_per_s / 1e12:g}", f"{spec.bf16_flop_per_s / 1e12:g}",
                     _tflops(spec.fp8_flop_per_s), _tflops(spec.fp4_flop_per_s),
                     f"{spec.memory_bytes / 2**30:g}", f"{spec.nvlink_bytes_per_s / 1e9:g}",
                     "yes" if spec.name in SHIPPED_GPUS else "no", fit_gpu(spec) if fit_gpu(spec) == spec.name
                     else f"{fit_gpu(spec)}'s", spec.description)
    console.print(gpus)
    from simlab.hardware.stacks import STACKS

    stacks = Table(title="Serving stacks (hardware: {kind: roofline, ..., stack: NAME})")
    for column in ("stack", "engine", "CUDA-graph sizes", "host launch floor"):
        stacks.add_column(column, no_wrap=column == "stack")
    for spec in STACKS.values():
        sizes = spec.capture_sizes
        stacks.add_row(spec.name, spec.engine, f"{len(sizes)} up to {sizes[-1]}" if sizes else "none",
                       f"{spec.host_launch_s * 1e6:g} us/kernel" if spec.host_launch_s else "-")
    console.print(stacks)
    models = Table(title="Models (model: NAME, or a path to a Hugging Face config.json: simlab profiles model PATH)")
    models.add_column("model", no_wrap=True)
    models.add_column("Hugging Face id", no_wrap=True)
    for column in ( "params (B)", "layers", "hidden", "heads / kv", "KV bytes/token"):
        models.add_column(column)
    for cfg in MODELS.values():
        params = f"{cfg.total_params / 1e9:.2f}" + (f" ({cfg.active_params / 1e9:.2f} active)" if cfg.is_moe else "")
        models.add_row(cfg.name, cfg.hf_id, params, str(cfg.num_layers), str(cfg.hidden_size),
                       f"{cfg.num_heads} / {_kv_kind(cfg)}", f"{cfg.kv_bytes_per_token():,.0f}")
    console.print(models)


def _kv_kind(cfg) -> str:
    """The KV heads column: a count, or the attention that caches something else (MLA's latent, V4's
    compressed entries)."""
    if cfg.compressed is not None:
        return f"{cfg.num_kv_heads} (window + CSA/HCA)"
    return "MLA" if cfg.is_mla else str(cfg.num_kv_heads)


DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _stack_and_precision(provenance: dict) -> tuple[str, str]:
    """The serving stack and the weight / KV precision a profile stands for, from its provenance."""
    from simlab.hardware.profiles import roofline_source

    if provenance.get("generator") == "simlab profile":  # measured with simlab's own kernels (real mode)
        dtype = DTYPES.get(str(provenance.get("dtype")), str(provenance.get("dtype", "-")))
        return "eager", f"{dtype} / {dtype}"
    if not (provenance.get("source") or {}).get("parameters"):
        return "-", "-"
    source = roofline_source(provenance)
    return str(source["stack"]), f"{source['precision']} / {source['kv_precision']}"


def _source(provenance: dict) -> str:
    """Where a profile's numbers come from, in a few words (its provenance)."""
    if provenance.get("measured") is False:
        return ("calibrated roofline (not measured): " + str(provenance["calibration"].get("name"))
                if isinstance(provenance.get("calibration"), dict) else "roofline (not measured)")
    if provenance.get("measured") is True:
        return "fitted to measurements" if provenance.get("generator") == "simlab profiles fit" else "measured"
    return "unstated"


def _tflops(value) -> str:
    return "-" if value is None else f"{value / 1e12:g}"


@profiles_app.command("export")
def export_command(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    out: Path = typer.Option(..., "--out", "-o", help="File to write (atomically)."),
    fmt: ExportFormat = typer.Option(ExportFormat.table, "--format", "-f", help="table (YAML) or sglang-sps (JSON)."),
    tp: Optional[int] = typer.Option(None, "--tp", min=1, help="Tensor parallelism of a roofline source."),
    ep: Optional[int] = typer.Option(None, "--ep", min=1, help="Expert parallelism of a roofline source (a mixture "
                                     "of experts; above --tp: data-parallel attention)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="Weights of a roofline source: bf16, fp8 "
                                            "or fp4."),
    context_tokens: int = typer.Option(
        0, "--context-tokens", min=0, help="sglang-sps: total KV tokens per step the SPS curve is evaluated at."
    ),
    query_tokens: float = typer.Option(
        4.0, "--query-tokens-per-request", min=1.0, help="Query tokens per request assumed for attention FLOPs."
    ),
    max_batch_tokens: int = typer.Option(8192, "--max-batch-tokens", min=1, help="Largest batch size sampled."),
) -> None:
    """Write a cost model as a table file (contract format, with provenance) or SGLang's SPS JSON."""
    from simlab.common.outputs import check_out_file
    from simlab.hardware.export import ExportSettings, is_sps_file, sps_dict, table_dict, write_sps, write_table
    from simlab.hardware.profiles import is_shipped_profile

    source_file = [] if source.startswith(ROOFLINE_PREFIX) or is_shipped_profile(source) else [Path(source)]
    check_out_file(out, inputs=source_file, recognise=is_sps_file if fmt is ExportFormat.sglang_sps else None)
    cost_model = resolve_source(source, tensor_parallel=tp, expert_parallel=ep, precision=precision)
    if fmt is ExportFormat.sglang_sps:
        data = sps_dict(cost_model, context_tokens=context_tokens, query_tokens_per_request=query_tokens,
                        max_batch_tokens=max_batch_tokens)
        write_sps(out, data)
        typer.echo(f"wrote {out}: SGLang SPS table of {cost_model.name}, {len(data['sample_batch_tokens'])} batch "
                   f"sizes up to {data['max_batch_tokens']}, at {context_tokens} context tokens per step"
                   + _context_note(cost_model, context_tokens))
        return
    settings = ExportSettings(max_batch_tokens=max_batch_tokens, query_tokens_per_request=query_tokens)
    write_table(out, table_dict(cost_model, settings, generator="simlab profiles export"))
    typer.echo(f"wrote {out}: cost table of {cost_model.name}")


def _context_note(cost_model: CostModel, context_tokens: int) -> str:
    """For a table measured at some contexts only: say when the SPS context lies outside them."""
    from simlab.hardware.table import TableCostModel

    rows = cost_model.config.verify.context_tokens if isinstance(cost_model, TableCostModel) else None
    if not rows or rows[0] <= context_tokens <= rows[-1]:
        return ""
    return (f" (outside the table's contexts {rows[0]}..{rows[-1]}: the nearest row is used; pass "
            "--context-tokens within them)")


def resolve_source(source: str, *, tensor_parallel: Optional[int] = None,
                   expert_parallel: Optional[int] = None, precision: Optional[str] = None) -> CostModel:
    """The cost model ``source`` names (see ``simlab profiles export --help``)."""
    from simlab.common.resources import is_bare_name
    from simlab.common.schema_errors import validate
    from simlab.common.yaml_file import read_yaml
    from simlab.config.base import StrictModel
    from simlab.config.hardware import HardwareConfig, RooflineHardware  # noqa: F401 (read by the model below)
    from simlab.hardware.profiles import check_is_table, is_shipped_profile
    from simlab.hardware.roofline_build import build_roofline
    from simlab.hardware.specs import GPUS, MODELS

    class _ScenarioHardware(StrictModel):
        """The one part of a scenario file that export reads."""

        hardware: HardwareConfig

    if precision is not None:
        from simlab.hardware.precision import PRECISIONS

        if precision not in PRECISIONS:
            raise InputError("not one of the choices", field="--precision", value=precision,
                             valid=", ".join(PRECISIONS))
    layout = {"tensor_parallel": tensor_parallel, "expert_parallel": expert_parallel, "precision": precision}
    if source.startswith(ROOFLINE_PREFIX):
        parts = source[len(ROOFLINE_PREFIX):].split(":")
        if len(parts) != 2 or not all(parts):
            raise InputError("a roofline source is roofline:GPU:MODEL", field="SOURCE", value=source,
                             valid=f"GPU one of {', '.join(GPUS)}; MODEL one of {', '.join(MODELS)}")
        cfg = RooflineHardware(kind="roofline", gpu=parts[0], model=parts[1], tensor_parallel=tensor_parallel or 1,
                               expert_parallel=expert_parallel or 1, precision=precision or "bf16")
        return build_roofline(cfg, field="SOURCE")
    if is_bare_name(source) or is_shipped_profile(source):
        return _build(source, layout, base_dir=Path.cwd(), file=None, field="SOURCE")
    path = Path(source)
    data = read_yaml(path, what="profile or scenario file")
    if isinstance(data, dict) and "hardware" in data:
        hardware = validate(_ScenarioHardware, {"hardware": data["hardware"]}, file=path).hardware
        return _build(hardware, layout, base_dir=path.parent, file=path, field="hardware")
    if isinstance(data, dict) and data.get("kind") == "roofline":
        cfg = validate(RooflineHardware, data, file=path)
        return _build(cfg, layout, base_dir=path.parent, file=path, field="")
    check_is_table(data, file=path)
    return _build(str(path.resolve()), layout, base_dir=path.parent, file=path, field="")


def _build(hardware: HardwareConfig, layout: dict[str, Any], *, base_dir: Path, file: Optional[Path],
           field: str) -> CostModel:
    """The cost model of ``hardware``, with ``layout`` (--tp, --ep, --precision; None: as given) applied to a
    roofline."""
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware.profiles import build_cost_model

    flags = {"tensor_parallel": "--tp", "expert_parallel": "--ep", "precision": "--precision"}
    for name, value in layout.items():
        if value is None:
            continue
        flag = flags[name]
        if not isinstance(hardware, RooflineHardware):
            raise InputError(f"{flag} applies only to a roofline source", field=flag, value=value,
                             valid=f"leave it out, or export {ROOFLINE_PREFIX}GPU:MODEL {flag} ...")
        hardware = hardware.model_copy(update={name: value})
    return build_cost_model(hardware, base_dir=base_dir, file=file, field=field)
