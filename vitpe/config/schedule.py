"""The sizes and epochs a config trains at, the sizes its model is built for, and the notes on schedules that an
override changed or that do something a user may not expect."""

from __future__ import annotations

from vitpe.config.schema import WARMUP_START, Config, TrainConfig


def reference_size(config: Config) -> int:
    """The image size the model and its PE are built for: ``model.img_size`` when set, else the training size, or
    the native size (``data.img_size``) when training uses several sizes."""
    sizes = config.train.img_sizes
    return config.model.img_size or (sizes[0] if len(sizes) == 1 else config.data.img_size)


def eval_size(config: Config) -> int:
    """The image size the test split is evaluated at during training: the size the model trains at last -- the one
    training size, or the last of a progressive schedule (``train.img_size_epochs``) -- and the reference size when
    each batch draws one of several sizes. A run fine-tuned at 24 px from a 16 px run is tested at 24 px, though its
    reference grid stays 16 px."""
    sizes = config.train.img_sizes
    return sizes[-1] if len(sizes) == 1 or config.train.img_size_epochs else reference_size(config)


def reference_length(config: Config) -> int:
    """The sequence length a text model and its PE are built for: ``model.max_len`` when set, else ``data.max_len``."""
    return config.model.max_len or config.data.max_len


def split_epochs(epochs: list[int], total: int) -> list[int]:
    """``epochs`` (one count per size) rescaled to ``total`` epochs, each size keeping its share as nearly as whole
    epochs allow (largest remainders), the last size at least one epoch; a size may get 0."""
    shares = [e * total / sum(epochs) for e in epochs]
    scaled = [int(share) for share in shares]
    by_remainder = sorted(range(len(shares)), key=lambda i: (scaled[i] - shares[i], i))
    for i in by_remainder[:total - sum(scaled)]:
        scaled[i] += 1
    if scaled[-1] == 0:  # the final size is the one the model is tested at: it keeps at least one epoch
        donor = max(range(len(scaled) - 1), key=lambda i: (scaled[i], -i))
        scaled[donor] -= 1
        scaled[-1] = 1
    return scaled


def fit_size_schedule(train: TrainConfig, overridden: set[str]) -> str | None:
    """Adapt a progressive-resizing schedule (``train.img_sizes`` with ``train.img_size_epochs``) that came with the
    config to what the overrides changed, and say what was done (None: nothing):

    * ``train.epochs=N`` alone: the schedule is scaled to N epochs, each size keeping its share, at least one epoch
      at the final size (sizes left with no epoch are dropped);
    * ``train.img_sizes=[S]`` alone (one size): the schedule is dropped, every epoch is at S.

    A schedule given in the overrides themselves is taken as it is (and checked by :func:`validate`)."""
    if not train.img_size_epochs or "train.img_size_epochs" in overridden:
        return None
    if "train.img_sizes" in overridden:
        if len(train.img_sizes) != 1:
            return None
        train.img_size_epochs = []
        return f"train.img_sizes={train.img_sizes}: one size, so the config's progressive schedule is dropped"
    if "train.epochs" not in overridden or train.epochs < 1 or sum(train.img_size_epochs) == train.epochs:
        return None
    before = f"{train.img_sizes} for {train.img_size_epochs} epochs"
    scaled = split_epochs(train.img_size_epochs, train.epochs)
    train.img_sizes = [size for size, e in zip(train.img_sizes, scaled) if e]
    train.img_size_epochs = [e for e in scaled if e]
    return (f"train.epochs={train.epochs}: the progressive schedule ({before}) is scaled to {train.epochs} epochs, "
            f"each size keeping its share: train.img_sizes={train.img_sizes}, "
            f"train.img_size_epochs={train.img_size_epochs}")


def all_warmup_note(t: TrainConfig) -> str | None:
    """A note for a run whose warm-up is as long as the run: its learning rate would reach ``train.lr`` only at the
    last step (a one-epoch run of a config with one epoch of warm-up)."""
    if t.warmup_epochs < t.epochs:
        return None
    return (f"note: train.warmup_epochs={t.warmup_epochs:g} covers the whole run (train.epochs={t.epochs}): the "
            f"learning rate rises from {t.lr * WARMUP_START:g} and reaches train.lr={t.lr:g} only at the last step; "
            f"give train.warmup_epochs below train.epochs (e.g. train.warmup_epochs={t.epochs / 10:g}) for a decay too")


def reference_grid_note(config: Config) -> str | None:
    """A note for a model built for a size it never trains at (``model.img_size`` outside ``train.img_sizes``, no
    ``model.init``): its PE's reference grid is then not the training grid, and every training step resizes it (a
    patch size changed without the image size, e.g. ``model.patch_size=2 train.img_sizes=[16]`` on a 32 px config)."""
    m, sizes = config.model, config.train.img_sizes
    if not m.img_size or m.init or not sizes or m.img_size in sizes:
        return None
    ref, grids = m.img_size // m.patch_size, sorted({size // m.patch_size for size in sizes})
    trained = ", ".join(f"{g} x {g}" for g in grids)
    return (f"note: model.img_size={m.img_size} with patch {m.patch_size} builds the PE for a {ref} x {ref} grid, "
            f"but training at {sizes} px gives {trained}: the PE is resized at every step; for a reference grid that "
            f"is the training grid set model.img_size={sizes[-1]}")
