"""What a study simulated, in words a reader checks first: the model (and whether it is a mixture of experts), the
GPUs, the serving engine and its release, the load and the service objectives. A sweep records one such setting
per point (the hardware or the load may vary), a what-if one for its scenario; the pages' opening sentences and
the verdicts read them (:mod:`simlab.studies.sweep_verdict`, :mod:`simlab.studies.whatif_verdict`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

NO_RELEASE = "no engine release: simlab's default engine limits"


def hardware_setting(hardware: Any, *, base_dir: Path, file: Path) -> dict:
    """A scenario's ``hardware:`` as model, GPU, GPUs per replica, stack and release (``None`` where the
    hardware does not say: a measured table names no GPU)."""
    from simlab.hardware.releases import known_versions

    if isinstance(hardware, str):
        from simlab.common.yaml_file import read_yaml
        from simlab.hardware.profiles import find_profile

        profile = read_yaml(find_profile(hardware, base_dir=base_dir, file=file), what="hardware profile")
        source = ((profile or {}).get("provenance") or {}).get("source") or {}
        params = source.get("parameters") or {}
        return {"source": f"profile {hardware}", "model": source.get("model"), "gpu": source.get("gpu"),
                "gpus_per_replica": _gpus(source), "stack": params.get("stack") or source.get("stack"),
                "release": None, "precision": params.get("precision")}
    hardware = dict(hardware or {})
    kind = hardware.get("kind", "table")
    if kind == "table":
        return {"source": "a cost table", "model": None, "gpu": None, "gpus_per_replica": None, "stack": None,
                "release": None, "precision": None}
    stack = hardware.get("stack", "vllm")
    version = hardware.get("stack_version")
    if version is None and kind == "roofline":
        versions = known_versions(stack)
        version = versions[-1] if versions else None
    return {"source": kind, "model": hardware.get("model"), "gpu": hardware.get("gpu"),
            "gpus_per_replica": _gpus(hardware), "stack": stack, "release": version,
            "precision": hardware.get("precision", "bf16")}


def _gpus(hardware: dict) -> Optional[int]:
    tp, ep = int(hardware.get("tensor_parallel", 1)), int(hardware.get("expert_parallel", 1))
    return max(tp, ep)


def scenario_setting(data: dict, file: str | Path) -> dict:
    """One scenario's setting: :func:`hardware_setting` plus replicas, whether the model is a mixture of experts,
    the workload's kind, its users (closed loop) or its arrival rate in requests/s (open loop, trace), and the
    scenario's ``slo:``."""
    from simlab.common.errors import InputError
    from simlab.config.loading import scenario_from_data
    from simlab.hardware.specs import get_model
    from simlab.workload.build import build_workload

    file = Path(file)
    scenario = scenario_from_data(data, file=file).scenario
    out = hardware_setting(data.get("hardware"), base_dir=file.parent, file=file)
    try:
        out["moe"] = bool(get_model(out["model"]).is_moe) if out["model"] else None
    except InputError:
        out["moe"] = None
    out["replicas"] = scenario.engine.num_replicas
    out["disaggregation"] = (None if scenario.engine.disaggregation is None else
                             {"prefill_replicas": scenario.engine.disaggregation.prefill_replicas,
                              "decode_replicas": scenario.engine.disaggregation.decode_replicas})
    workload = build_workload(scenario.workload, base_dir=file.parent, seed=scenario.seed, file=file)
    out["workload"] = workload.source["kind"]
    if workload.closed_loop is not None:
        out["users"] = workload.closed_loop.concurrency
        out["arrival_rate_rps"] = None
    else:
        duration_s = float(workload.requests.arrival_s[-1])
        num = len(workload.requests.arrival_s)
        out["users"] = None
        out["arrival_rate_rps"] = round((num - 1) / duration_s, 4) if duration_s > 0 and num > 1 else None
    out["slo"] = scenario.slo.model_dump(exclude_none=True) if scenario.slo is not None else {}
    return out


def _distinct(values: Iterable[Any]) -> list[Any]:
    seen: dict[Any, None] = {}
    for value in values:
        if value is not None:
            seen.setdefault(value, None)
    return list(seen)


def _either(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


def engine_text(settings: list[dict]) -> str:
    """The engines of ``settings`` in words: ``vLLM 0.34.0``, or the stack and that no release was simulated."""
    names = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM", "eager": "simlab's eager engine"}
    parts = _distinct(f"{names.get(s['stack'], s['stack'])} {s['release']}" if s.get("release") else
                      (f"{names.get(s['stack'], s['stack'])}'s calibrated costs ({NO_RELEASE})" if s.get("stack")
                       else None) for s in settings)
    return _either(parts) if parts else f"a cost table ({NO_RELEASE})"


def hardware_text(settings: list[dict]) -> str:
    """The model and GPUs of ``settings``: ``qwen3-8b (dense) on H100-SXM, 1 GPU per replica``."""
    models = _distinct(s.get("model") for s in settings)
    moe = _distinct(s.get("moe") for s in settings)
    kind = " (a mixture of experts)" if moe == [True] else " (dense)" if moe == [False] else ""
    gpus = _distinct(str(s["gpu"]).upper() for s in settings if s.get("gpu"))
    per = _distinct(s.get("gpus_per_replica") for s in settings)
    counts = " or ".join(f"{n} GPU{'s' if n != 1 else ''}" for n in per)
    replicas = _distinct(s.get("replicas") for s in settings)
    pools = ("; " + " or ".join(str(r) for r in replicas) + " replicas") if replicas and replicas != [1] else ""
    model = _either(models) if models else "the profile's model"
    where = f" on {_either(gpus)}" if gpus else ""
    return f"{model}{kind}{where}, {counts or 'its GPUs'} per replica{pools}"


def load_text(settings: list[dict]) -> str:
    """The load of ``settings``: ``1 to 256 users (closed loop)`` or ``30 to 67 requests/s``."""
    users = sorted(_distinct(s.get("users") for s in settings))
    rates = sorted(_distinct(s.get("arrival_rate_rps") for s in settings))
    parts = []
    if users:
        parts.append(f"{_span(users)} concurrent user{'s' if users[-1] != 1 else ''} (closed loop)")
    if rates:
        parts.append(f"{_span(rates)} requests/s arriving")
    return " and ".join(parts) or "the scenario's load"


def _span(values: list[float]) -> str:
    low, high = values[0], values[-1]
    return f"{low:.3g}" if low == high else f"{low:.3g} to {high:.3g}"


def slo_text(slo: dict) -> str:
    """``TTFT ≤ 2,000 ms, TPOT ≤ 20 ms`` (empty without an SLO)."""
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2el_ms": "end-to-end latency"}
    return ", ".join(f"{names.get(k, k)} ≤ {v:,.4g} ms" for k, v in slo.items())


def is_moe(settings: list[dict]) -> bool:
    """Whether any setting's model is a mixture of experts."""
    return any(s.get("moe") for s in settings)
