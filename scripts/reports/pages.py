"""The pages the report writes and checks, and the generated spans each must hold, in order.

Every page of the project's documentation is here (README.md, RESULTS.md, BENCHMARKS.md, docs/**): the check reads
each for placeholders, and compares its markers -- ``<!-- table: NAME -->`` blocks and ``<!-- value: NAME -->``
spans inside sentences -- with this list, so that a marker removed (and the table or number under it edited by hand)
fails the check instead of passing because another page still shows that table. A page added to docs/ without an
entry here fails too.
"""

from __future__ import annotations

#: page (relative to the repository) -> its tables in order ("table:NAME"), then each value it shows inside sentences
#: with the number of its spans ("value:NAME xCOUNT", by name).
MARKERS: dict[str, tuple[str, ...]] = {
    "README.md": (
        "table:recipe-pes-short",
        "table:recipe-current-short",
        "table:imagenette-short",
        "value:speed-verdicts x1",
        "value:sweep-change x4",
        "value:sweep-mean x5",
    ),
    "RESULTS.md": (
        "table:machines",
        "table:recipe-current-short",
        "table:recipe-pes",
        "table:pe-order",
        "table:compare-accuracy",
        "table:recipe-resolution",
        "table:compare-resolution",
        "table:compare-multires",
        "table:detail-gains",
        "table:transfer-remedies",
        "table:transfer-sweep",
        "table:imagenette-recipe",
        "table:imagenette-resolution",
        "value:sweep-change x42",
        "value:sweep-gap x24",
        "value:sweep-mean x71",
        "value:sweep-spread x15",
    ),
    "BENCHMARKS.md": (
        "table:bench-throughput",
        "table:bench-targets-eager",
        "table:bench-targets-compiled",
        "table:bench-gpu",
        "table:bench-targets-gpu",
        "table:bench-gpu-ab",
        "table:bench-new-pes",
        "value:gpu-step-ms x1",
    ),
    "docs/data.md": (),
    "docs/position_encodings.md": (),
    "docs/pretrained.md": (),
    "docs/reliability.md": (),
    "docs/resolution.md": (),
    "docs/results/bias_growth.md": ("table:relbias-scale16",),
    "docs/results/first_cpu_recipe.md": ("table:cpu-recipe-accuracy", "table:cpu-recipe-resolution"),
    "docs/results/recipe.md": (
        "table:machines",
        "table:recipe-ablation",
        "table:recipe-diagnostic",
        "table:recipe-levers",
        "table:recipe-anchors",
        "table:recipe-gpu-four",
        "table:recipe-gpu",
        "value:run-minutes x4",
    ),
    "docs/results/text.md": (
        "table:text-order",
        "table:text-adjacent",
        "table:sst2",
        "table:sst2-trials",
    ),
    "docs/speed.md": ("value:gpu-step-ms x1",),
    "docs/text.md": (),
    "docs/training.md": (),
}
