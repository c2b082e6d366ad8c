"""Images on different grids in one batch (native aspect, mixed resolution), for every 2D PE: vitpe.pe.mixed.

The tolerance where a mixed batch is compared with images run alone, 1e-5 on logits of about unit size: the same sums
in float32, in another order (a group's matrices have other batch sizes and lengths than one image's), agree to about
1e-7; a position, mask or padding token that leaked into another image's output moves the logits by 1e-2 or more.
"""

from __future__ import annotations

import pytest
import torch

import vitpe
import vitpe.pe
from vitpe.pe.mixed import PADDING_BIAS, GridLayout

#: Every PE that works on 2D grids, and a composed one (a table and a rotation together).
PES = [name for name in vitpe.pe.available() if 2 in vitpe.pe.get(name).grid_dims] + ["learnable+rope_mixed"]
TOLERANCE = 1e-5
PATCH = 8
#: (H, W) of the images of a mixed batch: two share a size (one group of two), aspects from 1:3 to 3:1, grids larger
#: and smaller than the reference 4 x 4, one of 1 x 4 patches.
SIZES = [(32, 32), (16, 48), (48, 16), (24, 40), (32, 32), (8, 32)]


def model(pe: str, pool: str = "cls", resize: str = "interpolate", **options) -> vitpe.ViT:
    torch.manual_seed(0)
    return vitpe.ViT(img_size=32, patch_size=PATCH, dim=32, depth=2, heads=2, pe=pe, num_classes=5, pool=pool,
                     pe_resize=resize, **options).eval()


def images(sizes=SIZES, seed: int = 1) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(3, h, w, generator=generator) for h, w in sizes]


@pytest.mark.parametrize("pool", ["cls", "mean"])
@pytest.mark.parametrize("pe", PES)
def test_an_images_logits_in_a_mixed_batch_are_its_logits_alone(pe, pool):
    net, batch = model(pe, pool), images()
    with torch.no_grad():
        mixed = net(batch)
        alone = torch.cat([net(image[None]) for image in batch])
    assert mixed.shape == (len(SIZES), 5)
    assert torch.allclose(mixed, alone, atol=TOLERANCE, rtol=0), (mixed - alone).abs().max()


@pytest.mark.parametrize("pe", PES)
def test_one_grid_through_the_mixed_path_gives_the_one_grid_numbers(pe):
    """A layout whose images share a grid, run through the mixed state (per-group hooks, per-image bias, key mask),
    against the batch path of a (B, C, H, W) tensor, with the same weights."""
    net = model(pe)
    batch = torch.stack(images([(24, 40)] * 3))
    with torch.no_grad():
        tokens, grid = net.embed(batch)
        layout = GridLayout([grid] * 3, net.num_prefix_tokens)
        through_mixed = net.forward_head(net.encode(tokens, layout), token_mask=layout.token_mask())
        assert torch.allclose(through_mixed, net(batch), atol=TOLERANCE, rtol=0)
        assert torch.equal(net(list(batch)), net(batch))  # a list of one size is that batch


@pytest.mark.parametrize("pe", PES)
def test_padding_changes_nothing(pe):
    """Whatever the padding tokens hold, the images' outputs are the same: no PE reads them."""
    net = model(pe, pool="mean")
    with torch.no_grad():
        tokens, layout = net.embed_images(images())
        clean = net.forward_head(net.encode(tokens, layout), token_mask=layout.token_mask())
        padding = 1 - layout.token_mask()  # (B, T, 1)
        noisy = tokens + 100 * torch.randn(tokens.shape, generator=torch.Generator().manual_seed(3)) * padding
        assert not torch.equal(noisy, tokens)
        assert torch.allclose(net.forward_head(net.encode(noisy, layout), token_mask=layout.token_mask()), clean,
                              atol=TOLERANCE, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("pe", PES)
def test_aspects_from_1_to_4_through_4_to_1_run_and_learn(pe):
    net = model(pe, pool="mean").train()  # (with a class token, the last block's bias never reaches the logits)
    sizes = [(8, 32), (16, 32), (24, 32), (32, 32), (32, 24), (32, 16), (32, 8)]  # grids 1x4 ... 4x4 ... 4x1
    logits = net(images(sizes))
    assert logits.shape == (len(sizes), 5) and torch.isfinite(logits).all()
    logits.logsumexp(-1).mean().backward()
    grads = [p.grad for p in net.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    learned = [p for name, p in net.named_parameters() if name.startswith("pe.")]
    assert all(p.grad.abs().sum() > 0 for p in learned), "a PE parameter got no gradient from a mixed batch"


@pytest.mark.parametrize("pe", ["learnable", "peg", "rope_mixed", "cpb", "relbias", "lookhere", "pape", "fire"])
def test_a_mixed_batchs_gradient_is_the_mean_of_the_images_gradients(pe):
    """Training sees the same loss per image as one image at a time: the mixed batch's mean loss has the mean of the
    images' gradients (the learned biases take the per-image fast path of the CPU attention here)."""
    net, batch = model(pe).train(), images()
    labels = torch.arange(len(batch)) % 5
    torch.nn.functional.cross_entropy(net(batch), labels).backward()
    mixed = {name: p.grad.clone() for name, p in net.named_parameters()}
    net.zero_grad()
    for image, label in zip(batch, labels):
        (torch.nn.functional.cross_entropy(net(image[None]), label[None]) / len(batch)).backward()
    for name, p in net.named_parameters():
        assert torch.allclose(mixed[name], p.grad, atol=1e-5, rtol=1e-4), name


def test_the_padding_mask_is_finite_and_masks_exactly():
    layout = GridLayout([(2, 3), (1, 1), (2, 3), (3, 3)], num_prefix_tokens=1)
    assert layout.tokens == 10 and [g.grid for g in layout.groups] == [(2, 3), (1, 1), (3, 3)]
    assert layout.groups[0].rows.tolist() == [0, 2] and not layout.uniform
    key_mask = layout.key_mask()
    assert key_mask.shape == (4, 1, 1, 10) and torch.isfinite(key_mask).all()
    assert key_mask[1, 0, 0, :2].eq(0).all() and key_mask[1, 0, 0, 2:].eq(PADDING_BIAS).all()
    for dtype in (torch.float16, torch.bfloat16, torch.float32):  # finite in each, even doubled; exp() of it is 0
        assert torch.isfinite(torch.tensor(2 * PADDING_BIAS, dtype=dtype))
        assert torch.softmax(torch.tensor([0.0, PADDING_BIAS], dtype=dtype), 0)[1] == 0


def test_mixed_batches_under_bfloat16_autocast_stay_finite():
    for pe in ("cpb", "lookhere", "rope_mixed", "pape"):
        net = model(pe)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            features = net.forward_features(images())
        assert torch.isfinite(features.float()).all(), pe


def test_bad_lists_and_grids_are_refused_in_one_line():
    net = model("rope_mixed")
    with pytest.raises(ValueError, match="non-empty list of images"):
        net([])
    with pytest.raises(ValueError, match=r"image 1 of the list is \(1, 3, 8, 8\); each image of a list is one"):
        net([torch.randn(3, 8, 8), torch.randn(1, 3, 8, 8)])
    with pytest.raises(ValueError, match="not divisible by the patch size 8"):
        net([torch.randn(3, 8, 8), torch.randn(3, 12, 8)])
    with pytest.raises(vitpe.pe.ResizeError):  # a learned table cannot extrapolate past its grid, in a batch or not
        model("learnable", resize="extrapolate")(images())
    with pytest.raises(ValueError, match="pass no key_mask or token_mask"):
        tokens, layout = net.embed_images(images())
        net.encode(tokens, layout, token_mask=layout.token_mask())
    with pytest.raises(ValueError, match="expected one batch tensor .* got a list"):
        net.forward_intermediates(images())
    with pytest.raises(ValueError, match="one number of dimensions"):
        GridLayout([(2, 3), (4,)], num_prefix_tokens=0)


def test_a_conv_stem_normalises_a_mixed_batch_with_the_whole_batchs_statistics():
    """In training, the groups of a mixed batch share their BatchNorm statistics: two groups of one size give what one
    batch of them gives (outputs and running statistics), not each group's own statistics."""
    from vitpe.models.stem import ConvPatchStem

    torch.manual_seed(0)
    whole, grouped = ConvPatchStem(8, 3, 32).train(), ConvPatchStem(8, 3, 32).train()
    grouped.load_state_dict(whole.state_dict())
    batch = torch.randn(5, 3, 16, 24)
    one = whole(batch)
    parts = grouped.forward_groups([batch[:2], batch[2:]])
    assert torch.allclose(torch.cat(parts), one, atol=1e-5)
    for a, b in zip(whole.state_dict().values(), grouped.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), atol=1e-6)
    alone = grouped.forward_groups([batch[:1]])[0]  # a group's own statistics would give other numbers
    assert not torch.allclose(alone, one[:1], atol=1e-3)


@pytest.mark.parametrize("pe", ["cpb", "rope_mixed"])
def test_a_conv_stem_model_gives_an_image_its_logits_alone(pe):
    net, batch = model(pe, stem="conv"), images()
    with torch.no_grad():
        assert torch.allclose(net(batch), torch.cat([net(image[None]) for image in batch]), atol=TOLERANCE, rtol=0)


@pytest.mark.parametrize("mode", ["ntk", "yarn", "extrapolate"])
@pytest.mark.parametrize("pe", ["rope_axial", "rope_mixed", "rope_dinov3"])
def test_frequency_scaling_comes_from_each_images_own_grid(pe, mode):
    """NTK / YaRN scale the rotation by each image's grid against the reference: in a mixed batch as alone."""
    net, batch = model(pe, resize=mode), images()
    with torch.no_grad():
        mixed = net(batch)
        alone = torch.cat([net(image[None]) for image in batch])
        assert torch.allclose(mixed, alone, atol=TOLERANCE, rtol=0)
        net.set_pe_resize("interpolate")
        assert not torch.allclose(net(batch), mixed, atol=1e-4)  # the mode acted


def test_rotary_pes_rotate_a_mixed_batch_at_once_by_per_image_angles():
    """RoPE's state for a mixed batch is one table per image (one rotation a layer); PEs whose state is more than
    angles (STRING's) or not angles go grid by grid. Both give each image its logits alone (tested above)."""
    layout = GridLayout([(4, 4), (2, 6), (4, 4)], num_prefix_tokens=1)
    for pe, batched in (("rope_axial", True), ("rope_mixed", True), ("rope_dinov3", True), ("string", False),
                        ("cpb", False)):
        state = model(pe).pe.prepare_mixed(layout)
        assert (state.batched is not None) == batched, pe
        if batched:
            cos = state.batched[0][0] if isinstance(state.batched[0], tuple) else state.batched[0]
            assert cos.shape[0] == 3 and cos.shape[-2] == layout.tokens
            assert torch.equal(cos[1, :, 13:], torch.ones_like(cos[1, :, 13:]))  # padding: no rotation
