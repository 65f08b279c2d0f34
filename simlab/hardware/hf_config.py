"""Reading a Hugging Face ``config.json``: the file, its ``text_config``, and field access that names what is wrong.

The field names it reads, per architecture, are listed in docs/models.md; simlab.hardware.model_description
turns a config into counts and into the shape the roofline prices.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simlab.common.errors import InputError

BF16_BYTES = 2
FP32_BYTES = 4
FULL, SLIDING, CHUNKED, LINEAR, MAMBA, MLA = ("full_attention", "sliding_attention", "chunked_attention",
                                              "linear_attention", "mamba", "mla")
KV_KINDS = (FULL, MLA)  # the layers whose cache grows with every token of context


@dataclass(frozen=True)
class LayerCounts:
    """Parameters of one layer's parts (attention or mixer, MLP), and what it keeps per token or per request."""

    mixer_params: int
    mlp_params: int
    mlp_active_params: int
    kv_bytes_per_token: int = 0  # full attention (and MLA): bytes one token of context adds, bf16
    state_bytes_per_request: int = 0  # linear attention, Mamba, a sliding window at its full window


class ConfigReader:
    """Field access on a config (its ``text_config`` where it has one) that names what is missing or wrong."""

    def __init__(self, data: dict, file: str):
        self.file = file
        self.prefix = ""
        self.outer = data
        if isinstance(data.get("text_config"), dict):
            self.data = {**{k: v for k, v in data.items() if k in ("quantization_config",)}, **data["text_config"]}
            self.prefix = "text_config."
        else:
            self.data = data

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def get(self, name: str, default: Any = None) -> Any:
        value = self.data.get(name)
        return default if value is None else value

    def integer(self, name: str, *alternatives: str, default: Optional[int] = None, minimum: int = 1) -> int:
        for key in (name, *alternatives):
            value = self.data.get(key)
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                    raise self.error(key, value, f"an integer >= {minimum}")
                return value
        if default is not None:
            return default
        names = " or ".join((name, *alternatives))
        raise InputError(f"the config lacks {names}, which the cost of a step needs", file=self.file,
                         field=self.prefix + name, value="(missing)", valid=f"an integer >= {minimum}")

    def error(self, name: str, value: Any, valid: str) -> InputError:
        return InputError("a config field simlab cannot read", file=self.file, field=self.prefix + name,
                          value=json.dumps(value)[:80], valid=valid)


def find_config_file(text: str, base_dir: Optional[Path] = None) -> Optional[Path]:
    """The config.json a ``model:`` value names (a file or a folder holding one), or None when it names none."""
    path = Path(text).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if path.is_dir():
        path = path / "config.json"
    return path.resolve() if path.is_file() else None


def read_config_file(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not a readable JSON file ({exc})", file=str(path), field="", value=path.name,
                         valid="a Hugging Face config.json") from None
    if not isinstance(data, dict):
        raise InputError("a config.json holds one JSON object", file=str(path), field="", value=type(data).__name__,
                         valid="a Hugging Face config.json")
    return data
