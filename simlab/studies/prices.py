"""GPU prices: the shipped table of public on-demand hourly prices (``data/gpu_prices.yaml``, each row with its
source and date) and a plan's own prices, which win."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

PRICES_FILE = Path(__file__).parent / "data" / "gpu_prices.yaml"


@dataclass(frozen=True)
class GpuPrice:
    """One GPU's price per GPU-hour and where it came from (``plan`` when the plan gave it)."""

    gpu: str
    usd_per_hour: float
    source: str
    date: Optional[str] = None


@lru_cache(maxsize=1)
def shipped_prices() -> dict[str, GpuPrice]:
    """The shipped table, by catalogue GPU name."""
    import yaml

    data = yaml.safe_load(PRICES_FILE.read_text(encoding="utf-8"))
    return {name: GpuPrice(name, float(row["usd_per_hour"]), str(row["source"]), str(row.get("date")))
            for name, row in data["gpus"].items()}


def price_of(gpu: str, usd_per_hour: Optional[float]) -> Optional[GpuPrice]:
    """The plan's price when given, else the shipped one, else None."""
    if usd_per_hour is not None:
        return GpuPrice(gpu, float(usd_per_hour), "plan")
    return shipped_prices().get(gpu)
