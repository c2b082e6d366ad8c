"""The speed benchmark (``python -m vitpe.bench``): what it measures (:mod:`~vitpe.bench.config`), how it times
(:mod:`~vitpe.bench.runner`, :mod:`~vitpe.bench.stats`, :mod:`~vitpe.bench.kernels`), what it times
(:mod:`~vitpe.bench.suites`), what it holds the results to (:mod:`~vitpe.bench.targets`), and how it reports them
(:mod:`~vitpe.bench.report`, with :mod:`vitpe.machine` saying what ran it). The command itself: :mod:`vitpe.bench.cli`."""
