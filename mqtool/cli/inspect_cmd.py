"""``mqtool inspect``: store overview."""

from __future__ import annotations

import typer

from mqtool.cli.lookups import run_inspect
from mqtool.cli.options import BrokerConfOpt, DelayLevelsOpt, JsonOpt, StoreArg


def inspect(
    store: StoreArg,
    delay_levels: DelayLevelsOpt = None,
    broker_conf: BrokerConfOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Overview of a store: state, files, queues, delay levels, groups.

    Shows clean/abort state, lock, checkpoint times, commitlog files with their data ends,
    topics and queues (retry/DLQ/schedule marked), delay-level progress, consumer lag, config
    and index files. Never changes a byte. The delay levels come from --delay-levels,
    --broker-conf, or the store itself (see "delay levels from"); a level the given levels
    contradict is a warning on stderr.

    Example: mqtool inspect ~/store --json

    Example: mqtool inspect ~/store --broker-conf conf/broker.conf
    """
    run_inspect(store, delay_levels, broker_conf, json_)


def register(app: typer.Typer) -> None:
    app.command("inspect")(inspect)
