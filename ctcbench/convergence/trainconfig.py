"""What one training run depends on, declared without torch: ``TrainConfig`` with its
``ModelConfig`` and ``DataConfig`` (data.py), each field a ``setting`` (see config.py), and
the models by name. ``ctcbench convergence --help`` reads these and imports no torch; the
loop (train.py), the models (models.py) and the optimizers' torch side import it on use."""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields

from ctcbench.convergence.data import DataConfig
from ctcbench.convergence.decode import MAX_BEAM
from ctcbench.convergence.optimizers import OPTIMIZERS
from ctcbench.core.reduction import SCALAR_REDUCTIONS
from ctcbench.runtime.threads import count_check
from ctcbench.settings import (NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, Setting, at_least,
                               check_config, in_unit_interval, setting, settings)

# name -> its class in models.py, imported when a model is built (as the backends' registry)
MODELS = {"linecnn": "ctcbench.convergence.models:LineCNN",
          "linecnnlstm": "ctcbench.convergence.models:LineCNNLSTM",
          "crnn": "ctcbench.convergence.models:CRNN",
          "rescrnn": "ctcbench.convergence.models:ResCRNN",
          "perpos": "ctcbench.convergence.models:PerPosition",
          "repeatvec": "ctcbench.convergence.models:RepeatVector"}


# a size of a model's layers: small models (a CPU harness), and never one whose weights cannot be
# allocated (a typo such as channels = 10**9 is refused before torch is asked for 72 TB)
SIZES = (lambda v: 1 <= v <= 1024, "an integer in [1, 1024]")
CHANNELS = (lambda v: 1 <= v <= 256, "an integer in [1, 256] (later blocks double it)")


@dataclass
class ModelConfig:
    name: str = setting("crnn", "Model architecture.", choices=lambda: MODELS, option="--model",
                        grid="models")
    num_classes: int = setting(11, "charset + blank", derived=True)
    height: int = setting(32, "follows the data", derived=True)
    width: int = setting(128, "follows the data; only the per-position model needs a fixed width",
                         derived=True)
    max_len: int = setting(8, "follows the data; only the per-position model uses it", derived=True)
    batchnorm: bool = setting(False, "BatchNorm after every conv layer (all models).")
    channels: int = setting(16, "Width of the first conv block, later blocks double it "
                            "(32 = the ~640k-parameter CRNN).", check=CHANNELS)
    hidden: int = setting(128, "LSTM size per direction.", check=SIZES)
    window: int = setting(16, "linecnn window width in pixels.", check=SIZES)
    stride: int = setting(4, "linecnn window stride in pixels.", check=SIZES)


@dataclass
class TrainConfig:
    """Everything one training run depends on. Each field is a ``setting``: its option,
    config-file key and check come from here (see ctcbench.convergence.config)."""

    optimizer: str = setting("rmsprop", "Optimizer (tuned by --beta1, --beta2, --alpha, "
                             "--momentum, --weight-decay).", choices=lambda: OPTIMIZERS,
                             grid="optimizers")
    lr: float = setting(1e-3, "Learning rate.", check=POSITIVE, grid="lrs")
    beta1: float = setting(0.9, "Adam/AdamW beta1.", check=in_unit_interval(closed=False))
    beta2: float = setting(0.999, "Adam/AdamW beta2.", check=in_unit_interval(closed=False))
    alpha: float = setting(0.99, "RMSprop smoothing.", check=in_unit_interval(closed=True))
    momentum: float = setting(0.0, "RMSprop/SGD momentum.", check=NON_NEGATIVE)
    weight_decay: float = setting(0.0, "Weight decay (every optimizer).", check=NON_NEGATIVE)
    clip: float = setting(0.0, "Max gradient norm (0 = off).", check=NON_NEGATIVE)
    warmup: int = setting(0, "Linear lr warm-up steps.", check=at_least(0))
    steps: int = setting(600, "Training steps per run.", check=at_least(1))
    batch_size: int = setting(32, "Lines per step.", check=at_least(1))
    curriculum_steps: int = setting(0, "Short-line curriculum: for the first N steps, batches "
                                    "come only from training lines of at most --curriculum-len "
                                    "characters (0 = off).", check=NON_NEGATIVE_INT)
    curriculum_len: int = setting(3, "Longest line in a curriculum step.", check=at_least(1))
    eval_every: int = setting(25, "Steps between held-out evaluations.", check=at_least(1))
    reduction: str = setting("mean", "Reduction of the CTC loss over the batch.",
                             choices=lambda: SCALAR_REDUCTIONS)
    ctc_backend: str = setting("torch", "Registry backend for the loss (numpy = float64 "
                               "reference, slow).")
    seed: int = setting(0, "Seed for init and batch order.", check=NON_NEGATIVE_INT, grid="seeds")
    threads: int = setting(1, "Torch threads per run.", check=count_check())
    beam: int = setting(0, "Also score the final model with prefix beam search of this width.",
                        check=(lambda v: 0 <= v <= MAX_BEAM,
                               f"an integer in [0, {MAX_BEAM}] (0 = greedy only)"))
    diagnose_every: int = setting(0, "Every N steps (a multiple of --eval-every) run "
                                  "ctcbench.diagnose on a held-out batch and record the finding "
                                  "codes in the curve rows (0 = off).", check=NON_NEGATIVE_INT)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def check(self) -> "TrainConfig":
        return check_config(self)

    def relations(self) -> list[tuple[str, bool, str, object]]:
        """Checks across fields, for ``check_config``: (field, holds, expected, got)."""
        return [("diagnose_every", self.diagnose_every % self.eval_every == 0,
                 f"a multiple of eval_every ({self.eval_every})", self.diagnose_every),
                ("curriculum_len",
                 not self.curriculum_steps or self.curriculum_len >= self.data.min_len,
                 f"at least data.min_len ({self.data.min_len}) when curriculum_steps > 0, "
                 "or no line is short enough", self.curriculum_len)]

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        model = ModelConfig(**d.pop("model", {}))
        data = DataConfig(**d.pop("data", {}))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known}, model=model, data=data)


@functools.cache
def run_settings() -> tuple[Setting, ...]:
    """Every setting of a run: the leaves of ``TrainConfig``, the model and data ones too."""
    return tuple(settings(TrainConfig))
