"""mqtool: inspect, trace and audit Apache RocketMQ message stores offline, and resend dead-lettered
messages into a store directory."""

__version__ = "0.1.0"
