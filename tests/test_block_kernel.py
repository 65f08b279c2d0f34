"""The compiled decode block (simlab/engine/block_kernel.py) against the numpy block it replaces, bit for bit.

The numpy block's exact steps equal stepping one iteration at a time (test_reference_*); the compiled block steps
in order, so all its steps are exact. Here both plan the same rosters from the same draws: every step the numpy
block calls exact must be equal in every array, the compiled block must be exact at least as far, and stepping
the numpy block one step at a time must reach the compiled block's later steps too.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers import simulate, write_scenario
from test_reference_equivalence import SCHEDULERS as REFERENCE_SCHEDULERS
from simlab.engine.block import Block, Roster, plan_block
from simlab.engine.decode import ArmPolicy
from simlab.engine.drawstore import DrawStore
from simlab.hardware.profiles import load_profile, shipped_profiles
from simlab.schedulers import make_scheduler

CONTEXT_TABLE = load_profile(shipped_profiles()["h100-sxm_qwen3-8b"])  # a (context x batch) verify grid


class TableStore(DrawStore):
    """Draws of every (request, decode step) from fixed tables [requests, steps, G], laid out as the DrawStore's
    rows (request r's step s is row r x steps + s); request r holds ``held[r]`` steps from its first."""

    def __init__(self, conf: np.ndarray, true_accepted: np.ndarray, held: np.ndarray, proposed=None) -> None:
        num_requests, self.num_steps_drawn, gamma = conf.shape
        self.conf = np.ascontiguousarray(conf).reshape(num_requests * self.num_steps_drawn, gamma)
        self.true_accepted = np.ascontiguousarray(true_accepted).reshape(-1)
        if proposed is None:
            proposed = np.full(true_accepted.shape, gamma)
        self.proposed = np.ascontiguousarray(proposed, dtype=np.int64).reshape(-1)
        self.held = held
        self.lag_steps = 0

    def ready(self, request_ids, first, last, remaining, single=False):
        end = np.minimum(first + self.held[request_ids], self.num_steps_drawn)
        return request_ids * self.num_steps_drawn, end, np.zeros_like(end)


def _case(rng, num_rows: int, gamma: int, *, ties: bool, num_steps_drawn: int = 80):
    conf = rng.uniform(0.0, 1.0, (num_rows, num_steps_drawn, gamma))
    if ties:  # a coarse grid: many equal survival values, zeros and ones among them
        conf = np.round(conf * 4) / 4
    true_accepted = rng.integers(0, gamma + 1, (num_rows, num_steps_drawn))
    held = rng.integers(1, 40, num_rows) if rng.random() < 0.5 else np.full(num_rows, num_steps_drawn)
    proposed = None
    if rng.random() < 0.4:  # a lookup drafter (ngram, suffix): rounds without a match propose nothing
        proposed = np.where(rng.random((num_rows, num_steps_drawn)) < 0.6, gamma, 0)
        conf[proposed == 0] = 0.0
        true_accepted[proposed == 0] = 0
    roster = Roster(request_id=np.arange(num_rows, dtype=np.int64),
                    remaining=rng.integers(1, 60, num_rows).astype(np.int64),
                    context=rng.integers(0, 300_000, num_rows).astype(np.int64),
                    steps=np.zeros(num_rows, dtype=np.int64),
                    join=(rng.random(num_rows) < 0.2).astype(np.int64), num_decoding=num_rows)
    return TableStore(conf, true_accepted, held, proposed), roster


SCHEDULERS = {  # every scheduler of the reference-equivalence tests (all served here), and adaptive's plan
    **REFERENCE_SCHEDULERS,
    "adaptive": {"kind": "adaptive"},
    "adaptive-lag3": {"kind": "adaptive", "lag_steps": 3},
    "adaptive-slo8": {"kind": "adaptive", "slo_tpot_ms": 8.0},  # a TPOT limit that binds at most loads
    "adaptive-slo15-lag3": {"kind": "adaptive", "slo_tpot_ms": 15.0, "lag_steps": 3},
}


def _policy(name: str, gamma: int, max_batch_tokens: int, cost=CONTEXT_TABLE, max_concurrency: int = 0,
            max_drafting: int = 0) -> ArmPolicy:
    params = dict(SCHEDULERS.get(name, {"kind": name}))
    kind = params.pop("kind")
    scheduler = make_scheduler(kind, **params)
    return ArmPolicy("dspark", gamma, scheduler, None, cost, max_batch_tokens, np.linspace(0.9, 0.4, gamma),
                     max_concurrency=max_concurrency, max_drafting=0 if scheduler.plans_draft else max_drafting)


def _stepped(policy, store, roster, num_steps):
    """The numpy block one step at a time (each step exact), advancing the roster by hand."""
    remaining, context, steps = roster.remaining.copy(), roster.context.copy(), roster.steps.copy()
    rows = []
    for k in range(num_steps):
        joined = roster.join <= k
        one = Roster(roster.request_id, remaining.copy(), context.copy(), steps.copy(),
                     np.where(joined, 0, 1).astype(np.int64), len(remaining))
        block = plan_block(policy, one, 1, store, compiled=False)
        rows.append(block)
        remaining -= block.emitted[0]
        context += block.emitted[0]
        steps += block.active[0]
    return rows


@pytest.mark.parametrize("kind", list(SCHEDULERS))
def test_compiled_block_equals_numpy_block(kind):
    _check_against_numpy(kind, CONTEXT_TABLE, np.random.default_rng(sorted(SCHEDULERS).index(kind)), 150)


ROOFLINES = {  # rooflines compiled code prices: a calibrated dense one, DeepSeek-V3 in SGLang's two layouts
    "qwen3-8b-h100-vllm": {"gpu": "h100-sxm", "model": "qwen3-8b", "stack": "vllm"},
    "qwen3-8b-h100-plain-no-graphs": {"gpu": "h100-sxm", "model": "qwen3-8b", "calibration": "none",
                                      "cuda_graph_buckets": "none"},
    "deepseek-v3-tp8": {"gpu": "h200", "model": "deepseek-v3", "stack": "sglang", "precision": "fp8",
                        "tensor_parallel": 8},
    "deepseek-v3-dp8-ep8": {"gpu": "h200", "model": "deepseek-v3", "stack": "sglang", "precision": "fp8",
                            "tensor_parallel": 1, "expert_parallel": 8},
}


@pytest.mark.parametrize("kind", ["hardware_aware", "async_topk", "oracle", "fixed", "goodput", "adaptive",
                                  "adaptive-slo8"])
@pytest.mark.parametrize("hardware", sorted(ROOFLINES))
def test_compiled_block_equals_numpy_block_on_a_roofline(tmp_path, kind, hardware):
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    cost = build_cost_model(RooflineHardware(kind="roofline", **ROOFLINES[hardware]), base_dir=tmp_path, file=None)
    _check_against_numpy(kind, cost, np.random.default_rng(sorted(ROOFLINES).index(hardware)), 60)


def _tree_policy(gamma: int, max_batch_tokens: int, cost, rng) -> ArmPolicy:
    """An EAGLE-3 tree arm (its scheduler is always fixed): a request verifies the tree's nodes within its
    length."""
    from simlab.acceptance.tree import TreeDraws, build_tree

    topk = int(rng.integers(1, 5))
    num_draft_tokens = int(rng.integers(2, topk + (gamma - 1) * topk * topk + 2))  # shallower trees too
    tree = build_tree(np.linspace(0.9, 0.5, gamma), 0.5, topk, num_draft_tokens, gamma)
    return ArmPolicy("eagle3", gamma, make_scheduler("fixed"), None, cost, max_batch_tokens,
                     np.linspace(0.9, 0.4, gamma), tree=TreeDraws(tree, 0.5, topk, gamma))


@pytest.mark.parametrize("hardware", ["table", "roofline"])
def test_compiled_tree_block_equals_numpy_block(tmp_path, hardware):
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    cost = CONTEXT_TABLE
    if hardware == "roofline":  # its drafter reads context: the tree's draft is priced in numpy
        cost = build_cost_model(RooflineHardware(kind="roofline", **ROOFLINES["qwen3-8b-h100-vllm"]),
                                base_dir=tmp_path, file=None)
    _check_against_numpy("tree", cost, np.random.default_rng(11), 80)


@pytest.mark.parametrize("kind", ["fixed", "hardware_aware", "goodput", "adaptive", "adaptive-slo8", "tree"])
def test_compiled_block_equals_numpy_block_on_a_table_whose_drafter_reads_context(tmp_path, kind):
    """kind: operations: a table whose drafter curves add their layers' attention over the drafting requests'
    context (``context_token_s``), read by compiled code as the grid plus that term."""
    from simlab.config.hardware import OperationsHardware
    from simlab.hardware import build_cost_model

    cost = build_cost_model(OperationsHardware(kind="operations", gpu="h100-sxm", model="qwen3-8b"),
                            base_dir=tmp_path, file=None)
    per_token_s, per_position = cost.draft_context("eagle3")
    assert per_position and per_token_s > 0.0
    assert cost.draft_context("dspark") == (pytest.approx(5 * per_token_s), False)  # five layers a block, not one
    _check_against_numpy(kind, cost, np.random.default_rng(29), 60)


def _check_against_numpy(kind, cost, rng, num_trials):
    compared = single = 0
    for trial in range(num_trials):
        num_rows = int(rng.choice([0, 1, 3, 17, 40, 130]))
        gamma = int(rng.integers(1, 9))
        max_batch_tokens = int(rng.choice([num_rows + 5, 4 * num_rows + 1, 16_384]))
        store, roster = _case(rng, num_rows, gamma, ties=trial % 2 == 0)
        if kind == "tree":
            policy = _tree_policy(gamma, max_batch_tokens, cost, rng)
        else:  # a third of the arms turn speculation off above a concurrency the block's rosters straddle
            limit = int(rng.integers(1, max(num_rows, 2) + 1)) if trial % 3 == 1 else 0
            most = int(rng.integers(1, max(num_rows, 2) + 1)) if trial % 4 == 2 else 0  # only the first few draft
            policy = _policy(kind, gamma, max_batch_tokens, cost, limit, most)
        store.lag_steps = policy.lag_steps
        roster.steps[:] = rng.integers(0, 3, num_rows)  # some requests have lagged confidences, some do not
        assert policy.block_kernel() is not None
        num_steps = int(rng.choice([1, 4, 12, 64]))
        fast = plan_block(policy, roster, num_steps, store)
        slow = plan_block(policy, roster, num_steps, store, compiled=False)
        assert 1 <= slow.num_exact <= fast.num_exact <= num_steps
        exact = slow.num_exact
        for name in ("lengths", "accepted", "emitted", "active", "context", "anchors", "batch_tokens"):
            assert np.array_equal(getattr(fast, name)[:exact], getattr(slow, name)[:exact]), (trial, name)
        if policy.tree is not None:
            assert np.array_equal(fast.verify[:exact], slow.verify[:exact]), trial
        assert np.array_equal(fast.drafted_tokens(exact), slow.drafted_tokens(exact)), trial
        assert np.array_equal(fast.draft_len_column(exact), slow.draft_len_column(exact)), trial
        _check_prices(policy, fast)
        _check_totals(fast, roster)
        compared += exact
        # the steps only the compiled block got to, and every third block whole: against single steps
        first = 0 if trial % 3 == 0 else exact
        if fast.num_exact > first:
            stepped = _stepped(policy, store, roster, fast.num_exact)
            for k in range(first, fast.num_exact):
                for name in ("lengths", "accepted", "emitted", "active"):
                    assert np.array_equal(getattr(fast, name)[k], getattr(stepped[k], name)[0]), (trial, k, name)
                if fast.plan is not None:
                    assert fast.plan[0][k] == stepped[k].plan[0][0] and fast.plan[1][k] == stepped[k].plan[1][0]
                assert fast.context[k] == stepped[k].context[0]
            single += fast.num_exact - first
    assert compared > 10 * num_trials // 3 and single > 4 * num_trials // 3  # both comparisons were exercised


def _check_prices(policy, block):
    """The compiled block's step prices equal the replica's pricing of the same steps in numpy, bit for bit."""
    if policy.tree is not None and policy.cost.draft_reads_context:
        assert block.priced is None
        return
    assert block.priced is not None
    exact = block.num_exact
    verify_s, draft_s = block.numpy_prices(policy, policy.verify_priced_by, exact)
    assert np.array_equal(block.priced[0][:exact], verify_s)
    assert np.array_equal(block.priced[1][:exact], draft_s)


def _check_totals(block, roster):
    """What compiled code counted equals what the block's arrays say."""
    counted = Block(block.lengths, block.accepted, block.emitted, block.active, block.context, block.num_exact,
                    block.gamma, verify=block.verify)
    assert np.array_equal(block.anchors, counted.anchors)
    assert np.array_equal(block.batch_tokens, counted.batch_tokens)
    assert np.array_equal(block.finish_step(roster), counted.finish_step(roster))
    assert np.array_equal(block.step_accepted(block.num_exact), counted.step_accepted(block.num_exact))


def test_block_stops_before_a_step_without_draws():
    """A request that would decode past the draws it holds ends the block before that step."""
    store, roster = _case(np.random.default_rng(3), 4, 3, ties=False)
    roster.remaining[:] = 50
    roster.join[:] = 0
    store.held[:] = [30, 7, 30, 30]
    block = plan_block(_policy("fixed", 3, 16_384), roster, 64, store)
    assert block.num_exact == 7
    assert not block.active[7:].any()


def test_sorted_head_is_the_sorted_paths_head():
    from simlab.engine.block_steps import sorted_head as _sorted_head

    rng = np.random.default_rng(5)
    for trial in range(300):
        num_rows, gamma = int(rng.integers(1, 60)), int(rng.integers(1, 9))
        conf = rng.uniform(0, 1, (num_rows, gamma))
        if trial % 3 == 0:
            conf = np.round(conf * 3) / 3
        a = np.multiply.accumulate(conf, axis=-1)[None]
        row_len = rng.integers(0, gamma + 2, (1, num_rows)).astype(np.int64)
        head = np.zeros(int(rng.choice([1, 5, 32])))
        _sorted_head(a, row_len, gamma, head)
        valid = np.arange(gamma)[None, None, :] < np.minimum(row_len, gamma)[..., None]
        full = np.sort(np.where(valid, -a, 1.0).ravel())
        full = np.concatenate([full, np.ones(head.size)])  # a head longer than the path: padded with +1
        assert np.array_equal(head, full[:head.size]), trial


def test_which_arms_the_compiled_block_serves(tmp_path):
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    hw = _policy("hardware_aware", 5, 8192)
    assert hw.block_kernel().code == 1
    assert _policy("fixed", 5, 8192).block_kernel().code == 0
    roofline = build_cost_model(RooflineHardware(kind="roofline", gpu="h100-sxm", model="qwen3-8b"),
                                base_dir=tmp_path, file=None)
    on_roofline = ArmPolicy("dspark", 5, make_scheduler("hardware_aware"), None, roofline, 8192, np.full(5, 0.5))
    assert on_roofline.block_kernel().cost is roofline.verify_kernel()  # compiled code prices the roofline
    goodput_on_roofline = ArmPolicy("dspark", 5, make_scheduler("goodput"), None, roofline, 8192, np.full(5, 0.5))
    assert goodput_on_roofline.block_kernel().draft.size > 0  # a drafter that reads context: compiled code prices it
    deepseek = build_cost_model(RooflineHardware(kind="roofline", gpu="h200", model="deepseek-v3", precision="fp8",
                                                 tensor_parallel=8), base_dir=tmp_path, file=None)
    assert ArmPolicy("mtp", 1, make_scheduler("goodput"), None, deepseek, 8192,
                     np.full(1, 0.5)).block_kernel() is None  # DeepSeek's MoE MTP layer: the numpy block
    compressed = build_cost_model(RooflineHardware(kind="roofline", gpu="b200", model="deepseek-v4-flash",
                                                   tensor_parallel=8), base_dir=tmp_path, file=None)
    assert ArmPolicy("dspark", 5, make_scheduler("hardware_aware"), None, compressed, 8192,
                     np.full(5, 0.5)).block_kernel() is None  # compressed attention: not compiled
    fixed_on_roofline = ArmPolicy("dspark", 5, make_scheduler("fixed"), None, roofline, 8192, np.full(5, 0.5))
    assert fixed_on_roofline.block_kernel() is not None  # fixed reads no cost
    verify_spec, draft_spec = fixed_on_roofline.block_kernel().price  # but its steps are priced in compiled code
    assert verify_spec is roofline.verify_kernel() and draft_spec.size > 0
    assert hw.block_kernel().price[1].size == 0  # a table's drafter: the draft grid prices it
    threshold_on_roofline = ArmPolicy("dspark", 5, make_scheduler("threshold", threshold=0.5), None, roofline,
                                      8192, np.full(5, 0.5))
    assert threshold_on_roofline.block_kernel() is not None
    for kind in ("threshold", "async_topk", "goodput", "oracle"):
        assert _policy(kind if kind != "threshold" else "threshold", 5, 8192).block_kernel() is not None, kind
    assert _policy("adaptive", 5, 8192).block_kernel() is not None
    with_slo = ArmPolicy("dspark", 5, make_scheduler("adaptive", slo_tpot_ms=20.0), None, CONTEXT_TABLE, 8192,
                         np.full(5, 0.5))
    assert with_slo.block_kernel().code == 6 and with_slo.block_kernel().slo_ms == 20.0  # adaptive with its TPOT limit
    assert ArmPolicy("none", 0, None, None, CONTEXT_TABLE, 8192, np.zeros(0)).block_kernel() is None


def test_simulations_are_the_same_with_and_without_the_compiled_block(tmp_path, monkeypatch):
    """A whole scenario (paged KV under pressure, chunked prefill, budgets): every record equal."""
    data = {
        "name": "compiled-block", "seed": 4,
        "workload": {"kind": "poisson", "rate": 40.0, "num_requests": 160,
                     "prompt_tokens": {"dist": "uniform", "low": 20, "high": 1500},
                     "output_tokens": {"dist": "uniform", "low": 1, "high": 300}},
        "hardware": "h100-sxm_qwen3-8b",
        "engine": {"max_num_seqs": 48, "max_batch_tokens": 260, "prefill_chunk_tokens": 128,
                   "kv_cache_tokens": 40_000},
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "fixed", "method": "dspark", "gamma": 7, "scheduler": {"kind": "fixed"}},
                 {"name": "hw", "method": "dflash", "gamma": 5, "scheduler": {"kind": "hardware_aware"}},
                 {"name": "adaptive-slo", "method": "dspark", "gamma": 5,
                  "scheduler": {"kind": "adaptive", "slo_tpot_ms": 9.0}}],
    }
    _same_without_the_compiled_block(write_scenario(tmp_path, data), monkeypatch)


def _same_without_the_compiled_block(path, monkeypatch) -> None:
    """Every arm's records equal whether the compiled block steps it or the numpy block does."""
    fast = simulate(path)
    from simlab.config.loading import load_scenario
    from simlab.runner import build

    assert all(arm.policy.block_kernel() is not None for arm in build(load_scenario(path)).arms)  # all compiled
    monkeypatch.setattr(ArmPolicy, "block_kernel", lambda self: None)
    slow = simulate(path)
    for name in slow:
        assert fast[name].requests.equals(slow[name].requests), name
        for column in slow[name].steps:
            assert np.array_equal(np.asarray(fast[name].steps[column]), np.asarray(slow[name].steps[column])), column
        assert fast[name].metrics["num_preemptions"] == slow[name].metrics["num_preemptions"]


@pytest.mark.parametrize("kind", ["fixed", "hardware_aware", "adaptive"])
def test_block_stops_after_the_first_finish_when_asked(kind):
    rng = np.random.default_rng(21)
    stopped_early = 0
    for trial in range(60):
        store, roster = _case(rng, int(rng.choice([3, 17, 40])), 5, ties=trial % 2 == 0)
        store.held[:] = store.num_steps_drawn
        policy = _policy(kind, 5, 16_384)
        store.lag_steps = policy.lag_steps
        whole = plan_block(policy, roster, 64, store)
        cut = plan_block(policy, roster, 64, store, stop_at_finish=True)
        finish = whole.finish_step(roster)
        first = int(finish.min())  # the first step at whose end a request emits its last token (64: none)
        assert cut.num_exact == min(first + 1, whole.num_exact), trial
        for name in ("lengths", "accepted", "emitted", "active", "context"):
            assert np.array_equal(getattr(cut, name)[:cut.num_exact], getattr(whole, name)[:cut.num_exact])
        stopped_early += cut.num_exact < whole.num_exact
    assert stopped_early > 20


def test_a_replaced_policy_does_not_inherit_the_compiled_blocks_choice(tmp_path):
    """ArmPolicy caches what the compiled block reads; a copy with another cost model decides afresh."""
    import dataclasses

    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    policy = _policy("hardware_aware", 5, 8192)
    assert policy.block_kernel() is not None
    compressed = build_cost_model(RooflineHardware(kind="roofline", gpu="b200", model="deepseek-v4-flash",
                                                   tensor_parallel=8), base_dir=tmp_path, file=None)
    assert dataclasses.replace(policy, cost=compressed).block_kernel() is None  # compiled code cannot price it


def test_simulations_on_a_roofline_are_the_same_with_and_without_the_compiled_block(tmp_path, monkeypatch):
    """DeepSeek-V3 with data-parallel attention (the busiest group's share, the routed experts' table): every
    record of the arms compiled code now steps on a roofline."""
    data = {
        "name": "compiled-roofline", "seed": 6,
        "workload": {"kind": "closed_loop", "concurrency": 24, "num_requests": 72,
                     "prompt_tokens": {"dist": "uniform", "low": 64, "high": 900},
                     "output_tokens": {"dist": "uniform", "low": 2, "high": 200}},
        "hardware": {"kind": "roofline", "gpu": "h200", "model": "deepseek-v3", "stack": "sglang",
                     "precision": "fp8", "tensor_parallel": 1, "expert_parallel": 8},
        "engine": {"max_num_seqs": 64, "max_batch_tokens": 2048, "prefill_chunk_tokens": 512},
        "acceptance": {"kind": "preset", "name": "qwen3-8b"},
        "arms": [{"name": "hw", "method": "dspark", "gamma": 5, "scheduler": {"kind": "hardware_aware"}},
                 {"name": "async", "method": "dflash", "gamma": 7, "scheduler": {"kind": "async_topk", "lag_steps": 2}},
                 {"name": "oracle", "method": "dspark", "gamma": 3, "scheduler": {"kind": "oracle"}},
                 {"name": "goodput", "method": "eagle3", "gamma": 4, "scheduler": {"kind": "goodput", "lag_steps": 1}},
                 {"name": "adaptive", "method": "dspark", "gamma": 5, "scheduler": {"kind": "adaptive"}},
                 {"name": "adaptive-slo", "method": "dflash", "gamma": 6,
                  "scheduler": {"kind": "adaptive", "slo_tpot_ms": 30.0}}],
    }
    _same_without_the_compiled_block(write_scenario(tmp_path, data), monkeypatch)


def test_steps_timed_by_another_model_than_the_policys_are_priced_with_it(tmp_path):
    """Validation schedules with one model and times steps with another: compiled prices (the policy's model)
    are used only when the timing model is the policy's."""
    from simlab.config.hardware import RooflineHardware
    from simlab.hardware import build_cost_model

    timing = build_cost_model(RooflineHardware(kind="roofline", **ROOFLINES["qwen3-8b-h100-vllm"]),
                              base_dir=tmp_path, file=None)
    store, roster = _case(np.random.default_rng(4), 17, 5, ties=False)
    policy = _policy("hardware_aware", 5, 16_384)
    block = plan_block(policy, roster, 12, store)
    exact = block.num_exact
    assert block.priced is not None
    own = block.prices(policy, policy.cost, exact)
    assert np.array_equal(own[0], block.priced[0][:exact])
    other = block.prices(policy, timing, exact)
    assert np.array_equal(other[0], block.numpy_prices(policy, timing, exact)[0])
    assert not np.array_equal(other[0], own[0])  # the roofline prices these steps otherwise
    assert np.array_equal(other[1], own[1])  # the draft is the policy's either way


@pytest.mark.parametrize("name", ["hardware_aware", "adaptive"])
def test_steps_are_priced_on_the_engines_staircase_where_the_scheduler_reads_another_view(name):
    """The scheduler reads its engine's view of the steps (no CUDA-graph padding); the engine times them on the
    staircase. Compiled code plans with the view and prices with the staircase, as the numpy block does."""
    from simlab.hardware.sps_view import scheduler_view

    view = scheduler_view(CONTEXT_TABLE, "smooth")
    assert view is not CONTEXT_TABLE  # the shipped profile pads to its graph sizes
    params = dict(SCHEDULERS[name]) if name in SCHEDULERS else {"kind": name}
    scheduler = make_scheduler(params.pop("kind"), **params)
    policy = ArmPolicy("dspark", 5, scheduler, None, view, 16_384, np.linspace(0.9, 0.4, 5),
                       step_cost=CONTEXT_TABLE)
    assert policy.verify_priced_by is CONTEXT_TABLE
    store, roster = _case(np.random.default_rng(11), 23, 5, ties=False)
    store.lag_steps = policy.lag_steps
    fast = plan_block(policy, roster, 12, store)
    slow = plan_block(policy, roster, 12, store, compiled=False)
    exact = slow.num_exact
    assert np.array_equal(fast.lengths[:exact], slow.lengths[:exact])  # planned on the view either way
    assert fast.priced is not None
    staircase = fast.prices(policy, CONTEXT_TABLE, exact)
    assert staircase[0] is not None and np.array_equal(staircase[0], fast.priced[0][:exact])
    assert np.array_equal(staircase[0], fast.numpy_prices(policy, CONTEXT_TABLE, exact)[0])
    assert not np.array_equal(staircase[0], fast.numpy_prices(policy, view, exact)[0])  # the padding counts
