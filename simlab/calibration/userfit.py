"""``simlab profiles fit``: turn your own benchmark numbers into a table profile with the calibrated smoothing.

The measurements file is a CSV, one measurement a row (docs/calibration.md, "Fitting your own measurements"):

====================  ==========================================================================================
column                meaning
====================  ==========================================================================================
``kind``              optional, default ``verify``: ``verify``, ``prefill``, ``draft_parallel``,
                      ``draft_autoregressive`` or ``draft_head``
``batch_tokens``      verify: decode/verify tokens in the step; prefill: prompt tokens of the chunk;
                      draft_parallel: block tokens (requests x gamma); draft_autoregressive, draft_head: requests
``context_tokens``    verify: total KV tokens the step's requests hold (may be empty for other kinds)
``step_ms``           the measured time in milliseconds (a median, say)
====================  ==========================================================================================

Verify rows are fitted with ``step = knee(a, s x B, w) + k x C`` (:mod:`simlab.hardware.knee`: a fixed time ``a``
below the knee, ``s`` seconds per token beyond it, the knee width ``w``, ``k`` seconds per context token); each
drafter kind with four or more sizes with ``knee(a, s x T, w)``, with fewer as measured (running maximum); prefill
as one time per token. The fit is least squares on log residuals; its residuals are stated in the profile's
provenance. The table samples the fitted curves only within the measured ranges (a table is flat beyond them).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from simlab.common.errors import InputError
from simlab.common.version import __version__
from simlab.calibration.stages.lsq import error_summary, fit_log, rounded
from simlab.hardware.knee import MAX_KNEE_WIDTH, knee_array

GENERATOR = "simlab profiles fit"
KINDS = ("verify", "prefill", "draft_parallel", "draft_autoregressive", "draft_head")
DRAFT_ENTRIES = {"draft_parallel": "parallel", "draft_autoregressive": "autoregressive",
                 "draft_head": "sequential_head"}
REQUIRED = ("batch_tokens", "context_tokens", "step_ms")
MIN_VERIFY_SIZES = 3
MIN_CURVE_SIZES = 4
MODEL_FORM = (
    "step_s = knee(a, s * batch_tokens, w) + k * context_tokens, knee(a, b, w) = (a + b + sqrt((a - b)^2 + w a b)) / 2"
)


@dataclass(frozen=True)
class Measurements:
    """The rows of a measurements file, validated: kind, batch tokens, context tokens (0 when empty), seconds."""

    path: Path
    kind: np.ndarray
    batch_tokens: np.ndarray
    context_tokens: np.ndarray
    seconds: np.ndarray

    def select(self, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        mask = self.kind == kind
        return self.batch_tokens[mask], self.context_tokens[mask], self.seconds[mask]


def read_measurements(path: str | Path) -> Measurements:
    """Read and check a measurements CSV; any problem is an :class:`InputError` naming the file, row and column."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such measurements file", file=path, valid="a CSV with columns "
                         + ", ".join(REQUIRED) + " (and optionally kind)")
    try:
        frame = pd.read_csv(path, comment="#", skipinitialspace=True, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable CSV ({str(exc).splitlines()[0]})", file=path,
                         valid="a CSV with a header row: " + ", ".join(REQUIRED)) from None
    frame.columns = [str(c).strip() for c in frame.columns]
    for column in REQUIRED:
        if column not in frame.columns:
            raise InputError("missing column", file=path, field=column, valid="a header with "
                             + ", ".join(REQUIRED) + " (and optionally kind)")
    if frame.empty:
        raise InputError("holds no measurements", file=path, valid="one row per measurement under the header")
    kinds = (frame["kind"].str.strip() if "kind" in frame.columns else pd.Series("verify", index=frame.index))
    kinds = kinds.replace("", "verify")
    rows: dict[str, list[float]] = {"batch_tokens": [], "context_tokens": [], "step_ms": []}
    for index, kind in kinds.items():
        line = int(index) + 2  # the header is line 1
        if kind not in KINDS:
            raise InputError("unknown kind", file=path, field=f"line {line}, kind", value=kind, valid=", ".join(KINDS))
        for column in REQUIRED:
            text = str(frame.at[index, column]).strip()
            if column == "context_tokens" and text == "" and kind != "verify":
                rows[column].append(0.0)
                continue
            try:
                value = float(text)
            except ValueError:
                raise InputError("not a number", file=path, field=f"line {line}, {column}", value=text,
                                 valid=_valid(column)) from None
            if not np.isfinite(value) or (value < 0 if column == "context_tokens" else value <= 0):
                raise InputError("out of range", file=path, field=f"line {line}, {column}", value=text,
                                 valid=_valid(column))
            rows[column].append(value)
    return Measurements(path, kinds.to_numpy(dtype=str), np.asarray(rows["batch_tokens"]),
                        np.asarray(rows["context_tokens"]), np.asarray(rows["step_ms"]) * 1e-3)


def _valid(column: str) -> str:
    return {"batch_tokens": "a positive number of tokens (or requests, for draft rows)",
            "context_tokens": "a number of tokens >= 0 (empty only on rows that are not verify)",
            "step_ms": "a positive time in milliseconds"}[column]


def _knee_fit(tokens: np.ndarray, seconds: np.ndarray, context: Optional[np.ndarray]
              ) -> tuple[dict, np.ndarray, dict]:
    """Fit ``knee(a, s T, w) (+ k C)``; returns the parameters, the fitted values at the measured points and the
    parameters' standard errors (from the residual variance)."""
    small, large = seconds[tokens == tokens.min()].min(), seconds[tokens == tokens.max()].max()
    x0 = [small, max(large / tokens.max(), 1e-12), 1.0]
    lower, upper = [1e-9, 0.0, 0.0], [10.0 * seconds.max(), 10.0 * seconds.max(), MAX_KNEE_WIDTH]
    if context is not None:
        x0.append(max(seconds.max() / max(context.max(), 1.0) * 0.1, 1e-15))
        lower.append(0.0)
        upper.append(10.0 * seconds.max() / max(context.max(), 1.0))

    def predict(x: np.ndarray, t: np.ndarray = tokens, c: Optional[np.ndarray] = context) -> np.ndarray:
        value = knee_array(x[0], x[1] * t, x[2])
        return value + x[3] * c if c is not None else value

    result = fit_log(predict, seconds, x0, lower, upper)
    names = ["fixed_s", "per_token_s", "knee_width"] + (["per_context_token_s"] if context is not None else [])
    params = dict(zip(names, (float(v) for v in result.x)))
    return params, predict(result.x), dict(zip(names, (float(v) for v in result.standard_errors)))


def evaluate(params: dict, tokens: np.ndarray, context: Any = 0.0) -> np.ndarray:
    """A fitted curve at ``tokens`` (and ``context`` for a verify fit)."""
    value = knee_array(params["fixed_s"], params["per_token_s"] * tokens, params["knee_width"])
    return value + params.get("per_context_token_s", 0.0) * np.asarray(context, dtype=float)


def grid(low: float, high: float) -> list[int]:
    """Integer sizes from ``low`` to ``high``: both ends, powers of two and one-and-a-half powers of two between."""
    points = {int(low), int(high)}
    for k in range(0, 40):
        for v in (2**k, 3 * 2**k // 2):
            if low < v < high:
                points.add(v)
    return sorted(points)


def _residual(name: str, fitted: np.ndarray, measured: np.ndarray, labels: list[str]) -> dict[str, Any]:
    rel = fitted / measured - 1.0
    worst = np.argsort(-np.abs(rel))[:3]
    return {"curve": name, **error_summary(fitted, measured),
            "worst": [{"row": labels[i], "fitted_over_measured": rounded(1.0 + rel[i], 4)} for i in worst]}


def _labels(kinds: str, tokens: np.ndarray, context: Optional[np.ndarray] = None) -> list[str]:
    if context is None:
        return [f"{kinds} {int(t)}" for t in tokens]
    return [f"{kinds} B={int(t)} C={int(c)}" for t, c in zip(tokens, context)]


def _verify(m: Measurements, provenance: dict) -> dict[str, Any]:
    tokens, context, seconds = m.select("verify")
    if np.unique(tokens).size < MIN_VERIFY_SIZES:
        raise InputError(f"needs verify rows at {MIN_VERIFY_SIZES} or more distinct batch_tokens to fit the knee",
                         file=m.path, field="batch_tokens", value=np.unique(tokens).size,
                         valid=f"verify rows at {MIN_VERIFY_SIZES} or more batch sizes (e.g. 1, 64, 512, 4096)")
    with_context = np.unique(context).size >= 2
    params, fitted, errors = _knee_fit(tokens, seconds, context if with_context else None)
    provenance["fit"]["verify"] = {**{k: rounded(v) for k, v in params.items()},
                                   "standard_errors": {k: rounded(v, 3) for k, v in errors.items()}}
    provenance["residuals"].append(_residual("verify", fitted, seconds, _labels("verify", tokens, context)))
    batch = grid(tokens.min(), tokens.max())
    b = np.asarray(batch, dtype=float)
    if not with_context:
        return {"batch_tokens": batch, "step_s": [rounded(v) for v in evaluate(params, b)]}
    rows = [int(context.min()), int(context.max())]  # the fit is affine in context: two rows are exact
    return {"batch_tokens": batch, "context_tokens": rows,
            "step_s": [[rounded(v) for v in evaluate(params, b, c)] for c in rows]}


def _draft(m: Measurements, kind: str, provenance: dict) -> Optional[dict[str, Any]]:
    tokens, _, seconds = m.select(kind)
    if tokens.size == 0:
        return None
    sizes = np.unique(tokens)
    if sizes.size >= MIN_CURVE_SIZES:
        params, fitted, errors = _knee_fit(tokens, seconds, None)
        provenance["fit"][kind] = {**{k: rounded(v) for k, v in params.items()},
                                   "standard_errors": {k: rounded(v, 3) for k, v in errors.items()}}
        provenance["residuals"].append(_residual(kind, fitted, seconds, _labels(kind, tokens)))
        points = grid(sizes.min(), sizes.max())
        return {"batch_tokens": points, "step_s": [rounded(v) for v in evaluate(params, np.asarray(points, float))]}
    medians = np.maximum.accumulate([float(np.median(seconds[tokens == s])) for s in sizes])
    provenance["fit"][kind] = f"as measured (fewer than {MIN_CURVE_SIZES} sizes: no fit), running maximum"
    if sizes.size == 1:
        return {"step_s": rounded(medians[0])}
    return {"batch_tokens": [int(s) for s in sizes], "step_s": [rounded(v) for v in medians]}


def _prefill(m: Measurements, provenance: dict) -> dict[str, float]:
    tokens, _, seconds = m.select("prefill")
    if tokens.size == 0:
        provenance["fit"]["prefill"] = "no prefill rows: prefill costs 0 in this table"
        return {"per_token_s": 0.0}
    per_token = float(tokens @ seconds / (tokens @ tokens))  # least squares through the origin
    provenance["fit"]["prefill"] = {"per_token_s": rounded(per_token)}
    provenance["residuals"].append(_residual("prefill", per_token * tokens, seconds, _labels("prefill", tokens)))
    return {"per_token_s": rounded(per_token)}


def fit_profile(m: Measurements, *, name: str, command: Optional[str] = None) -> dict[str, Any]:
    """The ``kind: table`` mapping fitted to ``m``, with the fit and its residuals in ``provenance``."""
    digest = hashlib.sha256(m.path.read_bytes()).hexdigest()
    provenance: dict[str, Any] = {
        "generator": GENERATOR, "simlab_version": __version__,
        "date": datetime.now(timezone.utc).date().isoformat(), "measured": True,
        "note": "fitted to the measurements in the input file; the table holds the fitted curves, not the raw rows",
        "input": {"file": m.path.name, "sha256": digest, "rows": int(m.seconds.size)},
        "model": MODEL_FORM, "fit": {}, "residuals": []}
    if command:
        provenance["command"] = command
    data: dict[str, Any] = {"kind": "table", "name": name, "verify": _verify(m, provenance)}
    draft = {entry: curve for kind, entry in DRAFT_ENTRIES.items() if (curve := _draft(m, kind, provenance))}
    if draft:
        data["draft"] = draft
    data["prefill"] = _prefill(m, provenance)
    data["provenance"] = provenance
    return data
