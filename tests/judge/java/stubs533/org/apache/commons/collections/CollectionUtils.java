/* mqtool judge (RocketMQ 5.3.3 build): the two commons-collections 3 helpers the store calls. */
package org.apache.commons.collections;

import java.util.Collection;

public final class CollectionUtils {
    private CollectionUtils() {
    }

    public static boolean isEmpty(Collection<?> c) {
        return c == null || c.isEmpty();
    }

    public static boolean isNotEmpty(Collection<?> c) {
        return !isEmpty(c);
    }
}
