"""Real Apache RocketMQ for the tests: the official artifacts from Maven Central, real processes.

* :func:`classpath` resolves ``org.apache.rocketmq:rocketmq-<name>`` of a version (and what it
  depends on) with ``mvn`` into the local Maven repository (``~/.m2``) through a generated pom
  under ``build/realmq/<version>-<names>/``; the class path is written beside the pom and reused
  while the pom is unchanged and its jars exist (``make realmq`` resolves everything the tests
  use before they run).
* :func:`compile_java` compiles test programs against it (cached under ``build/realmq/classes``).
* :class:`Cluster` is a real name server and broker of a version, two JVMs on free 127.0.0.1
  ports, over a store directory; :func:`mqadmin` runs the real admin tool; :func:`java` any main.

Every process gets ``user.home`` and ``ROCKETMQ_HOME`` under a home directory of its own, so
nothing (logs, name-server kv config, client caches) is written outside it.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import random
import select
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from mqtool.remoting.codes import RequestCode
from mqtool.remoting.frame import FrameDecoder, RemotingCommand, encode

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "realmq"
VERSIONS = ("4.9.7", "5.3.3")
DEFAULT_ARTIFACTS = ("broker", "namesrv", "tools", "client")
# the JVM flags RocketMQ's own runbroker.sh / runserver.sh give a JDK 9+ (store code maps files
# and frees direct buffers), and a small heap: the test machine is small and shared
JVM_FLAGS = (
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true",
)
SERVER_HEAP = ("-Xms256m", "-Xmx512m")
TOOL_HEAP = ("-Xms64m", "-Xmx256m")
DEPENDENCY_PLUGIN = "3.6.1"
REQUEST_BROKER_RUNTIME_INFO = 28  # RequestCode.GET_BROKER_RUNTIME_INFO (broker)

# 4.9.7's servers and mqadmin configure logback from $ROCKETMQ_HOME/conf/logback_<name>.xml
# (the binary distribution's conf/): this one logs everything at INFO to one file per process
# under user.home. 5.x configures its (relocated) logback from resources in its jars, also
# under user.home.
LOGBACK = """<?xml version="1.0" encoding="UTF-8"?>
<configuration>
  <appender name="File" class="ch.qos.logback.core.FileAppender">
    <file>${{user.home}}/logs/rocketmqlogs/{name}.log</file>
    <encoder><pattern>%d{{yyyy-MM-dd HH:mm:ss.SSS}} %p %t %c{{0}} - %m%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="File"/></root>
</configuration>
"""
LOGBACK_NAMES = ("namesrv", "broker", "tools")


# every server JVM a Cluster started and did not stop yet: killed when this Python exits, so a
# test run that dies leaves no broker behind
_RUNNING: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_running() -> None:
    for proc in list(_RUNNING):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _RUNNING.clear()


class RealMQError(RuntimeError):
    """A real RocketMQ process or the Maven resolution failed; the text says which and why."""


class _PortTaken(RealMQError):
    """A server JVM could not bind its port (taken after it was found free)."""


# --- resolution ---------------------------------------------------------------------------------


def _names(artifacts: Sequence[str]) -> tuple[str, ...]:
    names = tuple(sorted(set(artifacts or DEFAULT_ARTIFACTS)))
    for n in names:
        if not n.replace("-", "").isalnum():
            raise ValueError(f"not an artifact name: {n!r}")
    return names


def pom(version: str, names: Sequence[str]) -> str:
    deps = "".join(
        "    <dependency><groupId>org.apache.rocketmq</groupId>"
        f"<artifactId>rocketmq-{n}</artifactId><version>{version}</version>"
        "<scope>test</scope></dependency>\n"
        for n in names
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>mqtool.tests</groupId>
  <artifactId>realmq-{version}-{"-".join(names)}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}  </dependencies>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId>
    <version>{DEPENDENCY_PLUGIN}</version>
  </plugin></plugins></build>
</project>
"""


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def classpath(version: str, *artifacts: str) -> str:
    """The class path of ``rocketmq-<name>`` of ``version`` for each name (default: broker,
    namesrv, tools, client) and everything they depend on, jars in ``~/.m2``."""
    names = _names(artifacts)
    work = BUILD / f"{version}-{'-'.join(names)}"
    text = pom(version, names)
    cp_file = work / "classpath.txt"
    with _locked(work / ".lock"):
        if (work / "pom.xml").is_file() and (work / "pom.xml").read_text("utf-8") == text \
                and cp_file.is_file():
            cp = cp_file.read_text("utf-8").strip()
            if cp and all(Path(p).is_file() for p in cp.split(":")):
                return cp
        (work / "pom.xml").write_text(text, "utf-8")
        cp_file.unlink(missing_ok=True)
        res = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(work / "pom.xml"), "dependency:build-classpath",
             f"-Dmdep.outputFile={cp_file}", "-Dmdep.includeScope=test"],
            capture_output=True, text=True, timeout=1800,
        )
        if res.returncode != 0 or not cp_file.is_file():
            raise RealMQError(
                f"mvn could not resolve RocketMQ {version} {', '.join(names)} (exit "
                f"{res.returncode}):\n{res.stdout[-4000:]}{res.stderr[-4000:]}"
            )
        return cp_file.read_text("utf-8").strip()


def compile_java(version: str, sources: list[Path], *artifacts: str) -> Path:
    """``javac`` ``sources`` against :func:`classpath` (``version``, ``artifacts``): the class
    directory, reused while the sources and the class path are the same."""
    cp = classpath(version, *artifacts)
    digest = hashlib.sha256(cp.encode())
    for src in sorted(Path(s).resolve() for s in sources):
        digest.update(str(src).encode() + b"\0" + src.read_bytes() + b"\0")
    out = BUILD / "classes" / f"{version}-{digest.hexdigest()[:16]}"
    with _locked(out.with_name(out.name + ".lock")):
        if (out / ".compiled").is_file():
            return out
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=out.name + ".tmp"))
        res = subprocess.run(
            ["javac", "-nowarn", "-encoding", "UTF-8", "-d", str(tmp), "-cp", cp,
             *map(str, sources)],
            capture_output=True, text=True, timeout=600,
        )
        if res.returncode != 0:
            raise RealMQError(f"javac failed against RocketMQ {version}:\n{res.stdout}{res.stderr}")
        (tmp / ".compiled").write_text("\n".join(map(str, sources)) + "\n", "utf-8")
        if out.exists():
            subprocess.run(["rm", "-rf", str(out)], check=True)
        tmp.rename(out)
    return out


# --- processes ----------------------------------------------------------------------------------


def prepare_home(home: Path) -> Path:
    """A RocketMQ home: ``conf/logback_*.xml`` for 4.9.7, logs under ``home/logs``."""
    (home / "conf").mkdir(parents=True, exist_ok=True)
    for name in LOGBACK_NAMES:
        f = home / "conf" / f"logback_{name}.xml"
        if not f.exists():
            f.write_text(LOGBACK.format(name=name), "utf-8")
    return home


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["ROCKETMQ_HOME"] = str(home)
    env["HOME"] = str(home)
    env.pop("NAMESRV_ADDR", None)
    env.pop("JAVA_TOOL_OPTIONS", None)
    return env


def _java_cmd(home: Path, heap: Sequence[str], cp: str, main: str, *args: str,
              log: str = "client") -> list[str]:
    # 5.x: the logback configuration of this kind of process (its jar's rmq.<log>.logback.xml);
    # by default the first one found on the class path, with its status printed to stdout
    return ["java", *heap, *JVM_FLAGS, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}",
            f"-Drmq.logback.configurationFile=rmq.{log}.logback.xml",
            "-cp", cp, main, *args]


def java(version: str, main_class: str, *args: str, class_dir: Path | None = None,
         artifacts: Sequence[str] = DEFAULT_ARTIFACTS, timeout: float = 300,
         home: Path | None = None, input: str | None = None,
         log: str = "client", cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``main_class`` in a JVM with RocketMQ ``version``'s jars (and ``class_dir``) on the
    class path; ``home`` (default: a directory under build/realmq) is its user.home, ``cwd``
    its working directory (default: this process's)."""
    cp = classpath(version, *artifacts)
    if class_dir is not None:
        cp = f"{class_dir}:{cp}"
    home = prepare_home(home if home is not None else BUILD / "home" / version)
    return subprocess.run(
        _java_cmd(home, TOOL_HEAP, cp, main_class, *args, log=log),
        capture_output=True, text=True, timeout=timeout, env=_env(home), input=input, cwd=cwd,
    )


def mqadmin(version: str, namesrv: str, *args: str, timeout: float = 120,
            home: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``mqadmin <command> -n namesrv <options>`` of RocketMQ ``version``
    (``org.apache.rocketmq.tools.command.MQAdminStartup``); ``args[0]`` is the command, run in
    ``cwd`` (``consumerStatus`` writes its files there)."""
    if not args:
        raise ValueError("mqadmin needs a command")
    return java(version, "org.apache.rocketmq.tools.command.MQAdminStartup",
                args[0], "-n", namesrv, *args[1:], timeout=timeout, home=home, log="tools",
                cwd=cwd)


@contextmanager
def running_java(version: str, main_class: str, *args: str, class_dir: Path | None = None,
                 home: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """``main_class`` started as :func:`java` starts it (output to ``home``/java.out), for a
    test that needs it running (a consumer online) and not its output; killed when the block
    ends."""
    cp = classpath(version, *DEFAULT_ARTIFACTS)
    if class_dir is not None:
        cp = f"{class_dir}:{cp}"
    home = prepare_home(home if home is not None else BUILD / "home" / version)
    with open(home / "java.out", "ab") as out:
        proc = subprocess.Popen(_java_cmd(home, TOOL_HEAP, cp, main_class, *args), stdout=out,
                                stderr=subprocess.STDOUT, env=_env(home))
    _RUNNING.add(proc)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        _RUNNING.discard(proc)


class AdminShell:
    """``mqadmin`` commands of RocketMQ ``version`` one after another in one JVM
    (``tests/realmq/java/.../AdminShell.java`` hands each to the tools' own
    ``MQAdminStartup.main0``), so a test that runs many pays for one JVM start. ``home`` is its
    user.home and working directory (``consumerStatus`` writes its files there)."""

    MARK = b"\n@@mqadmin-done@@ "

    def __init__(self, version: str, namesrv: str, home: Path) -> None:
        self.namesrv = namesrv
        home = prepare_home(home)
        cp = f"{programs(version)}:{classpath(version, *DEFAULT_ARTIFACTS)}"
        self._err = open(home / "admin-shell.err", "ab")  # noqa: SIM115 (closed by close())
        self._proc = subprocess.Popen(
            _java_cmd(home, TOOL_HEAP, cp, "mqtool.realmq.AdminShell", log="tools"),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err, env=_env(home),
            cwd=home,
        )
        self._buf = b""

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``mqadmin <command> -n namesrv <options>``: what it printed, as from a process of its
        own (exit status 0: mqadmin's own is 0 whatever the command said)."""
        if not args or any("\t" in a or "\n" in a for a in args):
            raise ValueError(f"mqadmin needs a command and arguments without tabs: {args}")
        assert self._proc.stdin is not None and self._proc.stdout is not None
        line = "\t".join((args[0], "-n", self.namesrv, *args[1:])) + "\n"
        self._proc.stdin.write(line.encode("utf-8"))
        self._proc.stdin.flush()
        deadline = time.monotonic() + timeout
        fd = self._proc.stdout.fileno()
        while True:
            at = self._buf.find(self.MARK)
            if at >= 0:
                end = self._buf.find(b"\n", at + len(self.MARK))
                if end >= 0:
                    o, e = (int(n) for n in self._buf[at + len(self.MARK):end].split())
                    if len(self._buf) >= end + 1 + o + e:
                        body = self._buf[end + 1:end + 1 + o + e]
                        self._buf = self._buf[end + 1 + o + e:]
                        return subprocess.CompletedProcess(
                            ["mqadmin", *args], 0, body[:o].decode("utf-8", "replace"),
                            body[o:].decode("utf-8", "replace"))
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise subprocess.TimeoutExpired(["mqadmin", *args], timeout)
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RealMQError(f"the mqadmin JVM ended (exit {self._proc.wait()}) "
                                      f"during {args[0]}")
                self._buf += chunk

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._err.close()


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(*offsets: int) -> int:
    """A port p with p + each offset free on 127.0.0.1, below the ephemeral range (so no
    outgoing connection takes it meanwhile)."""
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(2000):
        p = rng.randrange(12000, 32000)
        if all(_port_free(p + o) for o in offsets):
            return p
    raise RealMQError("no free 127.0.0.1 ports")


def request(addr: str, code: int, timeout: float = 5.0) -> RemotingCommand | None:
    """One remoting request (no fields) and its response, or None when nothing answers."""
    host, _, port = addr.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as s:
            s.sendall(encode(RemotingCommand.request(code, opaque=1)))
            dec = FrameDecoder()
            while True:
                data = s.recv(65536)
                if not data:
                    return None
                for cmd in dec.feed(data):
                    if cmd.is_response and cmd.opaque == 1:
                        return cmd
    except OSError:
        return None


class Cluster:
    """A real name server and broker of RocketMQ ``version``: separate JVMs over ``store``."""

    def __init__(self, version: str, store: Path, *, broker_conf: dict[str, str] | None = None,
                 home: Path | None = None, broker_name: str = "broker-a",
                 cluster: str = "DefaultCluster") -> None:
        if version not in VERSIONS:
            raise ValueError(f"RocketMQ {version}: not one of {', '.join(VERSIONS)}")
        self.version = version
        self.store = Path(store)
        self.home = Path(home) if home is not None else \
            self.store.parent / f"{self.store.name}-home"
        self.logs = self.home / "logs" / "rocketmqlogs"
        self.broker_name = broker_name
        self.cluster = cluster
        self.broker_conf = dict(broker_conf or {})
        self.namesrv_port = 0
        self.broker_port = 0
        self.namesrv: subprocess.Popen[bytes] | None = None
        self.broker: subprocess.Popen[bytes] | None = None
        self._out_start: dict[str, int] = {}  # where each JVM's output of this start begins

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    def conf(self) -> dict[str, str]:
        """The broker.conf the broker is started with (``broker_conf`` wins)."""
        conf = {
            "brokerClusterName": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": "0",
            "brokerRole": "ASYNC_MASTER",
            "flushDiskType": "ASYNC_FLUSH",
            "brokerIP1": "127.0.0.1",
            "namesrvAddr": self.namesrv_addr,
            "listenPort": str(self.broker_port),
            "storePathRootDir": str(self.store),
            "storePathCommitLog": str(self.store / "commitlog"),
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "diskMaxUsedSpaceRatio": "99",
            "sendMessageThreadPoolNums": "2",
            "pullMessageThreadPoolNums": "4",
        }
        if self.version.startswith("5."):
            conf["enableControllerMode"] = "false"
        conf.update(self.broker_conf)
        return conf

    def _spawn(self, name: str, main: str, conf: dict[str, str]) -> subprocess.Popen[bytes]:
        path = self.home / f"{name}.conf"
        path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()), "utf-8")
        out = open(self.home / f"{name}.out", "ab")
        self._out_start[name] = len(self.output(name))
        try:
            proc = subprocess.Popen(
                _java_cmd(self.home, SERVER_HEAP, classpath(self.version), main, "-c", str(path),
                          log=name),
                stdout=out, stderr=subprocess.STDOUT, env=_env(self.home),
                start_new_session=True,
            )
        finally:
            out.close()
        _RUNNING.add(proc)
        return proc

    def output(self, name: str = "broker") -> str:
        """What the name server's or broker's JVM printed (stdout and stderr)."""
        f = self.home / f"{name}.out"
        return f.read_text("utf-8", "replace") if f.exists() else ""

    def start(self, timeout: float = 120) -> Cluster:
        """Start the name server, then the broker; return once the broker is registered with
        the name server and answers itself."""
        prepare_home(self.home)
        self.store.mkdir(parents=True, exist_ok=True)
        classpath(self.version)  # resolve before any port is picked
        deadline = time.monotonic() + timeout
        for attempt in range(3):
            try:
                self._start(deadline)
                return self
            except _PortTaken:  # another process bound a port between the check and the JVM
                if attempt == 2 or "listenPort" in self.broker_conf:
                    raise
        return self

    def _start(self, deadline: float) -> None:
        self.namesrv_port = free_ports(0)
        self.namesrv = self._spawn("namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup",
                                   {"listenPort": str(self.namesrv_port)})
        self._wait(self._namesrv_answers, deadline, "namesrv")
        # the broker listens on listenPort, listenPort - 2 (fast/VIP channel), listenPort + 1 (HA)
        self.broker_port = free_ports(0, -2, 1) if "listenPort" not in self.broker_conf \
            else int(self.broker_conf["listenPort"])
        self.broker = self._spawn("broker", "org.apache.rocketmq.broker.BrokerStartup",
                                  self.conf())
        self._wait(self._registered, deadline, "broker")

    def _namesrv_answers(self) -> bool:
        return request(self.namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO) is not None

    def _registered(self) -> bool:
        info = request(self.namesrv_addr, RequestCode.GET_BROKER_CLUSTER_INFO)
        if info is None or self.broker_addr.encode() not in info.body:
            return False
        return request(self.broker_addr, REQUEST_BROKER_RUNTIME_INFO) is not None

    def _wait(self, ready: Callable[[], bool], deadline: float, name: str) -> None:
        proc = self.namesrv if name == "namesrv" else self.broker
        assert proc is not None
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                self.kill()
                out = self.output(name)[self._out_start.get(name, 0):]
                error = _PortTaken if "Address already in use" in out else RealMQError
                raise error(f"RocketMQ {self.version} {name} exited {proc.returncode}:\n"
                            f"{out[-4000:]}")
            if ready():
                return
            time.sleep(0.3)
        self.kill()
        raise RealMQError(f"RocketMQ {self.version} {name} not ready in time:\n"
                          f"{self.output(name)[-4000:]}")

    @staticmethod
    def _term(proc: subprocess.Popen[bytes] | None, timeout: float) -> int:
        if proc is None:
            return 0
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise RealMQError(f"pid {proc.pid} did not stop in {timeout:.0f} s: killed") \
                    from None
        return proc.returncode

    def stop(self, timeout: float = 120) -> int:
        """Stop as an operator does (``mqshutdown``: SIGTERM): the broker's shutdown hook runs,
        the store is flushed and its ``abort`` file removed; then the name server. The
        broker's exit code (143: SIGTERM, handled by the JVM)."""
        try:
            code = self._term(self.broker, timeout)
        finally:
            try:
                self._term(self.namesrv, timeout)
            finally:
                self._forget()
        return code

    def _forget(self) -> None:
        for proc in (self.broker, self.namesrv):
            if proc is not None:
                _RUNNING.discard(proc)
        self.broker = self.namesrv = None

    def kill(self) -> None:
        """``kill -9`` both JVMs (a crash: the store keeps its ``abort`` file)."""
        for proc in (self.broker, self.namesrv):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        self._forget()

    def __enter__(self) -> Cluster:
        if self.broker is None:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.stop()
        else:
            try:
                self.stop()
            except RealMQError:
                self.kill()


# --- the official Java client ------------------------------------------------------------------

PROGRAMS = ROOT / "tests" / "realmq" / "java"


def programs(version: str) -> Path:
    """The class directory of tests/realmq/java (Produce, ConsumeAll) for ``version``."""
    return compile_java(version, sorted(PROGRAMS.rglob("*.java")), *DEFAULT_ARTIFACTS)


def _json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def produce(version: str, namesrv: str, topic: str, count: int, *, prefix: str = "m",
            tag: str = "t", timeout: float = 300,
            home: Path | None = None) -> list[dict[str, object]]:
    """Send ``count`` messages with the official producer of ``version`` (sync, one at a time;
    message i: body and key ``prefix-i``, tag ``tag``): one dict per send result (key, status,
    msgId, offsetMsgId, queueId, queueOffset). Raises when a send is not SEND_OK."""
    res = java(version, "mqtool.realmq.Produce", namesrv, topic, str(count), prefix, tag,
               class_dir=programs(version), timeout=timeout, home=home)
    sent = _json_lines(res.stdout)
    if res.returncode != 0 or len(sent) != count:
        raise RealMQError(f"Produce ({version}) exit {res.returncode}, {len(sent)} of {count} "
                          f"sent:\n{res.stdout[-2000:]}{res.stderr[-4000:]}")
    return sent


def consume_all(version: str, namesrv: str, topic: str, group: str, expect: int,
                timeout: float = 120, *, home: Path | None = None) -> list[dict[str, object]]:
    """Read ``topic`` from its first offset with the official push consumer of ``version`` in
    consumer group ``group`` until ``expect`` distinct messages (queue id and offset) came: one
    dict per delivery (msgId, offsetMsgId, topic, queueId, queueOffset, commitLogOffset, tags,
    keys, reconsumeTimes, storeTimestamp, body as UTF-8, properties), in delivery order. Raises
    when fewer came within ``timeout`` seconds."""
    res = java(version, "mqtool.realmq.ConsumeAll", namesrv, topic, group, str(expect),
               str(int(timeout * 1000)), class_dir=programs(version), timeout=timeout + 60,
               home=home)
    got = _json_lines(res.stdout)
    if res.returncode != 0:
        raise RealMQError(f"ConsumeAll ({version}) exit {res.returncode}: {len(got)} deliveries, "
                          f"{expect} expected:\n{res.stderr[-4000:]}")
    return got


# what the tests use: the cluster, mqadmin and the Java client; the judge's store code
TEST_ARTIFACTS = (DEFAULT_ARTIFACTS, ("store",))


def main() -> None:
    """``python tests/realmq.py`` (``make realmq``): resolve every version's artifacts the tests
    use and compile the Java client programs; one line each."""
    for v in VERSIONS:
        for arts in TEST_ARTIFACTS:
            cp = classpath(v, *arts)
            size = sum(Path(p).stat().st_size for p in cp.split(":"))
            print(f"RocketMQ {v} {', '.join(arts)}: {len(cp.split(':'))} jars, "
                  f"{size / 2**20:.1f} MiB")
        print(f"RocketMQ {v} client programs: {programs(v)}")


if __name__ == "__main__":
    main()
