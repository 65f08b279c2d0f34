"""One request's state and its random streams (docs/engine.md sections 1 and 2)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
import numpy as np

WAITING, PREFILLING, DECODING, FINISHED = "waiting", "prefilling", "decoding", "finished"


@dataclass
class Request:
    """A request as section 2 describes it. ``remaining`` counts the tokens still to emit from the moment the
    request exists (``output`` before its first token), so ``context`` is always ``prompt + emitted``."""

    id: int
    prompt: int
    output: int
    domain: int
    prefix_blocks: tuple[tuple[object, int], ...] = ()  # (hash id, tokens) per prefix block, section 7

    # records (section 8)
    arrival_s: float = math.nan
    first_token_s: float = math.nan
    finish_s: float = math.nan
    replica: int = -1

    # section 2
    state: str = WAITING
    remaining: int = 0
    steps: int = 0
    done: int = 0  # prompt (or recompute) tokens computed so far while prefilling
    prefill_target: int = 0

    # section 6: the request's own KV (tokens under reserve, blocks under paged) and the cached prefix blocks
    # it pins (section 7)
    own_kv: int = 0
    pinned: list = field(default_factory=list)
    admitted_before: bool = False
    cached_at_first_admission: int = 0

    # section 9 (disaggregation): the prefill replica holding the prompt's KV from its prefill's end until the
    # KV lands on the decode replica (``held_kv`` units, ``held_pinned`` prefix blocks), and the landing time
    holder: object = None
    held_kv: int = 0
    held_pinned: list = field(default_factory=list)
    remote: bool = False
    land_s: float = math.nan
    rebuild_draft: bool = False

    # section 1: draws of decode steps 0, 1, ... as they are needed
    conf: list = field(default_factory=list)
    true_accepted: list = field(default_factory=list)
    shift: list = field(default_factory=list)

    def __post_init__(self) -> None:
        self.remaining = self.output

    @property
    def emitted(self) -> int:
        return self.output - self.remaining

    @property
    def context(self) -> int:
        """Section 2: prompt plus every token emitted so far."""
        return self.prompt + self.emitted


class Streams:
    """The shared random streams of section 1, drawn one (request, decode step) at a time."""

    def __init__(self, draws, domain: np.ndarray, num_requests: int) -> None:
        self.draws = draws
        self.gamma = draws.gamma
        shift = draws.request_shift(num_requests)
        # section 1: base logits of the request's domain, plus its own shift when requests differ
        self.request_logit = [
            draws.base_logit[domain[r]] if shift is None else draws.base_logit[domain[r]] + shift[r]
            for r in range(num_requests)
        ]

    def at(self, request: Request, step: int) -> tuple[np.ndarray, int]:
        """(conf [γ], true_accepted) of ``request`` at decode step ``step`` (drawn by :meth:`draw_next`)."""
        return request.conf[step], request.true_accepted[step]

    def draw_next(self, requests: list[Request]) -> None:
        """Draw each request's next decode step, ``len(request.conf)``, from its previous step's z, in one
        call of the shared streams (each row depends on its own keys only, section 1)."""
        if not requests:
            return
        first_step = np.array([len(r.conf) for r in requests])
        previous = np.array([r.shift[-1] if r.shift else 0.0 for r in requests])
        conf, true_accepted, shift = self.draws.generate(
            np.array([r.id for r in requests]), np.array([self.request_logit[r.id] for r in requests]),
            first_step, previous, np.ones(len(requests), dtype=np.int64),
        )
        for i, r in enumerate(requests):
            r.conf.append(conf[i])
            r.true_accepted.append(int(true_accepted[i]))
            r.shift.append(float(shift[i]))
