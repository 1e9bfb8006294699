/* mqtool judge (RocketMQ 5.3.3 build): compile-time stand-in; the judge records no metrics. */
package io.opentelemetry.api.metrics;

import io.opentelemetry.api.common.Attributes;
import io.opentelemetry.context.Context;

public interface LongHistogram {
    void record(long value);

    void record(long value, Attributes attributes);

    void record(long value, Attributes attributes, Context context);
}
