"""The reference store: a pure-Python RocketMQ-compatible store engine.

It writes commitlog, consume queues, index files, checkpoint and the broker's config JSON exactly
as RocketMQ 4.9.7 (or 5.x) does, and behaves like the broker for delays, consumer retries and
dead-letter queues. See :class:`mqtool.refstore.engine.RefStore`.
"""
