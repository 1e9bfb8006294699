"""Damaged 5.x stores (copies of the real 5.3.3 fixtures, damaged here): every command says
where (file and offset, or RocksDB key), exits 1 and does not crash; repair refuses the store
kinds it does not fully understand."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, manifest_jsonl
from mqtool.cli import app

runner = CliRunner()


def _have(name: str) -> bool:
    return (FIXTURES / "5.3.3" / name / "manifest" / "queues.jsonl").is_file()


def _verify(root: Path) -> tuple[int, list[dict[str, object]], str]:
    res = runner.invoke(app, ["verify", str(root), "--json"])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.output
    data = json.loads(res.stdout)
    return res.exit_code, data["findings"], res.output


def test_lmq_unit_at_a_record_not_dispatched_to_it(store_copy) -> None:  # type: ignore[no-untyped-def]
    root = store_copy("5.3.3/lmq")
    msgs = [r for r in manifest_jsonl("5.3.3/lmq", "commitlog.jsonl") if r["kind"] == "msg"]
    plain = next(r for r in msgs if "INNER_MULTI_DISPATCH" not in r["properties"])
    unit = root / "consumequeue" / "%LMQ%order-3" / "0" / "00000000000000000000"
    raw = bytearray(unit.read_bytes())
    raw[40:52] = struct.pack(">qi", plain["phyOffset"], plain["size"])  # unit 2
    unit.write_bytes(bytes(raw))
    code, findings, out = _verify(root)
    assert code == 1, out
    hits = [f for f in findings if f["file"] == "consumequeue/%LMQ%order-3/0/00000000000000000000"
            and f["offset"] == 40]
    assert hits and "does not name %LMQ%order-3 in INNER_MULTI_DISPATCH" in str(hits[0]["detail"])


@pytest.mark.parametrize("name", ["lmq", "batchcq", "rocksdb", "rocksdb-double", "dledger"])
def test_repair_refuses_what_it_does_not_understand(name: str, tmp_path: Path) -> None:
    if not _have(name):
        pytest.fail(f"fixture 5.3.3/{name} missing (fixtures/make-5x-stores {name})")
    out = tmp_path / "out"
    res = runner.invoke(app, ["repair", str(FIXTURES / "5.3.3" / name / "store"), "--out",
                              str(out)])
    assert res.exit_code == 1
    assert "repair refuses to rewrite a store with" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    assert not out.exists()


def _records(name: str) -> list[dict[str, object]]:
    return [r for r in manifest_jsonl(f"5.3.3/{name}", "commitlog.jsonl") if r["kind"] == "msg"]


def test_checkpoint_record_with_malformed_json(store_copy) -> None:  # type: ignore[no-untyped-def]
    root = store_copy("5.3.3/pop")
    ck = next(r for r in _records("pop") if r["tags"] == "ck"
              and str(r["topic"]).startswith("rmq_sys_REVIVE_LOG_"))
    f = root / "commitlog" / str(ck["file"])
    raw = bytearray(f.read_bytes())
    body = raw.find(b'{"', int(ck["fileOffset"]))  # type: ignore[call-overload]
    assert 0 < body < int(ck["fileOffset"]) + int(ck["size"])  # type: ignore[call-overload]
    raw[body:body + 2] = b"{{"
    f.write_bytes(bytes(raw))
    code, findings, out = _verify(root)
    assert code == 1, out
    hits = [x for x in findings if x["file"] == f"commitlog/{ck['file']}"
            and x["offset"] == ck["fileOffset"] and x["kind"] == "bad-field"]
    assert hits and "revive record body is not a POP ck" in str(hits[0]["detail"]), findings


def test_dledger_entry_with_a_bad_crc(store_copy) -> None:  # type: ignore[no-untyped-def]
    root = store_copy("5.3.3/dledger")
    entries = manifest_jsonl("5.3.3/dledger", "dledger.jsonl")
    e = entries[3]
    f = root / "dledger-n0" / "data" / str(e["file"])
    raw = bytearray(f.read_bytes())
    raw[e["fileOffset"] + 40:e["fileOffset"] + 44] = (0x1234567).to_bytes(4, "big")
    f.write_bytes(bytes(raw))
    code, findings, out = _verify(root)
    assert code == 1, out
    hits = [x for x in findings if x["file"] == f"dledger-n0/data/{e['file']}"
            and x["offset"] == e["fileOffset"] and x["kind"] == "crc-mismatch"]
    assert hits, findings
    res = runner.invoke(app, ["messages", str(root), "--jsonl"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert len(res.stdout.splitlines()) == sum(r["kind"] == "entry" for r in entries)


def test_dledger_entry_out_of_sequence(store_copy) -> None:  # type: ignore[no-untyped-def]
    root = store_copy("5.3.3/dledger")
    e = manifest_jsonl("5.3.3/dledger", "dledger.jsonl")[5]
    f = root / "dledger-n0" / "data" / str(e["file"])
    raw = bytearray(f.read_bytes())
    raw[e["fileOffset"] + 8:e["fileOffset"] + 16] = (999).to_bytes(8, "big")
    f.write_bytes(bytes(raw))
    code, findings, out = _verify(root)
    assert code == 1, out
    assert any(x["offset"] == e["fileOffset"] and "index 999" in str(x["detail"])
               for x in findings), findings


@pytest.mark.parametrize("damage", ["no-current", "truncated-sst", "garbage-manifest"])
def test_half_written_rocksdb(store_copy, damage: str) -> None:  # type: ignore[no-untyped-def]
    root = store_copy("5.3.3/rocksdb")
    db = root / "consumequeue"
    if damage == "no-current":
        (db / "CURRENT").unlink()
        (db / "IDENTITY").unlink()
    elif damage == "truncated-sst":
        for p in db.glob("*.sst"):
            p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    else:
        for p in db.glob("MANIFEST-*"):
            p.write_bytes(b"\x00" * 7 + b"garbage" * 10)
    code, findings, out = _verify(root)
    assert code == 1, out
    assert "Traceback" not in out
    assert any(x["file"] == "consumequeue" and "RocksDB" in str(x["detail"]) for x in findings) \
        or any("has no consume-queue unit" in str(x["detail"]) for x in findings), findings
    for cmd in (["cq"], ["inspect"]):
        res = runner.invoke(app, [*cmd, str(root)])
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output


def test_double_written_queues_are_compared(store_copy) -> None:  # type: ignore[no-untyped-def]
    """With rocksdbCQDoubleWriteEnable, a RocksDB unit that is not its file unit is a finding."""
    from rocksdict import Options, Rdict

    from mqtool.formats.rocksdbcq import build_unit_key

    root = store_copy("5.3.3/rocksdb-double")
    db = Rdict(str(root / "consumequeue"), options=Options(raw_mode=True),
               column_families={"offset": Options(raw_mode=True)})
    key = build_unit_key("RdbTopic", 1, 3)
    value = bytearray(db[key])
    value[12:20] = (424242).to_bytes(8, "big")  # another tagsCode
    db[key] = bytes(value)
    db.close()
    code, findings, out = _verify(root)
    assert code == 1, out
    hits = [x for x in findings if x["file"] == "consumequeue/RdbTopic/1/00000000000000000000"
            and x["offset"] == 60]
    assert hits and "RocksDB queue" in str(hits[0]["detail"]) and "424242" in \
        str(hits[0]["detail"]), findings
