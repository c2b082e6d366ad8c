"""What the commands (train.py, eval.py, the benchmark) share: how they end (:mod:`~vitpe.cli.exits`: one line and an
exit code, never a traceback) and how they read numbers from the command line (:mod:`~vitpe.cli.arg_types`)."""
