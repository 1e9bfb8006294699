/* mqtool judge (RocketMQ 5.3.3 build): compile-time stand-in; the judge records no metrics. */
package io.opentelemetry.api.common;

public interface AttributesBuilder {
    AttributesBuilder put(String key, String value);

    AttributesBuilder put(String key, long value);

    AttributesBuilder put(String key, boolean value);

    Attributes build();
}
