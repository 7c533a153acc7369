"""Prometheus metrics of every process (SPEC §7.4): the metric objects, shared by the layers that count."""
