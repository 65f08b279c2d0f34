"""Batched, lossless speculative decoding with the simulator's step model (docs/engine.md), on real kernels.

One iteration, at wall time t:

1. **admission**, first come first served: the oldest arrived request is admitted while fewer than
   ``max_num_seqs`` run and its KV reservation (prompt + output tokens, held until it finishes) fits in
   ``kv_cache_tokens``; otherwise admission stops (it blocks those behind it);
2. **decode part**: the R decoding requests draft (one drafter block forward, then the Markov head samples
   x_1..x_G left to right and the confidence head gives c_k); the verify lengths l_r come from a
   :mod:`simlab.schedulers` policy fed by :func:`~simlab.schedulers.step_inputs.schedule_inputs` (the
   simulator's own helper: limits ``min(G, tokens left - 1)``, the token budget ``max_batch_tokens - R``, the
   lag rule with its prior);
3. **prefill part**: what is left of ``max_batch_tokens`` (at most ``prefill_chunk_tokens``) goes to the
   prefilling requests in admission order, as chunks;
4. **one target forward** over the ragged batch: ``[anchor, x_1..x_{l_r}]`` for each decoding request and the
   chunks, packed (projections and MLPs run on the real tokens only);
5. **outcomes**: speculative sampling (:func:`simlab.real.sampling.verify`) accepts a_r drafts and emits
   ``a_r + 1`` tokens; both KV caches keep the anchor and the accepted drafts; a prefill that completes its
   prompt emits the request's first token; requests that have all their tokens finish and free their seat.

Times are wall seconds since the run started; an iteration's ``step_s`` runs from its start to the next one's,
so the steps of a busy stretch add up to its wall time.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from simlab.config.scenario import EngineConfig
from simlab.real import streams
from simlab.real.drafter import Drafter
from simlab.real.generate import pad_batch
from simlab.real.record_book import RecordBook
from simlab.real.result import EngineResult
from simlab.real.sampling import analytic_acceptance, sample_from_probs, target_probs, verify
from simlab.real.target import TargetModel
from simlab.schedulers import DEFAULT_KIND, Scheduler, make_scheduler
from simlab.schedulers.step_inputs import LagBuffer, schedule_inputs

VerifyCost = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Request:
    """A generation request: prompt token ids, an output budget and an arrival time (seconds after start)."""

    id: int
    prompt_ids: tuple[int, ...]
    max_new_tokens: int
    arrival_s: float = 0.0
    domain: str = ""


@dataclass(frozen=True)
class DecodingConfig:
    """How the real engine decodes (the engine's limits are the simulator's
    :class:`simlab.config.EngineConfig`): gamma: drafted positions per round (0: plain decoding); temperature: 0
    for greedy, else the sampling temperature of target and drafter; seed: of the keyed random streams;
    eos_token_id: stop a request when emitted (None: run to max_new_tokens); arm: the records' arm name;
    max_seq_len: prompt + output tokens per cache slot (None: the longest request's)."""

    gamma: int = 7
    temperature: float = 0.0
    seed: int = 0
    eos_token_id: int | None = None
    arm: str = "real"
    max_seq_len: int | None = None


@dataclass(frozen=True)
class ClosedLoopUsers:
    """A closed loop: ``concurrency`` users send requests in id order; a user's next request arrives
    ``think_time_s`` after its last one finished (requests' own ``arrival_s`` are then ignored)."""

    concurrency: int
    think_time_s: float = 0.0


@dataclass
class _Live:
    """A request in the engine: prefilling (``done`` prompt tokens computed) or decoding."""

    request: Request
    slot: int
    kv_tokens: int
    arrival_s: float
    done: int = 0
    tokens: list[int] = field(default_factory=list)
    first_token_s: float = float("nan")
    steps: int = 0  # decode steps done

    @property
    def prompt_tokens(self) -> int:
        return len(self.request.prompt_ids)

    @property
    def decoding(self) -> bool:
        return self.done == self.prompt_tokens


class SpeculativeEngine:
    """Serve requests with ``target`` verifying ``drafter``'s blocks (``drafter=None``: plain decoding, one
    token per step). ``scheduler`` is a :func:`simlab.schedulers.make_scheduler` policy (default ``fixed``);
    policies that read costs need ``verify_cost``: a :class:`simlab.hardware.base.CostModel` (read at each step's
    context and request count, as in the simulator) or seconds of a target step as a function of its batch tokens
    (array in, array out). Lagged policies need ``prior_conf`` [G], the confidences that stand in for a request
    younger than the lag. ``limits`` are a scenario's engine limits (one replica)."""

    def __init__(
        self,
        target: TargetModel,
        drafter: Drafter | None = None,
        scheduler: Scheduler | None = None,
        decoding: DecodingConfig = DecodingConfig(),
        limits: EngineConfig | None = None,
        verify_cost=None,
        prior_conf: Optional[Sequence[float]] = None,
    ) -> None:
        self.target = target
        self.drafter = drafter
        self.scheduler = scheduler or make_scheduler(DEFAULT_KIND)
        self.config = config = decoding
        self.limits = limits = limits if limits is not None else EngineConfig()
        if limits.replicas != 1 or limits.disaggregation is not None:
            raise ValueError("the real engine serves one co-located replica (engine.replicas = 1, no disaggregation)")
        if limits.max_num_seqs > limits.max_batch_tokens:
            raise ValueError("max_batch_tokens must be >= max_num_seqs (every running request needs a token)")
        self.verify_cost = verify_cost
        entry = self.scheduler.entry
        if not entry.real:
            raise ValueError(f"scheduler {self.scheduler.kind!r} cannot run in real mode (it needs the true outcomes)")
        if entry.reads_verify_cost and verify_cost is None:
            raise ValueError(f"scheduler {self.scheduler.kind!r} needs a verify_cost curve")
        if drafter is not None and entry.reads_confidence and drafter.confidence_head is None:
            raise ValueError(f"scheduler {self.scheduler.kind!r} reads confidences; the drafter has no confidence head")
        if config.gamma < 0 or (drafter is None and config.gamma):
            config = self.config = dataclasses.replace(config, gamma=0)
        self.gamma = config.gamma
        self.prior_conf = None
        if self.scheduler.lag_steps and self.gamma:
            if prior_conf is None or len(prior_conf) < self.gamma:
                raise ValueError(f"scheduler {self.scheduler.kind!r} reads lagged confidences: give prior_conf "
                                 f"(at least {self.gamma} values)")
            self.prior_conf = np.asarray(prior_conf, dtype=float)[: self.gamma]
        self.hidden_layer_ids = drafter.target_layer_ids if drafter else ()
        self.max_seq_len = 0
        self.target_cache = self.draft_cache = None

    # ------------------------------------------------------------------------------------------- run
    @torch.inference_mode()
    def run(self, requests: Sequence[Request], closed_loop: ClosedLoopUsers | None = None) -> EngineResult:
        """Serve ``requests`` to completion and return outputs and records."""
        cfg, limits = self.config, self.limits
        max_seq_len = cfg.max_seq_len or max((len(r.prompt_ids) + r.max_new_tokens for r in requests), default=1)
        for r in requests:
            if len(r.prompt_ids) == 0 or len(r.prompt_ids) >= max_seq_len:
                raise ValueError(f"request {r.id}: prompt of {len(r.prompt_ids)} tokens must be in [1, max_seq_len)")
            if r.max_new_tokens < 1:
                raise ValueError(f"request {r.id}: max_new_tokens must be >= 1")
        num_slots = max(1, min(limits.max_num_seqs, len(requests)))
        self._allocate(num_slots, max_seq_len)
        capacity = limits.kv_cache_tokens if limits.kv_cache_tokens != "auto" else num_slots * self.max_seq_len
        need = max((len(r.prompt_ids) + r.max_new_tokens for r in requests), default=0)
        if need > capacity:
            raise ValueError(f"a request needs {need} KV tokens (prompt + output); the cache holds {capacity}")
        state = _RunState(self, requests, closed_loop, num_slots, capacity)
        state.serve()
        return state.book.result(state.outputs, wall_s=state.clock_s, kv_capacity=capacity,
                                 max_num_seqs=limits.max_num_seqs, open_loop=closed_loop is None,
                                 engine=self.settings())

    def settings(self) -> dict:
        """METRICS ``engine``: the limits this engine runs with (simlab's eager engine: no release; its KV is one
        slot per running request, held whole: ``reserve``)."""
        from simlab.hardware.engine_settings import resolve_engine

        limits = self.limits
        given = {name: getattr(limits, name) for name in type(limits).model_fields}
        described = resolve_engine(given, set(limits.model_fields_set), None, "", speculative=self.gamma > 0,
                                   draft_tokens=self.gamma).describe()
        described["kv_policy"], described["from"]["kv_policy"] = "reserve", "simlab real engine (a slot a request)"
        return described

    def _allocate(self, num_slots: int, max_seq_len: int) -> None:
        """KV caches of ``num_slots`` slots of ``max_seq_len`` tokens (kept while a run fits in them)."""
        cache = self.target_cache
        if cache is not None and cache.max_num_seqs >= num_slots and self.max_seq_len >= max_seq_len:
            return
        self.max_seq_len = max_seq_len
        self.target_cache = self.target.new_cache(num_slots, max_seq_len)
        if self.drafter is not None:
            self.draft_cache = self.drafter.new_context_cache(num_slots, max_seq_len)

    def _verify_fn(self, context_tokens: float, num_requests: int) -> VerifyCost:
        cost = self.verify_cost
        if cost is None:
            return _no_cost
        if hasattr(cost, "verify_s"):  # a simulator cost model: the step's context and requests bound in
            return lambda batch_tokens: cost.verify_s(batch_tokens, context_tokens, num_requests)
        return cost


class _RunState:
    """One run: the queue, the running requests, the KV reservations, the clock and the records."""

    def __init__(self, engine: SpeculativeEngine, requests: Sequence[Request], closed_loop: ClosedLoopUsers | None,
                 num_slots: int, capacity: int) -> None:
        self.engine = engine
        self.cfg = engine.config
        self.limits = engine.limits
        self.gamma = engine.gamma
        self.capacity = capacity
        self.kv_used = 0
        self.free_slots = list(range(num_slots))
        self.running: list[_Live] = []  # in admission order
        self.waiting: deque[tuple[Request, float]] = deque()  # arrived, FCFS: (request, arrival time)
        self.outputs: dict[int, list[int]] = {}
        self.lag = LagBuffer(engine.scheduler.lag_steps, self.gamma)
        self.book = RecordBook(arm=self.cfg.arm, gamma=self.gamma)
        self.closed_loop = closed_loop
        if closed_loop is None:
            self.pending = deque(sorted(((r.arrival_s, r.id, r) for r in requests), key=lambda x: x[:2]))
            self.unsent: deque[Request] = deque()
        else:
            self.unsent = deque(sorted(requests, key=lambda r: r.id))
            self.pending = deque((0.0, r.id, r) for r in
                                 [self.unsent.popleft() for _ in range(min(closed_loop.concurrency, len(requests)))])
        self.start = time.perf_counter()
        self.clock_s = 0.0

    def now(self) -> float:
        return time.perf_counter() - self.start

    def serve(self) -> None:
        while self.pending or self.waiting or self.running:
            if not self.running and not self.waiting:
                due = self.pending[0][0]
                wait = due - self.now()
                if wait > 0:
                    time.sleep(wait)
                self.clock_s = max(self.now(), due)
            self._arrive(self.clock_s)
            self._admit()
            if not self.running:  # nothing admissible (cannot happen with a fitting request): wait for arrivals
                self.clock_s = max(self.now(), self.pending[0][0] if self.pending else self.clock_s)
                continue
            self.clock_s = self._iterate(self.clock_s)

    # ------------------------------------------------------------------------------------------- queue
    def _arrive(self, now_s: float) -> None:
        while self.pending and self.pending[0][0] <= now_s:
            arrival_s, _, request = self.pending.popleft()
            self.waiting.append((request, arrival_s))

    def _admit(self) -> None:
        engine = self.engine
        while self.waiting and len(self.running) < self.limits.max_num_seqs:
            request, arrival_s = self.waiting[0]
            need = len(request.prompt_ids) + request.max_new_tokens
            if self.kv_used + need > self.capacity:
                break
            self.waiting.popleft()
            self.kv_used += need
            slot = self.free_slots.pop(0)
            slot_ids = torch.tensor([slot], dtype=torch.long, device=engine.target.device)
            engine.target_cache.reset(slot_ids)
            if engine.draft_cache is not None:
                engine.draft_cache.reset(slot_ids)
            self.running.append(_Live(request=request, slot=slot, kv_tokens=need, arrival_s=arrival_s))

    def _finish(self, live: _Live, end_s: float) -> None:
        self.outputs[live.request.id] = live.tokens
        self.kv_used -= live.kv_tokens
        self.free_slots.append(live.slot)
        self.free_slots.sort()
        self.lag.drop(live.request.id)
        self.book.add_request(live, end_s)
        if self.closed_loop is not None and self.unsent:
            request = self.unsent.popleft()
            self.pending.append((end_s + self.closed_loop.think_time_s, request.id, request))

    # ------------------------------------------------------------------------------------------- iteration
    def _iterate(self, start_s: float) -> float:
        """One iteration starting at ``start_s``; returns its end (the next iteration's start)."""
        engine, cfg, gamma = self.engine, self.cfg, self.gamma
        device = engine.target.device
        decoding = [s for s in self.running if s.decoding]
        prefilling = [s for s in self.running if not s.decoding]
        num_decode = len(decoding)
        context = np.array([s.prompt_tokens + len(s.tokens) - 1 for s in decoding], dtype=np.int64)
        remaining = np.array([s.request.max_new_tokens - len(s.tokens) for s in decoding], dtype=np.int64)
        request_ids = np.array([s.request.id for s in decoding], dtype=np.int64)
        rounds = np.array([s.steps + 1 for s in decoding], dtype=np.int64)  # stream keys: the prefill is round 0
        slot_ids = torch.tensor([s.slot for s in decoding], dtype=torch.long, device=device)
        anchors = torch.tensor([s.tokens[-1] for s in decoding], dtype=torch.long, device=device)
        max_len = np.minimum(remaining - 1, gamma).astype(np.int64)

        # decode part: draft, then schedule
        sample = None
        confidence = np.full((num_decode, gamma), np.nan)
        if num_decode and gamma:
            block = engine.drafter.draft(engine.target, engine.draft_cache, slot_ids, anchors, gamma)
            u = None
            if cfg.temperature > 0:
                u = streams.uniforms(cfg.seed, streams.DRAFT_SAMPLE, request_ids, rounds, gamma, device=device)
            sample = engine.drafter.sample(block, anchors, cfg.temperature, u)
            confidence = sample.confidence.double().cpu().numpy()
        draft_s = self.now() - start_s
        lengths = self._schedule(decoding, request_ids, confidence, max_len, context, draft_s)
        decode_tokens = num_decode + int(lengths.sum()) if num_decode else 0

        # prefill part: chunks in admission order from what the decode part leaves
        limits = self.limits
        budget = max(0, min(limits.prefill_budget, limits.max_batch_tokens - decode_tokens))
        chunks = []
        for live in prefilling:
            chunk = max(min(live.prompt_tokens - live.done, budget), 0)
            budget -= chunk
            if chunk:
                chunks.append((live, chunk))
        prefill_tokens = sum(c for _, c in chunks)

        # one target forward over decode rows then prefill chunks
        draft_tokens = sample.tokens if sample is not None else torch.zeros(num_decode, 0, dtype=torch.long,
                                                                            device=device)
        rows = [[int(a)] + draft_tokens[i, : lengths[i]].tolist() for i, a in enumerate(anchors.tolist())]
        rows += [list(live.request.prompt_ids[live.done: live.done + chunk]) for live, chunk in chunks]
        ids, query_lengths = pad_batch(rows)
        all_slots = torch.tensor([s.slot for s in decoding] + [live.slot for live, _ in chunks], dtype=torch.long,
                                 device=device)
        query_lengths = query_lengths.to(device)
        out = engine.target(ids.to(device), cache=engine.target_cache, slot_ids=all_slots,
                            query_lengths=query_lengths, hidden_layer_ids=engine.hidden_layer_ids,
                            row_groups=(num_decode, len(chunks)))  # decode rows and chunks attended apart

        # decode outcomes
        accepted = np.zeros(num_decode, dtype=np.int64)
        next_tokens = np.zeros(num_decode, dtype=np.int64)
        accept_prob = np.full((num_decode, gamma), np.nan)
        kept = query_lengths.clone()
        if num_decode:
            num_query = 1 + int(lengths.max())
            logits = engine.target.logits(out.hidden[:num_decode, :num_query])
            accept_u = resample_u = None
            if cfg.temperature > 0:
                accept_u = streams.uniforms(cfg.seed, streams.ACCEPT, request_ids, rounds, max(gamma, 1), device=device)
                resample_u = streams.uniforms(cfg.seed, streams.EMIT, request_ids, rounds, device=device)
            vocab = logits.shape[-1]
            draft_probs = sample.probs if sample is not None else torch.zeros(num_decode, 0, vocab, device=device)
            result = verify(draft_tokens, draft_probs, logits, torch.from_numpy(lengths).to(device), cfg.temperature,
                            accept_u[:, :gamma] if accept_u is not None else None, resample_u)
            accepted_t = result.num_accepted
            engine.target_cache.truncate(slot_ids, torch.from_numpy(context).to(device) + 1 + accepted_t)
            kept[:num_decode] = 1 + accepted_t
            accepted, next_tokens = accepted_t.cpu().numpy(), result.next_token.cpu().numpy()
            if sample is not None and num_query > 1:
                probs = analytic_acceptance(sample.probs[:, : num_query - 1], result.target_probs[:, : num_query - 1])
                verified = np.arange(num_query - 1)[None, :] < lengths[:, None]
                accept_prob[:, : num_query - 1] = np.where(verified, probs.double().cpu().numpy(), np.nan)
        if engine.drafter is not None and engine.draft_cache is not None and len(rows):
            engine.drafter.append_context(engine.draft_cache, out.layer_hidden, all_slots, kept)

        # first tokens of the prompts that complete now
        completing = [(row, live) for row, (live, chunk) in enumerate(chunks, start=num_decode)
                      if live.done + chunk == live.prompt_tokens]
        first_tokens: list[int] = []
        if completing:
            row_ids = torch.tensor([row for row, _ in completing], device=device)
            last = engine.target.logits(out.hidden[row_ids, query_lengths[row_ids] - 1])
            if cfg.temperature == 0.0:
                first_tokens = last.argmax(dim=-1).tolist()
            else:
                ids0 = np.array([live.request.id for _, live in completing])
                u = streams.uniforms(cfg.seed, streams.EMIT, ids0, np.zeros(len(ids0)), device=device)
                first_tokens = sample_from_probs(target_probs(last, cfg.temperature), u).tolist()
        for live, chunk in chunks:
            live.done += chunk

        emitted = np.zeros(num_decode, dtype=np.int64)
        drafted_np = draft_tokens.cpu().numpy()
        for row, live in enumerate(decoding):
            new = [int(t) for t in drafted_np[row, : accepted[row]]] + [int(next_tokens[row])]
            if cfg.eos_token_id is not None and cfg.eos_token_id in new:
                new = new[: new.index(cfg.eos_token_id) + 1]
            new = new[: live.request.max_new_tokens - len(live.tokens)]
            live.tokens.extend(new)
            live.steps += 1
            emitted[row] = len(new)
        end_s = self.now()
        for (_, live), token in zip(completing, first_tokens):
            live.tokens.append(int(token))
            live.first_token_s = end_s

        # records, then finishes (in request id order)
        self.book.add_step(
            t_s=start_s, step_s=end_s - start_s, num_requests=num_decode + len(chunks), decode_requests=num_decode,
            batch_tokens=decode_tokens + prefill_tokens, verify_tokens=int(lengths.sum()),
            accepted_tokens=int(accepted.sum()), emitted_tokens=int(emitted.sum()), prefill_tokens=prefill_tokens,
            kv_tokens=self.kv_used, drafted_tokens=num_decode * gamma if sample is not None else 0,
            draft_len=gamma if sample is not None else 0, draft_s=draft_s, context_tokens=int(context.sum()),
        )
        if num_decode:
            self.book.add_rounds(
                ids=request_ids, domains=[s.request.domain for s in decoding], steps=rounds - 1,
                drafted=gamma if engine.drafter is not None else 0, verified=lengths, accepted=accepted,
                confidence=confidence, t_s=start_s, context_tokens=context, max_len=max_len, emitted=emitted,
                accept_prob=accept_prob,
            )
        done = [s for s in self.running if self._is_done(s)]
        for live in sorted(done, key=lambda s: s.request.id):
            self._finish(live, end_s)
        self.running = [s for s in self.running if s not in done]
        return end_s

    def _is_done(self, live: _Live) -> bool:
        if not live.tokens:
            return False
        eos = self.cfg.eos_token_id
        return len(live.tokens) >= live.request.max_new_tokens or (eos is not None and live.tokens[-1] == eos)

    def _schedule(self, decoding: list[_Live], request_ids: np.ndarray, confidence: np.ndarray, max_len: np.ndarray,
                  context: np.ndarray, draft_s: float) -> np.ndarray:
        """Verify lengths [R] from the scheduler (S = 1), with the simulator's inputs."""
        num = len(decoding)
        if self.gamma == 0 or num == 0:
            return np.zeros(num, dtype=np.int64)
        engine = self.engine
        conf = np.nan_to_num(confidence, nan=1.0)
        lagged, known = self.lag.lagged(request_ids)
        inputs = schedule_inputs(
            engine.scheduler,
            conf=conf[None], max_len=max_len[None],
            verify_s=engine._verify_fn(float(context.sum()), num),
            draft_s=draft_s, token_budget=max(self.limits.max_batch_tokens - num, 0),
            lagged_conf=lagged[None], lagged_known=known[None], prior_conf=engine.prior_conf,
        )
        lengths = np.asarray(engine.scheduler(inputs))[0].astype(np.int64)
        self.lag.push(request_ids, conf)
        return np.minimum(lengths, max_len)


def _no_cost(batch_tokens: np.ndarray) -> np.ndarray:
    """A flat cost for policies that do not read costs."""
    return np.ones_like(batch_tokens, dtype=float)


__all__ = ["ClosedLoopUsers", "DecodingConfig", "EngineResult", "Request", "SpeculativeEngine", "VerifyCost"]
