"""A byte-level tokenizer: token i < 256 is byte i; three special tokens follow."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ByteTokenizer:
    """UTF-8 bytes as tokens 0..255, then PAD, BOS and EOS (vocabulary of 259)."""

    pad_id: int = 256
    bos_id: int = 257
    eos_id: int = 258

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""
        return 259

    def encode(self, text: str, *, add_bos: bool = False) -> list[int]:
        """Token ids of ``text`` (UTF-8 bytes), optionally after BOS."""
        ids = list(text.encode("utf-8"))
        return [self.bos_id, *ids] if add_bos else ids

    def encode_document(self, text: str) -> list[int]:
        """Token ids of ``text`` as the start of a document: EOS (the training corpus's document separator)
        followed by its bytes."""
        return [self.eos_id, *text.encode("utf-8")]

    def decode(self, ids) -> str:
        """Text of the byte tokens in ``ids`` (special tokens dropped, invalid UTF-8 replaced)."""
        return bytes(int(i) for i in ids if 0 <= int(i) < 256).decode("utf-8", errors="replace")


__all__ = ["ByteTokenizer"]
