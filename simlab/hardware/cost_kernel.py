"""Verify seconds in compiled code (numba), for the simulator's compiled block: a cost model's spec
(:mod:`simlab.hardware.cost_spec`) read at one batch, with the arithmetic of the cost model's own vectorised
path, operation for operation, so that a compiled block prices a step bit for bit as the numpy block does
(tests/test_cost_kernel.py).

This module is imported on a compiled block's first call, never at the command line's start-up.
"""

from __future__ import annotations

import numpy as np

from simlab.common.jit import njit
from simlab.hardware import cost_spec as at


@njit(cache=True, inline="always")
def table_s(flat, width, rows, batch_tokens, context_tokens):
    """:class:`~simlab.hardware.curves.BatchLookup`'s arithmetic at ``batch_tokens`` (an integer >= 1): the
    column's value in each context row, then the blend across rows."""
    b = min(batch_tokens, width - 1)
    if rows.size == 0:
        return flat[b]
    clipped = min(max(context_tokens, rows[0]), rows[rows.size - 1])
    i = min(np.searchsorted(rows, clipped, side="right"), rows.size - 1) - 1
    weight = (clipped - rows[i]) / (rows[i + 1] - rows[i])
    index = i * width + b
    top = flat[index]
    return top + (flat[index + width] - top) * weight


@njit(cache=True, inline="always")
def knee(a, b, width):
    """:func:`simlab.hardware.knee.knee_array` on one pair."""
    d = a - b
    return 0.5 * (a + b + np.sqrt(d * d + width * a * b))


@njit(cache=True, inline="always")
def pad(sizes, b):
    """:meth:`simlab.hardware.buckets.Buckets.pad_array` on one float batch."""
    if sizes.size == 0:
        return b
    if b <= sizes[sizes.size - 1] and b > 0.0:
        return sizes[min(np.searchsorted(sizes, b, side="left"), sizes.size - 1)]
    return b


@njit(cache=True)
def routed_share(coef, shares, tokens):
    """:meth:`simlab.hardware.moe_layout.MoeLayout.routed_share` at ``tokens``: NumPy's ``interp`` over the busiest
    GPU's table (expert parallelism), or the tabulated share of a whole number of tokens."""
    x = max(tokens, 0.0)
    last = shares.size - 1
    if coef[at.SHARE_INTERP] == 0.0:
        return shares[int(x)] if x < last else 1.0
    if x > last:
        return 1.0
    if x == last:
        return shares[last]
    j = int(x)
    if j == x:
        return shares[j]
    slope = (shares[j + 1] - shares[j]) / ((j + 1.0) - j)
    return slope * (x - j) + shares[j]


@njit(cache=True, inline="always")
def floored(coef, gpu_s, padded):
    """:meth:`RooflineCostModel._floored_array`: a forward outside a CUDA graph takes at least the host's launches."""
    if coef[at.LAUNCH_FLOOR] > 0.0 and padded > coef[at.GRAPH_LIMIT]:
        return max(gpu_s, coef[at.LAUNCH_FLOOR])
    return gpu_s


@njit(cache=True)
def roofline_s(coef, sizes, shares, batch_tokens, context_tokens, num_requests):
    """:meth:`RooflineCostModel._verify_array` (or the calibrated one's) at one batch of ``batch_tokens`` > 0."""
    b = float(batch_tokens)
    requests = max(float(num_requests), 1.0)
    c = context_tokens
    if coef[at.GROUPS] == 1.0:
        padded = pad(sizes, b)
        routed = padded
    else:  # the busiest data-parallel attention group's share
        share = np.ceil(requests / coef[at.GROUPS]) / requests
        padded = pad(sizes, b * share)
        b, c, requests, routed = b * share, c * share, requests * share, padded / share
    if coef[at.KIND] == at.PLAIN:
        memory = coef[at.MEM_FIXED] + coef[at.MEM_PER_CONTEXT] * c
        compute = coef[at.DECODE_TOKEN] * padded + coef[at.ATTN_PAIR] * (b / requests) * c
        if coef[at.ROUTED] != 0.0:
            memory = memory + coef[at.ROUTED_READ] * routed_share(coef, shares, routed)
            compute = compute + coef[at.ROUTED_TOKEN] * routed
        return (floored(coef, max(memory, compute), padded) + (coef[at.AR_TOKEN] + coef[at.SAMPLE_TOKEN]) * padded
                + coef[at.FIXED])
    width = coef[at.WIDTH]
    body = knee(coef[at.BODY_WEIGHT], coef[at.BODY_FLOP_TOKEN] * padded, width) if padded > 0.0 else 0.0
    if coef[at.ROUTED] != 0.0:
        routed_s = (knee(coef[at.ROUTED_READ] * routed_share(coef, shares, routed), coef[at.ROUTED_TOKEN] * routed,
                         width) if routed > 0.0 else 0.0)
        body = body + routed_s
    head = knee(coef[at.HEAD_WEIGHT], coef[at.HEAD_FLOP_TOKEN] * padded, width) if padded > 0.0 else 0.0
    linear = body + head + (coef[at.ELEM_TOKEN] + coef[at.AR_TOKEN]) * padded + coef[at.SAMPLE_TOKEN] * padded
    attention = max(c, 0.0) * knee(coef[at.KV_TOKEN], coef[at.ATTN_PAIR] * (b / requests), width)
    return floored(coef, linear + attention, padded) + coef[at.FIXED] + coef[at.REQUEST] * requests


@njit(cache=True)
def verify_s(cost, batch_tokens, context_tokens, num_requests):
    """Verify seconds of ``batch_tokens`` (an integer >= 1) at ``context_tokens`` for ``num_requests`` requests,
    from a spec (:mod:`simlab.hardware.cost_spec`)."""
    flat, width, rows, coef, sizes, shares = cost
    if coef.size == 0:
        return table_s(flat, width, rows, batch_tokens, context_tokens)
    return roofline_s(coef, sizes, shares, batch_tokens, context_tokens, num_requests)


@njit(cache=True)
def verify_run_s(cost, first_tokens, out, context_tokens, num_requests):
    """``out[k]`` = :func:`verify_s` at ``first_tokens + k`` batch tokens (``first_tokens`` >= 1), the same
    context and requests: a table's context row and blend weight are found once for the whole run."""
    flat, width, rows, coef, sizes, shares = cost
    if coef.size != 0:
        for k in range(out.size):
            out[k] = roofline_s(coef, sizes, shares, first_tokens + k, context_tokens, num_requests)
        return
    if rows.size == 0:
        for k in range(out.size):
            out[k] = flat[min(first_tokens + k, width - 1)]
        return
    clipped = min(max(context_tokens, rows[0]), rows[rows.size - 1])  # table_s's row and weight, found once
    i = min(np.searchsorted(rows, clipped, side="right"), rows.size - 1) - 1
    weight = (clipped - rows[i]) / (rows[i + 1] - rows[i])
    for k in range(out.size):
        index = i * width + min(first_tokens + k, width - 1)
        top = flat[index]
        out[k] = top + (flat[index + width] - top) * weight


@njit(cache=True)
def shape_s(draft, offset, tokens, num_requests, context_tokens):
    """:meth:`simlab.hardware.drafters.ForwardShape.time_s` of the shape at ``offset`` (no routed experts, no
    windows), on the plain or the calibrated device."""
    queries_per_request = tokens / max(num_requests, 1.0)
    attn_flops = draft[offset + at.S_ATTN] * queries_per_request * context_tokens
    weight_bytes = draft[offset + at.S_WEIGHT]
    kv_bytes = draft[offset + at.S_KV] * context_tokens
    other_bytes = draft[offset + at.S_LOGIT] * num_requests
    matmul_flops = draft[offset + at.S_FLOPS] * tokens
    fixed, per_token = draft[offset + at.S_AR_FIXED], draft[offset + at.S_AR_TOKEN]
    kernels_s = draft[offset + at.S_KERNELS]
    if draft[at.D_DEVICE] == at.PLAIN:
        compute = max((weight_bytes + kv_bytes + other_bytes) / draft[at.D_BYTES],
                      (matmul_flops + attn_flops) / draft[at.D_FLOPS])
        return compute + fixed + per_token * tokens + kernels_s + 0.0  # + 0.0: time_s's extra_s
    width = draft[at.D_WIDTH]
    cost = knee(weight_bytes / draft[at.D_BYTES], matmul_flops / draft[at.D_FLOPS], width) if tokens > 0.0 else 0.0
    if kv_bytes > 0.0 or attn_flops > 0.0:
        cost += knee(kv_bytes / draft[at.D_ATTN_BYTES], attn_flops / draft[at.D_FLOPS], width)
    return cost + other_bytes / draft[at.D_ELEM_BYTES] + fixed + per_token * tokens + kernels_s + 0.0


@njit(cache=True)
def roofline_draft_s(draft, gamma, num_requests, context_tokens):
    """:meth:`RooflineCostModel.draft_s`: ``num_requests`` >= 1 requests drafting ``gamma`` >= 1 positions over
    ``context_tokens`` (the busiest attention group's share of them)."""
    r, c = float(num_requests), context_tokens
    if draft[at.D_GROUPS] != 1.0:
        share = np.ceil(r / draft[at.D_GROUPS]) / r
        r, c = num_requests * share, c * share
    host, round_s = draft[at.D_HOST], draft[at.D_ROUND]
    method = draft[at.D_METHOD]
    if method == at.EAGLE3 or method == at.MTP:
        fuse = shape_s(draft, at.D_FUSE, r, r, 0.0) if method == at.EAGLE3 else 0.0
        return gamma * shape_s(draft, at.D_STEP, r, r, c) + fuse + gamma * host + round_s
    block = shape_s(draft, at.D_BLOCK, r * gamma, r, c)
    if method == at.DFLASH:
        return block + host + round_s
    return block + gamma * shape_s(draft, at.D_HEAD, r, r, 0.0) + host + round_s


@njit(cache=True)
def planned_draft_s(draft, draft_len, num_drafting, num_decoding, context_tokens):
    """:meth:`simlab.engine.decode.ArmPolicy.planned_draft_s` of one step: ``num_drafting`` of the
    ``num_decoding`` requests draft ``draft_len`` positions and read their share of the batch's
    ``context_tokens``. ``draft`` is ``(grid, spec)``: the grid [G + 1, n] by draft length and requests drafting
    of a drafter whose cost ignores context (an empty spec), or a roofline's draft spec."""
    grid, spec = draft
    if spec.size == 0:
        return grid[draft_len, num_drafting]
    if num_drafting == 0 or draft_len == 0:
        return 0.0
    share = (context_tokens if num_drafting == num_decoding
             else context_tokens * num_drafting / max(num_decoding, 1))
    if spec[at.D_METHOD] == at.TABLE_CONTEXT:
        return table_draft_s(grid, spec, draft_len, num_drafting, share)
    return roofline_draft_s(spec, draft_len, num_drafting, share)


@njit(cache=True, inline="always")
def table_draft_s(grid, spec, draft_len, num_drafting, context_tokens):
    """A table drafter's seconds (:meth:`simlab.engine.decode.ArmPolicy.draft_cost`): its grid at no context plus
    its forwards' context term (:func:`simlab.hardware.cost_spec.table_draft_spec`)."""
    if draft_len == 0 or num_drafting == 0:
        return grid[draft_len, num_drafting]
    forwards = float(draft_len) if spec[2] != 0.0 else 1.0
    return grid[draft_len, num_drafting] + spec[1] * forwards * context_tokens


@njit(cache=True)
def full_draft_s(draft, gamma, num_requests, context_tokens):
    """:meth:`simlab.engine.decode.ArmPolicy.draft_s` of one step: all ``num_requests`` >= 1 draft ``gamma``."""
    grid, spec = draft
    if spec.size == 0:
        return grid[gamma, num_requests]
    if spec[at.D_METHOD] == at.TABLE_CONTEXT:
        return table_draft_s(grid, spec, gamma, num_requests, context_tokens)
    return roofline_draft_s(spec, gamma, num_requests, context_tokens)
