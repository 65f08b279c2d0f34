"""Arms of a plan as users type them: simlab's own (``method``, ``gamma``, ``tree``), a vLLM
``speculative_config`` mapping (``vllm:``), or SGLang's ``--speculative-*`` flags (``sglang:``, a mapping or
the flags as one string). Each becomes a simlab arm and the drafter checkpoint it names, which the launch
commands translate back (:mod:`simlab.studies.launch`)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, Optional

from simlab.common.errors import InputError

# vLLM speculative_config "method" -> simlab method (vllm/config/speculative.py's names)
VLLM_METHODS = {"eagle3": "eagle3", "eagle": "eagle3", "mtp": "mtp", "deepseek_mtp": "mtp", "qwen3_next_mtp": "mtp",
                "glm4_moe_mtp": "mtp", "mimo_mtp": "mtp", "ernie_mtp": "mtp", "dflash": "dflash", "dspark": "dspark",
                "ngram": "ngram", "ngram_gpu": "ngram", "suffix": "suffix", "draft_model": "draft_model"}
VLLM_KEYS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "max_model_len",
             "disable_padded_drafter_batch", "prompt_lookup_min", "prompt_lookup_max", "suffix_decoding_max_tree_depth",
             "num_speculative_tokens_per_batch_size")
SUFFIX_DEFAULT_TOKENS = 8  # vLLM 0.34.0: min(8, suffix_decoding_max_tree_depth) (spec_decode/suffix/config.py:25-32)
# SGLang --speculative-algorithm -> simlab method (NEXTN is SGLang's name for a model's own MTP heads)
SGLANG_ALGORITHMS = {"EAGLE3": "eagle3", "EAGLE": "eagle3", "NEXTN": "mtp", "DFLASH": "dflash", "DSPARK": "dspark",
                     "NGRAM": "ngram", "STANDALONE": "draft_model"}
SGLANG_KEYS = ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
               "speculative_eagle_topk", "speculative_num_draft_tokens", "speculative_ngram_max_bfs_breadth",
               "speculative_ngram_max_trie_depth")
SGLANG_NGRAM_DRAFT_TOKENS = 12  # python/sglang/srt/arg_groups/speculative_hook.py:1314-1323 @v0.5.23
SIMLAB_KEYS = ("name", "method", "gamma", "scheduler", "calibration", "tree", "draft_model", "prompt_lookup_min",
               "prompt_lookup_max", "max_concurrency", "lookup_depth", "draft_tensor_parallel")
FORMS = ("method (none, mtp, eagle3, dflash, dspark, draft_model, ngram, suffix) with gamma, or vllm: "
         "{speculative_config}, or sglang: {...} / '--speculative-* flags'")


@dataclass(frozen=True)
class PlanArm:
    """A plan's arm: the simlab arm a scenario runs, the drafter checkpoint named (if any) and how it was given."""

    arm: dict
    drafter: Optional[str]
    given_as: str  # "simlab", "vllm" or "sglang"

    @property
    def label(self) -> str:
        from simlab.config.arms import Arm

        return Arm(**self.arm).label

    @property
    def moving_parts(self) -> list[str]:
        """What this arm runs beyond plain decoding, each a thing to train, host or keep in step with the target:
        a drafter, a draft tree, a scheduler that reads the load (empty: no speculation)."""
        from simlab.config.arms import Arm

        arm = Arm(**self.arm)
        if arm.draft_len == 0:
            return []
        parts = [f"{'an' if arm.method[0] in 'aeiou' else 'a'} {arm.method} drafter"]
        if arm.tree is not None:
            parts.append("a draft tree")
        from simlab.schedulers import DEFAULT_KIND

        if arm.scheduler is not None and arm.scheduler.kind != DEFAULT_KIND:
            parts.append(f"the {arm.scheduler.kind} scheduler")
        return parts


def read_arm(raw: Any, index: int, *, file: str) -> PlanArm:
    """One entry of a plan's ``arms:`` as a :class:`PlanArm`; every problem is an :class:`InputError` naming
    ``arms[index]`` and its field."""
    where = f"arms[{index}]"
    if not isinstance(raw, dict):
        raise InputError("is not a mapping", file=file, field=where, value=raw, valid=FORMS)
    raw = dict(raw)
    drafter = raw.pop("drafter", None)
    given = [k for k in ("vllm", "sglang") if k in raw]
    if len(given) > 1 or (given and "method" in raw):
        raise InputError("gives the drafter twice", file=file, field=where, value=sorted(raw), valid=f"one of {FORMS}")
    if not given:
        if "method" not in raw:
            raise InputError("has no method", file=file, field=f"{where}.method", valid=FORMS)
        return PlanArm(raw, None if drafter is None else str(drafter), "simlab")
    kind = given[0]
    spec = raw.pop(kind)
    extra = {k: v for k, v in raw.items() if k in ("name", "scheduler", "calibration")}
    unknown = sorted(set(raw) - set(extra))
    if unknown:
        raise InputError("is not a field of an arm given as engine flags", file=file, field=f"{where}.{unknown[0]}",
                         valid="name, scheduler, calibration, drafter")
    arm, model = (_from_vllm if kind == "vllm" else _from_sglang)(spec, f"{where}.{kind}", file)
    return PlanArm({**extra, **arm}, drafter if drafter is not None else model, kind)


def _from_vllm(spec: Any, field: str, file: str) -> tuple[dict, Optional[str]]:
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError:
            raise InputError("is not JSON", file=file, field=field, value=spec, valid='a speculative_config, e.g. '
                             '{"method": "eagle3", "num_speculative_tokens": 3}') from None
    if not isinstance(spec, dict):
        raise InputError("is not a mapping", file=file, field=field, value=spec, valid="a speculative_config mapping")
    for key in spec:
        if key not in VLLM_KEYS:
            raise InputError("is not a speculative_config key simlab reads", file=file, field=f"{field}.{key}",
                             valid=", ".join(VLLM_KEYS))
    method = spec.get("method")
    if method is None and spec.get("model") is not None:  # vLLM: a model without a method is a draft model
        method = "draft_model"  # (vllm/config/speculative.py:1370-1372 @v0.34.0)
    if method is None:
        raise InputError("has no method", file=file, field=f"{field}.method", valid=", ".join(VLLM_METHODS))
    if str(method) not in VLLM_METHODS:
        raise InputError("is not a method simlab models", file=file, field=f"{field}.method", value=method,
                         valid=", ".join(VLLM_METHODS))
    simlab_method = VLLM_METHODS[str(method)]
    gamma = spec.get("num_speculative_tokens")
    if gamma is None and simlab_method == "suffix":
        gamma = min(SUFFIX_DEFAULT_TOKENS, int(spec.get("suffix_decoding_max_tree_depth", 24)))
    if not isinstance(gamma, int) or isinstance(gamma, bool) or gamma < 1:
        raise InputError("must be a positive integer", file=file, field=f"{field}.num_speculative_tokens",
                         value=gamma, valid="the draft length, e.g. 3")
    arm: dict[str, Any] = {"method": simlab_method, "gamma": gamma}
    if simlab_method == "ngram":
        arm.update({k: spec[k] for k in ("prompt_lookup_min", "prompt_lookup_max") if spec.get(k) is not None})
    if simlab_method == "suffix" and spec.get("suffix_decoding_max_tree_depth") is not None:
        arm["lookup_depth"] = spec["suffix_decoding_max_tree_depth"]
    if simlab_method == "draft_model":
        if spec.get("model") is None:
            raise InputError("is needed by method draft_model (the small model)", file=file, field=f"{field}.model",
                             valid="a catalogue name, a Hugging Face id such as Qwen/Qwen3-0.6B, or a config.json")
        arm["draft_model"] = str(spec["model"])
        if spec.get("draft_tensor_parallel_size") is not None:
            arm["draft_tensor_parallel"] = spec["draft_tensor_parallel_size"]
    schedule = spec.get("num_speculative_tokens_per_batch_size")
    if schedule is not None:
        arm["max_concurrency"] = _off_above(schedule, gamma, f"{field}.num_speculative_tokens_per_batch_size", file)
    return arm, None if simlab_method in ("ngram", "suffix", "draft_model") else spec.get("model")


def _off_above(schedule: Any, gamma: int, field: str, file: str) -> int:
    """The batch above which vLLM's ``num_speculative_tokens_per_batch_size`` turns speculation off: simlab reads the
    schedule ``[[1, N, gamma], [N + 1, M, 0]]`` (gamma drafts up to N requests, none above)."""
    valid = "[[1, N, num_speculative_tokens], [N + 1, M, 0]]: speculation on up to N requests, off above"
    try:
        (start, end, drafts), (start2, _, drafts2) = [tuple(int(v) for v in row) for row in schedule]
    except (TypeError, ValueError):
        raise InputError("is not a schedule simlab reads", file=file, field=field, value=schedule,
                         valid=valid) from None
    if start != 1 or drafts != gamma or start2 != end + 1 or drafts2 != 0 or end < 1:
        raise InputError("is not a schedule simlab reads", file=file, field=field, value=schedule, valid=valid)
    return end


def _sglang_mapping(spec: Any, field: str, file: str) -> dict:
    if isinstance(spec, str):
        words = shlex.split(spec)
        out: dict[str, Any] = {}
        i = 0
        while i < len(words):
            word = words[i]
            if not word.startswith("--"):
                raise InputError("is not a --flag", file=file, field=field, value=word,
                                 valid="--speculative-* VALUE ...")
            name, equals, value = word[2:].partition("=")
            if not equals:
                if i + 1 >= len(words):
                    raise InputError("has no value", file=file, field=field, value=word, valid="--flag VALUE")
                value, i = words[i + 1], i + 1
            out[name] = value
            i += 1
        spec = out
    if not isinstance(spec, dict):
        raise InputError("is not a mapping or a string of flags", file=file, field=field, value=spec,
                         valid="--speculative-algorithm EAGLE3 --speculative-num-steps 3 ...")
    return {str(k).lstrip("-").replace("-", "_"): v for k, v in spec.items()}


def _int(spec: dict, key: str, field: str, file: str, default: Optional[int] = None) -> Optional[int]:
    value = spec.get(key, default)
    if value is None:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = 0
    if number < 1 or str(value).strip() != str(number):
        raise InputError("must be a positive integer", file=file, field=f"{field}.{key}", value=value,
                         valid="an integer >= 1")
    return number


def _from_sglang(spec: Any, field: str, file: str) -> tuple[dict, Optional[str]]:
    spec = _sglang_mapping(spec, field, file)
    for key in spec:
        if key not in SGLANG_KEYS:
            raise InputError("is not a speculative flag simlab reads", file=file, field=f"{field}.{key}",
                             valid=", ".join("--" + k.replace("_", "-") for k in SGLANG_KEYS))
    algorithm = spec.get("speculative_algorithm")
    if algorithm is None:
        raise InputError("has no speculative_algorithm", file=file, field=f"{field}.speculative_algorithm",
                         valid=", ".join(SGLANG_ALGORITHMS))
    if str(algorithm).upper() not in SGLANG_ALGORITHMS:
        raise InputError("is not an algorithm simlab models", file=file, field=f"{field}.speculative_algorithm",
                         value=algorithm, valid=", ".join(SGLANG_ALGORITHMS))
    method = SGLANG_ALGORITHMS[str(algorithm).upper()]
    if method == "ngram":  # a chain of num_draft_tokens - 1 drafts (simlab drafts n-gram as a chain, not a tree)
        tokens = _int(spec, "speculative_num_draft_tokens", field, file, SGLANG_NGRAM_DRAFT_TOKENS)
        if tokens < 2:
            raise InputError("verifies no draft", file=file, field=f"{field}.speculative_num_draft_tokens",
                             value=tokens, valid="an integer >= 2")
        arm = {"method": "ngram", "gamma": min(tokens - 1, 16)}
        depth = _int(spec, "speculative_ngram_max_trie_depth", field, file)
        if depth is not None:
            if arm["gamma"] > depth:
                raise InputError(f"the trie stores continuations of at most {depth} tokens: {tokens - 1} drafts "
                                 "cannot be proposed", file=file, field=f"{field}.speculative_num_draft_tokens",
                                 value=tokens, valid=f"at most {depth + 1}")
            arm["lookup_depth"] = depth
        return arm, None
    steps = _int(spec, "speculative_num_steps", field, file, 3 if method == "draft_model" else None)
    if steps is None:
        raise InputError("is needed (the draft depth)", file=file, field=f"{field}.speculative_num_steps",
                         valid="an integer >= 1, e.g. 3")
    topk = _int(spec, "speculative_eagle_topk", field, file, 1)
    tokens = _int(spec, "speculative_num_draft_tokens", field, file, None)
    arm: dict[str, Any] = {"method": method, "gamma": steps}
    if topk > 1:
        if method != "eagle3":
            raise InputError(f"a draft tree is drafted by EAGLE3, not {algorithm}", file=file,
                             field=f"{field}.speculative_eagle_topk", value=topk, valid="1")
        if tokens is None:
            raise InputError("is needed with speculative_eagle_topk > 1 (the tree's tokens)", file=file,
                             field=f"{field}.speculative_num_draft_tokens", valid="an integer >= 2")
        arm["tree"] = {"topk": topk, "num_draft_tokens": tokens}
    elif tokens is not None and tokens != steps + 1:
        raise InputError(f"a chain of {steps} steps verifies {steps + 1} tokens", file=file,
                         field=f"{field}.speculative_num_draft_tokens", value=tokens, valid=str(steps + 1))
    if method == "draft_model":
        if spec.get("speculative_draft_model_path") is None:
            raise InputError("is needed by STANDALONE (the small model)", file=file,
                             field=f"{field}.speculative_draft_model_path", valid="a Hugging Face id or a config.json")
        return {**arm, "draft_model": str(spec["speculative_draft_model_path"])}, None
    return arm, spec.get("speculative_draft_model_path")
