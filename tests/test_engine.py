import pytest
import torch

from vitpe.atomic_files import save_figure_atomic, write_text_atomic
from vitpe.config import config_from_dict
from vitpe.engine.optimizer import build_optimizer, build_scheduler
from vitpe.loading.checkpoint import CheckpointError, load_checkpoint, save_atomic
from vitpe.models.from_config import build_model


@pytest.mark.parametrize("pe,table", [("rope_mixed", "pe.freqs"), ("relbias", "pe.relative_bias_table"),
                                      ("learnable", "pe.pos_embed")])
def test_no_weight_decay_on_norms_biases_class_token_and_pe(pe, table):
    config = config_from_dict({"model": {"pe": pe, "dim": 32, "depth": 2, "heads": 2}})
    model = build_model(config, 10)
    optimizer = build_optimizer(config, model)
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for g in optimizer.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    assert table not in decayed and "cls_token" not in decayed
    assert not any(n.endswith(".bias") or "norm" in n for n in decayed)
    assert "blocks.0.attn.qkv.weight" in decayed and "head.weight" in decayed


def test_schedule_warms_up_then_decays_to_min_lr():
    config = config_from_dict({"train": {"epochs": 2, "lr": 1e-3, "min_lr": 1e-5, "warmup_epochs": 0.5}})
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = build_scheduler(config, optimizer, steps_per_epoch=10)
    lrs = []
    for step in range(1, 21):
        scheduler.step_update(step)
        lrs.append(optimizer.param_groups[0]["lr"])
    assert lrs[0] < lrs[4] <= 1e-3 + 1e-12  # warmup
    assert max(lrs) == pytest.approx(1e-3, rel=0.05) and lrs[-1] == pytest.approx(1e-5, rel=0.2)


def test_atomic_save_never_leaves_a_partial_file(tmp_path):
    path = tmp_path / "ckpt.pt"
    save_atomic({"config": {}, "model": {"w": torch.ones(2)}}, path)

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        save_atomic({"config": {}, "model": Unpicklable()}, path)
    assert torch.equal(load_checkpoint(path)["model"]["w"], torch.ones(2))  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]  # no temporary left behind


def test_atomic_files_get_the_permissions_of_any_new_file(tmp_path):
    import os
    import stat

    before = os.umask(0o027)  # a group that shares runs: group may read, others nothing
    try:
        save_atomic({"w": torch.ones(1)}, tmp_path / "ckpt.pt")
        write_text_atomic("{}", tmp_path / "record.json")
    finally:
        os.umask(before)
    for name in ("ckpt.pt", "record.json"):  # mkstemp's 0600 would lock the group out
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o640


def test_a_figure_is_written_whole_or_not_at_all(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = tmp_path / "resolution.png"
    save_figure_atomic(plt.figure(), path)
    before = path.read_bytes()
    assert before.startswith(b"\x89PNG")
    fig = plt.figure()
    fig.savefig = lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt)  # interrupted while rendering
    with pytest.raises(KeyboardInterrupt):
        save_figure_atomic(fig, path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["resolution.png"]
    assert plt.get_fignums() == []  # closed either way


def test_checkpoints_that_would_run_code_are_refused(tmp_path):
    import os

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"config": {}, "model": Evil()}, path)
    with pytest.raises(CheckpointError, match="corrupt or not a vitpe checkpoint"):
        load_checkpoint(path)
