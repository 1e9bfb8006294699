"""NOTIFY_CONSUMER_IDS_CHANGED (40) as the broker's ``DefaultConsumerIdsChangeListener`` sends
it: to every consumer of the group when one joins (the new one too, so its first rebalance
sees itself) and when one's connection closes."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from mqtool.remoting import bodies, frame
from mqtool.remoting.codes import RequestCode
from mqtool.remoting.frame import RemotingCommand
from tests.serve.conftest import connect


def _heartbeat(client_id: str) -> RemotingCommand:
    hb = bodies.build_heartbeat(bodies.HeartbeatData(client_id, (), (
        bodies.ConsumerData("GID_n", subscriptions=(bodies.Subscription("T"),)),)))
    return RemotingCommand.request(RequestCode.HEART_BEAT, {}, hb, opaque=7)


def _frames(s: socket.socket, until_response: bool) -> list[RemotingCommand]:
    """Frames read from ``s``: up to and with the answer, else until nothing came for 3 s."""
    out: list[RemotingCommand] = []
    dec = frame.FrameDecoder()
    s.settimeout(3 if not until_response else 30)
    while True:
        try:
            data = s.recv(65536)
        except TimeoutError:
            return out
        assert data, "connection closed"
        for cmd in dec.feed(data):
            out.append(cmd)
            if until_response and cmd.is_response:
                return out


def _notices(cmds: list[RemotingCommand]) -> list[str]:
    return [c.ext_fields.get("consumerGroup", "") for c in cmds
            if not c.is_response and c.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]


def test_group_changes_are_told_to_every_member(tmp_path: Path, serve_factory: Any) -> None:
    srv = serve_factory(tmp_path / "store")
    with connect(srv.broker) as a, connect(srv.broker) as b:
        a.sendall(frame.encode(_heartbeat("cid-a")))
        assert _notices(_frames(a, True)) == ["GID_n"]  # the one that joined is told too
        a.sendall(frame.encode(_heartbeat("cid-a")))
        assert _notices(_frames(a, True)) == []  # the same member again: no change
        b.sendall(frame.encode(_heartbeat("cid-b")))
        assert _notices(_frames(b, True)) == ["GID_n"]
        assert _notices(_frames(a, False)) == ["GID_n"]
        b.close()
        assert _notices(_frames(a, False)) == ["GID_n"]  # a member's connection closed
    assert srv.stop() == 0, srv.stderr()
