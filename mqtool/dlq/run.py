"""A whole resend as ``mqtool dlq resend`` runs it: where it reads, where it writes, the journal.

* :func:`plan_resend` chooses the places from what the command was given: the source (a store
  directory, else the live ``%DLQ%<group>`` of the ``--namesrv`` cluster), the target (a store
  given by ``--target``, else the live cluster) and the journal (``--journal``, else the target
  store's own, else one per name servers and group under the state directory). A contradiction
  is a usage error (:data:`~mqtool.formats.errors.EXIT_USAGE`).
* :func:`run_resend` opens them in that order (the live client first, then the source: a store is
  opened read-only and must know the group; then the target and the journal, read-only for a dry
  run), resends (:func:`mqtool.dlq.resend.resend`), commits the live ``%DLQ%`` offsets when
  asked, and closes what it opened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.dlq.journal import ResendJournal, default_journal_path, live_journal_path
from mqtool.dlq.outgoing import TO_RETRY
from mqtool.dlq.resend import DEFAULT_BATCH, Outcome, ResendReport, resend
from mqtool.dlq.selection import DlqError, DlqSelection, require_group, select_dlq
from mqtool.dlq.targets import RefStoreTarget, ResendTarget
from mqtool.formats.errors import usage
from mqtool.store import Store

if TYPE_CHECKING:
    from mqtool.remoting.acl import AclCredentials
    from mqtool.remoting.client import LiveClient

__all__ = ["ResendPlan", "ResendRun", "live_client", "plan_resend", "run_resend"]


@dataclass(frozen=True, slots=True)
class ResendPlan:
    """Where one resend reads (``store``, else the live cluster), where it writes (``target``,
    else the live cluster at ``namesrv``) and its ``journal``."""

    group: str
    store: Path | None
    target: Path | None
    namesrv: str | None
    journal: Path
    commit: bool = False


def plan_resend(group: str, store: Path | None, target: Path | None, namesrv: str | None,
                journal: Path | None = None, *, commit: bool = False) -> ResendPlan:
    """The places of a resend; ``namesrv`` falls back to ``$NAMESRV_ADDR`` when no ``target``
    is given. A usage :class:`DlqError` when they contradict each other."""
    from mqtool.remoting.client import namesrv_from

    if target is not None and namesrv:
        raise usage(DlqError("give --target DIR (a store) or --namesrv (a live cluster), "
                             "not both"))
    ns = None if target is not None else namesrv_from(namesrv)
    if target is None and ns is None:
        raise usage(DlqError("give --namesrv host:port (or set NAMESRV_ADDR) to resend into "
                             "a live cluster, or --target DIR for a store"))
    if store is None and ns is None:
        raise usage(DlqError("no STORE given: reading the live %DLQ% needs --namesrv"))
    if commit and store is not None:
        raise usage(DlqError("--commit commits the live %DLQ% offsets: it needs the live "
                             "source (no STORE)"))
    if journal is None:
        if ns is not None:
            journal = live_journal_path(ns, group)
        else:
            assert target is not None
            journal = default_journal_path(target)
    return ResendPlan(group, store, target, ns, journal, commit)


def live_client(namesrv: str, acl: AclCredentials | None, timeout: float) -> LiveClient:
    """A client of the cluster behind ``namesrv`` (a usage error when it is no address list)."""
    from mqtool.remoting.client import LiveClient, parse_namesrv

    parse_namesrv(namesrv)
    return LiveClient(namesrv, acl=acl, timeout=timeout)


@dataclass(slots=True)
class ResendRun:
    """What a resend did: the report, the offsets committed (``--commit``), the source store
    (None when the source was live; its findings are the caller's to say)."""

    plan: ResendPlan
    report: ResendReport
    committed: dict[int, int] | None
    store: Store | None

    def to_dict(self, body: str = "none") -> dict[str, Any]:
        d = self.report.to_dict(body)
        if self.committed is not None:
            d["committedOffsets"] = {str(k): v for k, v in self.committed.items()}
        return d


def run_resend(
    plan: ResendPlan,
    sel: DlqSelection,
    *,
    open_store: Callable[[Path], Store] = Store.open,
    acl: AclCredentials | None = None,
    timeout: float = 3.0,
    to: str = TO_RETRY,
    dry_run: bool = False,
    rate: float | None = None,
    batch: int = DEFAULT_BATCH,
    on_outcome: Callable[[Outcome], None] | None = None,
) -> ResendRun:
    """Resend the records ``sel`` selects as ``plan`` says. ``open_store`` opens the source
    store (the command line's also says when a broker holds it)."""
    with ExitStack() as stack:
        client = None
        if plan.namesrv is not None:
            client = stack.enter_context(live_client(plan.namesrv, acl, timeout))
        st = None
        live = None
        records: Iterable[Any]
        if plan.store is not None:
            st = open_store(plan.store)
            require_group(st, plan.group)
            records = select_dlq(st, sel)
            source = str(st.root)
        else:
            from mqtool.dlq.live import LiveDlq

            assert client is not None
            live = LiveDlq(client, plan.group)
            live.require_group()
            records = live.records(sel)
            source = live.label
        tgt: ResendTarget
        if client is not None:
            from mqtool.dlq.live import BrokerTarget

            tgt = BrokerTarget(client, plan.group)
        else:
            assert plan.target is not None
            tgt = RefStoreTarget(plan.target, read_only=dry_run)
        stack.callback(tgt.close)
        jr = ResendJournal.read(plan.journal) if dry_run else ResendJournal.open(plan.journal)
        stack.callback(jr.close)
        report = resend(records, plan.group, tgt, jr, source=source, to=to, dry_run=dry_run,
                        rate=rate, batch=batch, on_outcome=on_outcome)
        committed = None
        if plan.commit and live is not None and not dry_run and report.stopped is None:
            committed = live.commit(ResendJournal.read(plan.journal).done_ids())
        return ResendRun(plan, report, committed, st)
