"""Fabric telemetry: sources -> Samples -> rates -> detectors -> Alerts, a Prometheus exporter, rules, dashboard.

Sources (``sources/<kind>.py``) read NIC and switch counters into :class:`tensorfabric.samples.Sample`
records named from :mod:`tensorfabric.telemetry.metrics`. Detectors (``detectors/<name>.py``) are pure
functions over windows of samples. prometheus_client is imported only by the exporter.
"""
