"""A cost model's verify seconds in the form compiled code reads (:mod:`simlab.hardware.cost_kernel`).

A spec is the tuple ``(flat, width, rows, coef, sizes, shares)``:

- a table (:class:`~simlab.hardware.table.TableCostModel`): ``flat`` [rows x width] its verify seconds at every
  integer batch, ``rows`` the context axis (empty when context does not matter); ``coef`` is empty;
- a roofline (plain or calibrated, without compressed attention): ``coef`` its precomputed coefficients (the
  indices below), ``sizes`` the CUDA-graph sizes, ``shares`` the routed-expert share of the busiest GPU by tokens
  (an MoE model's; empty for a dense one); ``flat`` and ``rows`` are empty, ``width`` 0.

A roofline's draft spec (:func:`roofline_draft_spec`) is one array: the drafter's method, the layout, its host
times, the device's rates and each forward shape it runs (the ``D_*`` and ``S_*`` indices below); a drafter
whose cost ignores context is a grid instead, and its draft spec empty.

Building a spec needs no numba: cost models build theirs at the command line's start-up cost of a few arrays.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

# coef's layout
KIND, GROUPS, MEM_FIXED, MEM_PER_CONTEXT, DECODE_TOKEN, ATTN_PAIR, ROUTED, ROUTED_READ, ROUTED_TOKEN = range(9)
LAUNCH_FLOOR, GRAPH_LIMIT, AR_TOKEN, FIXED, SHARE_INTERP = range(9, 14)
BODY_WEIGHT, BODY_FLOP_TOKEN, HEAD_WEIGHT, HEAD_FLOP_TOKEN, ELEM_TOKEN, KV_TOKEN, REQUEST, WIDTH = range(14, 22)
SAMPLE_TOKEN = 22
NUM_COEF = 23
PLAIN, CALIBRATED = 1.0, 2.0  # coef[KIND]

# a roofline draft spec's layout: the method, the layout and the host times, the device, then four forward shapes
D_METHOD, D_GROUPS, D_HOST, D_ROUND, D_DEVICE, D_BYTES, D_FLOPS, D_ATTN_BYTES, D_ELEM_BYTES, D_WIDTH = range(10)
EAGLE3, MTP, DFLASH, DSPARK = 1.0, 2.0, 3.0, 4.0  # draft[D_METHOD]
D_STEP, D_FUSE, D_BLOCK, D_HEAD = 10, 18, 26, 34  # each shape's offset: its fields at offset + S_*
S_WEIGHT, S_KV, S_FLOPS, S_ATTN, S_LOGIT, S_AR_FIXED, S_AR_TOKEN, S_KERNELS = range(8)
NUM_DRAFT_COEF = 42
# a table's draft spec: its grid (by draft length and requests drafting, at no context) read with a context term,
# [TABLE_CONTEXT, seconds per context token a forward, 1 if every drafted position runs a forward else 0]
TABLE_CONTEXT = 5.0
# a draft model's gamma forwards run as MTP's (gamma steps of one shape, no round fusion)
_METHODS = {"eagle3": EAGLE3, "mtp": MTP, "dflash": DFLASH, "dspark": DSPARK, "draft_model": MTP}

MAX_SHARE_TOKENS = 1 << 20  # the most tokens tabulated for a routed share that is not interpolated

_EMPTY = np.zeros(0)


def table_draft_spec(context_token_s: float, per_position: bool) -> np.ndarray:
    """A table drafter's draft spec: its grid plus ``context_token_s`` x the drafting requests' context tokens for
    each forward (one a drafted position when ``per_position``, else one a round)."""
    return np.array([TABLE_CONTEXT, float(context_token_s), 1.0 if per_position else 0.0])


def table_spec(flat: np.ndarray, width: int, rows: np.ndarray) -> tuple:
    """The spec of a verify table tabulated at every integer batch (see the module docstring)."""
    return (flat, int(width), rows, _EMPTY, _EMPTY, _EMPTY)


def roofline_spec(cost) -> Optional[tuple]:
    """The spec of a :class:`~simlab.hardware.roofline.RooflineCostModel` (or its calibrated subclass), or None
    where compiled code does not price it (compressed attention)."""
    if cost.compressed is not None or not _priced(cost):
        return None
    coef = np.zeros(NUM_COEF)
    calibrated = _calibrated(cost)
    coef[KIND] = CALIBRATED if calibrated else PLAIN
    coef[GROUPS] = cost.groups
    coef[MEM_FIXED], coef[MEM_PER_CONTEXT] = cost._mem_fixed_s, cost._mem_per_context_s
    coef[DECODE_TOKEN], coef[ATTN_PAIR] = cost._decode_token_s, cost._attn_pair_s
    coef[ROUTED] = 1.0 if cost._routed else 0.0
    coef[ROUTED_READ], coef[ROUTED_TOKEN] = cost._routed_read_s, cost._routed_token_s
    coef[LAUNCH_FLOOR], coef[GRAPH_LIMIT] = cost._launch_floor_s, cost._graph_limit
    coef[AR_TOKEN], coef[FIXED], coef[SAMPLE_TOKEN] = cost._ar_token_s, cost._fixed_s, cost._sample_token_s
    if calibrated:
        coef[BODY_WEIGHT], coef[BODY_FLOP_TOKEN] = cost._body_weight_s, cost._body_flop_token_s
        coef[HEAD_WEIGHT], coef[HEAD_FLOP_TOKEN] = cost._head_weight_s, cost._head_flop_token_s
        coef[ELEM_TOKEN], coef[KV_TOKEN] = cost._elem_token_s, cost._kv_token_s
        coef[REQUEST], coef[WIDTH] = cost._request_s, cost._width
    shares = _EMPTY
    if cost._routed:
        layout = cost.layout
        if layout.expert_parallel > 1:  # interpolated in the busiest GPU's table, as MoeLayout.routed_share does
            coef[SHARE_INTERP] = 1.0
            shares = np.ascontiguousarray(layout._busiest_table(), dtype=float)
        else:
            if cost.groups > 1:
                return None
            shares = _integer_shares(cost)
            if shares is None:
                return None
    sizes = np.ascontiguousarray(cost.buckets._sizes_arr, dtype=float)
    return (_EMPTY, 0, _EMPTY, coef, sizes, shares)


def _calibrated(cost) -> bool:
    return cost.kernel_arithmetic == CALIBRATED


def _priced(cost) -> bool:
    """Whether compiled code repeats this model's arithmetic: its class declares which (``kernel_arithmetic``); a
    subclass that does not may price a step otherwise."""
    return "kernel_arithmetic" in type(cost).__dict__


def _integer_shares(cost) -> Optional[np.ndarray]:
    """The routed share at 0, 1, 2, ... tokens, computed by the cost model's own (numpy) expression, up to the
    first that is exactly 1 (every larger count reads 1 too: the share never falls); None if it is not 1 within
    ``MAX_SHARE_TOKENS``. Without expert parallelism a step's routed tokens are its padded batch, a whole number."""
    size = 1024
    while size <= MAX_SHARE_TOKENS:
        shares = np.asarray(cost.routed_share(np.arange(size, dtype=float)), dtype=float)
        whole = np.flatnonzero(shares == 1.0)
        if whole.size and np.all(shares[whole[0]:] == 1.0):
            return np.ascontiguousarray(shares[:whole[0] + 1])
        size *= 4
    return None


def roofline_draft_spec(cost, method: str) -> Optional[np.ndarray]:
    """The draft spec of ``method`` on a roofline (see the module docstring), or None where compiled code does not
    price it: compressed attention's windows, an MoE drafter layer (DeepSeek's MTP), an unknown method."""
    drafter, device = cost.drafter, cost.device
    if cost.compressed is not None or method not in _METHODS or not _priced(cost):
        return None
    if method == "draft_model" and drafter.draft_model_step is None:
        return None
    shapes = {"eagle3": {D_STEP: drafter.eagle3_step, D_FUSE: drafter.eagle3_fuse}, "mtp": {D_STEP: drafter.mtp_step},
              "dflash": {D_BLOCK: drafter.parallel_block},
              "dspark": {D_BLOCK: drafter.parallel_block, D_HEAD: drafter.head_step},
              "draft_model": {D_STEP: drafter.draft_model_step}}[method]  # the forwards it runs
    draft = np.zeros(NUM_DRAFT_COEF)
    draft[D_METHOD], draft[D_GROUPS] = _METHODS[method], cost.groups
    draft[D_HOST], draft[D_ROUND] = cost.params.draft_forward_overhead_s, cost.params.spec_round_overhead_s
    calibrated = _calibrated(cost)
    draft[D_DEVICE] = CALIBRATED if calibrated else PLAIN
    draft[D_BYTES], draft[D_FLOPS] = device.bytes_per_s, device.flop_per_s
    if calibrated:
        draft[D_ATTN_BYTES], draft[D_ELEM_BYTES], draft[D_WIDTH] = (device.attn_bytes_per_s, device.elem_bytes_per_s,
                                                                    device.width)
    for offset, shape in shapes.items():
        if shape.routed_bytes or shape.window_tokens:
            return None
        fixed, per_token = device.allreduce_coefficients(shape.num_allreduces, cost.model.hidden_size)
        draft[offset:offset + 8] = (shape.weight_bytes, shape.kv_bytes_per_context_token, shape.flops_per_token,
                                    shape.attn_flops_per_query_context, shape.logit_bytes_per_request, fixed, per_token,
                                    shape.kernels * cost.params.kernel_launch_s)
    return draft
