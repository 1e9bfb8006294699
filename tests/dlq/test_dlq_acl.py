"""ACL signing (mqtool.remoting.acl) against real signatures: the C++ client (rocketmq 0.4.4)
signs every request as AclClientRPCHook does, with an empty access and secret key."""

from __future__ import annotations

import json
from pathlib import Path

from mqtool.remoting.acl import AclCredentials, sign, signature
from mqtool.remoting.frame import decode

FRAMES = json.loads((Path(__file__).parent / "fixtures" / "peer_frames.json").read_text())["frames"]


def test_signature_matches_every_signed_frame_of_the_cpp_client() -> None:
    checked = 0
    for name, hexframe in FRAMES.items():
        if not name.startswith("rocketmq-0.4.4"):
            continue
        cmd = decode(bytes.fromhex(hexframe))
        assert "Signature" in cmd.ext_fields, name
        assert signature(cmd.ext_fields, cmd.body, "") == cmd.ext_fields["Signature"], name
        checked += 1
    assert checked >= 10  # sends with bodies, heartbeats with JSON bodies, pulls, offsets


def test_sign_adds_access_key_and_signature_and_depends_on_every_input() -> None:
    ext = {"topic": "T", "queueId": "0"}
    cred = AclCredentials("ak", "sk")
    signed = sign(ext, b"body", cred)
    assert signed["AccessKey"] == "ak" and set(signed) == {"topic", "queueId", "AccessKey",
                                                           "Signature"}
    assert signed["Signature"] == signature({**ext, "AccessKey": "ak"}, b"body", "sk")
    assert sign(ext, b"body", AclCredentials("ak", "other"))["Signature"] != signed["Signature"]
    assert sign(ext, b"bodY", cred)["Signature"] != signed["Signature"]
    assert sign({**ext, "queueId": "1"}, b"body", cred)["Signature"] != signed["Signature"]
    with_token = sign(ext, b"", AclCredentials("ak", "sk", "tok"))
    assert with_token["SecurityToken"] == "tok"
