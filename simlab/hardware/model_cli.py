"""``simlab profiles model MODEL [--json]``: what a model's config declares (simlab.hardware.hf_config).

Mounted by simlab/cli.py under ``simlab profiles``. Bad input raises :class:`InputError` (exit 2 there)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

MODEL_HELP = ("A catalogue name (qwen3-8b; `simlab profiles list`), a path to a Hugging Face config.json, or a "
              "folder holding one.")


def describe_model(text: str):
    """The :class:`~simlab.hardware.hf_config.ModelDescription` of a catalogue name or a config path."""
    from simlab.common.errors import InputError
    from simlab.hardware.hf_config import find_config_file
    from simlab.hardware.model_description import catalogue_config, describe_config, describe_file
    from simlab.hardware.specs import MODELS, get_model

    path = find_config_file(text, Path.cwd())
    if path is not None:
        return describe_file(path)
    try:
        model = get_model(text, field="model")
    except InputError:
        raise InputError("unknown model", field="MODEL", value=text,
                         valid=", ".join(MODELS) + ", or a path to a Hugging Face config.json or a folder with "
                               "one") from None
    return describe_config(catalogue_config(model), file=f"catalogue:{model.name}", name=model.name)


def pricing(text: str) -> dict[str, str]:
    """Which cost models price the model (``yes``), or why not: the roofline (``kind: roofline``) and the operation
    model (``kind: operations``, docs/operations.md)."""
    from simlab.common.errors import InputError
    from simlab.hardware.hf_config import find_config_file, read_config_file
    from simlab.hardware.model_description import roofline_shape
    from simlab.hardware.specs import get_model

    path = find_config_file(text, Path.cwd())
    try:
        shape = (roofline_shape(read_config_file(path), file=str(path), name=str(path)) if path is not None
                 else get_model(text, field="model"))
    except InputError as err:
        reason = f"no: {err.problem.split(' (`simlab profiles model`')[0]} ({err.field})"
        return {"roofline": reason, "operations": reason}
    operations = "yes"
    if shape.compressed is not None:
        operations = "no: compressed attention is not operations yet (docs/operations.md)"
    return {"roofline": "yes", "operations": operations}


def model_command(
    model: str = typer.Argument(..., help=MODEL_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (the fields of docs/models.md)."),
) -> None:
    """What a model's config declares: parameters (total, active), weight bytes, KV bytes per token of context,
    the state each request holds whatever its length, and its layers by kind."""
    described = describe_model(model)
    priced = pricing(model)
    if as_json:
        typer.echo(json.dumps({**described.as_dict(), "priced_by": priced}, indent=2))
        return
    d = described
    lines = [f"{d.name} ({d.model_type}; {d.source})",
             f"  parameters       {d.params_total / 1e9:,.2f} B in all, {d.params_active / 1e9:,.2f} B active a token "
             f"(input embedding {d.params_embedding / 1e9:,.2f} B" + (f"; MTP layers {d.params_mtp / 1e9:,.2f} B more"
                                                                     if d.params_mtp else "") + ")",
             f"  weights          {d.weight_bytes / 2**30:,.1f} GiB ({d.quantization})",
             f"  KV per token     {d.kv_bytes_per_token:,} bytes of context (full-attention layers, bf16)",
             f"  state a request  {d.state_bytes_per_request / 2**20:,.2f} MiB whatever its length "
             f"({d.state_bytes_per_request:,} bytes: windows, linear-attention and SSM states)",
             "  layers           " + ", ".join(f"{n} {k}" for k, n in d.layers.items()),
             "  MLPs             " + ", ".join(f"{n} {k}" for k, n in d.mlp_layers.items())]
    lines += [f"  note             {n}" for n in d.notes]
    lines += [f"  kind: roofline   {priced['roofline']}", f"  kind: operations {priced['operations']}"]
    typer.echo("\n".join(lines))
