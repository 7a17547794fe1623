"""Sweep settings of the AoT experiments, parameter counts, and which replicas share a batched
model.

Pure Python (no torch): the Snakefile sizes the AoT jobs with :func:`sweep_memory_mb`, and the
config checker (:mod:`memcap.aot.checks`) reads the settings, before any job starts.
A sweep in the config lists fixed values and lists of values; its settings are the Cartesian
product of the lists (see ``aot.sweeps`` in the config schema). The dataclasses carry no
defaults for scientific settings: they are built from the schema-defaulted config.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from memcap.training.config import TrainConfig, replicate_seeds, with_overrides

Model = Literal["aot", "mlp"]
Task = Literal["association", "distribution"]
Variant = Literal["paper", "code"]
Recipe = Literal["ours", "authors"]

MAX_SEQUENCES = 2**20  # N^S inputs are enumerated (one table row each); more does not fit
GRID_KEYS = ("N", "S", "d", "d_h", "H")  # keys that may hold a list of values


@dataclass(frozen=True)
class Setting:
    """One trained configuration (before seeds): task sizes and model shape."""

    sweep: str  # name of the sweep in the config
    task: Task  # association (one next token) or distribution (full conditional)
    model: Model  # aot, or mlp = one head plus a GELU MLP of width ``width``
    N: int  # dictionary size
    S: int  # input length (tokens before the predicted one)
    d: int  # embedding dimension
    d_h: int  # head dimension
    H: int  # heads per layer
    depth: int = 1  # layers
    width: int = 0  # MLP width (0 for the AoT)
    temperature: float = 1.0  # softmax temperature of the distribution task's targets
    variant: Variant = "paper"  # the paper text's model, or the authors' code's (see model.py)

    @property
    def T(self) -> int:
        """Number of input sequences (all of them have positive probability)."""
        return self.N**self.S

    @property
    def params(self) -> int:
        return parameter_count(self)

    def shape_key(self) -> tuple[int, ...]:
        """Settings with equal keys have identical parameter shapes."""
        return (self.N, self.S, self.d, self.d_h, self.H, self.depth, self.width, self.variant)

    def as_row(self) -> dict[str, Any]:
        return {**asdict(self), "T0": self.T, "params": self.params}


def parameter_count(s: Setting) -> int:
    """Trainable parameters: embeddings, heads (W_Q, W_K, W_V, W_O), MLP, unembedding."""
    if s.variant == "code":
        return _code_parameter_count(s)
    embeddings = s.N * s.d + s.S * s.d  # token + positional
    head_params = s.H * 4 * s.d * s.d_h  # W_Q, W_K, W_V in R^{d_h x d}, W_O in R^{d x d_h}
    mlp = 2 * s.d * s.width + s.width  # W_1 (with bias), W_2 (no bias)
    unembedding = s.N * s.d
    return embeddings + s.depth * (head_params + mlp) + unembedding


def _code_parameter_count(s: Setting) -> int:
    """The code variant: map d → d_h (if d_h ≠ d), residual in R^{d_h}, biases."""
    embeddings = s.N * s.d + (s.d_h * s.d if s.d_h != s.d else 0) + s.S * s.d_h
    head_params = s.H * (4 * s.d_h * s.d_h + 4 * s.d_h)  # one nn.MultiheadAttention per head
    mlp = 2 * s.d_h * s.width + s.width + s.d_h if s.width else 0
    unembedding = s.N * s.d_h + s.N
    return embeddings + s.depth * (head_params + mlp) + unembedding


def mlp_width(d: int, H: int) -> int:
    """Width at which a one-head MLP-Transformer matches the AoT with H heads (paper B)."""
    return 2 * d * (H - 1)


def expand_sweep(name: str, spec: Mapping[str, Any]) -> list[Setting]:
    """Every setting of one validated sweep (Cartesian product of its list-valued keys).

    ``d_h: "d"`` ties the head dimension to ``d``; ``cap_d_h`` uses ``min(d_h, d)``. Model
    ``mlp`` turns a head count H into one head plus an MLP of width ``2·d·(H−1)``, which has
    the parameter count of the AoT with H heads.
    """
    values = {k: spec[k] if isinstance(spec[k], list) else [spec[k]] for k in GRID_KEYS}
    settings = []
    for model in spec["models"]:
        for n, s, d, d_h, h in itertools.product(*(values[k] for k in GRID_KEYS)):
            d_h = d if d_h == "d" else int(d_h)
            if spec["cap_d_h"]:
                d_h = min(d_h, d)
            H, width = (1, mlp_width(d, h)) if model == "mlp" else (h, 0)
            settings.append(
                Setting(
                    sweep=name,
                    task=spec["task"],
                    model=model,
                    N=n,
                    S=s,
                    d=d,
                    d_h=d_h,
                    H=H,
                    depth=spec["depth"],
                    width=width,
                    temperature=float(spec["temperature"]),
                    variant=spec["variant"],
                )
            )
    return settings


@dataclass(frozen=True)
class StageSettings:
    """Settings shared by every sweep of the stage (``config["aot"]``) and how it trains."""

    seeds: int  # replicate seeds per setting (different table and initialisation), averaged
    base_seed: int  # the config's global seed; see memcap.training.config.replicate_seeds
    train: Mapping[str, Any]  # our recipe's training settings (``aot.train``)
    authors: Mapping[str, Any]  # the authors' recipe's settings (``aot.authors``)
    pad_replicas: bool  # batch different shapes together (zero-padded, masked)
    precision: str  # arithmetic of the training step (float32, tf32, bf16)
    compile: bool  # torch.compile the training step
    cuda_graph: bool  # the whole step captured as one CUDA graph and replayed (CUDA)

    @classmethod
    def from_config(
        cls, section: Mapping[str, Any], seed: int, engine: Mapping[str, Any]
    ) -> StageSettings:
        """Build from the validated ``aot`` and ``engine`` sections and the global seed."""
        return cls(
            seeds=section["seeds"],
            base_seed=int(seed),
            train=section["train"],
            authors=section["authors"],
            pad_replicas=engine["aot"]["pad_replicas"],
            precision=engine["precision"],
            compile=engine["compile"],
            cuda_graph=engine["cuda_graph"],
        )

    def engine(self) -> dict[str, Any]:
        """How the training loop runs (:class:`TrainConfig`'s fields), the same for both recipes."""
        return {
            "precision": self.precision,
            "compile": self.compile,
            "cuda_graph": self.cuda_graph,
        }

    def replicate_seeds(self, spec: Mapping[str, Any] | None = None) -> list[int]:
        """The replicate seeds of every setting of sweep ``spec``: its own ``seeds``, or the
        stage's where it has none (replicate k is the same seed in every sweep)."""
        return replicate_seeds(self.base_seed, sweep_seeds(spec, self.seeds))

    def sweep_train(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The training settings of one sweep: its recipe's, with the sweep's own."""
        stage = self.authors if spec["recipe"] == "authors" else self.train
        return {"recipe": spec["recipe"], **with_overrides(stage, spec["train"])}

    def sample_size(self, spec: Mapping[str, Any]) -> int | None:
        """Sequences of the fixed training sample (authors' recipe); None = all N^S inputs."""
        return self.sweep_train(spec)["sample"] if spec["recipe"] == "authors" else None

    def train_config(self, spec: Mapping[str, Any], T: int, task: str, model: str) -> TrainConfig:
        """Optimisation of one batched model of sweep ``spec`` with T inputs."""
        train = self.sweep_train(spec)
        if spec["recipe"] == "authors":
            return authors_train_config(train, model, self.engine())
        batch_size = train["batch_size"]
        steps = train["epochs"] * (1 if batch_size is None else math.ceil(T / batch_size))
        return TrainConfig(
            steps=steps,
            lr=train["lr"],
            warmup_frac=train["warmup_frac"],
            schedule=train["schedule"],
            batch_size=batch_size,
            eval_every=min(train["eval_every"], steps),
            # the distribution task keeps lowering the KL after the argmax is right
            early_stop=train["early_stop"] and task == "association",
            regression_tol=None,
            **self.engine(),
        )


def authors_train_config(
    train: Mapping[str, Any], model: str, engine: Mapping[str, Any]
) -> TrainConfig:
    """The authors' recipe: shuffled epochs over a fixed sample, per-epoch linear lr decay.

    ``epochs`` passes over ``sample`` sequences in batches of ``batch_size``; Adam's rate
    falls linearly, once per epoch, from ``lr`` towards ``final_lr`` (``mlp_final_lr`` for the
    MLP-Transformer), as PyTorch's ``LinearLR(start_factor, end_factor, total_iters=epochs)``
    on their base rate 0.1; one evaluation at the end; the curve's metric is the mean
    training-batch accuracy of the last ``last_batches`` batches. ``engine``: how the loop
    runs (:meth:`StageSettings.engine`).
    """
    batches = train["sample"] // train["batch_size"]
    steps = train["epochs"] * batches
    final = train["mlp_final_lr"] if model == "mlp" else train["final_lr"]
    return TrainConfig(
        steps=steps,
        lr=train["lr"],
        warmup_frac=0.0,
        schedule="linear",
        batch_size=train["batch_size"],
        eval_every=steps,
        early_stop=False,
        regression_tol=None,
        sampling="shuffle",
        lr_period=batches,
        final_lr_frac=final / train["lr"],
        last_batches=min(train["last_batches"], steps),
        **engine,
    )


def sweep_seeds(spec: Mapping[str, Any] | None, stage_seeds: int) -> int:
    """Replicate seeds of one sweep: its ``seeds`` when set, else the stage's ``aot.seeds``."""
    own = None if spec is None else spec.get("seeds")
    return stage_seeds if own is None else int(own)


def sweep_names(section: Mapping[str, Any]) -> list[str]:
    """Names of the configured sweeps, in config order."""
    return list(section["sweeps"])


def x_axis(spec: Mapping[str, Any]) -> str:
    """The plot axis of a sweep: params when models are compared, else the varied key."""
    if "mlp" in spec["models"]:
        return "params"
    order = ("H", "d_h", "d", "N", "S")  # the first varied one is the x axis
    varied = [k for k in order if isinstance(spec[k], list) and len(spec[k]) > 1]
    return varied[0] if varied else "H"


def facet_keys(spec: Mapping[str, Any]) -> list[str]:
    """Other varied keys of a sweep: one curve (and one plot panel) per value."""
    axis = x_axis(spec)
    return [
        k
        for k in GRID_KEYS
        if isinstance(spec[k], list)
        and len(spec[k]) > 1
        and k != axis
        and not (axis == "params" and k == "H")
    ]


def group_replicas(
    replicas: Sequence[tuple[Setting, int]],
    pad: bool,
    split_widths: bool = True,
    apart: Sequence[str] = (),
) -> list[list[tuple[Setting, int]]]:
    """Replicas that can share one batched model, in first-seen order.

    ``split_widths`` keeps MLP widths apart: at full batch, padding a narrow MLP to a wide one
    costs more than a run of its own. Otherwise (mini-batches, where another run's per-step
    overhead weighs more) neighbouring widths share a model while padding adds at most a
    quarter to their MLPs (:func:`width_buckets`). Settings that differ in a key of ``apart``
    (a sweep's facets: :func:`facet_keys`) never share a model: aot_vs_mlp's facet d is the
    residual dimension D, and the merged heads cost D(D + 1) numbers per example, so padding
    d = 7 to 10 costs more than a model of its own.
    """
    keys = [
        (s.task, s.N, s.S, s.depth, s.model, s.variant)
        + (() if pad else s.shape_key())
        + tuple(getattr(s, k) for k in apart)
        for s, _ in replicas
    ]
    widths = [s.width for s, _ in replicas]
    split = split_widths or not pad
    bucket = {w: w for w in widths} if split else width_buckets(widths)
    groups: dict[tuple, list[tuple[Setting, int]]] = {}
    for key, width, replica in zip(keys, widths, replicas, strict=True):
        groups.setdefault(key + (bucket[width],), []).append(replica)
    return list(groups.values())


def width_buckets(widths: Sequence[int], slack: float = 1.25) -> dict[int, int]:
    """Bucket (its narrowest width) of every MLP width: runs of ascending widths whose padding
    to the run's widest costs at most ``slack`` times their own widths (an MLP's cost)."""
    bucket: dict[int, int] = {}
    members: list[int] = []
    for width in sorted(widths):
        if members and (len(members) + 1) * width > slack * (sum(members) + width):
            members = []
        members.append(width)
        bucket[width] = members[0]
    return bucket


def sweep_memory_mb(section: Mapping[str, Any], name: str) -> int:
    """Rough peak memory of one sweep: its largest batched model's activations, shapes padded
    together (the most ``engine.aot.pad_replicas`` groups)."""
    spec = section["sweeps"][name]
    seeds = range(sweep_seeds(spec, section["seeds"]))
    replicas = [(s, seed) for s in expand_sweep(name, spec) for seed in seeds]
    peak = 0
    for members in group_replicas(replicas, True, spec["recipe"] != "authors", facet_keys(spec)):
        settings = [s for s, _ in members]
        first = settings[0]
        H = max(s.H for s in settings)
        width = max(s.width for s in settings)
        d = max(s.d for s in settings)
        per_example = 8 * H * first.S + 6 * (d + first.N) + 4 * width  # floats, with gradients
        peak = max(peak, len(members) * first.T * per_example * 4)
    return 600 + peak // 2**20
