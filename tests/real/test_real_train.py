"""Training loops and losses on tiny models (a few steps each)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from simlab.real.corpus import is_validation, list_sources, load_corpus  # noqa: E402
from simlab.real.target import TargetModel  # noqa: E402
from simlab.real.tokenizer import ByteTokenizer  # noqa: E402
from simlab.real.train import (  # noqa: E402
    DrafterLossWeights, drafter_losses, evaluate_target_loss, freeze, sample_anchors, train_drafter, train_target,
)

from .models import build_pair, tiny_target_config  # noqa: E402


def _toy_tokens(n: int = 20_000, seed: int = 0) -> np.ndarray:
    """A learnable stream: a repeated phrase with random digits in it."""
    rng = np.random.default_rng(seed)
    text = "".join(f"def f{d}(x):\n    return x + {d}\n" for d in rng.integers(0, 10, size=n // 30))
    return np.frombuffer(text.encode(), dtype=np.uint8).astype(np.uint16)


def test_target_training_lowers_the_loss():
    torch.manual_seed(0)
    model = TargetModel(tiny_target_config())
    tokens = _toy_tokens()
    before = evaluate_target_loss(model, tokens, num_windows=8, seq_len=64)
    report = train_target(model, tokens, steps=40, batch_size=8, seq_len=64)
    after = evaluate_target_loss(model, tokens, num_windows=8, seq_len=64)
    assert report.steps == 40 and report.tokens == 40 * 8 * 64
    assert after < 0.6 * before  # from ~log(259) = 5.6 nats to well below


def test_time_budget_stops_the_loop():
    model = TargetModel(tiny_target_config())
    report = train_target(model, _toy_tokens(), seconds=1.5, batch_size=4, seq_len=32, bf16=False)
    assert report.seconds < 6.0 and report.steps >= 4


def test_drafter_losses_and_gradients():
    target, drafter = build_pair(0, dtype=torch.float32)
    freeze(target)
    tokens = torch.from_numpy(_toy_tokens(2000)[:2 * 64].astype(np.int64)).view(2, 64)
    anchors = sample_anchors(2, 64, 6, 5, torch.Generator().manual_seed(0))
    assert int(anchors.min()) >= 1 and int(anchors.max()) + 5 < 64
    losses = drafter_losses(drafter, target, tokens, anchors, 5)
    assert torch.isfinite(losses.total) and losses.tv > 0 and losses.confidence > 0
    assert losses.acceptance.shape == (5,) and bool(((losses.acceptance >= 0) & (losses.acceptance <= 1)).all())
    losses.total.backward()
    assert all(p.grad is None for p in target.parameters())
    assert drafter.markov_out.weight.grad is not None and drafter.confidence_head.weight.grad is not None
    w = DrafterLossWeights().position_weights(3)
    torch.testing.assert_close(w, torch.exp(-torch.arange(3.0) / 4.0))


def test_drafter_training_raises_acceptance():
    torch.manual_seed(0)
    target = TargetModel(tiny_target_config())
    tokens = _toy_tokens()
    train_target(target, tokens, steps=40, batch_size=8, seq_len=64)
    _, drafter = build_pair(1, dtype=torch.float32)
    batch = torch.from_numpy(tokens[: 4 * 64].astype(np.int64)).view(4, 64)
    anchors = sample_anchors(4, 64, 8, 5, torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = drafter_losses(drafter, target, batch, anchors, 5).acceptance.mean()
    train_drafter(drafter, target, tokens, steps=30, gamma=5, batch_size=4, seq_len=64, num_anchors=8)
    with torch.no_grad():
        after = drafter_losses(drafter, target, batch, anchors, 5).acceptance.mean()
    assert after > before + 0.1


def test_corpus_split_is_by_file_and_stable():
    files = list_sources()
    assert files and all(p.suffix == ".py" for p in files)
    assert is_validation("json/decoder.py", 0.05) == is_validation("json/decoder.py", 0.05)
    corpus = load_corpus(max_bytes=200_000)
    assert set(corpus.train_files).isdisjoint(corpus.validation_files)
    assert 0.01 < len(corpus.validation_files) / len(list_sources()) < 0.1
    tok = ByteTokenizer()
    assert int(corpus.train.max()) <= tok.eos_id
    assert tok.decode(tok.encode("def f(x): ü")) == "def f(x): ü"
