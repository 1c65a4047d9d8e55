"""Prometheus metrics of the broker and the name server, with RocketMQ 5's names (docs/metrics.md).

``metrics_config`` (the ``metrics*`` keys), ``exporter`` (``/metrics`` over prometheus_client's
HTTP server thread), ``histogram`` (bucket counts the hot paths add to), ``label_cap`` (the
bounded ``topic`` / ``consumer_group`` label values), ``broker_metrics`` and ``namesrv_metrics``
(the collectors that read the live objects at each scrape, on the server's event loop).
"""
