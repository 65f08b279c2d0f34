"""Format ``sglang-sts``: SGLang's STS calibration shards, PyTorch ``.pt`` files (torch is an optional extra).

Each shard holds ``logits [N, gamma]`` (the confidence head's raw logits for every drafted position of N draft
rounds) and ``prefix_mask [N, gamma]`` (1 while the drafts are accepted: the accepted prefix, all gamma positions
verified). A path may be a shard or a folder of shards (``*.pt``, read in name order). Read from this field
description; the shards do not say which request a round belongs to, so request and step heterogeneity cannot be
told apart from them (only their total; see docs/acceptance-logs.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import expit

from simlab.acceptance.logs.parsed import MAX_POSITIONS, AcceptanceLog, Rounds, concat_rounds
from simlab.common.errors import InputError

NAME = "sglang-sts"
DESCRIPTION = "SGLang STS calibration shards (.pt: logits [N, gamma], prefix_mask [N, gamma]; needs torch)"
HAS_CONFIDENCE = True
DEFAULT_METHOD = "dspark"  # STS calibrates DSpark's confidence head


def shard_files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(path.glob("*.pt"))
            if not found:
                raise InputError("no .pt shards in this folder", file=path, valid="a folder of STS calibration shards")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise InputError("no such shard or folder", file=path, valid="a .pt shard or a folder of them")
    return files


def load_shard(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(logits [N, gamma] float64, prefix_mask [N, gamma] bool) of one shard."""
    try:
        import torch
    except ImportError:
        raise InputError("reading .pt shards needs PyTorch, which is not installed", file=path,
                         valid="pip install 'simlab[real]' (or torch), then run again") from None
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds for a file that is not a tensor archive
        first = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise InputError(f"not a readable PyTorch file ({first})", file=path,
                         valid="a .pt file saved with torch.save({'logits': ..., 'prefix_mask': ...})") from None
    if not isinstance(data, dict):
        raise InputError("a shard must hold a mapping", file=path, value=type(data).__name__,
                         valid="{'logits': Tensor[N, gamma], 'prefix_mask': Tensor[N, gamma]}")
    arrays = {}
    for key in ("logits", "prefix_mask"):
        value = data.get(key)
        if not isinstance(value, torch.Tensor):
            raise InputError("missing or not a tensor", file=path, field=key, valid="a tensor [N, gamma]")
        arrays[key] = value.detach().to(torch.float64).numpy()
    logits, mask = arrays["logits"], arrays["prefix_mask"]
    if logits.ndim != 2 or logits.shape != mask.shape or logits.shape[1] == 0:
        raise InputError("shapes do not match", file=path, field="prefix_mask", value=list(mask.shape),
                         valid=f"[N, gamma] like logits {list(logits.shape)}")
    if logits.shape[1] > MAX_POSITIONS:
        raise InputError(f"gamma {logits.shape[1]} is too long", file=path, field="logits",
                         valid=f"at most {MAX_POSITIONS} positions")
    if not np.isfinite(logits).all():
        row = int(np.flatnonzero(~np.isfinite(logits).all(axis=1))[0])
        raise InputError("a logit is not finite", file=path, field=f"logits[{row}]", valid="finite numbers")
    if not np.isin(mask, (0.0, 1.0)).all():
        raise InputError("not a 0/1 mask", file=path, field="prefix_mask", valid="0 or 1 per position")
    rising = (np.diff(mask, axis=1) > 0).any(axis=1)
    if rising.any():
        row = int(np.flatnonzero(rising)[0])
        raise InputError("not a prefix: a position is accepted after a rejected one", file=path,
                         field=f"prefix_mask[{row}]", value=mask[row].astype(int).tolist(),
                         valid="1s followed by 0s (the accepted prefix)")
    return logits, mask.astype(bool)


def read(paths: list[Path], **_: object) -> AcceptanceLog:
    files = shard_files(paths)
    parts = []
    for file in files:
        logits, mask = load_shard(file)
        n, gamma = logits.shape
        parts.append(Rounds(
            method=np.full(n, DEFAULT_METHOD, dtype=object), domain=np.full(n, "*", dtype=object),
            sequence=np.full(n, -1, dtype=np.int64), cluster=np.full(n, -1, dtype=object),
            step=np.zeros(n, dtype=np.int64), drafted=np.full(n, gamma, dtype=np.int64),
            verified=np.full(n, gamma, dtype=np.int64), accepted=mask.sum(axis=1).astype(np.int64),
            conf=expit(logits),
        ))
    notes = [f"sglang-sts shards: method taken as {DEFAULT_METHOD} (STS calibrates DSpark's head) unless --method "
             "says otherwise; rounds are not tied to requests"]
    rounds = concat_rounds(parts)
    cluster = np.arange(len(rounds)).astype(object)  # every round its own cluster: rows are independent rounds
    rounds = Rounds(rounds.method, rounds.domain, rounds.sequence, cluster, rounds.step, rounds.drafted,
                    rounds.verified, rounds.accepted, rounds.conf)
    return AcceptanceLog.from_rounds(NAME, [str(f) for f in files], rounds, notes)
