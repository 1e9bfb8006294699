"""mqtool: inspect, trace, repair and audit Apache RocketMQ message stores offline."""

__version__ = "0.1.0"
