"""Drafters as operations: each method's forwards built from the target's own layer operations
(simlab.hardware.operations) and priced by the same kernel curves, tabulated as a table's draft curves
(docs/operations.md, "Drafters").

A drafter layer is one of the target's layers, its mean over the target's layers at no context (a mixture of
experts' MTP layer reads the experts its tokens select; a DFlash/DSpark layer is target-shaped), with the pieces
each method adds as GEMMs (the shapes of simlab.hardware.drafters, DOMAIN.md section 2):

- EAGLE-3 step over R requests: a layer whose q/k/v also read the hidden state (2h wide input), a 32k-vocabulary
  LM head, sampling; once a round an fc fusing three target layers' hidden states (3h -> h);
- MTP step: an eh-projection (2h -> h), a layer, the full LM head, sampling;
- DFlash block over R x gamma tokens: ``draft_layers`` layers, an fc fusing five target layers (5h -> h), the full
  LM head over every block token, sampling; DSpark adds gamma head steps over R rows (a rank-256 projection to the
  vocabulary and sampling).

The engine's host time per drafter forward and per speculative round are the calibrated roofline's for the same
GPU, stack and model (``draft_forward_overhead_s``, ``spec_round_overhead_s``). A table's draft curves read no
context, so the drafter's attention over its context is left out here, as in the tables built from the roofline.
"""

from __future__ import annotations

from simlab.hardware.drafters import DFLASH_FUSED_LAYERS, DSPARK_HEAD_RANK, EAGLE3_FUSED_LAYERS
from simlab.hardware.model_shape import ModelConfig
from simlab.hardware.operations import decode_operations, gemm, price, sampler

DRAFT_BATCH_TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def _gemm_s(curves, m: int, n: float, k: float) -> float:
    """One bf16 GEMM of a drafter (its checkpoints are bf16)."""
    return curves.seconds(gemm("drafter", m, n, k, 1))


def _sampler_s(curves, tokens: int, vocab: float) -> float:
    return curves.seconds(sampler(tokens, vocab))


def layer_s(model: ModelConfig, curves, tokens: int, tensor_parallel: int, precision: str,
            expert_parallel: int = 1) -> float:
    """One of the target's layers over ``tokens`` tokens at no context: its operations less the LM head and the
    sampler, over its layers (under expert parallelism with its share of the all-to-all)."""
    parts = price(decode_operations(model, num_requests=tokens, context_per_request=0.0,
                                    tensor_parallel=tensor_parallel, expert_parallel=expert_parallel,
                                    precision=precision), curves)
    return (parts["total"] - parts["lm_head"] - parts["sampler"]) / model.num_layers


def context_token_s(model: ModelConfig, curves, tensor_parallel: int = 1, kv_precision: str = "bf16") -> float:
    """Seconds one drafter layer's attention spends per token of context it reads: one layer's K and V of a token
    on one GPU (an MLA model's latent and rope key, whole on every GPU) at the KV cache's precision, read at the
    decode attention's efficiency (its fp8-KV curve where the GPU has one)."""
    from simlab.hardware.device import kv_heads_per_gpu
    from simlab.hardware.precision import KV_BYTES

    per_token = model.kv_bytes_per_token(kv_heads_per_gpu(model, tensor_parallel), KV_BYTES[kv_precision])
    return per_token / model.num_kv_layers / curves.hbm_bytes_per_s / curves.decode_curve(kv_precision)[1]


def drafter_curves(model: ModelConfig, curves, params, tensor_parallel: int = 1, precision: str = "bf16",
                   kv_precision: str = "bf16", expert_parallel: int = 1) -> dict:
    """A table's draft curves (``autoregressive``, ``autoregressive_round``, ``parallel``, ``sequential_head``) for
    ``model`` from its operations; ``params`` the roofline parameters holding the host times, ``draft_layers`` and
    ``eagle3_draft_vocab``; and MTP's own step (the target's layer, the 2h -> h projection of the embedding and
    the hidden state, the full LM head and sampling) with its round's host time. The curves are at no context;
    an autoregressive step (one drafter layer) and a parallel block (``draft_layers`` layers) add their layers'
    attention over the drafting requests' context as ``context_token_s`` (:func:`context_token_s`)."""
    tp, h = tensor_parallel, model.hidden_size
    vocab = model.vocab_size / tp
    qkv_width = (model.num_heads + 2 * model.num_kv_heads) * model.head_dim / tp
    host, round_host = float(params.draft_forward_overhead_s), float(params.spec_round_overhead_s)
    draft_vocab = params.eagle3_draft_vocab / tp
    points = list(DRAFT_BATCH_TOKENS)
    auto, fuse, block, head, mtp = [], [], [], [], []
    for m in points:
        layer = layer_s(model, curves, m, tp, precision, expert_parallel)
        auto.append(layer + _gemm_s(curves, m, qkv_width, h) + _gemm_s(curves, m, draft_vocab, h)
                    + _sampler_s(curves, m, draft_vocab) + host)
        mtp.append(layer + _gemm_s(curves, m, h, 2 * h) + _gemm_s(curves, m, vocab, h) + _sampler_s(curves, m, vocab)
                   + host)
        fuse.append(_gemm_s(curves, m, h, EAGLE3_FUSED_LAYERS * h) + round_host)
        block.append(params.draft_layers * layer + _gemm_s(curves, m, h, DFLASH_FUSED_LAYERS * h)
                     + _gemm_s(curves, m, vocab, h) + _sampler_s(curves, m, vocab) + host + round_host)
        head.append(_gemm_s(curves, m, vocab, DSPARK_HEAD_RANK) + _sampler_s(curves, m, vocab))
    out = {name: {"batch_tokens": points, "step_s": curve}
           for name, curve in (("autoregressive", auto), ("autoregressive_round", fuse), ("parallel", block),
                               ("sequential_head", head), ("mtp", mtp))}
    out["mtp_round"] = {"step_s": round_host}
    per_layer_s = context_token_s(model, curves, tp, kv_precision)
    out["autoregressive"]["context_token_s"] = out["mtp"]["context_token_s"] = per_layer_s
    out["parallel"]["context_token_s"] = params.draft_layers * per_layer_s
    return out
