"""The target model: ragged batched attention with the static cache, KV rollback, checkpoints, big shapes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.real.config import TARGET_PRESETS  # noqa: E402
from simlab.real.generate import pad_batch, plain_generate  # noqa: E402
from simlab.real.hf_checkpoint import load_hf_checkpoint, save_hf_checkpoint  # noqa: E402
from simlab.real.target import TargetModel  # noqa: E402

from .models import tiny_target_config  # noqa: E402

# float32 comparisons between differently shaped (batched / unbatched) computations: a few ulps of the logits
ATOL32 = 2e-5


def _model(dtype=torch.float64, seed=0, **changes):
    torch.manual_seed(seed)
    return TargetModel(tiny_target_config(**changes)).to(dtype).eval()


def _reference_logits(model, ids):
    """Logits of one sequence computed alone, without a cache."""
    return model.logits(model(torch.tensor([ids])).hidden)[0]


@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-12), (torch.float32, ATOL32)])
def test_ragged_batched_attention_equals_per_request_computation(dtype, atol):
    model = _model(dtype)
    gen = torch.Generator().manual_seed(1)
    sequences = [torch.randint(0, 259, (n,), generator=gen).tolist() for n in (17, 5, 11, 1)]
    prefill = [s[: n] for s, n in zip(sequences, (9, 2, 11, 1))]
    # request 2 continues with nothing (query length 0) while the others continue with different lengths
    continuation = [s[len(p):] for s, p in zip(sequences, prefill)]
    cache = model.new_cache(6, 32)
    slots = torch.tensor([4, 0, 2, 5])  # rows map to arbitrary slots
    with torch.no_grad():
        ids, lengths = pad_batch(prefill)
        first = model.logits(model(ids, cache=cache, slot_ids=slots, query_lengths=lengths).hidden)
        ids2, lengths2 = pad_batch(continuation)
        second = model.logits(model(ids2, cache=cache, slot_ids=slots, query_lengths=lengths2).hidden)
        for row, seq in enumerate(sequences):
            reference = _reference_logits(model, seq)
            n1, n2 = len(prefill[row]), len(continuation[row])
            torch.testing.assert_close(first[row, :n1], reference[:n1], atol=atol, rtol=0)
            torch.testing.assert_close(second[row, :n2], reference[n1:n1 + n2], atol=atol, rtol=0)
    assert cache.lengths[slots].tolist() == [len(s) for s in sequences]


@pytest.mark.parametrize("dtype,atol", [(torch.float64, 1e-12), (torch.float32, ATOL32)])
def test_continuing_after_a_rollback_equals_a_fresh_prefill(dtype, atol):
    model = _model(dtype)
    gen = torch.Generator().manual_seed(2)
    prompt = torch.randint(0, 259, (2, 8), generator=gen)
    drafts = torch.randint(0, 259, (2, 6), generator=gen)
    cache = model.new_cache(2, 40)
    with torch.no_grad():
        model(prompt, cache=cache)
        model(drafts, cache=cache)  # verify 6 drafted tokens for both rows
        accepted = torch.tensor([2, 5])
        cache.truncate(torch.arange(2), 8 + accepted)  # keep 2 and 5 of them
        correction = torch.randint(0, 259, (2, 3), generator=gen)
        continued = model.logits(model(correction, cache=cache).hidden)
        for row in range(2):
            kept = prompt[row].tolist() + drafts[row, : accepted[row]].tolist() + correction[row].tolist()
            fresh = _reference_logits(model, kept)[-3:]
            torch.testing.assert_close(continued[row], fresh, atol=atol, rtol=0)
    with pytest.raises(ValueError):
        cache.truncate(torch.arange(2), torch.tensor([100, 100]))


def test_cache_overflow_is_an_error():
    model = _model()
    cache = model.new_cache(1, 4)
    with pytest.raises(ValueError, match="overflow"):
        model(torch.zeros(1, 5, dtype=torch.long), cache=cache)


def test_cached_greedy_decoding_equals_recomputing_from_scratch():
    model = _model()
    prompts = [[5, 6, 7], [1], [9, 9, 9, 9, 9]]
    outputs = plain_generate(model, prompts, [5, 7, 3])
    for prompt, out in zip(prompts, outputs):
        sequence = list(prompt)
        for token in out:
            assert int(_reference_logits(model, sequence)[-1].argmax()) == token
            sequence.append(token)


def test_hidden_states_of_chosen_layers():
    model = _model()
    ids = torch.randint(0, 259, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model(ids, hidden_layer_ids=(1, 0))
        x = model.embed_tokens(ids)
        # recompute layer 0's output by hand from the public pieces
        layer = model.layers[0]
        h = layer.input_layernorm(x)
        from simlab.real.layers import attend, rotary_cos_sin

        cos, sin = rotary_cos_sin(torch.arange(7).expand(2, 7), model.config.head_dim, model.config.rope_theta, x.dtype)
        attn = layer.self_attn
        k, v = attn.key_value(h, cos, sin)
        x0 = layer.mlp_block(x + attn.output(attend(attn.query(h, cos, sin), k, v, None, causal=True)))
    assert out.layer_hidden.shape == (2, 7, 2, model.config.hidden_size)
    torch.testing.assert_close(out.layer_hidden[:, :, 1], x0, atol=1e-12, rtol=0)
    with pytest.raises(ValueError):
        model(ids, hidden_layer_ids=(0, 0))


@pytest.mark.parametrize("tied,max_shard_bytes", [(True, None), (False, 40_000)])
def test_hf_checkpoint_round_trip(tmp_path, tied, max_shard_bytes):
    model = _model(torch.float32, seed=4, tie_word_embeddings=tied)
    folder = save_hf_checkpoint(model, tmp_path / "ckpt", max_shard_bytes=max_shard_bytes)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "qwen3" and config["tie_word_embeddings"] == tied
    assert (folder / "model.safetensors.index.json").exists() == (max_shard_bytes is not None)
    loaded = load_hf_checkpoint(folder)
    assert (loaded.lm_head.weight is loaded.embed_tokens.weight) == tied
    ids = torch.randint(0, 259, (2, 9), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert torch.equal(model.logits(model(ids).hidden), loaded.logits(loaded(ids).hidden))


def test_hf_names_and_errors(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    model = _model(torch.float32)
    folder = save_hf_checkpoint(model, tmp_path / "ckpt", dtype=torch.bfloat16)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as written:
        names = set(written.keys())
        assert written.metadata() == {"format": "pt"}
    assert "model.layers.1.self_attn.q_norm.weight" in names and "model.embed_tokens.weight" in names
    assert "lm_head.weight" not in names  # tied
    assert load_hf_checkpoint(folder).dtype == torch.bfloat16
    # a missing tensor is reported, not silently left random
    tensors = {n: torch.zeros(1) for n in ["model.norm.weight"]}
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((folder / "config.json").read_text())
    save_file(tensors, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match="shape"):
        load_hf_checkpoint(broken)
    config = json.loads((folder / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(ValueError, match="model_type"):
        load_hf_checkpoint(broken)


@pytest.mark.parametrize("name", ["qwen3-4b", "qwen3-8b", "qwen3-14b"])
def test_qwen3_shapes_build_on_the_meta_device(name):
    config = TARGET_PRESETS[name]
    with torch.device("meta"):
        model = TargetModel(config)
    unique = {id(p): p for p in model.parameters()}
    assert sum(p.numel() for p in unique.values()) == config.num_parameters
    assert all(p.is_meta for p in unique.values())
    published = {"qwen3-4b": 4.02e9, "qwen3-8b": 8.19e9, "qwen3-14b": 14.77e9}[name]
    assert abs(config.num_parameters - published) / published < 0.005


def test_meta_model_runs_shapes_only():
    config = dataclasses.replace(TARGET_PRESETS["qwen3-8b"], num_hidden_layers=2)
    with torch.device("meta"):
        model = TargetModel(config)
        out = model(torch.zeros(1, 3, dtype=torch.long), hidden_layer_ids=(0,))
    assert out.hidden.shape == (1, 3, 4096) and out.layer_hidden.shape == (1, 3, 1, 4096)
    assert np.prod(out.hidden.shape) > 0


@pytest.mark.parametrize("groups", [None, (2, 1)])
def test_packed_ragged_forward_equals_each_row_alone(groups):
    """Rows of very different lengths (decode rows beside a prompt chunk) in one packed forward, attended in
    groups or together: every real token's output equals the row computed on its own."""
    model = _model(torch.float64, seed=6)
    gen = torch.Generator().manual_seed(7)
    contexts = [5, 9, 0]
    lengths = [2, 1, 11]
    cache = model.new_cache(3, 32)
    for slot, n in enumerate(contexts):
        if n:
            model(torch.randint(0, 259, (1, n), generator=gen), cache=cache, slot_ids=torch.tensor([slot]))
    ids = torch.randint(0, 259, (3, max(lengths)), generator=gen)
    snapshot = (cache.keys.clone(), cache.values.clone(), cache.lengths.clone())
    out = model(ids, cache=cache, query_lengths=torch.tensor(lengths), hidden_layer_ids=(0,), row_groups=groups)
    assert cache.lengths.tolist() == [c + n for c, n in zip(contexts, lengths)]
    for row, (n, c) in enumerate(zip(lengths, contexts)):
        alone = model.new_cache(1, 32)
        alone.keys[:, 0], alone.values[:, 0], alone.lengths[0] = snapshot[0][:, row], snapshot[1][:, row], c
        ref = model(ids[row: row + 1, :n], cache=alone, hidden_layer_ids=(0,))
        torch.testing.assert_close(out.hidden[row, :n], ref.hidden[0], atol=1e-12, rtol=0)
        torch.testing.assert_close(out.layer_hidden[row, :n], ref.layer_hidden[0], atol=1e-12, rtol=0)
        assert (out.hidden[row, n:] == 0).all()  # padding is not computed
