"""vitpe.engine.compiled: the training forward compiled once per training size, and dynamo's graph limit raised to fit
with no silent eager fallback (train.compile, the compiled benchmarks)."""

import pytest
import torch
import torch._dynamo as dynamo
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounter

from vitpe.engine.compiled import SizeCompiled, compile_limits, fill_grid_caches
from vitpe.models import ViT

SIZES = [(8, 8), (12, 12), (16, 8)]  # a progressive schedule, a non-square size among them


def small_vit(pe: str) -> ViT:
    torch.manual_seed(0)
    return ViT(img_size=16, patch_size=4, dim=32, depth=2, heads=2, pe=pe, pool="mean", stem="conv")


def train_steps(forward, sizes, steps: int = 2) -> None:
    for h, w in sizes:
        for _ in range(steps):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(forward(torch.randn(2, 3, h, w)).float(), torch.tensor([0, 1]))
            loss.backward()


@pytest.mark.parametrize("pe", ["cpb", "sincos", "rope_mixed"])
def test_one_graph_per_training_size(pe):
    """A PE's grid cache filled at the first compiled call changed what the graph's guards read: every size compiled
    twice, and five sizes of the recipe passed dynamo's limit of 8 and ran eagerly. Filled first: once per size."""
    counter = CompileCounter()
    dynamo.reset()
    try:
        train_steps(SizeCompiled(small_vit(pe), SIZES, precision="bf16", backend=counter), SIZES)
        assert counter.frame_count == len(SIZES)
        if pe == "cpb":  # the failure this guards against: compiled before the caches were filled
            unfilled = CompileCounter()
            dynamo.reset()
            train_steps(torch.compile(small_vit(pe), dynamic=False, backend=unfilled), SIZES)
            assert unfilled.frame_count == 2 * len(SIZES)
    finally:
        dynamo.reset()


def test_filling_the_caches_leaves_the_model_and_the_random_draws_as_they_were():
    model = small_vit("cpb").train()
    batch_norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert batch_norms
    stats = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for m in batch_norms]
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    fill_grid_caches(model, SIZES, precision="bf16")
    assert model.training and torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
    assert all(torch.equal(mean, m.running_mean) and torch.equal(var, m.running_var)
               and torch.equal(seen, m.num_batches_tracked) for (mean, var, seen), m in zip(stats, batch_norms))


def test_the_compiled_module_trains_the_models_own_parameters():
    model = small_vit("cpb")
    compiled = SizeCompiled(model, SIZES[:1], backend="eager")
    assert {id(p) for p in compiled.parameters()} == {id(p) for p in model.parameters()}
    dynamo.reset()
    try:
        train_steps(compiled, SIZES[:1], steps=1)
        assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    finally:
        dynamo.reset()


def test_a_compiled_benchmark_compiles_every_variant_or_fails():
    """Past dynamo's default limit (8 graphs per function) the benchmark's later variants would run eagerly; under
    ``compile_limits`` every variant gets its graph, and reaching the limit is an error, not an eager fallback."""
    import torch._dynamo as dynamo
    from torch._dynamo.testing import CompileCounter

    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
              torch.int8, torch.uint8, torch.complex64]  # one graph each: dynamo guards on the dtype

    def double(x):
        return x + x

    counter = CompileCounter()
    dynamo.reset()
    compiled = torch.compile(double, backend=counter)
    default_limit = dynamo.config.cache_size_limit
    try:
        with compile_limits(len(dtypes)):
            for dtype in dtypes:
                compiled(torch.ones(2, dtype=dtype))
            assert counter.frame_count == len(dtypes)  # all compiled: none ran eagerly past the default limit
            assert dynamo.config.cache_size_limit >= len(dtypes)
            if hasattr(dynamo.config, "fail_on_recompile_limit_hit"):  # past the limit: an error, not eager
                assert dynamo.config.fail_on_recompile_limit_hit
    finally:
        dynamo.reset()
    assert dynamo.config.cache_size_limit == default_limit  # the settings last only for the benchmark
