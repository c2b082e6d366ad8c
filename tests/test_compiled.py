"""vitpe.engine.compiled: the training forward compiled once per training size, and dynamo's graph limit raised to fit
with no silent eager fallback (train.compile, the compiled benchmarks)."""

from collections.abc import Callable

import pytest
import torch
import torch._dynamo as dynamo
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounter

from vitpe.data.text import PAD_ID
from vitpe.engine.compiled import SizeCompiled, blank_images, blank_sequences, compile_limits, fill_grid_caches
from vitpe.models import TextClassifier, ViT

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


@pytest.mark.slow
@pytest.mark.parametrize("pe", ["cpb", "sincos", "rope_mixed"])
def test_one_graph_per_training_size(pe):
    """A PE's grid cache filled at the first compiled call changed what the graph's guards read: every size compiled
    twice, and five sizes of the recipe passed dynamo's limit of 8 and ran eagerly. Now once per size."""
    counter = CompileCounter()
    dynamo.reset()
    try:
        train_steps(SizeCompiled(small_vit(pe), blank_images(SIZES), "bf16", backend=counter), SIZES)
        assert counter.frame_count == len(SIZES)
    finally:
        dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize("pe", ["cpb", "sincos", "relbias", "alibi", "rope_axial"])
def test_a_model_compiled_by_hand_compiles_once_per_size_and_leaves_its_cache_alone(pe):
    """A user's own torch.compile of a vitpe model, caches not filled: a missing entry is built into the graph and not
    stored while dynamo traces (storing it had made every size compile twice)."""
    model, counter = small_vit(pe), CompileCounter()
    dynamo.reset()
    try:
        train_steps(torch.compile(model, dynamic=False, backend=counter), SIZES)
        assert counter.frame_count == len(SIZES)
        assert all(not m._cache for m in model.modules() if hasattr(m, "_cache"))
    finally:
        dynamo.reset()


@pytest.mark.slow
def test_an_eager_evaluation_between_epochs_costs_no_compilation():
    """train.py evaluates the plain model eagerly, which fills the caches at the sizes it evaluates; graphs traced
    with those entries missing would compile again. Filled before compiling, they never see the cache change."""
    def graphs(compiled: Callable[[ViT, CompileCounter], Callable]) -> int:
        model, counter = small_vit("cpb"), CompileCounter()
        dynamo.reset()
        try:
            forward = compiled(model, counter)
            train_steps(forward, SIZES, steps=1)
            fill_grid_caches(model, blank_images(SIZES), "bf16")  # what an eager evaluation at every size stores
            train_steps(forward, SIZES, steps=1)
            return counter.frame_count
        finally:
            dynamo.reset()

    assert graphs(lambda model, counter: SizeCompiled(model, blank_images(SIZES), "bf16", backend=counter)) == len(SIZES)
    # the control: traced with the entries missing
    assert graphs(lambda model, counter: torch.compile(model, dynamic=False, backend=counter)) == 2 * len(SIZES)


def test_filling_the_caches_leaves_the_model_and_the_random_draws_as_they_were():
    model = small_vit("cpb").train()
    batch_norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert batch_norms
    stats = [(m.running_mean.clone(), m.running_var.clone(), m.num_batches_tracked.clone()) for m in batch_norms]
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    fill_grid_caches(model, blank_images(SIZES), "bf16")
    assert model.training and torch.equal(torch.get_rng_state(), rng)
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in weights.items())
    assert all(torch.equal(mean, m.running_mean) and torch.equal(var, m.running_var)
               and torch.equal(seen, m.num_batches_tracked) for (mean, var, seen), m in zip(stats, batch_norms))


WIDTHS = [8, 16, 21]  # a text set's padded widths (TextBatchLoader's width_multiple=8, the set 21 tokens wide)


def text_batch(width: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two right-padded sequences in a batch ``width`` tokens wide, the shorter one 1 to width - 1 tokens long."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([width - 1, int(torch.randint(1, width, (), generator=g))])  # (2,)
    mask = torch.arange(width)[None, :] < lengths[:, None]  # (2, L)
    return torch.randint(3, 50, (2, width), generator=g).masked_fill(~mask, PAD_ID), mask


@pytest.mark.slow
@pytest.mark.parametrize("pe", ["rope_axial", "alibi", "t5bias", "sincos"])
def test_a_compiled_text_model_takes_one_graph_per_width_evaluation_between_epochs_included(pe):
    """Text was compiled with dynamic lengths: the mask's checks split the graph, and each length took its own graphs,
    past dynamo's limit of 8 after a few lengths (then eager, with one warning). Padded to a few widths, one whole
    graph each, and the eager evaluation between epochs costs nothing."""
    torch.manual_seed(0)
    model, counter = TextClassifier(50, 2, max_len=21, dim=32, depth=2, heads=2, pe=pe), CompileCounter()
    dynamo.reset()
    try:
        compiled = SizeCompiled(model, blank_sequences(WIDTHS), "bf16", backend=counter)
        for epoch in range(2):
            for seed, width in enumerate(WIDTHS * 2):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = compiled(*text_batch(width, 10 * epoch + seed))
                F.cross_entropy(logits.float(), torch.tensor([0, 1])).backward()
            model.eval()
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                for width in WIDTHS:
                    model(*text_batch(width, 100 + width))
            model.train()
        assert counter.frame_count == len(WIDTHS)
    finally:
        dynamo.reset()


def test_a_compiled_text_model_gives_the_eager_logits():
    torch.manual_seed(0)
    model = TextClassifier(50, 3, max_len=21, dim=32, depth=2, heads=2, pe="rope_axial", pool="mean").eval()
    dynamo.reset()
    try:
        compiled = SizeCompiled(model, blank_sequences(WIDTHS), backend="aot_eager")
        for width in WIDTHS:
            tokens, mask = text_batch(width, width)
            torch.testing.assert_close(compiled(tokens, mask), model(tokens, mask), atol=1e-5, rtol=1e-5)
    finally:
        dynamo.reset()


def test_the_compiled_module_trains_the_models_own_parameters():
    model = small_vit("cpb")
    compiled = SizeCompiled(model, blank_images(SIZES[:1]), backend="eager")
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


def test_with_cuda_graphs_each_training_call_starts_a_graph_step_and_still_one_graph_per_size(monkeypatch):
    """train.compile_mode=reduce-overhead: inductor records each size's step as CUDA graphs; a training call tells the
    graph trees that the last step's outputs are done with (without it a replay may overwrite logits still in use).
    Evaluation calls do not, and the mode leaves the one-graph-per-size count alone."""
    marks = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: marks.append(1))
    counter = CompileCounter()
    dynamo.reset()
    try:
        compiled = SizeCompiled(small_vit("rope_mixed"), blank_images(SIZES), "bf16", backend=counter,
                                mode="reduce-overhead")
        train_steps(compiled, SIZES)
        assert counter.frame_count == len(SIZES) and len(marks) == 2 * len(SIZES)  # train_steps: two per size
        compiled.eval()
        with torch.no_grad():
            compiled(torch.randn(2, 3, *SIZES[0]))
        assert len(marks) == 2 * len(SIZES)
    finally:
        dynamo.reset()
    plain = SizeCompiled(small_vit("sincos"), blank_images(SIZES), backend=counter)
    assert not plain.new_graph_step


def test_a_compile_mode_needs_compile_and_is_one_of_torchs():
    from vitpe.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="train.compile_mode"):
        load_config("configs/smoke.yaml", ["train.compile_mode=reduce-overhead"])  # without train.compile
    with pytest.raises(ConfigError, match="train.compile_mode.*one of default, reduce-overhead"):
        load_config("configs/smoke.yaml", ["train.compile=true", "train.compile_mode=fast"])
    assert load_config("configs/smoke.yaml", ["train.compile=true", "train.compile_mode=reduce-overhead"]) \
        .train.compile_mode == "reduce-overhead"


def test_adamw_is_fused_on_a_gpu_and_torchs_default_on_the_cpu():
    from vitpe.config import Config
    from vitpe.engine.optimizer import build_optimizer

    assert not build_optimizer(Config(), small_vit("none")).defaults.get("fused")  # CPU runs keep their numbers
    if torch.cuda.is_available():
        assert build_optimizer(Config(), small_vit("none").cuda()).defaults["fused"]
