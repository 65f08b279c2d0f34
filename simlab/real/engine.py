"""Batched, lossless speculative decoding with ragged per-request verify lengths.

One decode round for the R running requests:

1. draft: one block forward of the drafter for all R (context = accepted tokens' target features), then the
   Markov head samples x_1..x_G left to right and the confidence head gives c_k;
2. schedule: the verify lengths l_r come from a :mod:`simlab.schedulers` policy (the simulator's code) fed
   with the confidences, each request's limit, the verify cost curve and the measured draft seconds;
3. verify: one target forward over the ragged batch [anchor, x_1..x_{l_r}] (1 + l_r query tokens per request);
4. accept: speculative sampling (:func:`simlab.real.sampling.verify`), then both KV caches keep only the
   anchor and the accepted drafts (rejected entries are rolled back by shortening the lengths).

Requests join through a prefill step (which emits their first token) whenever a slot is free and they have
arrived; a finished request frees its slot (continuous batching).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch

from simlab.real import streams
from simlab.real.drafter import Drafter, DraftSample
from simlab.real.generate import pad_batch
from simlab.real.records import RecordBook, write_records
from simlab.real.sampling import analytic_acceptance, sample_from_probs, target_probs, verify
from simlab.real.target import TargetModel
from simlab.schedulers import DEFAULT_KIND, ScheduleInputs, Scheduler, make_scheduler

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
class EngineConfig:
    """gamma: drafted positions per round (0: plain decoding); temperature: 0 for greedy, else the sampling
    temperature of target and drafter; max_num_seqs: concurrent requests (cache slots); max_seq_len: prompt +
    output tokens per slot; max_num_batched_tokens: cap on a step's target tokens (None: none); seed: of the
    keyed random streams; eos_token_id: stop a request when emitted (None: run to max_new_tokens); arm: the
    records' arm name."""

    gamma: int = 7
    temperature: float = 0.0
    max_num_seqs: int = 8
    max_seq_len: int = 2048
    max_num_batched_tokens: int | None = None
    seed: int = 0
    eos_token_id: int | None = None
    arm: str = "real"


@dataclass
class EngineResult:
    """Output tokens per request id, the records, and the wall time of the run."""

    outputs: dict[int, list[int]]
    requests: pd.DataFrame
    steps: pd.DataFrame
    request_steps: pd.DataFrame
    wall_s: float

    @property
    def num_rounds(self) -> int:
        """Request-rounds (one request in one decode step)."""
        return len(self.request_steps)

    @property
    def tau(self) -> float:
        """Mean tokens emitted per request-round, bonus included (the acceptance length)."""
        return float(self.request_steps["emitted_tokens"].mean()) if self.num_rounds else float("nan")

    @property
    def tau_standard_error(self) -> float:
        """Standard error of :attr:`tau` over request-rounds (treating rounds as independent)."""
        emitted = self.request_steps["emitted_tokens"].to_numpy(dtype=float)
        return float(emitted.std(ddof=1) / np.sqrt(len(emitted))) if len(emitted) > 1 else float("nan")

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens per wall second over the whole run."""
        return float(self.requests["output_tokens"].sum() / self.wall_s) if self.wall_s > 0 else float("nan")

    def _judged(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[rounds, G] masks: verified at k, judged at k (verified, and 1..k-1 accepted), accepted at k."""
        frame = self.request_steps
        gamma = sum(1 for c in frame.columns if c.startswith("conf_"))
        positions = np.arange(gamma)[None, :]
        verified = frame["verify_len"].to_numpy()[:, None] > positions
        accepted_len = frame["accepted_len"].to_numpy()[:, None]
        return verified, verified & (accepted_len >= positions), accepted_len > positions

    def per_position_acceptance(self) -> np.ndarray:
        """Accepted at position k / verified at position k, k = 1..G (the contract's metric; NaN where never
        verified). With every position verified this is the survival a_k."""
        verified, _, accepted = self._judged()
        with np.errstate(invalid="ignore", divide="ignore"):
            return accepted.sum(0) / verified.sum(0)

    def conditional_acceptance(self) -> np.ndarray:
        """Accepted at k / judged at k (verified with positions 1..k-1 accepted): the conditional c_k."""
        _, judged, accepted = self._judged()
        with np.errstate(invalid="ignore", divide="ignore"):
            return accepted.sum(0) / judged.sum(0)

    def mean_confidence(self) -> np.ndarray:
        """The confidence head's mean c_k over the rounds where position k was judged (compare with
        :meth:`conditional_acceptance` for calibration)."""
        _, judged, _ = self._judged()
        conf = self.request_steps[[f"conf_{k + 1}" for k in range(judged.shape[1])]].to_numpy(dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(judged, conf, 0.0).sum(0) / judged.sum(0)

    def write(self, out_dir) -> None:
        """Write requests.csv, steps.csv and request_steps.csv."""
        write_records(out_dir, self.requests, self.steps, self.request_steps)


@dataclass
class _Running:
    request: Request
    slot: int
    tokens: list[int]
    first_token_s: float
    rounds: int = 0
    history: deque = field(default_factory=deque)


class SpeculativeEngine:
    """Serve requests with ``target`` verifying ``drafter``'s blocks (``drafter=None``: plain decoding, one
    token per step). ``scheduler`` is a :func:`simlab.schedulers.make_scheduler` policy (default ``fixed``);
    policies that read costs need ``verify_cost``: seconds of a target step of B batch tokens (array in,
    array out, as :class:`simlab.schedulers.ScheduleInputs.verify_s`)."""

    def __init__(
        self,
        target: TargetModel,
        drafter: Drafter | None = None,
        scheduler: Scheduler | None = None,
        config: EngineConfig = EngineConfig(),
        verify_cost: VerifyCost | None = None,
    ) -> None:
        self.target = target
        self.drafter = drafter
        self.scheduler = scheduler or make_scheduler(DEFAULT_KIND)
        self.config = config
        self.verify_cost = verify_cost
        entry = self.scheduler.entry
        if not entry.real:
            raise ValueError(f"scheduler {self.scheduler.kind!r} cannot run in real mode (it needs the true outcomes)")
        if entry.reads_verify_cost and verify_cost is None:
            raise ValueError(f"scheduler {self.scheduler.kind!r} needs a verify_cost curve")
        if drafter is not None and entry.reads_confidence and drafter.confidence_head is None:
            raise ValueError(f"scheduler {self.scheduler.kind!r} reads confidences; the drafter has no confidence head")
        if config.gamma < 0 or (drafter is None and config.gamma):
            config = EngineConfig(**{**config.__dict__, "gamma": 0})
            self.config = config
        self.gamma = config.gamma
        self.target_cache = target.new_cache(config.max_num_seqs, config.max_seq_len)
        self.draft_cache = drafter.new_context_cache(config.max_num_seqs, config.max_seq_len) if drafter else None
        self.hidden_layer_ids = drafter.target_layer_ids if drafter else ()

    # ------------------------------------------------------------------------------------------- run
    @torch.inference_mode()
    def run(self, requests: Sequence[Request]) -> EngineResult:
        """Serve ``requests`` to completion and return outputs and records."""
        cfg = self.config
        for r in requests:
            if len(r.prompt_ids) == 0 or len(r.prompt_ids) >= cfg.max_seq_len:
                raise ValueError(f"request {r.id}: prompt of {len(r.prompt_ids)} tokens must be in [1, max_seq_len)")
            if r.max_new_tokens < 1:
                raise ValueError(f"request {r.id}: max_new_tokens must be >= 1")
        book = RecordBook(arm=cfg.arm, gamma=self.gamma)
        waiting = deque(sorted(requests, key=lambda r: (r.arrival_s, r.id)))
        free_slots = list(range(cfg.max_num_seqs))
        running: list[_Running] = []
        outputs: dict[int, list[int]] = {}
        start = time.perf_counter()

        def now() -> float:
            return time.perf_counter() - start

        while waiting or running:
            admitted: list[Request] = []
            budget = cfg.max_num_batched_tokens
            while waiting and len(admitted) < len(free_slots) and waiting[0].arrival_s <= now():
                need = len(waiting[0].prompt_ids)
                if admitted and budget is not None and need + sum(len(a.prompt_ids) for a in admitted) > budget:
                    break
                admitted.append(waiting.popleft())
            if admitted:
                slots = [free_slots.pop(0) for _ in admitted]
                running.extend(self._prefill(admitted, slots, book, now))
            elif running:
                self._decode(running, book, now)
            else:
                time.sleep(max(0.0, waiting[0].arrival_s - now()))
            still: list[_Running] = []
            for state in running:
                if self._finished(state):
                    outputs[state.request.id] = state.tokens
                    free_slots.append(state.slot)
                    book.add_request(
                        id=state.request.id, arrival_s=state.request.arrival_s,
                        prompt_tokens=len(state.request.prompt_ids), output_tokens=len(state.tokens),
                        domain=state.request.domain, first_token_s=state.first_token_s, finish_s=now(),
                        steps=state.rounds,
                    )
                else:
                    still.append(state)
            running = still
            free_slots.sort()
        wall_s = now()
        frames = book.frames()
        return EngineResult(outputs, *frames, wall_s=wall_s)

    def _finished(self, state: _Running) -> bool:
        eos = self.config.eos_token_id
        return len(state.tokens) >= state.request.max_new_tokens or (eos is not None and state.tokens[-1] == eos)

    # ------------------------------------------------------------------------------------------- prefill
    def _prefill(self, admitted: list[Request], slots: list[int], book: RecordBook, now) -> list[_Running]:
        t0 = now()
        device = self.target.device
        slot_ids = torch.tensor(slots, dtype=torch.long, device=device)
        self.target_cache.reset(slot_ids)
        ids, lengths = pad_batch([r.prompt_ids for r in admitted])
        lengths = lengths.to(device)
        out = self.target(ids.to(device), cache=self.target_cache, slot_ids=slot_ids, query_lengths=lengths,
                          hidden_layer_ids=self.hidden_layer_ids)
        rows = torch.arange(len(admitted), device=device)
        last = self.target.logits(out.hidden[rows, lengths - 1])
        if self.config.temperature == 0.0:
            first = last.argmax(dim=-1)
        else:
            request_ids = np.array([r.id for r in admitted])
            u = streams.uniforms(self.config.seed, streams.EMIT, request_ids, np.zeros(len(admitted)), device=device)
            first = sample_from_probs(target_probs(last, self.config.temperature), u)
        if self.drafter is not None and self.draft_cache is not None:
            self.draft_cache.reset(slot_ids)
            self.drafter.append_context(self.draft_cache, out.layer_hidden, slot_ids, lengths)
        done = now()
        num_tokens = int(lengths.sum())
        book.add_step(t_s=t0, num_requests=len(admitted), batch_tokens=num_tokens, verify_tokens=0,
                      accepted_tokens=0, step_s=done - t0, kind="prefill", draft_s=0.0, target_s=done - t0)
        return [_Running(request=r, slot=s, tokens=[int(t)], first_token_s=done)
                for r, s, t in zip(admitted, slots, first.tolist())]

    # ------------------------------------------------------------------------------------------- decode
    def _schedule(
        self, running: list[_Running], confidence: np.ndarray, max_len: np.ndarray, draft_s: float
    ) -> np.ndarray:
        """Verify lengths [R] from the scheduler (S = 1)."""
        num = len(running)
        if self.gamma == 0:
            return np.zeros(num, dtype=np.int64)
        lag = self.scheduler.lag_steps
        lagged_conf = lagged_max_len = None
        if lag > 0:
            lagged_conf = np.zeros((1, num, self.gamma))
            lagged_max_len = np.zeros((1, num), dtype=np.int64)
            for row, state in enumerate(running):  # requests younger than the lag contribute nothing
                if len(state.history) >= lag:
                    lagged_conf[0, row], lagged_max_len[0, row] = state.history[-lag]
        budget = self.config.max_num_batched_tokens
        inputs = ScheduleInputs(
            conf=confidence[None], max_len=max_len[None],
            verify_s=self.verify_cost if self.verify_cost is not None else _no_cost,
            draft_s=draft_s, token_budget=None if budget is None else max(0, budget - num),
            lagged_conf=lagged_conf, lagged_max_len=lagged_max_len,
        )
        lengths = np.asarray(self.scheduler(inputs))[0].astype(np.int64)
        if lag > 0:
            for row, state in enumerate(running):
                state.history.append((confidence[row].copy(), int(max_len[row])))
                while len(state.history) > lag:
                    state.history.popleft()
        return np.minimum(lengths, max_len)

    def _decode(self, running: list[_Running], book: RecordBook, now) -> None:
        cfg, gamma, device = self.config, self.gamma, self.target.device
        t0 = now()
        num = len(running)
        slot_ids = torch.tensor([s.slot for s in running], dtype=torch.long, device=device)
        request_ids = np.array([s.request.id for s in running])
        for state in running:
            state.rounds += 1
        rounds = np.array([s.rounds for s in running])
        anchors = torch.tensor([s.tokens[-1] for s in running], dtype=torch.long, device=device)
        context = self.target_cache.lengths[slot_ids].clone()
        remaining = np.array([s.request.max_new_tokens - len(s.tokens) for s in running])
        room = cfg.max_seq_len - context.cpu().numpy() - 1
        if (room < 0).any():
            raise ValueError("a request outgrew max_seq_len; raise EngineConfig.max_seq_len")
        max_len = np.clip(np.minimum(remaining - 1, room), 0, gamma).astype(np.int64)

        sample: DraftSample | None = None
        confidence = np.full((num, gamma), np.nan)
        if self.drafter is not None and gamma > 0:
            block = self.drafter.draft(self.target, self.draft_cache, slot_ids, anchors, gamma)
            u = None
            if cfg.temperature > 0:
                u = streams.uniforms(cfg.seed, streams.DRAFT_SAMPLE, request_ids, rounds, gamma, device=device)
            sample = self.drafter.sample(block, anchors, cfg.temperature, u)
            confidence = sample.confidence.double().cpu().numpy()
        t_draft = now()
        lengths_np = self._schedule(running, np.nan_to_num(confidence, nan=1.0), max_len, t_draft - t0)
        lengths = torch.from_numpy(lengths_np).to(device)

        num_query = 1 + int(lengths_np.max())
        draft_tokens = sample.tokens if sample is not None else torch.zeros(num, 0, dtype=torch.long, device=device)
        query = torch.cat([anchors[:, None], draft_tokens[:, : num_query - 1]], dim=1)
        out = self.target(query, cache=self.target_cache, slot_ids=slot_ids, query_lengths=1 + lengths,
                          hidden_layer_ids=self.hidden_layer_ids)
        logits = self.target.logits(out.hidden)
        accept_u = resample_u = None
        if cfg.temperature > 0:
            accept_u = streams.uniforms(cfg.seed, streams.ACCEPT, request_ids, rounds, max(gamma, 1), device=device)
            resample_u = streams.uniforms(cfg.seed, streams.EMIT, request_ids, rounds, device=device)
        draft_probs = sample.probs if sample is not None else torch.zeros(num, 0, logits.shape[-1], device=device)
        result = verify(draft_tokens, draft_probs, logits, lengths, cfg.temperature,
                        accept_u[:, :gamma] if accept_u is not None else None, resample_u)
        accepted = result.num_accepted
        self.target_cache.truncate(slot_ids, context + 1 + accepted)
        if self.drafter is not None and self.draft_cache is not None:
            self.drafter.append_context(self.draft_cache, out.layer_hidden, slot_ids, 1 + accepted)
        t_done = now()

        accept_prob = np.full((num, gamma), np.nan)
        if sample is not None and num_query > 1:
            probs = analytic_acceptance(sample.probs[:, : num_query - 1], result.target_probs[:, : num_query - 1])
            verified = np.arange(num_query - 1)[None, :] < lengths_np[:, None]
            accept_prob[:, : num_query - 1] = np.where(verified, probs.double().cpu().numpy(), np.nan)
        accepted_np = accepted.cpu().numpy()
        drafted = draft_tokens.cpu().numpy()
        next_tokens = result.next_token.cpu().numpy()
        emitted = np.zeros(num, dtype=np.int64)
        for row, state in enumerate(running):
            new = [int(t) for t in drafted[row, : accepted_np[row]]] + [int(next_tokens[row])]
            if cfg.eos_token_id is not None and cfg.eos_token_id in new:
                new = new[: new.index(cfg.eos_token_id) + 1]
            new = new[: state.request.max_new_tokens - len(state.tokens)]
            state.tokens.extend(new)
            emitted[row] = len(new)
        book.add_step(
            t_s=t0, num_requests=num, batch_tokens=int(num + lengths_np.sum()), verify_tokens=int(lengths_np.sum()),
            accepted_tokens=int(accepted_np.sum()), step_s=t_done - t0, kind="decode", draft_s=t_draft - t0,
            target_s=t_done - t_draft,
        )
        book.add_request_steps(
            ids=request_ids, rounds=rounds, t_s=t0, context_tokens=context.cpu().numpy(), max_len=max_len,
            verify_len=lengths_np, accepted_len=accepted_np, emitted_tokens=emitted, confidence=confidence,
            accept_prob=accept_prob,
        )


def _no_cost(batch_tokens: np.ndarray) -> np.ndarray:
    """A flat cost for policies that do not read costs."""
    return np.ones_like(batch_tokens, dtype=float)


__all__ = ["EngineConfig", "EngineResult", "Request", "SpeculativeEngine", "VerifyCost"]
