"""``mqtool serve`` on a disk that fills up, judged by the real C++ client: sends fail with an
error while there is no room, the server keeps serving and says so once, sends succeed again
when there is room (no restart), and every SEND_OK message is in the store exactly once."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import SmallFs
from tests.serve.conftest import mqtool, run_cpp


def test_serve_on_a_full_disk_answers_errors_and_loses_nothing(
    small_fs: SmallFs, serve_factory: Any, tmp_path: Path
) -> None:
    small_fs.resize("2m")
    srv = serve_factory(small_fs.path / "store")
    home = tmp_path / "cpp"
    rc, ev, err = run_cpp(home, "produce", srv.namesrv, "DiskTopic", "full", "20000", "0", "0",
                          "0", "0", timeout=300)
    ok = {e["key"] for e in ev if e.get("status") == 0}
    assert rc != 0 and 1000 < len(ok) < 20000, (rc, len(ok), err[-2000:])  # the disk filled
    assert srv.proc.poll() is None  # still serving
    small_fs.resize("64m")  # room again: no restart needed
    rc, ev, err = run_cpp(home, "produce", srv.namesrv, "DiskTopic", "room", "200", "0", "0",
                          "0", "0")
    assert rc == 0, err[-2000:]
    ok |= {e["key"] for e in ev if e.get("status") == 0}
    time.sleep(6)  # a flush round (5 s) with room again
    assert srv.stop() == 0, srv.stderr()
    said = srv.stderr()
    assert said.count("flush failed:") <= 1 and "No space left on device" in said, said
    assert "Traceback" not in said, said
    p = mqtool("messages", str(srv.store), "--topic", "DiskTopic", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    keys = [k for m in json.loads(p.stdout) for k in m["keys"].split()]
    assert sorted(keys) == sorted(ok)  # each SEND_OK once, nothing else
    p = mqtool("verify", str(srv.store))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
