"""Frame codec: golden frames of the real peers, both header serializations, hostile input."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.remoting import bodies, frame, headers
from mqtool.remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode, SerializeType
from mqtool.remoting.frame import FrameDecoder, FrameError, HeaderFieldError, RemotingCommand

FRAMES = json.loads((Path(__file__).parent / "fixtures" / "peer_frames.json").read_text())["frames"]


def _frame(prefix: str) -> bytes:
    hits = [v for k, v in FRAMES.items() if k.startswith(prefix)]
    assert len(hits) == 1, prefix
    return bytes.fromhex(hits[0])


def test_every_peer_frame_decodes() -> None:
    assert len(FRAMES) == 31
    for title, hx in FRAMES.items():
        cmd = frame.decode(bytes.fromhex(hx))
        assert cmd.serialize_type == SerializeType.JSON, title
        if "->" not in title:
            assert cmd.is_response, title
        else:
            assert not cmd.is_response, title
            assert f"code {cmd.code} " in title, title


def test_cpp_send_message_mixed_types_coerced() -> None:
    cmd = frame.decode(_frame("rocketmq-0.4.4 producer -> BROKER: code 10"))
    assert cmd.code == RequestCode.SEND_MESSAGE and cmd.language == "CPP" and cmd.version == 63
    assert cmd.ext_fields["queueId"] == "0" and cmd.ext_fields["defaultTopicQueueNums"] == "4"
    h = headers.decode_header(headers.SendMessageRequestHeader, cmd.ext_fields)
    assert (h.topic, h.queueId, h.sysFlag, h.batch, h.unitMode) == ("TopicTest", 0, 0, False, False)
    assert h.bornTimestamp == 1795294688036 and h.reconsumeTimes == 0
    assert h.properties is not None and "UNIQ_KEY\x01" in h.properties
    assert cmd.body == b"hello from rocketmq 0.4.4"


def test_cpp_batch_on_code_10() -> None:
    """The C++ client's batch flag is "1", which Java's Boolean.parseBoolean reads as false:
    the broker takes the frame as one message whose body is the encoded batch."""
    cmd = frame.decode(_frame("rocketmq-0.4.4 send_batch"))
    assert cmd.ext_fields["batch"] == "1"
    h = headers.decode_header(headers.SendMessageRequestHeader, cmd.ext_fields)
    assert h.batch is False and h.queueId == 2
    msgs = bodies.decode_batch(cmd.body)
    assert [m.body for m in msgs] == [b"body-4", b"body-5"]
    assert "KEYS\x01key-4" in msgs[0].properties
    assert bodies.encode_batch(msgs) == cmd.body


def test_alions_v2_header() -> None:
    cmd = frame.decode(_frame("ali-ons producer -> BROKER: code 310"))
    h = headers.send_header_from_v2(cmd.ext_fields)
    assert (h.producerGroup, h.topic, h.queueId, h.unitMode) == (
        "PID-ALIONS-TEST",
        "TopicTest",
        1,
        False,
    )
    assert h.bornTimestamp == 1795294868741
    assert headers.send_header_from_v2(headers.send_header_to_v2(h)) == h


def test_pull_and_send_back_headers() -> None:
    for prefix in (
        "rocketmq-0.4.4 consumer -> BROKER: code 11",
        "ali-ons consumer -> BROKER: code 11",
    ):
        h = headers.decode_header(
            headers.PullMessageRequestHeader, frame.decode(_frame(prefix)).ext_fields
        )
        assert h.maxMsgNums == 32 and h.suspendTimeoutMillis == 15000 and h.sysFlag == 6
    sb = headers.decode_header(
        headers.ConsumerSendMsgBackRequestHeader,
        frame.decode(_frame("ali-ons consumer -> BROKER: code 36")).ext_fields,
    )
    assert (sb.offset, sb.group, sb.maxReconsumeTimes, sb.unitMode) == (
        1000,
        "CID-ALIONS-TEST",
        16,
        False,
    )
    sb2 = headers.decode_header(
        headers.ConsumerSendMsgBackRequestHeader,
        frame.decode(_frame("rocketmq-0.4.4 consumer -> BROKER: code 36")).ext_fields,
    )
    assert sb2.maxReconsumeTimes is None and sb2.offset == 1000


def test_heartbeats_both_enum_styles() -> None:
    cpp = bodies.parse_heartbeat(
        frame.decode(_frame("rocketmq-0.4.4 consumer -> BROKER: code 34")).body
    )
    js = bodies.parse_heartbeat(frame.decode(_frame("ali-ons consumer -> BROKER: code 34")).body)
    assert cpp.consumers[0].group == "CID-STUB-TEST" and cpp.consumers[0].message_model == "1"
    assert [s.topic for s in cpp.consumers[0].subscriptions] == [
        "%RETRY%CID-STUB-TEST",
        "TopicTest",
    ]
    assert js.consumers[0].message_model == "CLUSTERING" and js.consumers[0].subscriptions[
        0
    ].tags == ("TagA", "TagB")
    prod = bodies.parse_heartbeat(
        frame.decode(_frame("rocketmq-0.4.4 producer -> BROKER: code 34")).body
    )
    assert prod.producer_groups == ("PID-STUB-TEST",) and prod.consumers == ()


def test_route_reply_roundtrip() -> None:
    cmd = frame.decode(_frame("route reply"))
    route = bodies.parse_route(cmd.body)
    assert route.broker_datas[0].addrs == {0: "127.0.0.1:20911"}
    again = bodies.parse_route(bodies.build_route(route))
    assert again.queue_datas == route.queue_datas and again.broker_datas[0].addrs == {
        0: "127.0.0.1:20911"
    }
    # fastjson writes Long map keys unquoted
    assert bodies.parse_route(
        b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:"h:1"}}],"queueDatas":[]}'
    ).broker_datas[0].addrs == {0: "h:1"}


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_roundtrip_both_serializations(stype: SerializeType) -> None:
    req = RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {"topic": "T", "queueId": 3, "x": True},
        b"\x00body",
        opaque=77,
        serialize_type=stype,
    )
    data = frame.encode(req)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4 and data[4] == int(stype)
    back = frame.decode(data)
    assert back == req
    assert back.ext_fields == {"topic": "T", "queueId": "3", "x": "true"}
    resp = back.response(ResponseCode.PULL_NOT_FOUND, "no new message", {"nextBeginOffset": 5})
    r = frame.decode(frame.encode(resp))
    assert (
        r.is_response
        and r.opaque == 77
        and r.serialize_type == stype
        and r.remark == "no new message"
    )


def test_rocketmq_header_layout_golden() -> None:
    cmd = RemotingCommand(
        code=34,
        opaque=1,
        flag=0,
        language="CPP",
        version=63,
        remark=None,
        ext_fields={"k": "v"},
        serialize_type=SerializeType.ROCKETMQ,
    )
    h = frame.encode_rocketmq_header(cmd)
    # code(2) lang(1) version(2) opaque(4) flag(4) remarkLen(4) extLen(4) + k/v entry
    assert h == bytes.fromhex("002201003f0000000100000000000000000000000800016b0000000176")


def test_oneway_and_response_bits() -> None:
    c = RemotingCommand.request(10, {}, oneway=True)
    assert c.flag == FLAG_ONEWAY and c.is_oneway and not c.is_response
    assert c.response().flag == 1


# -- hostile frames ---------------------------------------------------------------------------


def _raw(length: int, word: int, rest: bytes = b"") -> bytes:
    return struct.pack(">iI", length, word) + rest


@pytest.mark.parametrize(
    "data, msg",
    [
        (b"\x00\x00", "no length field"),
        (struct.pack(">i", -5), "below the 4-byte"),
        (struct.pack(">i", 2**31 - 1), "exceeds"),
        (struct.pack(">i", 16 * 1024 * 1024), "exceeds"),
        (_raw(8, 100, b"{}{}"), "bad header length"),
        (_raw(6, 2, b"{x"), "not valid JSON"),
        (_raw(6, 2, b"[]"), "not an object"),
        (_raw(8, 4, b'{"a"'), "not valid JSON"),
        (_raw(6, (7 << 24) | 2, b"{}"), "unknown serialize type"),
        (_raw(6, 2, b"{}"), "'code' missing"),
        (_raw(9, 5, b"\xff\xfe{}0"), "not valid JSON"),
        (_raw(4 + 10, (1 << 24) | 10, b"\x00" * 10), "at least 21"),
    ],
)
def test_hostile_frames_raise_clear_errors(data: bytes, msg: str) -> None:
    if len(data) >= 4 and struct.unpack(">i", data[:4])[0] + 4 != len(data):
        with pytest.raises(FrameError, match=msg):
            if len(data) == 4:
                FrameDecoder().feed(data)
            else:
                frame.decode(data)
    else:
        with pytest.raises(FrameError, match=msg):
            frame.decode(data)


def test_decoder_rejects_oversize_before_buffering() -> None:
    dec = FrameDecoder(max_frame=1024)
    with pytest.raises(FrameError, match="exceeds the 1024-byte limit"):
        dec.feed(struct.pack(">i", 2000))
    dec2 = FrameDecoder()
    with pytest.raises(FrameError, match="bad header length"):
        dec2.feed(_raw(100, 500))


def test_rocketmq_header_bad_lengths() -> None:
    base = bytearray(
        frame.encode_rocketmq_header(
            RemotingCommand(
                code=1, remark="r", ext_fields={"a": "b"}, serialize_type=SerializeType.ROCKETMQ
            )
        )
    )
    bad_remark = bytearray(base)
    struct.pack_into(">i", bad_remark, 13, 10_000)
    with pytest.raises(FrameError, match="remark length 10000"):
        frame.decode_rocketmq_header(bytes(bad_remark))
    bad_ext = bytearray(base)
    struct.pack_into(">i", bad_ext, 18, -1)
    with pytest.raises(FrameError, match="extFields length -1"):
        frame.decode_rocketmq_header(bytes(bad_ext))
    bad_val = bytearray(base)
    struct.pack_into(">i", bad_val, 25, 2**30)
    with pytest.raises(FrameError, match="value length"):
        frame.decode_rocketmq_header(bytes(bad_val))


def test_header_field_coercion_errors() -> None:
    with pytest.raises(HeaderFieldError, match="<topic> is null"):
        headers.decode_header(headers.GetMaxOffsetRequestHeader, {"queueId": "1"})
    with pytest.raises(HeaderFieldError, match="queueId: 'x' is not an integer"):
        headers.decode_header(headers.GetMaxOffsetRequestHeader, {"topic": "t", "queueId": "x"})
    with pytest.raises(HeaderFieldError, match="out of range"):
        headers.decode_header(
            headers.GetMaxOffsetRequestHeader, {"topic": "t", "queueId": str(2**31)}
        )
    with pytest.raises(FrameError, match="expected a string or a number"):
        frame.decode(
            frame.encode(RemotingCommand(0))[:0] + _json_frame({"code": 1, "extFields": {"a": [1]}})
        )


def _json_frame(obj: object) -> bytes:
    h = json.dumps(obj).encode()
    return struct.pack(">iI", 4 + len(h), len(h)) + h


def test_batch_body_bad_lengths() -> None:
    good = bodies.encode_batch([bodies.BatchMessage(0, b"abc", "K\x01v\x02")])
    with pytest.raises(bodies.BodyError, match="bad totalSize"):
        bodies.decode_batch(struct.pack(">i", 10_000) + good[4:])
    with pytest.raises(bodies.BodyError, match="truncated"):
        bodies.decode_batch(good + b"\x00\x00")


# -- fuzz ---------------------------------------------------------------------------------------

_ext = st.dictionaries(st.text(max_size=20), st.text(max_size=40), max_size=6)


@settings(max_examples=200, deadline=None)
@given(
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    remark=st.none() | st.text(min_size=1, max_size=30),
    ext=_ext,
    body=st.binary(max_size=64),
    stype=st.sampled_from(list(SerializeType)),
)
def test_fuzz_roundtrip(
    code: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext: dict[str, str],
    body: bytes,
    stype: SerializeType,
) -> None:
    cmd = RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        body=body,
        serialize_type=stype,
        language="JAVA",
        version=0,
    )
    data = frame.encode(cmd)
    assert frame.decode(data) == cmd
    dec = FrameDecoder()
    out = []
    for i in range(0, len(data), 7):
        out += dec.feed(data[i : i + 7])
    assert out == [cmd] and dec.pending == 0


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_fuzz_garbage_never_crashes(data: bytes) -> None:
    dec = FrameDecoder(max_frame=4096)
    try:
        dec.feed(data)
    except FrameError:
        pass
    assert dec.pending <= 4096


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=120))
def test_fuzz_rocketmq_header_garbage(data: bytes) -> None:
    try:
        frame.decode_rocketmq_header(data)
    except FrameError:
        pass


@settings(max_examples=200, deadline=None)
@given(
    bodies_=st.lists(st.binary(max_size=300), min_size=1, max_size=6),
    cuts=st.lists(st.integers(0, 2000), max_size=8),
)
def test_fuzz_decoder_any_split(bodies_: list[bytes], cuts: list[int]) -> None:
    """Several frames cut anywhere (mid length field, mid header, several per chunk) decode to
    the same commands in order."""
    cmds = [RemotingCommand(code=i, opaque=i, ext_fields={"k": str(i)}, body=b, version=0)
            for i, b in enumerate(bodies_)]
    data = b"".join(frame.encode(c) for c in cmds)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    dec = FrameDecoder()
    out: list[RemotingCommand] = []
    for a, b in zip(points, points[1:], strict=False):
        out += dec.feed(data[a:b])
    assert out == cmds and dec.pending == 0 and dec.expected is None


def test_encode_refuses_a_header_past_24_bits() -> None:
    cmd = RemotingCommand(code=1, remark="r" * (0xFFFFFF + 1))
    with pytest.raises(frame.RemotingError, match="24-bit"):
        frame.encode(cmd, max_frame=64 * 1024 * 1024)


def test_json_header_depth_is_limited() -> None:
    ok = b'{"code":1,"extFields":{"a":"[[[[{{{{' + b"[" * 100 + b'\\"}}"}}'
    assert frame.decode_json_header(ok).ext_fields["a"].startswith("[[[[{{{{")
    assert not frame.json_too_deep(b"[" * 32 + b"]" * 32)
    for deep in (b"[" * 33 + b"]" * 33, b'{"a":' * 33 + b"1" + b"}" * 33,
                 b"[" * 100_000 + b"]" * 100_000, b"[" * 100_000,
                 b'{"code":1,"x":' + b"[{}," * 40 + b"[" * 40 + b"]" * 80 + b"}"):
        with pytest.raises(FrameError, match="nests deeper than 32 levels"):
            frame.decode_json_header(deep)
    dec = FrameDecoder()
    hdr = b"[" * 50_000
    with pytest.raises(FrameError, match="nests deeper"):
        dec.feed(struct.pack(">iI", 4 + len(hdr), len(hdr)) + hdr)
