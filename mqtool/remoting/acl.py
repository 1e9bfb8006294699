"""ACL request signing, as RocketMQ 4.x's ``AclClientRPCHook`` signs a request.

The hook puts ``AccessKey`` (and ``SecurityToken`` when there is one) next to the request's
header fields, sorts all of them by name (a Java ``TreeMap``: plain string order), concatenates
their *values* (the ``Signature`` field itself left out) as UTF-8, appends the body, and signs
that with HMAC-SHA1 keyed by the secret key (``AclUtils.calSignature`` -> ``AclSigner``,
``HmacSHA1``); the Base64 digest travels as ``Signature``. The broker recomputes it with the
secret it holds for ``AccessKey`` and refuses the request when they differ.

Checked against real frames: the C++ client (rocketmq 0.4.4) signs every request this way, with
an empty access and secret key (its captures in tests/remoting/ fixtures and PEERS.md).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

ACCESS_KEY = "AccessKey"  # SessionCredentials.ACCESS_KEY
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"  # SessionCredentials.SIGNATURE
SECURITY_TOKEN = "SecurityToken"  # SessionCredentials.SECURITY_TOKEN

__all__ = ["ACCESS_KEY", "SECURITY_TOKEN", "SIGNATURE", "AclCredentials", "sign", "signature"]


@dataclass(frozen=True, slots=True)
class AclCredentials:
    """``SessionCredentials``: the access key, its secret and an optional security token."""

    access_key: str
    secret_key: str
    security_token: str | None = None


def signature(fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    """Base64 HMAC-SHA1 over the values of ``fields`` in key order (``Signature`` skipped)
    followed by ``body`` (``AclUtils.combineRequestContent`` + ``calSignature``)."""
    content = "".join(v for k, v in sorted(fields.items()) if k != SIGNATURE)
    mac = hmac.new(secret_key.encode("utf-8"), content.encode("utf-8") + body, hashlib.sha1)
    return base64.b64encode(mac.digest()).decode("ascii")


def sign(ext_fields: Mapping[str, str], body: bytes, cred: AclCredentials) -> dict[str, str]:
    """The request's extFields with ``AccessKey``, ``Signature`` (and ``SecurityToken``) added,
    as ``AclClientRPCHook.doBeforeRequest`` leaves them."""
    fields = {k: v for k, v in ext_fields.items() if k not in (SIGNATURE, ACCESS_KEY)}
    fields[ACCESS_KEY] = cred.access_key
    if cred.security_token is not None:
        fields[SECURITY_TOKEN] = cred.security_token
    out = dict(fields)
    out[SIGNATURE] = signature(fields, body, cred.secret_key)
    return out
