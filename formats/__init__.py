"""RocketMQ on-disk formats: construct definitions, typed records, fast decoders.

Imported as ``mqtool.formats``. This package depends on nothing else in mqtool, nor on rich or
pyspark (a test checks ``sys.modules``).
"""

from mqtool.formats.errors import FormatError, MqtoolError, TruncatedError

__all__ = ["FormatError", "MqtoolError", "TruncatedError"]
