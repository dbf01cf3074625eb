"""The Prometheus endpoint of ``[metrics] listen``: the stages' counters and the followed
run's gauges, served while a command holds the project lock.

Imported only when ``listen`` is set: ``prometheus_client`` costs nothing otherwise.
"""
