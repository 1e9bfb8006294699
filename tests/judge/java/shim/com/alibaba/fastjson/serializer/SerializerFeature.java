/* mqtool judge: stand-in for fastjson's SerializerFeature (names only; the shim ignores them). */
package com.alibaba.fastjson.serializer;

public enum SerializerFeature {
    PrettyFormat,
    WriteMapNullValue,
    SortField,
    MapSortField,
    WriteClassName,
    DisableCircularReferenceDetect,
    BrowserCompatible
}
