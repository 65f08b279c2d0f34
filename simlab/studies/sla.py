"""SLA expressions: ``p90_tpot_ms<=12.5,p99_ttft_ms<=2000,median_user_tok_s>=80``.

Each condition is a METRICS key, ``<=`` or ``>=``, and a number; a run meets the SLA when every condition
holds. A metric that is null (no SLO for ``request_goodput``, no speculation for acceptance figures) does not
meet its condition.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

from simlab.common.errors import InputError

OPS = ("<=", ">=")
_CONDITION = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=)\s*([^\s,]+)\s*")
FORMAT = "METRIC<=VALUE or METRIC>=VALUE, comma-separated, e.g. p90_tpot_ms<=12.5,median_user_tok_s>=80"


@dataclass(frozen=True)
class Condition:
    metric: str
    op: str
    value: float

    def holds(self, metrics: dict) -> bool:
        actual = metrics.get(self.metric)
        if actual is None or isinstance(actual, bool) or not isinstance(actual, (int, float)) or math.isnan(actual):
            return False
        return actual <= self.value if self.op == "<=" else actual >= self.value

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"


@dataclass(frozen=True)
class SLA:
    """A conjunction of conditions."""

    conditions: tuple[Condition, ...]

    def meets(self, metrics: dict) -> bool:
        return all(c.holds(metrics) for c in self.conditions)

    def failing(self, metrics: dict) -> list[str]:
        """The conditions ``metrics`` does not meet, as text."""
        return [str(c) for c in self.conditions if not c.holds(metrics)]

    def document(self) -> dict[str, list]:
        """The contract's form: ``{METRIC: [op, value]}``."""
        return {c.metric: [c.op, c.value] for c in self.conditions}

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.conditions)


def parse_sla(text: Optional[str], *, field: str = "--sla") -> SLA:
    """Parse an SLA expression; anything malformed is one :class:`InputError`."""
    if text is None or not text.strip():
        raise InputError("is empty", field=field, value=text or "", valid=FORMAT)
    conditions: list[Condition] = []
    for piece in text.split(","):
        match = _CONDITION.fullmatch(piece)
        if match is None:
            raise InputError("is not a condition", field=field, value=piece.strip(), valid=FORMAT)
        metric, op, number = match.groups()
        try:
            value = float(number)
        except ValueError:
            raise InputError("is not a number", field=field, value=number, valid=FORMAT) from None
        if not math.isfinite(value):
            raise InputError("is not a finite number", field=field, value=number, valid=FORMAT)
        if any(c.metric == metric for c in conditions):
            raise InputError(f"gives {metric} twice", field=field, value=text, valid="each metric once")
        conditions.append(Condition(metric, op, value))
    return SLA(tuple(conditions))


def check_metrics_known(sla: SLA, metrics: dict[str, Any], *, field: str = "--sla") -> None:
    """Every condition names a numeric metric of ``metrics`` (one arm's METRICS from a first run)."""
    numeric = [k for k, v in metrics.items() if v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))]
    for condition in sla.conditions:
        if condition.metric not in numeric:
            raise InputError("is not a numeric METRICS key", field=field, value=condition.metric,
                             valid=", ".join(numeric))
