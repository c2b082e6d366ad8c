"""The Triton rotation of q and k (vitpe/pe/rotary_triton.py, the eager path on CUDA), run on CPU tensors by Triton's
interpreter and checked against the complex product of vitpe/pe/rotary.py, forward and backward."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from vitpe.models import ViT
from vitpe.pe import rotary

triton = pytest.importorskip("triton")

BATCH, HEADS, TOKENS, HEAD_DIM = 3, 3, 5, 8  # 12 pairs a token: the kernel's 16 lanes include masked ones


@pytest.fixture(scope="module")
def kernels():
    """rotary_triton loaded anew with TRITON_INTERPRET=1, which Triton reads when the kernel is decorated."""
    patch = pytest.MonkeyPatch()
    patch.setenv("TRITON_INTERPRET", "1")
    try:
        path = Path(rotary.__file__).with_name("rotary_triton.py")
        spec = importlib.util.spec_from_file_location("rotary_triton_interpreted", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        patch.undo()
    return module


def _projections(batch: int, dtype: torch.dtype) -> torch.Tensor:
    """A leaf (B, T, 3, nH, Dh), the memory order of the attention's projections."""
    return torch.randn(batch, TOKENS, 3, HEADS, HEAD_DIM).to(dtype).requires_grad_()


def _angles(kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin as the rotary PEs hand them over: (T, Dh/2) shared, or per head (nH, T, Dh/2) laid out token-major
    (RoPE-Mixed's state), with or without a gradient."""
    if kind == "shared":
        phase = torch.randn(TOKENS, HEAD_DIM // 2)
    else:
        phase = torch.randn(TOKENS, HEADS, HEAD_DIM // 2).transpose(0, 1)  # (nH, T, Dh/2), token-major in memory
    learned = kind != "shared"
    if kind == "shared_learned":
        phase = torch.randn(TOKENS, HEAD_DIM // 2)
    phase = phase.requires_grad_(learned)
    return phase.cos(), phase.sin()


def _assert_close(got: torch.Tensor, want: torch.Tensor) -> None:
    """Float32 to rounding; bfloat16 to one step, where the two round a sum differently."""
    coarse = got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=1e-2 if coarse else 1e-5, atol=1e-2 if coarse else 1e-6)


def _rotated_with_grads(rotate, proj: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, grads):
    qkv = proj.permute(2, 0, 3, 1, 4)  # (3, B, nH, T, Dh)
    q, k, v = rotate(qkv, cos, sin)
    inputs = [t for t in (proj, cos, sin) if t.requires_grad]
    return (q, k, v), torch.autograd.grad((q, k, v), inputs, grads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind", ["shared", "per_head", "shared_learned"])
@pytest.mark.parametrize("batch", [1, BATCH])
def test_the_kernels_match_the_complex_product(kernels, dtype, kind, batch):
    torch.manual_seed(0)
    proj = _projections(batch, dtype)
    cos, sin = _angles(kind)
    shape = (batch, HEADS, TOKENS, HEAD_DIM)
    # q's gradient contiguous, k's and v's token-major: the kernel reads one layout, so these are copied to one
    grads = (torch.randn(shape).to(dtype), *(torch.randn(batch, TOKENS, HEADS, HEAD_DIM).to(dtype).transpose(1, 2)
                                             for _ in range(2)))
    assert kernels.fusable(proj.permute(2, 0, 3, 1, 4), cos, sin)
    fused, fused_grads = _rotated_with_grads(kernels.FusedRotaryQK.apply, proj, cos, sin, grads)
    reference, reference_grads = _rotated_with_grads(rotary._RotaryQK.apply, proj, cos, sin, grads)
    for got, want in zip(fused, reference):
        assert got.dtype == dtype and got.shape == shape
        _assert_close(got, want)
    assert len(fused_grads) == (1 if kind == "shared" else 3)
    for got, want in zip(fused_grads, reference_grads):
        assert got.dtype == want.dtype and got.shape == want.shape
        _assert_close(got, want)
    assert fused_grads[0].permute(2, 0, 3, 1, 4).stride() == proj.permute(2, 0, 3, 1, 4).stride()


def test_the_kernel_rotates_by_the_angle_not_its_opposite(kernels):
    """Pair (1, 0) turned by a quarter turn is (0, 1): the sign convention of the complex product."""
    qkv = torch.zeros(3, 1, 1, 1, 2)
    qkv[:2, ..., 0] = 1.0
    angle = torch.full((1, 1), torch.pi / 2)
    q, k, v = kernels.rotate_qk_in_place(qkv, angle.cos(), angle.sin())
    torch.testing.assert_close(q.flatten(), torch.tensor([0.0, 1.0]), atol=1e-7, rtol=0)
    assert q.data_ptr() == qkv.data_ptr() and torch.equal(v, torch.zeros(1, 1, 1, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_place_rotation_matches_and_writes_into_qkv(kernels, dtype):
    torch.manual_seed(1)
    qkv = torch.randn(BATCH, TOKENS, 3, HEADS, HEAD_DIM).to(dtype).permute(2, 0, 3, 1, 4)
    cos, sin = (t.detach() for t in _angles("per_head"))
    want = rotary._RotaryQK.apply(qkv, cos, sin)
    got = kernels.rotate_qk_in_place(qkv, cos, sin)
    for g, w in zip(got, want):
        _assert_close(g, w)
    assert all(g.untyped_storage().data_ptr() == qkv.untyped_storage().data_ptr() for g in got)


def test_only_what_the_kernels_take_goes_to_them(kernels):
    qkv = torch.randn(3, 2, HEADS, TOKENS, HEAD_DIM)
    cos = torch.randn(HEADS, TOKENS, HEAD_DIM // 2)
    assert kernels.fusable(qkv, cos, cos) and kernels.fusable(qkv, cos[0], cos[0])
    assert not kernels.fusable(qkv, cos, cos.transpose(0, 1).contiguous().transpose(0, 1))  # two layouts
    assert not kernels.fusable(qkv, cos[:2], cos[:2])  # neither per head nor shared
    assert not kernels.fusable(qkv[:, 0], cos, cos)  # no batch dimension
    assert not kernels.fusable(qkv.double(), cos, cos)  # float64 keeps its precision in the complex product
    assert not kernels.fusable(qkv, cos.double(), cos.double())
    assert not kernels.fusable(qkv[:, :0], cos, cos)  # an empty batch launches nothing
    assert rotary._fused_kernels(qkv) is None  # a CPU tensor keeps the complex product


@pytest.mark.parametrize("pe", ["rope_axial", "rope_mixed"])
def test_a_vit_through_the_kernels_gives_its_logits_and_gradients(kernels, pe, monkeypatch):
    """The ViT's own rotary states (shared angles with a class token; RoPE-Mixed's per-layer views) through the
    dispatch of rotate_qk_of_qkv, as on CUDA: the same logits and gradients, in training and at inference."""
    torch.manual_seed(3)
    model = ViT(pe=pe, img_size=16, patch_size=4, dim=32, depth=2, heads=2, num_classes=5)
    images = torch.randn(2, 3, 16, 16)

    def run():
        model.zero_grad(set_to_none=True)
        model(images).square().sum().backward()
        with torch.inference_mode():
            logits = model.eval()(images)
        model.train()
        return logits, {name: p.grad for name, p in model.named_parameters()}

    want_logits, want_grads = run()
    monkeypatch.setattr(rotary, "_fused_kernels", lambda qkv: kernels)
    got_logits, got_grads = run()
    torch.testing.assert_close(got_logits, want_logits, rtol=1e-5, atol=1e-5)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-5, msg=name)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_the_kernel_compiles_for_an_h100(dtype, tmp_path, monkeypatch):
    """What the interpreter does not check (types, constexpr branches, lowering to PTX and ptxas): the kernel in each
    form the launches use -- forward, backward, backward with angle gradients -- compiled for sm_90 without a GPU."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from vitpe.pe.rotary_triton import _rotate_rows

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # compiled here, not found in a cache
    names = _rotate_rows.arg_names
    flags = {"INVERSE", "COPY_V", "ANGLES", "PAIRS", "CHANNELS"}
    signature = {name: ("*fp32" if name in ("cos", "sin", "angle_grads") else f"*{dtype}") for name in names[:11]}
    signature |= {name: "constexpr" if name in flags else "i32" for name in names[11:]}
    for inverse, copy_v, angles in [(False, False, False), (True, True, False), (True, True, True)]:
        constexprs = dict(INVERSE=inverse, COPY_V=copy_v, ANGLES=angles, PAIRS=64, CHANNELS=128)
        source = ASTSource(_rotate_rows, signature, {(names.index(k),): v for k, v in constexprs.items()})
        kernel = triton.compile(source, target=GPUTarget("cuda", 90, 32))
        assert kernel.asm["cubin"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_takes_the_kernels_and_matches_the_cpu():
    torch.manual_seed(2)
    proj = _projections(BATCH, torch.float32)
    cos, sin = _angles("per_head")
    grads = tuple(torch.randn(BATCH, HEADS, TOKENS, HEAD_DIM) for _ in range(3))
    cpu, cpu_grads = _rotated_with_grads(rotary.rotate_qk_of_qkv, proj, cos, sin, grads)
    leaves = [t.detach().cuda().requires_grad_(t.requires_grad) for t in (proj, cos, sin)]
    assert rotary._fused_kernels(leaves[0]) is not None
    gpu, gpu_grads = _rotated_with_grads(rotary.rotate_qk_of_qkv, *leaves, tuple(g.cuda() for g in grads))
    for got, want in zip((*gpu, *gpu_grads), (*cpu, *cpu_grads)):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_a_steps_kernels_include_the_triton_launches(kernels, monkeypatch):
    """The benchmark's kernel count (vitpe.bench.kernels) sees the aten operations of a step and adds the Triton
    kernels the rotation launched: one forward, one backward here. (Triton's interpreter, which runs them on the
    CPU here, adds aten operations of its own; on a GPU a launch is one kernel.)"""
    from vitpe.bench.kernels import KernelCounter, kernels_per_step

    monkeypatch.setitem(sys.modules, "vitpe.pe.rotary_triton", kernels)  # where the count looks for launches
    proj = _projections(BATCH, torch.float32)
    cos, sin = _angles("shared")

    def step() -> None:
        proj.grad = None  # every call the same operations
        q, k, v = kernels.FusedRotaryQK.apply(proj.permute(2, 0, 3, 1, 4), cos, sin)
        (q.sum() + k.sum() + v.sum()).backward()

    with KernelCounter() as counter:
        launched = kernels.launches
        step()
        assert kernels.launches - launched == 2
    assert kernels_per_step(step) == sum(counter.ops.values()) + 2
