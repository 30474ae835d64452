"""Operations: what the project knows about DVC, Prefect-facing process bookkeeping and MLflow runs.

Layer rule: :mod:`codethinker.ops` may import the core (``contra``, ``data``, ``sandbox``,
``engines``, ``sampling``, ``rewards``, ``training``, ``evaluation``, ``params``, ``tracking``);
the core never imports ``ops`` (the preflight reads ``dvc.yaml`` through :mod:`~codethinker.ops.dvcfile`, the
project's one reader of it, which imports no DVC). The stages (``stages/*.py``), the command line and the Prefect
flows (``flows/``) are its callers.

- :mod:`~codethinker.ops.dvcfile`: ``dvc.yaml`` read as plain YAML (a stage's entry, foreach
  items, its declared outs/metrics/plots, its ``meta:`` marks).
- :mod:`~codethinker.ops.dvc_api`: what goes through DVC itself (the stage graph, ``-S`` overrides,
  ``dvc exp show``).
- :mod:`~codethinker.ops.procs`: processes by ``host:pid:start`` key and their liveness (the process
  that opened a run, so that a killed one's run can be reaped).
- :mod:`~codethinker.ops.autolog`: what a stage run records from its ``dvc.yaml`` entry.
- :mod:`~codethinker.ops.runs`: the parent run per pipeline run (opened by its launcher,
  ``codethinker repro`` or the flow, its id passed explicitly) and the child run per stage.
- :mod:`~codethinker.ops.stage`: the stage runner (child run + autolog + one-line errors).
"""
