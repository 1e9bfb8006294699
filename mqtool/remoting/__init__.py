"""RocketMQ's remoting protocol, shared by mqtool's server (``mqtool serve``) and client.

* :mod:`mqtool.remoting.codes`: request/response/language codes and flag bits;
* :mod:`mqtool.remoting.frame`: :class:`RemotingCommand`, the frame codec and both header
  serializations (JSON, ROCKETMQ), with size limits checked before allocation;
* :mod:`mqtool.remoting.headers`: typed request/response headers with extFields coercion;
* :mod:`mqtool.remoting.bodies`: JSON bodies and the batch message layout;
* :mod:`mqtool.remoting.server`: the asyncio server (connections, requests to handlers);
* :mod:`mqtool.remoting.connection`: a client connection (responses matched by opaque);
* :mod:`mqtool.remoting.client`: the client of a live cluster (routes, sends, pulls, queries).
"""
