"""The profiler's building blocks: its planned steps compute what the real models compute, the grids and the
placement of batch tokens, the monotone fix, the timer and the model resolution."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.common.errors import InputError  # noqa: E402
from simlab.hardware.buckets import vllm_default_capture_sizes  # noqa: E402
from simlab.real.profiler.models import load_models  # noqa: E402
from simlab.real.profiler.spec import batch_token_grid, build_spec, place_verify, spread  # noqa: E402
from simlab.real.profiler.steps import (  # noqa: E402
    autoregressive_step,
    planned_draft,
    planned_forward,
    prefill_step,
    sequential_head_step,
)
from simlab.real.profiler.table import monotone, monotone_grid  # noqa: E402
from simlab.real.profiler.timing import time_step  # noqa: E402

from .models import build_pair  # noqa: E402


def _random_cache(cache, seed):
    generator = torch.Generator().manual_seed(seed)
    cache.keys.normal_(generator=generator)
    cache.values.normal_(generator=generator)


def test_planned_forward_equals_the_target_forward_on_a_ragged_batch():
    target, _ = build_pair(0)
    queries, contexts = place_verify(13, 21, 8)
    cache = target.new_cache(len(queries), max(q + c for q, c in zip(queries, contexts)))
    cache.lengths.copy_(torch.tensor(contexts))
    _random_cache(cache, 1)
    planned_cache = copy.deepcopy(cache)
    ids = torch.randint(0, target.config.vocab_size, (len(queries), max(queries)),
                        generator=torch.Generator().manual_seed(2))
    slots, lengths = torch.arange(len(queries)), torch.tensor(queries)
    with torch.inference_mode():
        reference = target(ids, cache=cache, slot_ids=slots, query_lengths=lengths, hidden_layer_ids=(1, 0))
        batch = planned_cache.plan(slots, lengths, max(queries))
        logits, layer_hidden = planned_forward(target, planned_cache, batch, ids, (1, 0))
        reference_logits = target.logits(reference.hidden)
    torch.testing.assert_close(logits, reference_logits, rtol=0, atol=0)
    torch.testing.assert_close(layer_hidden, reference.layer_hidden, rtol=0, atol=0)
    assert torch.equal(planned_cache.keys, cache.keys)  # the same K/V written where the engine writes them


def test_prefill_step_gives_the_last_tokens_logits_of_a_plain_causal_forward():
    target, _ = build_pair(0)
    with torch.inference_mode():
        logits = prefill_step(target, 12).run()
        reference = target.logits(target(torch.zeros(1, 12, dtype=torch.long)).hidden)[:, -1:]
    torch.testing.assert_close(logits, reference, rtol=0, atol=1e-12)


@pytest.mark.parametrize("layout", ["dspark", "dflash"])
def test_planned_draft_equals_drafter_draft(layout):
    target, drafter = build_pair(0, layout=layout)
    cache = drafter.new_context_cache(3, 20)
    cache.lengths.fill_(9)
    _random_cache(cache, 3)
    anchors = torch.tensor([5, 17, 200])
    with torch.inference_mode():
        reference = drafter.draft(target, cache, torch.arange(3), anchors, 4)
        planned = planned_draft(target, drafter, cache, anchors, 4, 9)()
    assert planned.shape == (3, 4, target.config.vocab_size)
    torch.testing.assert_close(planned, reference.base_logits, rtol=0, atol=0)


def test_head_and_autoregressive_steps_produce_tokens_and_logits():
    target, drafter = build_pair(0, dtype=torch.float32)
    with torch.inference_mode():
        tokens = sequential_head_step(target, drafter, 5).run()
        logits = autoregressive_step(target, drafter, 3, 10).run()
    assert tokens.shape == (5, 1) and int(tokens.min()) >= 0 and int(tokens.max()) < target.config.vocab_size
    assert logits.shape == (3, 1, target.config.vocab_size) and bool(torch.isfinite(logits).all())


def test_placement_spreads_tokens_and_context_over_requests_of_one_plus_gamma():
    for batch, context, q in [(1, 0, 8), (13, 21, 8), (64, 512, 8), (7, 3, 4), (8192, 131072, 8)]:
        queries, contexts = place_verify(batch, context, q)
        assert len(queries) == len(contexts) == math.ceil(batch / q)
        assert sum(queries) == batch and sum(contexts) == context
        assert max(queries) - min(queries) <= 1 and max(contexts) - min(contexts) <= 1
    assert place_verify(13, 21, 8) == ([7, 6], [11, 10])
    assert spread(5, 3) == [2, 2, 1]


def test_batch_grid_has_every_power_of_two_and_every_capture_size():
    grid = batch_token_grid(8192)
    assert {2**k for k in range(14)} <= set(grid) and set(vllm_default_capture_sizes()) <= set(grid)
    assert grid == sorted(set(grid)) and grid[-1] == 8192 and len(grid) == 55
    assert batch_token_grid(100, capture_sizes=False) == [1, 2, 4, 8, 16, 32, 64, 100]
    spec = build_spec(device="cuda", dtype="bfloat16", gamma=7, max_batch_tokens=8192)
    assert spec.draft_requests[-1] == 1024 and spec.draft_gammas == (2, 4, 7, 16)
    assert spec.prefill_chunks == (512, 2048) and spec.use_cuda_graphs
    assert not build_spec(device="cpu", dtype="float32", gamma=7).use_cuda_graphs


def test_monotone_fix_is_a_running_maximum_in_both_axes():
    raw = np.random.default_rng(0).uniform(1.0, 2.0, size=(4, 9))
    fixed = np.asarray(monotone_grid(raw.tolist()))
    assert (np.diff(fixed, axis=1) >= 0).all() and (np.diff(fixed, axis=0) >= 0).all()
    assert (fixed >= raw).all() and fixed[0, 0] == raw[0, 0]
    sorted_grid = np.sort(np.sort(raw, axis=1), axis=0)
    assert np.array_equal(monotone_grid(sorted_grid.tolist()), sorted_grid)  # already monotone: unchanged
    assert monotone([3.0, 1.0, 2.0, 5.0]) == [3.0, 3.0, 3.0, 5.0]


def test_timer_runs_warmups_then_replays_and_keeps_the_median():
    calls = []
    timing = time_step(lambda: calls.append(1), device=torch.device("cpu"), warmup=2, replays=5)
    assert len(calls) == 7 and len(timing.samples_s) == 5 and not timing.cuda_graph
    assert timing.median_s == sorted(timing.samples_s)[2] and timing.wall_s >= sum(timing.samples_s)
    with pytest.raises(ValueError):
        time_step(lambda: None, device=torch.device("cpu"), warmup=0, replays=0)


def test_models_resolve_presets_shapes_and_folders(tmp_path):
    from simlab.real.hf_checkpoint import save_hf_checkpoint

    cpu = torch.device("cpu")
    models = load_models("tiny", "dflash:2", device=cpu, dtype=torch.float32)
    assert models.drafter.config.layout == "dflash" and models.drafter.config.num_hidden_layers == 2
    assert models.drafter.markov_in is None and "random weights" in models.target_source
    norm = models.target.layers[0].input_layernorm.weight
    assert torch.equal(norm, torch.ones_like(norm))
    assert all(bool(torch.isfinite(p).all()) for p in models.target.parameters())
    assert models.target.lm_head.weight is models.target.embed_tokens.weight  # tied, as the preset says
    default = load_models("tiny", None, device=cpu, dtype=torch.float32)
    assert default.drafter.config.layout == "dspark" and default.drafter.markov_in is not None
    save_hf_checkpoint(models.target, tmp_path / "ckpt")
    loaded = load_models(str(tmp_path / "ckpt"), "1", device=cpu, dtype=torch.float32)
    assert loaded.target_source.startswith("checkpoint") and loaded.drafter.config.num_hidden_layers == 1
    torch.testing.assert_close(loaded.target.embed_tokens.weight, models.target.embed_tokens.weight)
    with pytest.raises(InputError) as err:
        load_models("tiny", str(tmp_path / "ckpt"), device=cpu, dtype=torch.float32)
    assert err.value.field == "--drafter"
