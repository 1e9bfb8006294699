"""RocketMQ remoting codes and flags.

Numbers as in apache/rocketmq ``RequestCode``, ``ResponseCode`` / ``RemotingSysResponseCode``,
``LanguageCode`` and ``SerializeType`` (remoting module, org.apache.rocketmq.remoting.protocol).
Only the codes mqtool speaks are named; any other number is still carried verbatim.
"""

from __future__ import annotations

from enum import IntEnum


class RequestCode(IntEnum):
    """Request codes (``RequestCode.java``)."""

    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_AND_CREATE_TOPIC = 17
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    GET_CONSUMER_LIST_BY_GROUP = 38
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    CHECK_CLIENT_CONFIG = 46
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_TOPIC_STATS_INFO = 202
    GET_CONSUMER_CONNECTION_LIST = 203
    GET_PRODUCER_CONNECTION_LIST = 204
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_SUBSCRIPTIONGROUP = 207
    GET_CONSUME_STATS = 208
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    RESET_CONSUMER_CLIENT_OFFSET = 220
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    GET_CONSUMER_RUNNING_INFO = 307
    CONSUME_MESSAGE_DIRECTLY = 309
    SEND_MESSAGE_V2 = 310
    SEND_BATCH_MESSAGE = 320
    LITE_PULL_MESSAGE = 361


class ResponseCode(IntEnum):
    """Response codes (``RemotingSysResponseCode.java`` 0-4, ``ResponseCode.java`` the rest)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    INVALID_PARAMETER = 29
    CONSUMER_NOT_ONLINE = 206
    CONSUME_MSG_TIMEOUT = 207


class LanguageCode(IntEnum):
    """Client language, a name in JSON headers and one byte in ROCKETMQ headers."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12


class SerializeType(IntEnum):
    """High byte of the header-length word (``SerializeType.java``)."""

    JSON = 0
    ROCKETMQ = 1


#: ``RemotingCommand.RPC_TYPE``: bit 0 of ``flag`` set = response.
RPC_TYPE_BIT = 0
#: ``RemotingCommand.RPC_ONEWAY``: bit 1 of ``flag`` set = oneway request (no response).
RPC_ONEWAY_BIT = 1
FLAG_RESPONSE = 1 << RPC_TYPE_BIT
FLAG_ONEWAY = 1 << RPC_ONEWAY_BIT

#: Header ``version`` mqtool puts in what it sends: ``RemotingCommand``'s default when the
#: ``rocketmq.remoting.version`` property is unset. Peers do not check it in responses.
MQTOOL_VERSION = 0
