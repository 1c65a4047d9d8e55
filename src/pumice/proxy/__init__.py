"""RocketMQ 5's gRPC endpoint (``apache.rocketmq.v2.MessagingService``): the proxy in LOCAL
mode, inside ``pumice broker --enable-proxy`` and ``pumice dev`` (docs/v5/grpc.md).

Its stubs are generated from ``proto/*.proto`` by the build (``python3 -m pumice.proxy.generate``).
"""
