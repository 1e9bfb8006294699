"""mqtool: inspect, trace, verify, repair and audit Apache RocketMQ message stores offline, and
resend dead-lettered messages into a store directory or a live cluster."""

__version__ = "0.1.0"
