"""From an ``acceptance:`` config to the :class:`AcceptanceSpec` the engine draws from, and coverage checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Sequence, TypeVar, Union

import numpy as np
from pydantic import BaseModel
from scipy.special import logit

from simlab.acceptance.presets import load_preset, shipped_presets
from simlab.acceptance.spec import ANY_DOMAIN, AcceptanceSpec
from simlab.common.errors import InputError
from simlab.config.acceptance import (
    AcceptanceSetting,
    ConfidenceConfig,
    HeterogeneityConfig,
    IIDAcceptance,
    PositionalAcceptance,
    PresetAcceptance,
    TraceAcceptance,
)

DRAFT_METHODS = ("mtp", "eagle3", "dflash", "dspark", "draft_model", "ngram", "suffix")
IID_POSITIONS = 16
_M = TypeVar("_M", bound=BaseModel)


def build_acceptance(cfg: AcceptanceSetting, *, file: Union[str, Path, None]) -> AcceptanceSpec:
    """Resolve the config: iid and positional curves become logits; a preset is loaded (by name or path,
    relative to ``file``'s folder). Heterogeneity and confidence fields given in the config override the
    kind's defaults field by field (zero and a perfect head for iid/positional, the preset's own values).

    A string is a shipped preset's name or a path to an acceptance file (:mod:`simlab.acceptance.files`).

    Methods the config gives no curves for among ``draft_model``, ``ngram`` and ``suffix`` take simlab's shipped
    ones (:mod:`simlab.acceptance.other_drafters`; an ``iid`` config covers every method itself)."""
    return _with_other_drafters(_build(cfg, file=file))


def _with_other_drafters(spec: AcceptanceSpec) -> AcceptanceSpec:
    """``spec`` with simlab's shipped curves for the other drafters it gives none for."""
    from simlab.acceptance.other_drafters import OTHER_METHODS, shipped_curves

    missing = [m for m in OTHER_METHODS if m not in spec.base_logit]
    if not missing:
        return spec
    curves = shipped_curves()
    base = dict(spec.base_logit)
    match = dict(spec.match_prob)
    for method in missing:
        shipped = curves[method]
        with np.errstate(divide="ignore"):
            base[method] = {domain: logit(values) for domain, values in shipped.conditional.items()}
        if method != "draft_model":
            match[method] = dict(shipped.match)
    source = {**spec.source, "other_drafters": {m: curves[m].source for m in missing}}
    return dataclasses.replace(spec, base_logit=base, match_prob=match, source=source,
                               plain_methods=spec.plain_methods | frozenset(missing))


def _build(cfg: AcceptanceSetting, *, file: Union[str, Path, None]) -> AcceptanceSpec:
    if isinstance(cfg, str):
        from simlab.acceptance.files import resolve_acceptance

        resolved, path = resolve_acceptance(cfg, file=file)
        spec = _build(resolved, file=path if path is not None else file)
        return spec if path is None else dataclasses.replace(spec, source={**spec.source, "file": str(path)})
    if isinstance(cfg, IIDAcceptance):
        curve = np.full(IID_POSITIONS, float(logit(cfg.alpha)))
        base = {m: {ANY_DOMAIN: curve.copy()} for m in DRAFT_METHODS}
        return _spec(base, HeterogeneityConfig(), ConfidenceConfig(), cfg, {"kind": "iid", "alpha": cfg.alpha})
    if isinstance(cfg, PositionalAcceptance):
        base = {
            method: {domain: logit(np.asarray(values, dtype=float)) for domain, values in domains.items()}
            for method, domains in cfg.methods.items()
        }
        source = {"kind": "positional"}
        if cfg.provenance is not None:
            source["provenance"] = cfg.provenance
        return _spec(base, HeterogeneityConfig(), ConfidenceConfig(), cfg, source)
    if isinstance(cfg, PresetAcceptance):
        base_dir = Path(file).resolve().parent if file is not None else None
        preset = load_preset(cfg.name, base_dir=base_dir, file=file)
        source = {"kind": "preset", "name": preset.name, "path": str(preset.path), "provenance": preset.provenance}
        return _spec(preset.base_logit, preset.heterogeneity, preset.confidence, cfg, source)
    if isinstance(cfg, TraceAcceptance):
        from simlab.acceptance.replay import load_recorded

        base_dir = Path(file).resolve().parent if file is not None else Path.cwd()
        path = Path(cfg.path) if Path(cfg.path).is_absolute() else base_dir / cfg.path
        if not path.is_file():
            raise InputError("no such file", file=file, field="acceptance.path", value=cfg.path,
                             valid="a specdecode-bench JSON-lines file, relative to the scenario file")
        recorded = load_recorded(path, cfg.format, cfg.proposer, file=file, field="acceptance")
        rates = recorded.conditional_rates()
        base = {m: {ANY_DOMAIN: logit(rates)} for m in DRAFT_METHODS}
        source = {"kind": "trace", **recorded.source, "pooled_conditional_rates": rates.round(6).tolist()}
        spec = _spec(base, HeterogeneityConfig(), ConfidenceConfig(), cfg, source)
        return dataclasses.replace(spec, recorded=recorded)
    raise TypeError(f"not an acceptance config: {cfg!r}")


def _spec(base, het_default, conf_default, cfg, source) -> AcceptanceSpec:
    return AcceptanceSpec(
        base_logit=base,
        heterogeneity=_override(het_default, cfg.heterogeneity),
        confidence=_override(conf_default, cfg.confidence),
        calibration_samples=cfg.calibration_samples,
        source=source,
    )


def _override(default: _M, given: Optional[_M]) -> _M:
    """``default`` with the fields the user wrote in ``given`` replaced."""
    if given is None:
        return default
    return type(default).model_validate({**default.model_dump(), **given.model_dump(include=given.model_fields_set)})


def check_coverage(
    spec: AcceptanceSpec,
    arms: Sequence[tuple[str, Optional[int]]],
    domains: Sequence[str],
    *,
    file: Union[str, Path, None],
) -> None:
    """Raise InputError unless every (method, gamma) arm has a curve of at least gamma positions for every
    workload domain. Arms with method ``none`` need nothing."""
    kind = spec.source.get("kind")
    for method, gamma in arms:
        if method == "none":
            continue
        if method not in spec.base_logit:
            covered = ", ".join(spec.base_logit) or "none"
            if kind == "preset":
                raise InputError(
                    f"preset {spec.source.get('name')!r} has no curves for method {method!r}",
                    file=file, field="acceptance.name", value=spec.source.get("name"),
                    valid=f"a preset covering {method}, or an arm method among {covered}",
                )
            raise InputError(
                f"missing: an arm uses method {method!r}", file=file, field=f"acceptance.methods.{method}",
                valid=f"add a curve for {method} (methods given: {covered})",
            )
        by_domain = spec.base_logit[method]
        for domain in domains:
            if domain in by_domain:
                curve = by_domain[domain]
            elif ANY_DOMAIN in by_domain:
                curve = by_domain[ANY_DOMAIN]
            else:
                raise _unknown_domain(spec, method, domain, file)
            if gamma is not None and len(curve) < gamma:
                field = "acceptance.name" if kind == "preset" else f"acceptance.methods.{method}.{domain}"
                raise InputError(
                    f"{len(curve)} positions for {method} on {domain}, too short for an arm with gamma {gamma}",
                    file=file, field=field, valid=f"at least {gamma} conditional acceptances",
                )


def _unknown_domain(spec: AcceptanceSpec, method: str, domain: str, file) -> InputError:
    known = ", ".join(d for d in spec.base_logit[method] if d != ANY_DOMAIN)
    if spec.source.get("kind") == "preset":
        return InputError(
            f"a workload domain that preset {spec.source.get('name')!r} does not know",
            file=file, field="workload.domains", value=domain, valid=known,
        )
    return InputError(
        f"no curve for workload domain {domain!r}", file=file, field=f"acceptance.methods.{method}",
        valid=f"domains given: {known}; add {domain}, or a '*' entry for every domain",
    )


__all__ = ["DRAFT_METHODS", "build_acceptance", "check_coverage", "shipped_presets"]
