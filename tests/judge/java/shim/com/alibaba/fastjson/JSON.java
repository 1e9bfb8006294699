/*
 * mqtool judge: a minimal stand-in for com.alibaba.fastjson.JSON (fastjson is not reachable from
 * this build machine). Only the calls RocketMQ's store code makes on the judge's path are here,
 * backed by Jackson. It reads fastjson's own output (unquoted integer keys, tab indentation).
 * Written for mqtool; not derived from fastjson sources.
 */
package com.alibaba.fastjson;

import com.alibaba.fastjson.serializer.SerializerFeature;
import com.fasterxml.jackson.annotation.JsonAutoDetect;
import com.fasterxml.jackson.annotation.PropertyAccessor;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.MapperFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;

public final class JSON {
    private static final ObjectMapper MAPPER = JsonMapper.builder()
        .enable(JsonReadFeature.ALLOW_UNQUOTED_FIELD_NAMES)
        .enable(JsonReadFeature.ALLOW_SINGLE_QUOTES)
        .enable(JsonReadFeature.ALLOW_JAVA_COMMENTS)
        .enable(JsonReadFeature.ALLOW_TRAILING_COMMA)
        .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
        .disable(SerializationFeature.FAIL_ON_EMPTY_BEANS)
        .disable(MapperFeature.AUTO_DETECT_IS_GETTERS)
        .visibility(PropertyAccessor.FIELD, JsonAutoDetect.Visibility.NONE)
        .build();

    private JSON() {
    }

    public static String toJSONString(Object obj) {
        return toJSONString(obj, false);
    }

    public static String toJSONString(Object obj, boolean prettyFormat) {
        try {
            if (prettyFormat) {
                return MAPPER.writerWithDefaultPrettyPrinter().writeValueAsString(obj);
            }
            return MAPPER.writeValueAsString(obj);
        } catch (Exception e) {
            throw new RuntimeException("fastjson shim: cannot encode " + obj.getClass().getName(), e);
        }
    }

    public static String toJSONString(Object obj, SerializerFeature... features) {
        return toJSONString(obj, false);
    }

    public static <T> java.util.List<T> parseArray(String text, Class<T> clazz) {
        if (text == null || text.trim().isEmpty()) {
            return null;
        }
        try {
            return MAPPER.readValue(text, MAPPER.getTypeFactory().constructCollectionType(java.util.List.class, clazz));
        } catch (Exception e) {
            throw new RuntimeException("fastjson shim: cannot decode a list of " + clazz.getName(), e);
        }
    }

    public static <T> T parseObject(String text, TypeReference<T> ref) {
        return parseObject(text, ref.getType());
    }

    public static <T> T parseObject(byte[] bytes, Class<T> clazz) {
        return parseObject(new String(bytes, java.nio.charset.StandardCharsets.UTF_8), clazz);
    }

    public static void writeJSONString(java.io.Writer writer, Object obj, SerializerFeature... features) {
        try {
            writer.write(toJSONString(obj, false));
        } catch (java.io.IOException e) {
            throw new RuntimeException("fastjson shim: cannot write " + obj.getClass().getName(), e);
        }
    }

    public static <T> T parseObject(String text, java.lang.reflect.Type type) {
        if (text == null || text.trim().isEmpty()) {
            return null;
        }
        try {
            return MAPPER.readValue(text, MAPPER.getTypeFactory().constructType(type));
        } catch (Exception e) {
            throw new RuntimeException("fastjson shim: cannot decode " + type + ": " + e.getMessage(), e);
        }
    }

    public static <T> T parseObject(String text, Class<T> clazz) {
        if (text == null || text.trim().isEmpty()) {
            return null;
        }
        try {
            return MAPPER.readValue(text, clazz);
        } catch (Exception e) {
            throw new RuntimeException("fastjson shim: cannot decode " + clazz.getName() + ": " + e.getMessage(), e);
        }
    }
}
