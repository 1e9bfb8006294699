/* mqtool judge: stand-in for fastjson's JSONField annotation (attributes used by RocketMQ only). */
package com.alibaba.fastjson.annotation;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.METHOD, ElementType.FIELD, ElementType.PARAMETER})
public @interface JSONField {
    String name() default "";

    boolean serialize() default true;

    boolean deserialize() default true;
}
