"""The layers a config declares, by kind, and what each holds (simlab.hardware.hf_config reads the config).

One function per question: which mixer each layer has (:func:`layer_kinds`), which MLP (:func:`mlp_kinds`), the
parameters and memory of a layer of a kind (:func:`layer_counts`), the MTP layers and the weight bytes under the
quantization the config names. The formulas follow the reference implementations in Hugging Face transformers
(docs/models.md gives each with its source)."""

from __future__ import annotations

from simlab.hardware.hf_config import (BF16_BYTES, CHUNKED, FP32_BYTES, FULL, LINEAR, MAMBA, MLA, SLIDING, ConfigReader,
                                       LayerCounts)

LAYER_TYPE_NAMES = {"full_attention": FULL, "attention": FULL, "global": FULL, "deepseek_sparse_attention": FULL,
                    "sliding_attention": SLIDING,
                    "local": SLIDING, "chunked_attention": CHUNKED, "linear_attention": LINEAR, "mamba": MAMBA}
NEMOTRON_H_BLOCKS = {"M": (MAMBA, "none"), "*": (FULL, "none"), "-": ("none", "dense"), "E": ("none", "moe")}
GATED_OUTPUT_TYPES = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
QK_NORM_TYPES = ("qwen3", "qwen3_moe", "qwen3_next", "gemma3", "gemma3_text", *GATED_OUTPUT_TYPES)
STATE_DTYPE_BYTES = {"float32": FP32_BYTES, "fp32": FP32_BYTES, "bfloat16": BF16_BYTES, "float16": BF16_BYTES,
                     "auto": BF16_BYTES}


def config_model_type(cfg: ConfigReader) -> str:
    """The config's model_type (its text model's, else the wrapper's), lower case."""
    return str(cfg.get("model_type", cfg.outer.get("model_type", ""))).lower()


def layer_kinds(cfg: ConfigReader) -> list[str]:
    """Each layer's mixer: full, sliding or chunked attention, MLA, linear attention, Mamba, or none (an
    MLP-only block of Nemotron-H)."""
    if cfg.has("compress_ratios"):
        raise cfg.error("compress_ratios", "DeepSeek-V4 compressed attention",
                        "the catalogue names deepseek-v4-flash and deepseek-v4-pro, which price it (docs/hardware.md)")
    pattern = _block_pattern(cfg)
    if pattern is not None:
        return [NEMOTRON_H_BLOCKS[c][0] for c in pattern]
    num_layers = cfg.integer("num_hidden_layers", "num_layers", "n_layer")
    if cfg.has("layer_types"):
        names = cfg.get("layer_types")
        if not isinstance(names, list) or len(names) != num_layers:
            raise cfg.error("layer_types", names, f"a list of {num_layers} layer types (num_hidden_layers)")
        unknown = sorted({str(n) for n in names} - set(LAYER_TYPE_NAMES))
        if unknown:
            raise cfg.error("layer_types", unknown[0], ", ".join(LAYER_TYPE_NAMES))
        kinds = [LAYER_TYPE_NAMES[str(n)] for n in names]
    elif cfg.has("full_attention_interval"):
        interval = cfg.integer("full_attention_interval")
        kinds = [FULL if (i + 1) % interval == 0 else LINEAR for i in range(num_layers)]
    elif cfg.has("sliding_window_pattern") and cfg.has("sliding_window"):
        every = cfg.integer("sliding_window_pattern")  # Gemma 3: every N-th layer global
        kinds = [FULL if (i + 1) % every == 0 else SLIDING for i in range(num_layers)]
    elif cfg.has("sliding_window") and cfg.get("use_sliding_window", True) is not False:
        kinds = [SLIDING] * num_layers  # Mistral's first release: a window in every layer
    else:
        kinds = [FULL] * num_layers
    if cfg.has("kv_lora_rank"):
        kinds = [MLA if k == FULL else k for k in kinds]
    return kinds


BLOCK_TYPE_LETTERS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _block_pattern(cfg: ConfigReader):
    """Nemotron-H's blocks as letters: ``hybrid_override_pattern``, or Nemotron 3's ``layers_block_type`` list."""
    if cfg.has("hybrid_override_pattern"):
        pattern = str(cfg.get("hybrid_override_pattern"))
        if set(pattern) - set(NEMOTRON_H_BLOCKS):
            raise cfg.error("hybrid_override_pattern", pattern, "a string of M (Mamba), * (attention), "
                            "- (MLP) and E (MoE)")
        return pattern
    if cfg.has("layers_block_type"):
        names = cfg.get("layers_block_type")
        if not isinstance(names, list) or any(str(n) not in BLOCK_TYPE_LETTERS for n in names):
            raise cfg.error("layers_block_type", names, "a list of " + ", ".join(BLOCK_TYPE_LETTERS))
        return "".join(BLOCK_TYPE_LETTERS[str(n)] for n in names)
    return None


def num_experts(cfg: ConfigReader) -> int:
    return cfg.integer("num_experts", "num_local_experts", "n_routed_experts", default=0, minimum=0)


def mlp_kinds(cfg: ConfigReader, num_layers: int) -> list[str]:
    """Each layer's MLP: dense, moe, or none (a mixer-only block of Nemotron-H)."""
    pattern = _block_pattern(cfg)
    if pattern is not None:
        return [NEMOTRON_H_BLOCKS[c][1] for c in pattern]
    if num_experts(cfg) == 0:
        return ["dense"] * num_layers
    first_dense = cfg.integer("first_k_dense_replace", default=0, minimum=0)
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):  # MiMo, MiniMax: one 0/1 a layer
        if len(freq) != num_layers or any(f not in (0, 1) for f in freq):
            raise cfg.error("moe_layer_freq", freq, f"an integer, or a list of {num_layers} zeros and ones")
        return ["moe" if f else "dense" for f in freq]
    step = cfg.integer("decoder_sparse_step", "moe_layer_freq", "interleave_moe_layer_step", default=1)
    only = cfg.get("mlp_only_layers", [])
    if not isinstance(only, list):
        raise cfg.error("mlp_only_layers", only, "a list of layer indices")

    def is_moe(i: int) -> bool:
        if i < first_dense or i in only:
            return False
        if cfg.has("moe_layer_freq"):  # DeepSeek: layer_idx % moe_layer_freq == 0 from the first_k_dense_replace-th
            return i % step == 0
        return (i + 1) % step == 0  # Qwen MoE, Llama 4: (layer_idx + 1) % step == 0

    return ["moe" if is_moe(i) else "dense" for i in range(num_layers)]


def _attention(cfg: ConfigReader, kind: str, hidden: int) -> LayerCounts:
    heads = cfg.integer("num_attention_heads", "n_head")
    kv_heads = cfg.integer("num_key_value_heads", default=heads)
    head_dim = cfg.integer("head_dim", default=hidden // heads)
    model_type = config_model_type(cfg)
    q_out = heads * head_dim * (2 if model_type in GATED_OUTPUT_TYPES else 1)  # gated output: q and its gate
    params = hidden * q_out + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    if cfg.get("attention_bias", model_type == "gpt_oss"):
        params += q_out + 2 * kv_heads * head_dim + hidden
    elif model_type in ("qwen2", "qwen2_moe"):
        params += q_out + 2 * kv_heads * head_dim  # q, k and v biases, none on o
    if model_type == "gpt_oss":
        params += heads  # attention sinks: one logit per head
    if model_type in QK_NORM_TYPES:
        params += 2 * head_dim
    entry = 2 * kv_heads * head_dim * BF16_BYTES
    if kind == FULL:
        return LayerCounts(params, 0, 0, kv_bytes_per_token=entry)
    window = cfg.integer("sliding_window") if kind == SLIDING else cfg.integer("attention_chunk_size")
    return LayerCounts(params, 0, 0, state_bytes_per_request=window * entry)


def _mla(cfg: ConfigReader, hidden: int) -> LayerCounts:
    heads = cfg.integer("num_attention_heads")
    kv_rank = cfg.integer("kv_lora_rank")
    q_rank = cfg.integer("q_lora_rank", default=0, minimum=0)
    nope, rope = cfg.integer("qk_nope_head_dim"), cfg.integer("qk_rope_head_dim")
    v_dim = cfg.integer("v_head_dim")
    q = hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
    kv = hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v_dim)
    params = q + kv + heads * v_dim * hidden
    kv_bytes = (kv_rank + rope) * BF16_BYTES
    if cfg.has("index_topk"):  # DeepSeek-V3.2's lightning indexer: its own keys per token
        index_heads, index_dim = cfg.integer("index_n_heads"), cfg.integer("index_head_dim")
        params += ((q_rank or hidden) * index_heads * index_dim + hidden * index_dim + 2 * index_dim
                   + hidden * index_heads)
        kv_bytes += index_dim * BF16_BYTES
    return LayerCounts(params, 0, 0, kv_bytes_per_token=kv_bytes)


def _state_bytes(cfg: ConfigReader, name: str = "mamba_ssm_dtype") -> int:
    dtype = str(cfg.get(name, "auto")).lower().replace("torch.", "")
    if dtype not in STATE_DTYPE_BYTES:
        raise cfg.error(name, dtype, ", ".join(STATE_DTYPE_BYTES))
    return STATE_DTYPE_BYTES[dtype]


def _linear_attention(cfg: ConfigReader, hidden: int) -> LayerCounts:
    """Gated DeltaNet (Qwen3-Next, Qwen3.5): q, k, v, z, b and a projections, a short causal convolution, and a
    recurrent state of value heads x key dim x value dim per request."""
    key_heads, value_heads = cfg.integer("linear_num_key_heads"), cfg.integer("linear_num_value_heads")
    key_dim, value_dim = cfg.integer("linear_key_head_dim"), cfg.integer("linear_value_head_dim")
    kernel = cfg.integer("linear_conv_kernel_dim")
    conv_dim = 2 * key_heads * key_dim + value_heads * value_dim
    params = (hidden * (2 * key_heads * key_dim + 2 * value_heads * value_dim) + hidden * 2 * value_heads
              + conv_dim * kernel + 2 * value_heads + value_dim + value_heads * value_dim * hidden)
    state = value_heads * key_dim * value_dim * _state_bytes(cfg) + conv_dim * (kernel - 1) * BF16_BYTES
    return LayerCounts(params, 0, 0, state_bytes_per_request=state)


def _mamba(cfg: ConfigReader, hidden: int) -> LayerCounts:
    """Mamba-2 (Nemotron-H): in and out projections, a causal convolution, and an SSM state of heads x head dim x
    state size per request."""
    heads, head_dim = cfg.integer("mamba_num_heads"), cfg.integer("mamba_head_dim")
    state_size, groups = cfg.integer("ssm_state_size"), cfg.integer("n_groups", default=1)
    kernel = cfg.integer("conv_kernel", "mamba_d_conv")
    inner = heads * head_dim
    conv_dim = inner + 2 * groups * state_size
    params = (hidden * (2 * inner + 2 * groups * state_size + heads) + conv_dim * kernel
              + (conv_dim if cfg.get("use_conv_bias", True) else 0) + 3 * heads + inner + inner * hidden)
    state = heads * head_dim * state_size * _state_bytes(cfg, "mamba_ssm_cache_dtype") \
        + conv_dim * (kernel - 1) * BF16_BYTES
    return LayerCounts(params, 0, 0, state_bytes_per_request=state)


def _matrices(cfg: ConfigReader) -> int:
    """Weight matrices of an MLP: 2 for squared-ReLU MLPs (Nemotron-H, no gate), else 3 (gate, up, down)."""
    relu2 = str(cfg.get("mlp_hidden_act", cfg.get("hidden_act", ""))).lower() == "relu2"
    return 2 if relu2 or config_model_type(cfg) == "nemotron_h" else 3


def _expert_width(cfg: ConfigReader, hidden: int) -> int:
    """The width routed experts run at: the hidden size, or a latent (Nemotron 3's ``moe_latent_size``, Kimi's
    ``routed_expert_hidden_size``) that the layer projects into and out of."""
    return cfg.integer("moe_latent_size", "routed_expert_hidden_size", default=hidden)


def _expert_params(cfg: ConfigReader, hidden: int) -> int:
    """One routed expert (gpt-oss's with its biases)."""
    width = cfg.integer("moe_intermediate_size", "intermediate_size")
    return (_matrices(cfg) * _expert_width(cfg, hidden) * width
            + (2 * width + hidden if config_model_type(cfg) == "gpt_oss" else 0))


def state_flops_per_token(cfg: ConfigReader, kind: str) -> int:
    """FLOPs of one token in a state layer: the state's update (a rank-1 write and a decay: 2 x heads x key dim x
    value dim each for Gated DeltaNet's delta rule) and read-out (2 x the same), and the convolution."""
    if kind == LINEAR:
        heads, key_dim = cfg.integer("linear_num_value_heads"), cfg.integer("linear_key_head_dim")
        value_dim, kernel = cfg.integer("linear_value_head_dim"), cfg.integer("linear_conv_kernel_dim")
        conv_dim = 2 * cfg.integer("linear_num_key_heads") * key_dim + heads * value_dim
        return 6 * heads * key_dim * value_dim + 2 * conv_dim * kernel
    if kind == MAMBA:
        heads, head_dim = cfg.integer("mamba_num_heads"), cfg.integer("mamba_head_dim")
        state_size, kernel = cfg.integer("ssm_state_size"), cfg.integer("conv_kernel", "mamba_d_conv")
        return 6 * heads * head_dim * state_size + 2 * (heads * head_dim) * kernel
    return 0


def shared_expert_count(cfg: ConfigReader) -> int:
    """The shared experts of an MoE layer as the config declares them (Llama 4: one, whatever it says)."""
    if config_model_type(cfg).startswith("llama4"):
        return 1
    return cfg.integer("n_shared_experts", "num_shared_experts", default=0, minimum=0)


def _mlp(cfg: ConfigReader, kind: str, hidden: int) -> tuple[int, int]:
    """(parameters, parameters one token uses) of a layer's MLP."""
    model_type = config_model_type(cfg)
    matrices = _matrices(cfg)
    if kind == "none":
        return 0, 0
    if kind == "dense":  # Llama 4's dense layers are intermediate_size_mlp wide (its experts intermediate_size)
        params = matrices * hidden * cfg.integer("intermediate_size_mlp", "intermediate_size", "ffn_hidden_size")
        return params, params
    experts = num_experts(cfg)
    per_token = cfg.integer("num_experts_per_tok", "experts_per_token", "num_experts_per_token", "top_k_experts",
                            "moe_topk")
    expert = _expert_params(cfg, hidden)
    router = hidden * experts + (experts if model_type == "gpt_oss" else 0)
    latent = _expert_width(cfg, hidden)
    if latent != hidden:
        router += 2 * hidden * latent  # into the latent and back
    shared_experts = shared_expert_count(cfg)
    shared_width = cfg.integer("moe_shared_expert_intermediate_size", "moe_intermediate_size", "intermediate_size")
    if cfg.has("moe_shared_expert_intermediate_size"):  # Nemotron 3: the shared experts' own width
        shared_experts = max(shared_experts, 1)
    shared = shared_experts * matrices * hidden * shared_width
    if cfg.get("shared_expert_intermediate_size"):
        shared += 3 * hidden * cfg.integer("shared_expert_intermediate_size") + hidden  # and its sigmoid gate
    return router + shared + experts * expert, router + shared + per_token * expert


def layer_counts(cfg: ConfigReader, kind: str, mlp: str) -> LayerCounts:
    """One layer of mixer ``kind`` and MLP ``mlp``, its norms included."""
    hidden = cfg.integer("hidden_size", "d_model")
    if kind in (FULL, SLIDING, CHUNKED):
        mixer = _attention(cfg, kind, hidden)
    elif kind == MLA:
        mixer = _mla(cfg, hidden)
    elif kind == LINEAR:
        mixer = _linear_attention(cfg, hidden)
    elif kind == MAMBA:
        mixer = _mamba(cfg, hidden)
    else:
        mixer = LayerCounts(0, 0, 0)
    mlp_params, mlp_active = _mlp(cfg, mlp, hidden)
    model_type = config_model_type(cfg)
    norms = hidden if model_type == "nemotron_h" else (4 if model_type.startswith("gemma") else 2) * hidden
    return LayerCounts(mixer.mixer_params + norms, mlp_params, mlp_active, mixer.kv_bytes_per_token,
                       mixer.state_bytes_per_request)


def routed_expert_params(cfg: ConfigReader, mlps: list[str]) -> int:
    """Every routed expert's parameters over the MoE layers (what mxfp4 quantizes)."""
    if num_experts(cfg) == 0:
        return 0
    hidden = cfg.integer("hidden_size", "d_model")
    return sum(1 for m in mlps if m == "moe") * num_experts(cfg) * _expert_params(cfg, hidden)


def mtp_params(cfg: ConfigReader, hidden: int) -> tuple[int, int]:
    """(parameters, layers) of the multi-token-prediction layers: each a decoder layer of the last layer's kinds
    plus the projection of [embedding; hidden state] and its norms."""
    count = cfg.integer("num_nextn_predict_layers", "mtp_num_hidden_layers", default=0, minimum=0)
    if count == 0:
        return 0, 0
    kind = MLA if cfg.has("kv_lora_rank") else FULL
    mlp = "moe" if num_experts(cfg) else "dense"
    layer = layer_counts(cfg, kind, mlp)
    return count * (layer.mixer_params + layer.mlp_params + 2 * hidden * hidden + 3 * hidden), count


QUANT_BYTES = {"fp8": 1.0 + 4 / (128 * 128), "mxfp4": 4.25 / 8, "nvfp4": 4.5 / 8}


def _group_bits(quant: dict):
    """compressed-tensors: the weights' fewest ``num_bits`` over its config groups (None when they state none). A
    mixed file (fp8 attention, fp4 experts) is counted at its smallest format, which most of its weights are in."""
    groups = quant.get("config_groups")
    bits = []
    if isinstance(groups, dict):
        for group in groups.values():
            weights = group.get("weights") if isinstance(group, dict) else None
            if isinstance(weights, dict) and isinstance(weights.get("num_bits"), int):
                bits.append(weights["num_bits"])
    return min(bits) if bits else None


def quantization(cfg: ConfigReader, total: int, unquantized: int, experts: int) -> tuple[str, float]:
    """(name, weight bytes) under the config's ``quantization_config``: matmul weights at the format's bytes
    (with its scales), the embedding, LM head and norms in bf16; mxfp4 (gpt-oss) quantizes the routed experts."""
    quant = cfg.get("quantization_config")
    if not quant:
        return "bf16", float(total * BF16_BYTES)
    if not isinstance(quant, dict):
        raise cfg.error("quantization_config", quant, "an object with quant_method")
    method = str(quant.get("quant_method") or ("modelopt" if quant.get("quant_algo") else "")).lower()
    algo = str(quant.get("quant_algo") or "").lower()
    if method == "modelopt" and "fp8" in algo:
        method = "fp8"
    if method == "mxfp4":
        return "mxfp4", experts * QUANT_BYTES["mxfp4"] + (total - experts) * BF16_BYTES
    if method in ("fp8", "fbgemm_fp8"):
        per_weight = QUANT_BYTES["fp8"]
    elif method in ("awq", "gptq", "compressed-tensors", "modelopt"):
        bits = quant.get("bits") or quant.get("w_bit") or (4 if "fp4" in algo else None) or _group_bits(quant)
        if not isinstance(bits, int) or not 2 <= bits <= 16:
            raise cfg.error("quantization_config.bits", bits, "an integer number of bits from 2 to 16")
        group = quant.get("group_size") or quant.get("q_group_size") or 128
        per_weight = bits / 8 + 4 / max(int(group), 1)  # a bf16 scale and zero per group
        method = f"{method} {bits}-bit"
    else:
        raise cfg.error("quantization_config.quant_method", method,
                        "fp8, mxfp4, awq, gptq, compressed-tensors or modelopt (or no quantization_config: bf16)")
    matmul = total - unquantized
    return method, matmul * per_weight + unquantized * BF16_BYTES

