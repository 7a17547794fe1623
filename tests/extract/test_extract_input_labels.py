"""What provenance says about each input and architecture: example labels (text windows,
crops, mosaics), Wikipedia titles, and how a model tells positions apart."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memcap.extract.corpus import Documents, wikipedia_leads
from memcap.extract.images import ImageInput, MosaicInput, describe_input
from memcap.extract.registry import position_encoding
from memcap.extract.text import Windows, window_labels

NAMES = ("astronaut", "coffee")


def windows(documents: list[int], offsets: list[int], length: int) -> Windows:
    tokens = np.zeros((len(documents), length), dtype=np.int64)
    return Windows(tokens, np.asarray(documents), np.asarray(offsets), len(documents), 9)


def test_text_labels_name_document_title_or_first_words_and_tokens():
    texts = ("A first   document with\nmany words in it, more than forty characters.", "Short.")
    titled = Documents(texts, "fake", stream=False, titles=("First", "Second"))
    assert window_labels(windows([1, 0], [96, 0], 64), titled) == [
        "document 1 'Second', tokens 96-159",
        "document 0 'First', tokens 0-63",
    ]
    untitled = Documents(texts, "fake", stream=False)
    assert window_labels(windows([0, 1], [3, 0], 4), untitled) == [
        "document 0 'A first document with many words in i...', tokens 3-6",
        "document 1 'Short.', tokens 0-3",
    ]
    stream = Documents(texts, "fake", stream=True)
    assert window_labels(windows([2], [0], 16), stream) == ["stream tile 2, tokens 32-47"]


def test_wikipedia_documents_carry_their_article_titles():
    leads = wikipedia_leads()
    assert leads.titles is not None and len(leads.titles) == len(leads.texts)
    index = leads.titles.index("2001: A Space Odyssey")
    assert "Space Odyssey" in leads.texts[index]


def test_image_labels_name_photograph_crop_flip_and_mosaic_tiles():
    whole = ImageInput(0, None, False)
    crop = ImageInput(1, (10, 20, 110, 140), True)
    assert describe_input(whole, NAMES) == "photograph 'astronaut'"
    assert describe_input(crop, NAMES) == "photograph 'coffee', crop (10, 20, 110, 140), flipped"
    mosaic = MosaicInput((whole, crop, whole, crop))
    assert describe_input(mosaic, NAMES) == (
        "2 x 2 mosaic: photograph 'astronaut'; photograph 'coffee', crop (10, 20, 110, 140), "
        "flipped; photograph 'astronaut'; photograph 'coffee', crop (10, 20, 110, 140), flipped"
    )


TINY = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "vocab_size": 50}


@pytest.mark.parametrize(
    ("config_class", "kwargs", "expected"),
    [
        ("GPT2Config", {"n_embd": 16, "n_layer": 1, "n_head": 2, "vocab_size": 50}, "additive"),
        ("BertConfig", {**TINY, "intermediate_size": 32}, "additive"),
        (
            "ViTConfig",
            {**TINY, "intermediate_size": 32, "image_size": 16, "patch_size": 8},
            "additive",
        ),
        ("LlamaConfig", {**TINY, "intermediate_size": 32}, "rotary"),
        ("Qwen2Config", {**TINY, "intermediate_size": 32}, "rotary"),
        ("BloomConfig", {"hidden_size": 16, "n_layer": 1, "n_head": 2, "vocab_size": 50}, "alibi"),
    ],
)
def test_position_encoding_of_transformers_models(config_class, kwargs, expected):
    import transformers

    config = getattr(transformers, config_class)(**kwargs)
    model = transformers.AutoModel.from_config(config)
    assert position_encoding(model, config) == expected


def test_position_encoding_of_a_timm_vit():
    import timm

    with torch.device("meta"):
        model = timm.create_model("test_vit")
    assert position_encoding(model, None) == "additive"
