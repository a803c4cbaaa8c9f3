"""The cloud consolidator: background jobs that turn the work queue (candidate
sentences, behaviour events, external content) into structured records, and keep
records' time current. See docs/consolidator.md.

Modules: ``tokens`` (keyed deterministic names), ``episodes`` (opening the words),
``extractors`` (the ONNX detector chained before the rules), ``candidates``,
``external``, ``behaviour`` (one plan per item kind), ``timejob``, ``worker`` (claim,
plan, apply, complete) and ``scheduler`` (the APScheduler process). Nothing is
imported here, so ``cloud.effects`` can use ``tokens`` without a cycle.
"""
