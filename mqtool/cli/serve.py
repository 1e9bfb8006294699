"""``mqtool serve``: a RocketMQ name server and broker over a reference store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mqtool.cli.exits import handle_errors
from mqtool.cli.options import BrokerConfOpt, WriteDelayLevelsOpt


def serve(
    store: Annotated[
        Path,
        typer.Argument(
            help="Reference store root, created when absent, e.g. ./live-store. A store "
            "locked by another process (a running broker or writer) is refused.",
            show_default=False,
        ),
    ],
    host: Annotated[
        str,
        typer.Option(
            help="Address both ports listen on and the broker advertises, e.g. 127.0.0.1."
        ),
    ] = "127.0.0.1",
    namesrv_port: Annotated[
        int,
        typer.Option(
            "--namesrv-port",
            help="Name server port (0: any free port), e.g. 9876.",
            min=0,
            max=65535,
        ),
    ] = 9876,
    broker_port: Annotated[
        int,
        typer.Option(
            "--broker-port", help="Broker port (0: any free port), e.g. 10911.", min=0, max=65535
        ),
    ] = 10911,
    broker_name: Annotated[
        str, typer.Option("--broker-name", help="brokerName in routes, e.g. broker-a.")
    ] = "broker-a",
    cluster: Annotated[
        str,
        typer.Option(
            help="brokerClusterName (also the CLUSTER property of stored "
            "messages), e.g. DefaultCluster."
        ),
    ] = "DefaultCluster",
    delay_levels: WriteDelayLevelsOpt = None,
    broker_conf: BrokerConfOpt = None,
    max_reconsume_times: Annotated[
        int | None,
        typer.Option(
            "--max-reconsume-times",
            min=0,
            help="retryMaxTimes of groups created "
            "from now on: failed deliveries before %DLQ%<group> (a client's own "
            "maxReconsumeTimes header wins), e.g. 16 (the default).",
            show_default=False,
        ),
    ] = None,
    dialect: Annotated[
        str | None,
        typer.Option(
            "--dialect",
            help="Serve and write as RocketMQ 4.9.7 or 5.3.3, e.g. 5.3.3 (default: the "
            "store's; a new store: 4.9.7).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """A name server and a broker in one process, over a store.

    Real RocketMQ remoting clients (4.x protocol; tested with the official Java client, the C++
    core and ali-ons) produce to and consume from it: sends (single, batch), transactions,
    pulls with long polling, offsets, retries through SCHEDULE_TOPIC_XXXX and %RETRY%<group>
    to %DLQ%<group>, orderly locks, queries by key and id. An unknown topic has no route; a
    send with TBW102 creates it (autoCreateTopicEnable), as on a real broker. --broker-conf
    also sets the broker keys serve honours (autoCreateTopicEnable, maxMessageSize,
    transaction*, ...) and names the others once on stderr. Prints one line when ready:
    "mqtool serve: ready namesrv HOST:PORT broker NAME HOST:PORT ...". SIGTERM or Ctrl-C
    stops it cleanly (offsets, delayOffset.json and checkpoint written, lock released, exit 0).

    Example: mqtool serve ./live-store --namesrv-port 9876 --broker-port 10911
    """
    from mqtool.delaylevels import levels_to_write
    from mqtool.serve.service import ServeOptions, serve_options
    from mqtool.serve.service import serve as run_serve

    with handle_errors():  # refused before the store is touched: a usage error
        delay_levels = levels_to_write(delay_levels, broker_conf)
    opts = ServeOptions(
        store=store,
        host=host,
        namesrv_port=namesrv_port,
        broker_port=broker_port,
        broker_name=broker_name,
        cluster=cluster,
        delay_levels=delay_levels,
        max_reconsume_times=max_reconsume_times,
    )

    def ready(line: str) -> None:
        print(line, flush=True)

    with handle_errors():
        opts = serve_options(broker_conf, dialect, opts)
        try:
            counts = run_serve(opts, ready)
        except OSError as e:  # a port in use, an address not on this machine
            from mqtool.cli.output import report_error
            from mqtool.formats.errors import EXIT_ENVIRONMENT

            report_error(f"cannot listen on {host}: {e.strerror or e} (--namesrv-port, "
                         "--broker-port, --host)")
            raise typer.Exit(EXIT_ENVIRONMENT) from None
    typer.echo(
        f"mqtool serve: stopped after {counts['sent']} messages stored, "
        f"{counts['pulled']} delivered by pulls, {counts['sent_back']} sent back",
        err=True,
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
