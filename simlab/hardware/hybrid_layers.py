"""A model whose layers are not all full attention: sliding-window (or chunked) layers and layers that keep a
fixed state per request (Gated DeltaNet linear attention, Mamba-2), read from its config (docs/models.md).

The roofline prices them beside the full-attention layers (simlab.hardware.roofline, "capped" attention, as
DeepSeek-V4's compressed attention is priced):

- a **window layer** reads ``min(c, W)`` KV entries per query at context ``c`` (window ``W``) and holds ``W``
  entries per request once it is that long;
- a **state layer** reads its state once per request and step and writes it once per query token: under
  speculation the engine keeps the state at every draft position so that a rejection can roll back (vLLM's and
  SGLang's speculative decoding for hybrid models), so a verify of ``q`` tokens writes ``q`` states; its FLOPs per
  token are the state update and read-out, about ``4 x heads x key dim x value dim`` a layer;
- only the **full-attention layers** grow KV with context.

The window's KV and the states are fixed per request: the KV budget reserves them for the engine's default number
of sequences, as for DeepSeek-V4's windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class HybridLayers:
    """The layer mix of a hybrid model (whole model, every GPU of a replica together)."""

    num_full_layers: int  # full attention: KV grows with context
    num_window_layers: int  # sliding-window or chunked attention
    window_tokens: int
    num_state_layers: int  # linear attention or Mamba
    state_bytes: int  # per request, every state layer (recurrent state and convolution window)
    state_flops_per_token: float  # every state layer's update and read-out for one token
    mixer_params: int  # every layer's attention or mixer matmul parameters

    def capped_entries(self, num_layers: int, context: Any) -> Any:
        """KV entries a query reads in the window layers at ``context`` (scalar or array)."""
        del num_layers
        if isinstance(context, np.ndarray):
            return self.num_window_layers * np.minimum(context, self.window_tokens)
        return self.num_window_layers * min(float(context), float(self.window_tokens))

    def window_bytes_per_sequence(self, num_layers: int, entry: float) -> float:
        """The windows' KV once a request is ``window_tokens`` long (the states are added per GPU by the
        roofline)."""
        del num_layers
        return self.num_window_layers * self.window_tokens * entry

    def calibration_note(self) -> str:
        """What a run on a hybrid model says of its error: no engine run of its class was compared."""
        mix = ", ".join(f"{n} {kind}" for n, kind in ((self.num_full_layers, "full-attention"),
                                                      (self.num_window_layers, "window"),
                                                      (self.num_state_layers, "linear-attention")) if n)
        return (f"a hybrid target ({mix} layers): no engine run of a hybrid model was compared, so its error is "
                "not stated; the nearest calibrated class is the dense targets' (engine_error.yaml, gain_error.yaml; "
                "docs/models.md)")
