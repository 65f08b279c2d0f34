"""Launch commands for a planned deployment, in the engines' own flag names at a named release: ``vllm serve``
with ``--speculative-config '{JSON}'``, and SGLang's ``python -m sglang.launch_server`` with its
``--speculative-*`` flags. One command starts one replica; a deployment of R replicas runs it R times behind a
router (a disaggregated one: its prefill and decode commands, each as many times as its pool's replicas).

The release is the one the plan simulated (plan.json's ``engine.stack_version``) for the engine it planned on,
and the newest simlab knows for the other engine (:mod:`simlab.hardware.releases`). A drafter method the release
does not serve (its ``methods``, with their source) is not emitted: the file says so in a comment instead."""

from __future__ import annotations

import json
import shlex
from typing import Any, Optional

VLLM_METHODS = {"eagle3": "eagle3", "mtp": "mtp", "dflash": "dflash", "dspark": "dspark", "ngram": "ngram",
                "suffix": "suffix", "draft_model": "draft_model"}
SGLANG_ALGORITHMS = {"eagle3": "EAGLE3", "mtp": "NEXTN", "dflash": "DFLASH", "dspark": "DSPARK", "ngram": "NGRAM",
                     "draft_model": "STANDALONE"}
NO_CHECKPOINT = ("mtp", "ngram", "suffix")  # heads inside the target's checkpoint, or no drafter model at all
EAGLE_STYLE = ("eagle3", "mtp")  # SGLang runs these on its EAGLE worker, which takes --speculative-eagle-topk
DEFAULT_MAX_NUM_SEQS = 256  # simlab's EngineConfig defaults, which every deployment runs with unless the plan sets them
DEFAULT_MAX_BATCH_TOKENS = 8192


def launch_release(engine: str, deployment: dict):
    """The :class:`~simlab.hardware.releases.EngineRelease` a launch file for ``engine`` is written for: the one
    the plan simulated where it planned on ``engine``, else ``engine``'s newest known (None: no release known)."""
    from simlab.common.errors import InputError
    from simlab.hardware.releases import get_release

    recorded = ((deployment.get("metrics") or {}).get("engine") or {}).get("stack_version") or ""
    stack, _, version = recorded.partition(" ")
    try:
        return get_release(engine, version if stack == engine and version else None)
    except InputError:
        return get_release(engine, None)


def serves(release, method: str) -> bool:
    """Whether ``release`` serves the drafter ``method`` (True without a release: nothing recorded to check)."""
    return release is None or release.serves(method)


def drafter_placeholder(method: str, hf_id: str) -> str:
    """What a command names when the plan gave no drafter checkpoint."""
    return f"<{method} drafter for {hf_id}>"


def _engine_limits(engine: dict) -> tuple[int, int]:
    return (int(engine.get("max_num_seqs", DEFAULT_MAX_NUM_SEQS)),
            int(engine.get("max_batch_tokens", DEFAULT_MAX_BATCH_TOKENS)))


def draft_model_id(arm: dict) -> str:
    """A draft-model arm's small model as the engines take it: the catalogue model's Hugging Face id, else what the
    arm names (a Hugging Face id or a path)."""
    from simlab.hardware.specs import MODELS

    name = str(arm["draft_model"])
    return MODELS[name.lower()].hf_id if name.lower() in MODELS else name


def vllm_speculative_config(arm: dict, hf_id: str, drafter: Optional[str]) -> Optional[dict]:
    """The ``--speculative-config`` mapping of an arm (None without speculation)."""
    method = arm["method"]
    if method == "none":
        return None
    config: dict[str, Any] = {"method": VLLM_METHODS[method]}
    if method == "draft_model":
        config["model"] = draft_model_id(arm)
        if arm.get("draft_tensor_parallel") is not None:
            config["draft_tensor_parallel_size"] = int(arm["draft_tensor_parallel"])
    elif method not in NO_CHECKPOINT:
        config["model"] = drafter or drafter_placeholder(method, hf_id)
    config["num_speculative_tokens"] = gamma = int(arm["gamma"])
    if method == "ngram":
        for key in ("prompt_lookup_min", "prompt_lookup_max"):
            if arm.get(key) is not None:
                config[key] = int(arm[key])
    if method == "suffix" and arm.get("lookup_depth") is not None:
        config["suffix_decoding_max_tree_depth"] = int(arm["lookup_depth"])
    if arm.get("max_concurrency"):  # vLLM 0.34.0's batch-size schedule: gamma drafts up to N requests, none above
        limit = int(arm["max_concurrency"])
        config["num_speculative_tokens_per_batch_size"] = [[1, limit, gamma], [limit + 1, max(limit + 1, 1 << 16), 0]]
    return config


def vllm_command(hardware: dict, arm: dict, engine: dict, hf_id: str, drafter: Optional[str] = None,
                 role: Optional[str] = None, release=None) -> str:
    """``vllm serve ...`` for one replica (``role``: ``prefill`` or ``decode`` of a disaggregated deployment);
    without speculation where ``release`` does not serve the arm's drafter."""
    seqs, tokens = _engine_limits(engine)
    if not serves(release, arm["method"]):
        arm = {"method": "none"}
    words = ["vllm", "serve", hf_id, "--tensor-parallel-size", str(hardware["tensor_parallel"])]
    tp, ep = int(hardware["tensor_parallel"]), int(hardware.get("expert_parallel", 1))
    if ep > 1:
        words += ["--enable-expert-parallel"]
        if ep > tp:
            words += ["--data-parallel-size", str(ep // tp)]
    if hardware.get("precision") == "fp8":
        words += ["--quantization", "fp8"]
    elif hardware.get("precision") == "fp4":
        words += ["--quantization", "modelopt_fp4"]
    words += ["--max-num-seqs", str(seqs), "--max-num-batched-tokens", str(tokens)]
    if role is not None:
        words += ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"},
                                                     separators=(",", ":"))]
    spec = vllm_speculative_config(arm, hf_id, drafter) if role != "prefill" else None
    if spec is not None:
        words += ["--speculative-config", json.dumps(spec, separators=(",", ":"))]
    return " ".join(shlex.quote(w) for w in words)


def sglang_command(hardware: dict, arm: dict, engine: dict, hf_id: str, drafter: Optional[str] = None,
                   role: Optional[str] = None, release=None) -> str:
    """``python -m sglang.launch_server ...`` for one replica; without speculation where ``release`` does not
    serve the arm's drafter."""
    seqs, tokens = _engine_limits(engine)
    if not serves(release, arm["method"]) or arm["method"] not in ("none", *SGLANG_ALGORITHMS):
        arm = {"method": "none"}  # (SGLang has no suffix decoding)
    tp, ep = int(hardware["tensor_parallel"]), int(hardware.get("expert_parallel", 1))
    words = ["python", "-m", "sglang.launch_server", "--model-path", hf_id, "--tp", str(max(tp, ep))]
    if ep > 1:
        words += ["--ep", str(ep)]
        if ep > tp:
            words += ["--enable-dp-attention", "--dp", str(ep // tp)]
    if hardware.get("precision") == "fp8":
        words += ["--quantization", "fp8"]
    elif hardware.get("precision") == "fp4":
        words += ["--quantization", "modelopt_fp4"]
    chunk = engine.get("prefill_chunk_tokens") or tokens  # the chunk the simulation prefilled in
    words += ["--max-running-requests", str(seqs), "--chunked-prefill-size", str(chunk)]
    if role is not None:
        words += ["--disaggregation-mode", role, "--disaggregation-transfer-backend", "nixl"]
    method = arm["method"]
    if method != "none" and role != "prefill":
        gamma = int(arm["gamma"])
        tree = arm.get("tree")
        words += ["--speculative-algorithm", SGLANG_ALGORITHMS[method]]
        if method == "ngram":  # a chain: one branch, gamma drafts past the root
            words += ["--speculative-ngram-max-bfs-breadth", "1", "--speculative-num-draft-tokens", str(gamma + 1)]
            if arm.get("lookup_depth") is not None:
                words += ["--speculative-ngram-max-trie-depth", str(int(arm["lookup_depth"]))]
            return " ".join(shlex.quote(w) for w in words)
        if method == "draft_model":
            words += ["--speculative-draft-model-path", draft_model_id(arm)]
        elif method != "mtp":
            words += ["--speculative-draft-model-path", drafter or drafter_placeholder(method, hf_id)]
        words += ["--speculative-num-steps", str(gamma)]
        if method in EAGLE_STYLE or method == "draft_model":  # the EAGLE worker's flags (STANDALONE runs on it)
            words += ["--speculative-eagle-topk", str(tree["topk"] if tree else 1)]
        words += ["--speculative-num-draft-tokens", str(tree["num_draft_tokens"] if tree else gamma + 1)]
    return " ".join(shlex.quote(w) for w in words)


def effective_engine(deployment: dict, scenario: dict) -> dict:
    """The engine limits a deployment ran with: its METRICS' ``engine`` (the effective settings, where the run
    records them), else its scenario's ``engine``, else simlab's defaults."""
    recorded = (deployment.get("metrics") or {}).get("engine")
    return {**(scenario.get("engine") or {}), **(recorded if isinstance(recorded, dict) else {})}


def launch_commands(deployment: dict, scenario: dict, hf_id: str, drafter: Optional[str]) -> dict[str, list[str]]:
    """Both engines' commands for a deployment, one per distinct replica role."""
    hardware, arm, engine = scenario["hardware"], scenario["arms"][0], effective_engine(deployment, scenario)
    roles = ["prefill", "decode"] if deployment.get("disaggregation") else [None]
    vllm, sglang = launch_release("vllm", deployment), launch_release("sglang", deployment)
    return {"vllm": [vllm_command(hardware, arm, engine, hf_id, drafter, r, vllm) for r in roles],
            "sglang": [sglang_command(hardware, arm, engine, hf_id, drafter, r, sglang) for r in roles]}


def launch_notes(engine: str, deployment: dict, arm: dict, drafter: Optional[str], hf_id: str) -> list[str]:
    """What a person must know before running a launch file (comment lines): the release it is written for and
    whether the plan simulated it, a drafter the release does not serve (left out of the command), a drafter they
    must fill in, a scheduler the engine has no flag for."""
    recorded = (deployment.get("metrics") or {}).get("engine") or {}
    simulated = recorded.get("stack_version") or deployment["stack"]
    release = launch_release(engine, deployment)
    label = release.label if release is not None else engine
    notes = []
    if deployment["stack"] != engine:
        notes.append(f"# NOT SIMULATED: simlab planned this deployment on {simulated}; this is the same deployment in "
                     f"{label}'s flags, whose own scheduling and kernels were not simulated")
    else:
        notes.append(f"# simulated on {simulated}, with the engine limits below as simlab ran them; written for "
                     f"{label}")
    notes.append(f"# checked against {label}: the drafter methods it serves (simlab/hardware/engine_releases/); "
                 "not checked: the flags' spelling at this release")
    method = arm.get("method", "none")
    if not serves(release, method):
        notes.append(f"# NOT IN {label}: it serves the drafters {', '.join(release.methods.value)} "
                     f"({release.methods.source}); the {method} drafter the plan credited has no flag there, so "
                     "this command serves without speculation")
        return notes
    if method not in ("none", "draft_model", *NO_CHECKPOINT) and not drafter:
        notes.append(f"# FILL IN: {drafter_placeholder(method, hf_id)} stands for a {method} drafter checkpoint; "
                     "the plan named none (give its arm `drafter:`)")
    from simlab.schedulers import DEFAULT_KIND

    kind = (arm.get("scheduler") or {}).get("kind", DEFAULT_KIND) if method != "none" else DEFAULT_KIND
    if kind != DEFAULT_KIND:
        notes.append(f"# simlab credited the {kind} scheduler; {label} has no flag for it (no adaptive or dynamic "
                     f"speculation setting among its release's settings) and verifies all {arm.get('gamma')} drafts "
                     "each step, which this plan did not simulate (add the arm with scheduler: {kind: fixed} to see "
                     "what that costs)")
    return notes


def launch_file_text(engine: str, deployment: dict, commands: list[str], notes: Optional[list[str]] = None) -> str:
    """A launch file: the command first (a vLLM file starts with ``vllm serve``), then what it stands for and
    ``notes`` (:func:`launch_notes`)."""
    split = deployment.get("disaggregation")
    if split:
        count = (f"# run the first line on {split['prefill_replicas']} prefill replica(s) and the second on "
                 f"{split['decode_replicas']} decode replica(s), with a P/D proxy in front")
    else:
        count = f"# run on {deployment['replicas']} replica(s) behind a load balancer"
    return "\n".join([*commands, count, *(notes or []), "# written by simlab plan", ""])
