"""The block drafter: training and inference paths agree, the context cache rolls back, the Markov head
samples left to right."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from simlab.real.generate import pad_batch  # noqa: E402

from .models import build_pair  # noqa: E402


def _context(target, drafter, sequences, max_len=48):
    """Target features of ``sequences`` appended to a fresh drafter context cache (one slot per sequence)."""
    cache = drafter.new_context_cache(len(sequences), max_len)
    ids, lengths = pad_batch(sequences)
    with torch.no_grad():
        out = target(ids, hidden_layer_ids=drafter.target_layer_ids)
        drafter.append_context(cache, out.layer_hidden, torch.arange(len(sequences)), lengths)
    return cache


@pytest.mark.parametrize("layout", ["dspark", "dflash"])
def test_training_forward_equals_inference_draft(layout):
    target, drafter = build_pair(1, layout=layout)
    gamma = 4
    tokens = torch.randint(0, 259, (2, 30), generator=torch.Generator().manual_seed(0))
    anchors = torch.tensor([[3, 17, 9], [25, 1, 12]])
    with torch.no_grad():
        out = target(tokens, hidden_layer_ids=drafter.target_layer_ids)
        trained = drafter.training_forward(target, out.layer_hidden, tokens, anchors, gamma)
    assert trained.shape == (2, 3, gamma, target.config.hidden_size)
    for row in range(2):
        for block, anchor in enumerate(anchors[row].tolist()):
            cache = _context(target, drafter, [tokens[row, :anchor].tolist()])
            with torch.no_grad():
                inferred = drafter.draft(target, cache, torch.tensor([0]), tokens[row, anchor][None], gamma)
            torch.testing.assert_close(inferred.hidden[0], trained[row, block], atol=1e-10, rtol=0)


@pytest.mark.parametrize("layout", ["dspark", "dflash"])
def test_block_layout(layout):
    target, drafter = build_pair(2, layout=layout)
    assert drafter.config.block_length(5) == (5 if layout == "dspark" else 6)
    cache = _context(target, drafter, [[1, 2, 3]])
    with torch.no_grad():
        block = drafter.draft(target, cache, torch.tensor([0]), torch.tensor([4]), 5)
    assert block.base_logits.shape == (1, 5, 259)


def test_context_rollback_equals_a_fresh_context():
    target, drafter = build_pair(3)
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(0, 259, (n,), generator=gen).tolist() for n in (6, 10)]
    verified = torch.randint(0, 259, (2, 5), generator=gen)  # anchor + 4 drafts per request
    accepted = torch.tensor([1, 3])  # anchor plus 0 and 2 accepted drafts
    cache = _context(target, drafter, prompts)
    target_cache = target.new_cache(2, 48)
    with torch.no_grad():
        ids, lengths = pad_batch(prompts)
        target(ids, cache=target_cache, query_lengths=lengths)
        out = target(verified, cache=target_cache, hidden_layer_ids=drafter.target_layer_ids)
        drafter.append_context(cache, out.layer_hidden, torch.arange(2), accepted)
        anchors = torch.tensor([7, 8])
        continued = drafter.draft(target, cache, torch.arange(2), anchors, 4)
    kept = [p + verified[r, : accepted[r]].tolist() for r, p in enumerate(prompts)]
    fresh_cache = _context(target, drafter, kept)
    with torch.no_grad():
        fresh = drafter.draft(target, fresh_cache, torch.arange(2), anchors, 4)
    assert cache.lengths.tolist() == [len(k) for k in kept]
    torch.testing.assert_close(continued.base_logits, fresh.base_logits, atol=1e-10, rtol=0)


def test_markov_head_samples_left_to_right():
    target, drafter = build_pair(4)
    cache = _context(target, drafter, [[3, 1, 4, 1, 5], [9, 2]])
    anchors = torch.tensor([6, 5])
    with torch.no_grad():
        block = drafter.draft(target, cache, torch.arange(2), anchors, 5)
        greedy = drafter.sample(block, anchors, 0.0)
        previous = anchors
        for k in range(5):
            logits = block.base_logits[:, k] + drafter.markov_out(drafter.markov_in(previous))
            expected = logits.argmax(-1)
            assert torch.equal(greedy.tokens[:, k], expected)
            features = torch.cat([block.hidden[:, k], drafter.markov_in(previous)], dim=-1)
            conf = torch.sigmoid(drafter.confidence_head(features)).squeeze(-1)
            torch.testing.assert_close(greedy.confidence[:, k], conf, atol=1e-12, rtol=0)
            previous = expected
        # the bias changes the choice somewhere, or this test would not tell DSpark from DFlash
        assert not torch.equal(greedy.tokens, block.base_logits.argmax(-1))
        u = torch.rand(2, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        sampled = drafter.sample(block, anchors, 1.0, u)
    torch.testing.assert_close(sampled.probs.sum(-1), torch.ones(2, 5, dtype=torch.float64), atol=1e-12, rtol=0)
    assert bool(((sampled.confidence > 0) & (sampled.confidence < 1)).all())
    chosen = torch.gather(sampled.probs, 2, sampled.tokens[..., None])
    assert bool((chosen > 0).all())


def test_drafter_owns_no_target_weights():
    target, drafter = build_pair(5)
    names = set(drafter.state_dict())
    assert not any("embed_tokens" in n or "lm_head" in n for n in names)
    assert {"fuse.weight", "markov_in.weight", "markov_out.weight", "confidence_head.weight"} <= names
