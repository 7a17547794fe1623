"""Image inputs for ViT models: real photographs, expanded to T distinct inputs.

The builtin source is every distinct real photograph that installs offline with the extract
environment (scikit-image's sample photographs, scikit-learn's two and matplotlib's one).
A source with at least T images gives T whole images. With fewer, each input is a
``mosaic`` x ``mosaic`` grid of seeded random-resized crops (area fraction in ``crop_scale``,
aspect ratio in [3/4, 4/3], random horizontal flips), each tile from a different photograph
and resized into a 128-pixel cell; ``mosaic: 1`` gives single crops. Every
input is then preprocessed with the model's own timm data config (resize, center crop,
normalise). Measured on random ViT-B/16 (docs/data.md): 800 single crops of the builtin
photographs span too few scenes for P(197) = 1 after block 1; 2 x 2 mosaics reach it.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from memcap.errors import ConfigError
from memcap.extract.config import DataConfig

_logger = logging.getLogger(__name__)

# scikit-image sample images that are photographs (synthetic ones are left out) and that
# ship inside the wheel, so they load offline.
SKIMAGE_PHOTOS = (
    "astronaut",
    "brick",
    "camera",
    "cat",
    "cell",
    "clock",
    "coffee",
    "coins",
    "grass",
    "gravel",
    "hubble_deep_field",
    "immunohistochemistry",
    "moon",
    "page",
    "retina",
    "rocket",
    "text",
)
MOSAIC_TILE = 128  # pixels per mosaic cell; the model's own preprocessing resizes the mosaic
THUMBNAIL = 32  # side of the renderings the duplicate audit compares
_RATIO_RANGE = (3 / 4, 4 / 3)
_MAX_CROP_TRIES = 10


@dataclass(frozen=True)
class ImageSource:
    """Indexable source images; ``load(i)`` decodes image i lazily as RGB."""

    names: tuple[str, ...]
    load: Callable[[int], Image.Image]
    description: str
    skipped: tuple[str, ...] = ()  # unreadable images left out, with why

    def size(self, i: int) -> tuple[int, int]:
        """(width, height) of image i."""
        return self.load(i).size

    def __len__(self) -> int:
        return len(self.names)


@dataclass(frozen=True)
class ImageInput:
    """A region of one source image: an optional crop box and flip."""

    source: int  # index into the ImageSource
    box: tuple[int, int, int, int] | None  # (left, top, right, bottom); None = whole image
    flip: bool


@dataclass(frozen=True)
class MosaicInput:
    """One of the T inputs made of a g x g grid of regions (row-major)."""

    tiles: tuple[ImageInput, ...]

    @property
    def grid(self) -> int:
        """Side g of the grid."""
        return math.isqrt(len(self.tiles))


PlannedInput = ImageInput | MosaicInput


def regions(item: PlannedInput) -> tuple[ImageInput, ...]:
    """The source regions an input is made of."""
    return item.tiles if isinstance(item, MosaicInput) else (item,)


def builtin_photographs() -> ImageSource:
    """Offline real photographs: skimage.data's, scikit-learn's two and matplotlib's one."""
    import matplotlib.cbook
    import skimage.data
    from sklearn.datasets import load_sample_images

    images = {name: getattr(skimage.data, name)() for name in SKIMAGE_PHOTOS}
    images["stereo_motorcycle"] = skimage.data.stereo_motorcycle()[0]  # the right view repeats it
    sample = load_sample_images()
    for filename, array in zip(sample.filenames, sample.images, strict=True):
        images[f"sklearn:{filename.rsplit('/', 1)[-1]}"] = array
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as handle:
        images["matplotlib:grace_hopper"] = np.asarray(Image.open(handle).convert("RGB"))
    pil = [_to_rgb(array) for array in images.values()]
    return ImageSource(
        names=tuple(images),
        load=pil.__getitem__,
        description=(
            f"builtin: {len(pil)} photographs from skimage.data, scikit-learn and matplotlib"
        ),
    )


def datasets_images(data: DataConfig, key: str) -> ImageSource:
    """Images from a `datasets` source: an ``imagefolder`` directory or a hub dataset.

    Hub datasets (a hub id or a local dataset directory) are streamed and only their first
    T readable images are read; with ``rgb_only`` the first T RGB images (paper A dropped
    ImageNet's grey and CMYK images: ``train[:2000]`` holds 1,973 RGB ones). Images are
    decoded here, not inside `datasets`, so that an unreadable file is named and skipped
    (see :func:`check_readable`).
    """
    import datasets

    column = data.column or "image"
    undecoded = datasets.Image(decode=False)
    try:
        if data.source == "imagefolder":
            folder = datasets.load_dataset("imagefolder", data_dir=data.path, split=data.split)
            cells = folder.cast_column(column, undecoded)[column]
            description = f"imagefolder {data.path} (split {data.split})"
        else:
            stream = datasets.load_dataset(
                data.dataset, data.dataset_config, split=data.split, streaming=True
            ).cast_column(column, undecoded)
            kind = "RGB images" if data.rgb_only else "images"
            description = f"hub dataset {data.dataset} (split {data.split}, first {data.T} {kind})"
            return _first_readable((row[column] for row in stream), data, key, description)
    except OSError as err:
        raise _dataset_error(data, key, err) from None
    readable, skipped = [], []
    for index, cell in enumerate(cells):
        try:
            decode_image(cell)
            readable.append(cell)
        except UNREADABLE as err:
            skipped.append(_cell_name(cell, index, err))
    check_readable(len(readable), skipped, data.T, key, description)

    def load(i: int) -> Image.Image:
        return decode_image(readable[i]).convert("RGB")

    names = tuple(f"{data.source}:{i}" for i in range(len(readable)))
    return ImageSource(names, load, description, tuple(skipped))


def _first_readable(
    cells: Iterator[dict], data: DataConfig, key: str, description: str
) -> ImageSource:
    """The first T readable (and, with ``rgb_only``, RGB) images of a stream of cells."""
    images: list[Image.Image] = []
    skipped: list[str] = []
    for index, cell in enumerate(cells):
        try:
            image = decode_image(cell)
        except UNREADABLE as err:
            skipped.append(_cell_name(cell, index, err))
            continue
        if not data.rgb_only or image.mode == "RGB":
            images.append(image.convert("RGB"))
        if len(images) == data.T:
            break
    check_readable(len(images), skipped, data.T, key, description)
    names = tuple(f"{data.source}:{i}" for i in range(len(images)))
    return ImageSource(names, images.__getitem__, description, tuple(skipped))


# What PIL raises for a truncated, corrupt or non-image file.
UNREADABLE = (OSError, SyntaxError, ValueError, Image.DecompressionBombError)


def decode_image(cell: dict) -> Image.Image:
    """Fully decode a `datasets` image cell ({"bytes", "path"}); raise if it is unreadable."""
    image = Image.open(io.BytesIO(cell["bytes"]) if cell.get("bytes") else cell["path"])
    image.load()
    return image


def check_readable(readable: int, skipped: list[str], T: int, key: str, description: str) -> None:
    """Log the unreadable images skipped; raise when they leave too few.

    Too few: none at all, or fewer than T where the source held T images (whole images would
    silently turn into crops of fewer photographs).
    """
    if skipped:
        _logger.warning(
            "%s: skipped %d unreadable image(s): %s", description, len(skipped), ", ".join(skipped)
        )
    if readable == 0 and not skipped:
        raise ConfigError(f"{key}.data", f"{description} has no images", "use a non-empty source")
    if readable == 0 or (readable < T <= readable + len(skipped)):
        raise ConfigError(
            f"{key}.data.T",
            f"{description} has {readable} readable images for T = {T}; unreadable: "
            f"{', '.join(skipped)}",
            "replace or remove the unreadable files, or lower data.T",
        )


def _cell_name(cell: dict, index: int, err: Exception) -> str:
    name = Path(cell["path"]).name if cell.get("path") else f"image {index}"
    return f"{name} ({type(err).__name__}: {err})"


def plan_inputs(
    count: int,
    size_of: Callable[[int], tuple[int, int]],
    T: int,
    seed: int,
    crop_scale: tuple[float, float],
    mosaic: int = 1,
) -> list[PlannedInput]:
    """T distinct inputs from ``count`` images (``size_of(i)`` = (width, height)).

    T of the images, in a seeded order, when there are enough; else seeded crops and flips:
    single crops of every image in turn (``mosaic`` 1), or ``mosaic`` x ``mosaic`` grids of
    crops of different images (the same image twice only when there are too few).
    """
    rng = np.random.default_rng(seed)
    if count >= T:
        chosen = rng.permutation(count)[:T]
        return [ImageInput(int(i), None, False) for i in chosen]
    sizes = [size_of(i) for i in range(count)]

    def crop(source: int) -> ImageInput:
        box = _crop_box(rng, sizes[source], crop_scale)
        return ImageInput(source, box, bool(rng.random() < 0.5))

    plan: list[PlannedInput] = []
    seen: set[PlannedInput] = set()
    cells = mosaic * mosaic
    while len(plan) < T:
        if mosaic == 1:
            candidate: PlannedInput = crop(len(plan) % count)
        else:
            sources = rng.choice(count, size=cells, replace=cells > count)
            candidate = MosaicInput(tuple(crop(int(i)) for i in sources))
        if candidate not in seen:
            seen.add(candidate)
            plan.append(candidate)
    return plan


def describe_plan(plan: Sequence[PlannedInput], crop_scale: tuple[float, float]) -> str:
    """How the inputs were made, in words, for provenance and the report."""
    first = plan[0] if plan else None
    if first is None or (isinstance(first, ImageInput) and first.box is None):
        return f"{len(plan)} inputs = whole images"
    low, high = (round(100 * x) for x in crop_scale)
    crops = f"random-resized crops ({low}-{high}% of the area) with random flips"
    if isinstance(first, MosaicInput):
        g = first.grid
        return (
            f"{len(plan)} inputs = {g} x {g} mosaics of {crops}, tiles from different photographs"
        )
    return f"{len(plan)} inputs = single {crops}"


def describe_input(item: PlannedInput, names: Sequence[str]) -> str:
    """One line naming an input, e.g. ``photograph 'astronaut', crop (10, 20, 310, 260)``.

    A crop box is (left, top, right, bottom) in pixels of its photograph; a mosaic lists its
    tiles row by row.
    """
    if isinstance(item, MosaicInput):
        tiles = "; ".join(describe_input(tile, names) for tile in item.tiles)
        return f"{item.grid} x {item.grid} mosaic: {tiles}"
    label = f"photograph {names[item.source]!r}"
    if item.box is not None:
        label += f", crop {item.box}"
    return label + (", flipped" if item.flip else "")


def image_batches(
    source: ImageSource,
    plan: Sequence[PlannedInput],
    transform: Callable[[Image.Image], torch.Tensor],
    batch_size: int,
    thumbnails: list[np.ndarray] | None = None,
) -> Iterator[torch.Tensor]:
    """Preprocessed batches (B, 3, H, W) of the planned inputs, in plan order.

    Each input is rendered once; when ``thumbnails`` is given, a small rendering of every
    input (see :func:`thumbnail`) is appended to it, for the duplicate audit.
    """
    for start in range(0, len(plan), batch_size):
        images = [render_input(source, item) for item in plan[start : start + batch_size]]
        if thumbnails is not None:
            thumbnails.extend(thumbnail(image) for image in images)
        yield torch.stack([transform(image) for image in images])


def thumbnail(image: Image.Image, size: int = THUMBNAIL) -> np.ndarray:
    """(size, size, 3) uint8 box-filtered rendering of an input."""
    return np.asarray(image.resize((size, size), Image.Resampling.BOX))


def render_input(source: ImageSource, item: PlannedInput) -> Image.Image:
    """The PIL image of one planned input: a region (crop, then flip), or a mosaic of them."""
    if isinstance(item, MosaicInput):
        g = item.grid
        canvas = Image.new("RGB", (g * MOSAIC_TILE, g * MOSAIC_TILE))
        for index, tile in enumerate(item.tiles):
            image = render_input(source, tile).resize(
                (MOSAIC_TILE, MOSAIC_TILE), Image.Resampling.BICUBIC, reducing_gap=3.0
            )
            canvas.paste(image, ((index % g) * MOSAIC_TILE, (index // g) * MOSAIC_TILE))
        return canvas
    image = source.load(item.source)
    if item.box is not None:
        image = image.crop(item.box)
    if item.flip:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return image


def _crop_box(
    rng: np.random.Generator, size: tuple[int, int], scale: tuple[float, float]
) -> tuple[int, int, int, int]:
    """A random-resized-crop box (torchvision's sampling rule, drawn from ``rng``)."""
    width, height = size
    area = width * height
    log_ratio = (math.log(_RATIO_RANGE[0]), math.log(_RATIO_RANGE[1]))
    for _ in range(_MAX_CROP_TRIES):
        target = area * rng.uniform(*scale)
        ratio = math.exp(rng.uniform(*log_ratio))
        w = round(math.sqrt(target * ratio))
        h = round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            left = int(rng.integers(0, width - w + 1))
            top = int(rng.integers(0, height - h + 1))
            return (left, top, left + w, top + h)
    side = min(width, height)  # fallback: a random square of the short side
    left = int(rng.integers(0, width - side + 1))
    top = int(rng.integers(0, height - side + 1))
    return (left, top, left + side, top + side)


def _to_rgb(array: np.ndarray) -> Image.Image:
    """uint8 / float / grayscale array -> RGB PIL image."""
    if array.dtype != np.uint8:
        array = np.clip(array * (255.0 if array.max() <= 1.0 else 1.0), 0, 255).astype(np.uint8)
    if array.ndim == 2:
        array = np.stack([array] * 3, axis=-1)
    return Image.fromarray(array[..., :3]).convert("RGB")


def _dataset_error(data: DataConfig, key: str, err: Exception) -> ConfigError:
    _logger.debug("loading %s failed: %s", data.dataset or data.path, err)
    where = data.dataset or data.path
    return ConfigError(
        f"{key}.data",
        f"cannot load images from '{where}' ({type(err).__name__}: {str(err).splitlines()[0]})",
        "either (1) fetch the dataset once where the hub is reachable so it is cached, or "
        "(2) use source imagefolder with a local directory, or source builtin",
    )
