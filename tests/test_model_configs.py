"""A model is its config (simlab.hardware.hf_config): parameter counts against the publishers' figures, KV and state
bytes against closed forms, the catalogue read back from its own config.json, `simlab profiles model`, `model:` as a
path in a scenario, and the errors a person gets for a config simlab cannot read or price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import CONTRACT_DIR, run_cli
from simlab.common.errors import InputError
from simlab.hardware.hf_config import read_config_file
from simlab.hardware.model_description import catalogue_config, describe_config, describe_file, roofline_shape
from simlab.hardware.specs import MODELS, get_model

FIXTURES = Path(__file__).parent / "fixtures" / "models"
LLAMA = CONTRACT_DIR / "models" / "llama-3.1-8b" / "config.json"
GPT_OSS = CONTRACT_DIR / "models" / "gpt-oss-120b" / "config.json"


def test_the_contracts_dense_model_has_its_published_parameters_and_kv():
    d = describe_file(LLAMA)
    assert d.params_total == pytest.approx(8.03e9, rel=0.03)
    assert d.params_total - d.params_embedding == pytest.approx(7.50e9, rel=0.03)
    # closed form: 32 layers x (attention 2 x 4096^2 + 2 x 4096 x 1024, MLP 3 x 4096 x 14336, norms 2 x 4096), the
    # embedding and the untied head 128256 x 4096 each, the final norm
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert d.params_total == 32 * layer + 2 * 128256 * 4096 + 4096
    assert d.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 and d.state_bytes_per_request == 0
    assert d.layers == {"full_attention": 32} and d.mlp_layers == {"dense": 32}


def test_the_contracts_moe_with_windows_and_sinks_has_its_published_parameters():
    d = describe_file(GPT_OSS)
    assert d.params_total == pytest.approx(116.8e9, rel=0.03)  # OpenAI's model card: 116.83 B
    assert d.params_active == pytest.approx(5.13e9, rel=0.03)  # 5.13 B active, the unembedding in, the embedding out
    assert d.layers == {"sliding_attention": 18, "full_attention": 18} and d.mlp_layers == {"moe": 36}
    entry = 2 * 8 * 64 * 2  # K and V of 8 heads of 64, bf16
    assert d.kv_bytes_per_token == 18 * entry  # only the full-attention layers grow with context
    assert d.state_bytes_per_request == 18 * 128 * entry  # each window layer at its full 128 tokens


@pytest.mark.parametrize("name,total_b,active_b", [
    ("qwen3.5-397b-a17b", 397, 17), ("qwen3.5-122b-a10b", 122, 10), ("qwen3.5-35b-a3b", 35, None),
    ("qwen3.5-27b", 27, None), ("qwen3-next-80b-a3b", 80, None), ("kimi-k2-instruct", 1026, 32)])
def test_published_configs_give_their_published_parameters(name, total_b, active_b):
    """Qwen's and Moonshot's cards count the input embedding among the activated parameters (Qwen3-30B-A3B's 3.3 B
    is our 3.04 B plus its 0.31 B embedding); "A3B" labels (3 B) are rounder than 3 % and are not compared."""
    d = describe_file(FIXTURES / name / "config.json")
    assert d.params_total == pytest.approx(total_b * 1e9, rel=0.03)
    if active_b is not None:
        assert d.params_active + d.params_embedding == pytest.approx(active_b * 1e9, rel=0.03)


def test_a_hybrid_linear_attention_model_keeps_kv_in_a_quarter_of_its_layers_and_a_state_in_the_rest():
    d = describe_file(FIXTURES / "qwen3.5-397b-a17b" / "config.json")  # read from text_config
    cfg = json.loads((FIXTURES / "qwen3.5-397b-a17b" / "config.json").read_text())["text_config"]
    assert d.layers == {"linear_attention": 45, "full_attention": 15, "mtp": 1} and d.mlp_layers == {"moe": 60}
    assert d.kv_bytes_per_token == 15 * 2 * cfg["num_key_value_heads"] * cfg["head_dim"] * 2
    recurrent = cfg["linear_num_value_heads"] * cfg["linear_key_head_dim"] * cfg["linear_value_head_dim"] * 4  # fp32
    conv = (2 * cfg["linear_num_key_heads"] * cfg["linear_key_head_dim"]
            + cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"]) * (cfg["linear_conv_kernel_dim"] - 1) * 2
    assert cfg["mamba_ssm_dtype"] == "float32"
    assert d.state_bytes_per_request == 45 * (recurrent + conv)
    assert any("text_config" in note for note in d.notes)


def test_a_mamba_hybrid_and_a_sparse_attention_indexer_are_read():
    nemotron = describe_file(FIXTURES / "nemotron-h-56b-base-8k" / "config.json")
    assert nemotron.layers == {"mamba": 54, "full_attention": 10} and nemotron.mlp_layers == {"dense": 54}
    assert nemotron.params_total == pytest.approx(56e9, rel=0.03) and nemotron.state_bytes_per_request > 0
    v32 = describe_file(FIXTURES / "deepseek-v3.2" / "config.json")
    assert v32.params_total == pytest.approx(671e9, rel=0.03) and v32.quantization == "fp8"
    assert v32.kv_bytes_per_token == 61 * ((512 + 64) * 2 + 128 * 2)  # the latent and rope key, the indexer's key
    assert v32.layers["mtp"] == 1 and any("indexer" in note for note in v32.notes)
    assert v32.weight_bytes < 0.6 * v32.params_total * 2  # fp8 matmul weights: about half of bf16


def test_every_catalogue_model_reads_back_from_its_own_config():
    """The catalogue written as config.json fields gives the same shape, so the same prices, and the same counts."""
    for model in MODELS.values():
        if model.compressed is not None:
            continue
        data = catalogue_config(model)
        assert roofline_shape(data, file="x", name=model.name).__dict__ | {"hf_id": model.hf_id} == model.__dict__
        d = describe_config(data, file="x")
        assert (d.params_total, d.params_active, d.kv_bytes_per_token) == (
            model.total_params, model.active_params, model.kv_bytes_per_token())


def test_a_scenario_names_a_config_by_a_path_relative_to_its_folder_and_prices_it_as_the_catalogue(tmp_path):
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    folder = tmp_path / "models" / "qwen3-8b"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(catalogue_config(MODELS["qwen3-8b"])), encoding="utf-8")
    scenario = tmp_path / "s.yaml"
    by_path = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="models/qwen3-8b"),
                               base_dir=tmp_path, file=scenario)
    by_name = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                               base_dir=tmp_path, file=scenario)
    for batch, context in ((1, 512.0), (32, 2048.0), (256, 8000.0)):
        assert by_path.verify_s(batch, context * batch, batch) == by_name.verify_s(batch, context * batch, batch)
    assert by_path.kv_cache_tokens() == by_name.kv_cache_tokens()


def test_profiles_model_prints_the_contracts_keys():
    code, stdout, stderr = run_cli("profiles", "model", str(GPT_OSS), "--json")
    assert code == 0, stderr
    data = json.loads(stdout)
    assert {"params_total", "params_active", "kv_bytes_per_token", "state_bytes_per_request", "layers"} <= set(data)
    assert data["layers"] == {"sliding_attention": 18, "full_attention": 18}
    code, stdout, _ = run_cli("profiles", "model", str(LLAMA.parent))
    assert code == 0 and "8.03 B in all" in stdout and "131,072 bytes" in stdout
    code, stdout, _ = run_cli("profiles", "model", "qwen3-8b")
    assert code == 0 and "36 full_attention" in stdout
    assert "kind: roofline   yes" in stdout and "kind: operations yes" in stdout
    code, stdout, _ = run_cli("profiles", "model", str(FIXTURES / "nemotron-h-56b-base-8k"), "--json")
    priced = json.loads(stdout)["priced_by"]
    assert code == 0 and priced["roofline"].startswith("no: ") and "hybrid_override_pattern" in priced["roofline"]
    assert json.loads(run_cli("profiles", "model", "deepseek-v3", "--json")[1])["priced_by"] == {
        "roofline": "yes", "operations": "yes"}


def _config(tmp_path, **changes) -> Path:
    data = read_config_file(LLAMA)
    data.update(changes)
    for key in [k for k, v in changes.items() if v is None]:
        del data[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("changes,field", [
    ({"hidden_size": None}, "hidden_size"), ({"num_hidden_layers": "32"}, "num_hidden_layers"),
    ({"layer_types": ["full_attention"] * 31 + ["cross_attention"]}, "layer_types"),
    ({"quantization_config": {"quant_method": "bitnet"}}, "quantization_config.quant_method")])
def test_a_config_simlab_cannot_read_is_exit_2_naming_the_field(tmp_path, changes, field):
    path = _config(tmp_path, **changes)
    code, stdout, stderr = run_cli("profiles", "model", str(path))
    assert code == 2 and f": {field}:" in stderr and "Traceback" not in stderr and stdout == ""


def _plain(model: str, gpu: str = "h200", **fields):
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    here = Path(__file__).parent / "x.yaml"
    return build_cost_model(RooflineHardware(kind="roofline", gpu=gpu, model=model, calibration="none",
                                             cuda_graph_buckets="none", **fields), base_dir=here.parent, file=here)


def test_sliding_window_layers_read_their_window_and_only_full_layers_grow_with_context():
    """gpt-oss-120b: past the 128-token window, a decode step's extra time per context token is the full-attention
    layers' KV read alone (one request, memory bound)."""
    cm = _plain(str(GPT_OSS.parent), gpu="h100-sxm", tensor_parallel=2, expert_precision="mxfp4")
    assert cm.model.hybrid.num_window_layers == 18 and cm.kv_bytes_per_token == 18 * 2 * 4 * 64 * 2  # 4 KV heads/GPU
    extra = cm.verify_s(1, 9000.0, 1) - cm.verify_s(1, 1000.0, 1)
    assert extra == pytest.approx(8000 * cm.kv_bytes_per_token / cm.device.bytes_per_s, rel=1e-9)
    # below the window, the window layers' reads grow too: twice the full layers' per token
    below = cm.verify_s(1, 100.0, 1) - cm.verify_s(1, 50.0, 1)
    assert below == pytest.approx(2 * 50 * cm.kv_bytes_per_token / cm.device.bytes_per_s, rel=1e-9)


def test_a_linear_attention_state_is_read_per_request_and_written_per_verified_token():
    """Qwen3.5-27B (dense, 48 Gated DeltaNet layers): one more verified token of one request costs its state's
    write (memory bound), its sampler row, and nothing else; KV grows in the 16 full-attention layers only."""
    cm = _plain(str(FIXTURES / "qwen3.5-27b"))
    d = describe_file(FIXTURES / "qwen3.5-27b" / "config.json")
    assert cm.kv_bytes_per_token == d.kv_bytes_per_token and cm.model.hybrid.state_bytes == d.state_bytes_per_request
    extra = cm.verify_s(2, 2000.0, 1) - cm.verify_s(1, 2000.0, 1)
    assert extra == pytest.approx(d.state_bytes_per_request / cm.device.bytes_per_s + cm._sample_token_s, rel=1e-9)
    # the states are reserved out of the KV budget for the engine's default 256 sequences
    from simlab.hardware.roofline import PROFILE_SAMPLED_ROWS

    assert cm._window_bytes == d.state_bytes_per_request and PROFILE_SAMPLED_ROWS == 256


def test_a_hybrid_model_runs_end_to_end_and_a_mamba_hybrid_is_exit_2_naming_its_pattern(tmp_path):
    scenario = tmp_path / "s.yaml"
    text = """name: hybrid
workload: {{kind: closed_loop, concurrency: 4, num_requests: 16, prompt_tokens: {{dist: constant, value: 256}},
           output_tokens: {{dist: constant, value: 32}}}}
hardware: {{kind: roofline, gpu: h200, model: {model}}}
acceptance: {{kind: iid, alpha: 0.7}}
arms: [{{name: no-spec, method: none}}, {{name: dflash, method: dflash, gamma: 7}}]
"""
    scenario.write_text(text.format(model=FIXTURES / "qwen3.5-35b-a3b"), encoding="utf-8")
    code, _, stderr = run_cli("run", str(scenario), "--out", str(tmp_path / "ok"), "--no-plot")
    assert code == 0, stderr
    hardware = json.loads((tmp_path / "ok" / "summary.json").read_text())["hardware"]
    assert "no engine run of a hybrid model was compared" in hardware["outside_calibrated_classes"]
    scenario.write_text(text.format(model=FIXTURES / "nemotron-h-56b-base-8k"), encoding="utf-8")
    out = tmp_path / "out"
    code, _, stderr = run_cli("run", str(scenario), "--out", str(out), "--no-plot")
    assert code == 2 and "hybrid_override_pattern" in stderr and "54 mamba" in stderr and not out.exists()
    with pytest.raises(InputError, match="unknown model"):
        get_model("no/such/config.json", file=str(scenario))


def _database_configs():
    try:
        import aiconfigurator_core
    except ImportError:
        return []
    folder = Path(aiconfigurator_core.__file__).parent / "model_configs"
    return sorted(p for p in folder.glob("*_config.json") if not p.name.endswith("hf_quant_config.json"))


def test_every_config_the_silicon_database_ships_is_read_or_refused_by_name():
    """aiconfigurator-core's 80-odd published configs (Llama, Qwen, DeepSeek, Kimi, GLM, MiniMax, Mixtral, gpt-oss,
    Gemma, MiMo, Step, Nemotron): each is described, or refused with an InputError naming its field, never a crash."""
    configs = _database_configs()
    if not configs:
        pytest.skip("aiconfigurator-core is not installed")
    described = 0
    for path in configs:
        try:
            d = describe_file(path)
        except InputError as err:
            assert err.field and "Traceback" not in str(err), path.name
            continue
        described += 1
        assert d.params_total >= d.params_active > 0 and d.kv_bytes_per_token >= 0, path.name
    assert described >= 0.9 * len(configs)


@pytest.mark.parametrize("name,total_b,active_b,embedding_counted", [
    ("meta-llama--Llama-4-Maverick-17B-128E-Instruct", 400, 17, True),
    ("meta-llama--Llama-4-Scout-17B-16E-Instruct", 109, 17, True),
    ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8", 120, 12, False),
    ("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.6, 3.2, False),
    ("nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16", 550, 55, False),
    ("mistralai--Mixtral-8x7B-v0.1", 46.7, 12.9, True), ("mistralai--Mixtral-8x22B-v0.1", 141, 39, True),
    ("Qwen--Qwen3-Coder-480B-A35B-Instruct", 480, 35, True), ("openai--gpt-oss-20b", 20.9, 3.6, False),
    ("zai-org--GLM-5", 744, None, True), ("MiniMaxAI--MiniMax-M2.5", 229, None, True)])
def test_the_databases_configs_give_their_published_parameters(name, total_b, active_b, embedding_counted):
    """Published totals and activated counts within 3 %; Meta, Mistral and Qwen count the input embedding among the
    activated parameters, NVIDIA and OpenAI do not (Llama 4 Scout's 109 B counts its vision tower: -1.1 % here)."""
    paths = [p for p in _database_configs() if p.name == f"{name}_config.json"]
    if not paths:
        pytest.skip("aiconfigurator-core is not installed")
    d = describe_file(paths[0])
    assert d.params_total == pytest.approx(total_b * 1e9, rel=0.03)
    if active_b is not None:
        active = d.params_active + (d.params_embedding if embedding_counted else 0)
        assert active == pytest.approx(active_b * 1e9, rel=0.03)


def test_interleaved_moe_layers_are_priced_by_count():
    """Llama-4-Maverick: MoE every second layer, the others dense at intermediate_size_mlp; the roofline's shape
    counts 24 of each and reads back to the description's parameters exactly."""
    paths = [p for p in _database_configs() if p.name == "meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json"]
    if not paths:
        pytest.skip("aiconfigurator-core is not installed")
    model = roofline_shape(read_config_file(paths[0]), file=str(paths[0]), name="maverick")
    d = describe_file(paths[0])
    assert (model.num_dense_layers, model.num_moe_layers, model.intermediate_size) == (24, 24, 16384)
    assert (model.total_params, model.active_params) == (d.params_total, d.params_active)
