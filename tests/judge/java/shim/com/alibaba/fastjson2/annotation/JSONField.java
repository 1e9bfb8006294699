/* mqtool judge: stand-in for fastjson2's JSONField annotation (RocketMQ 5 enums). */
package com.alibaba.fastjson2.annotation;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.METHOD, ElementType.FIELD, ElementType.PARAMETER, ElementType.TYPE})
public @interface JSONField {
    String name() default "";

    boolean value() default false;

    boolean serialize() default true;

    boolean deserialize() default true;
}
