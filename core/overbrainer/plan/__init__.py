"""The cost plan (``overbrainer plan``, and ``run`` before it spends): what the rest of a
run will cost, before anything is spent.

:mod:`~overbrainer.plan.run_cost` puts the parts together: the stages still to run (their
work from ``pipeline.projection``), training (:mod:`~overbrainer.plan.training`, with the
speed past runs showed, :mod:`~overbrainer.plan.throughput`), a served parent's hours
(:mod:`~overbrainer.plan.serve_hours`) and the parent's logprobs
(:mod:`~overbrainer.plan.logprobs`).
"""
