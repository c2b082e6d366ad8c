"""A benchmark result as markdown: the machine, the throughput table, the data pipeline, the targets, the text model."""

from __future__ import annotations

from typing import Any

from vitpe.bench.stats import CONFIDENCE
from vitpe.bench.targets import summary, targets_markdown
from vitpe.machine import cpu_line


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    counted = all("train_kernels" in r for r in result["rows"])
    lines = ["# vitpe benchmark", "",
             f"{cpu_line(result['machine'])}, {result['machine']['cpu_threads']} threads"
             f"{', ' + result['machine']['gpu'] if 'gpu' in result['machine'] else ''}; torch {result['torch']}, "
             f"timm {result['timm']}; device {cfg['device']}; ViT dim {cfg['dim']}, depth {cfg['depth']}, "
             f"heads {cfg['heads']}, MLP ratio {cfg['mlp_ratio']}, patch {cfg['patch_size']}, batch {cfg['batch']}, "
             f"{'average pooling' if cfg.get('pool') == 'mean' else 'class token'}"
             f"{', compiled' if cfg.get('compile') else ''}"
             f"{', ' + cfg['precision'] if cfg.get('precision', 'auto') != 'auto' else ''}; "
             f"median of {cfg['repeats']} interleaved rounds of {cfg['steps']} steps; ratios paired within "
             f"rounds, {100 * CONFIDENCE:.0f}% bootstrap intervals in the targets.", "",
             "| PE | px | train img/s | vs timm | vs none | infer img/s | vs timm | vs none |"
             + (" kernels/step: train | infer |" if counted else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|---|" if counted else "")]
    for r in result["rows"]:
        lines.append(f"| {r['pe']} | {r['img_size']} | {r['train_img_s']:.1f} | {r.get('train_vs_timm', 1):.3f} | "
                     f"{r.get('train_vs_none', float('nan')):.3f} | {r['infer_img_s']:.1f} | "
                     f"{r.get('infer_vs_timm', 1):.3f} | {r.get('infer_vs_none', float('nan')):.3f} |"
                     + (f" {r['train_kernels']} | {r['infer_kernels']} |" if counted else ""))
    if counted:
        lines += ["", "Kernels per step: the aten operations that reach a kernel, and vitpe's Triton kernels "
                      "(vitpe.bench.kernels); on a GPU, where these small steps are launch-bound, a PE costs about "
                      "what it adds here."]
    d = result.get("data")
    if d:
        lines += ["", f"Data pipeline ({d['source']}, batch {d['batch']}): {1000 * d['data_s_per_batch']:.1f} ms per "
                      f"augmented batch vs {1000 * d['model_s_per_step']:.0f} ms per training step: "
                      f"{100 * d['data_share']:.1f}% of a step; in a real run of {d['real_epoch_steps']} steps "
                      f"({d['real_epoch_s']:.1f} s) {100 * d['real_epoch_data_share']:.1f}%."]
    if result.get("targets"):
        lines += ["", "Targets (training step; overhead = t_pe / t_none - 1):", "",
                  *targets_markdown(result["targets"]), "", summary(result["targets"])]
    if result.get("text_rows"):
        lines += ["", f"Text classifier, training, sequences of {result['text_rows'][0]['seq_len']} tokens:", "",
                  "| PE | tokens/s | vs none |", "|---|---|---|"]
        lines += [f"| {r['pe']} | {r['train_tokens_s']:.0f} | {r['train_vs_none']:.3f} |" for r in result["text_rows"]]
    return "\n".join(lines) + "\n"
