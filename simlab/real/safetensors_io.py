"""Reading and writing the safetensors format without the ``safetensors`` package.

A file is: 8 bytes (little-endian u64) header length N, N bytes of JSON header mapping each tensor name to
``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets relative to the end of the header) plus an
optional ``"__metadata__"`` dict of strings, then the raw little-endian tensor bytes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Iterator

import torch

DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
    "BOOL": torch.bool,
}
DTYPE_NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in DTYPES.items()}
MAX_HEADER_BYTES = 100_000_000


def read_header(path: str | Path) -> tuple[dict, int]:
    """The JSON header of a safetensors file and the byte offset where tensor data starts."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (size,) = struct.unpack("<Q", raw)
        if size > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: implausible safetensors header of {size} bytes")
        header = json.loads(f.read(size))
    return header, 8 + size


def iter_tensors(path: str | Path, names: set[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (name, tensor) for the tensors of a file (all, or those in ``names``), one at a time."""
    header, data_start = read_header(path)
    with open(path, "rb") as f:
        for name, entry in header.items():
            if name == "__metadata__" or (names is not None and name not in names):
                continue
            dtype_name = entry["dtype"]
            if dtype_name not in DTYPES:
                raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dtype_name}")
            begin, end = entry["data_offsets"]
            f.seek(data_start + begin)
            buffer = bytearray(f.read(end - begin))
            dtype = DTYPES[dtype_name]
            shape = tuple(entry["shape"])
            expected = dtype.itemsize * int(torch.Size(shape).numel())
            if len(buffer) != expected:
                raise ValueError(f"{path}: tensor {name!r} has {len(buffer)} bytes, expected {expected}")
            tensor = torch.frombuffer(buffer, dtype=dtype) if buffer else torch.empty(0, dtype=dtype)
            yield name, tensor.reshape(shape)


def load_file(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a safetensors file."""
    return dict(iter_tensors(path))


def save_file(path: str | Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (contiguous copies, on CPU) to ``path`` in the safetensors format."""
    header: dict = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs: list[bytes] = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().to("cpu").contiguous()
        if tensor.dtype not in DTYPE_NAMES:
            raise ValueError(f"tensor {name!r}: dtype {tensor.dtype} cannot be stored")
        blob = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": DTYPE_NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode("utf-8")
    encoded += b" " * (-len(encoded) % 8)  # align the data section to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)))
        f.write(encoded)
        for blob in blobs:
            f.write(blob)


__all__ = ["DTYPES", "iter_tensors", "load_file", "read_header", "save_file"]
