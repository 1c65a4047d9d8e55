"""RocketMQ 4.x remoting: the wire protocol, sans-IO (bytes in, commands out)."""
