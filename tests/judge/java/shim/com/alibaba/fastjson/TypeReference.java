/* mqtool judge: stand-in for fastjson's TypeReference (RocketMQ 5 TopicConfig): captures the
 * generic type of an anonymous subclass. */
package com.alibaba.fastjson;

import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;

public class TypeReference<T> {
    private final Type type;

    protected TypeReference() {
        Type sup = getClass().getGenericSuperclass();
        this.type = ((ParameterizedType) sup).getActualTypeArguments()[0];
    }

    public Type getType() {
        return type;
    }
}
