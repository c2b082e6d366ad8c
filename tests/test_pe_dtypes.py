"""Every PE in a model cast to bfloat16, float16 or float64 (``model.to(dtype)``, no autocast): forward, backward and
a mixed batch run, and in float64 the logits are float32's to the precision of float32."""

from __future__ import annotations

import pytest
import torch

import vitpe
import vitpe.pe

PES = [name for name in vitpe.pe.available() if 2 in vitpe.pe.get(name).grid_dims]


def model(pe: str) -> vitpe.ViT:
    torch.manual_seed(0)
    return vitpe.ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, pe=pe, num_classes=3, pool="mean")


CASES = [(pe, dtype) for pe in PES for dtype in (torch.bfloat16, torch.float64)] + \
    [(pe, torch.float16) for pe in ("cpb", "fire", "liere", "pape", "rope_mixed")]  # float16: as bfloat16, spot-checked


@pytest.mark.slow
@pytest.mark.parametrize("pe,dtype", CASES, ids=lambda case: str(case))
def test_a_model_cast_to_a_dtype_trains_and_takes_mixed_batches(pe, dtype):
    net = model(pe).to(dtype)
    images = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
    logits = net(images)
    assert logits.dtype == dtype and torch.isfinite(logits.float()).all()
    logits.float().logsumexp(-1).sum().backward()
    assert all(p.grad is None or torch.isfinite(p.grad.float()).all() for p in net.parameters())
    with torch.no_grad():
        mixed = net.eval()([images[0], images[1, :, :8, :12]])
    assert mixed.shape == (2, 3) and torch.isfinite(mixed.float()).all()


@pytest.mark.parametrize("pe", PES)
def test_float64_gives_float32s_logits(pe):
    images = torch.randn(2, 3, 16, 20, generator=torch.Generator().manual_seed(1))
    single, double = model(pe).eval(), model(pe).double().eval()
    with torch.no_grad():
        assert torch.allclose(double(images.double()).float(), single(images), atol=1e-4)
