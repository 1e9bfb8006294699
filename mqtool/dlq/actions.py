"""What each ``mqtool dlq`` command does: where it reads, where it writes, what it returns.

* :func:`dlq_source` and :func:`dlq_records`: the records of ``list``/``show``/``export``, from
  a store directory (opened read-only; it must know the group) or from the live ``%DLQ%<group>``
  of the ``--namesrv`` cluster; :func:`list_dlq`: every group, with what its journals say was
  resent.

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

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqtool.dlq.journal import ResendJournal, default_journal_path, live_journal_path
from mqtool.dlq.outgoing import TO_RETRY
from mqtool.dlq.resend import DEFAULT_BATCH, Outcome, ResendReport, resend
from mqtool.dlq.selection import (
    DlqError,
    DlqGroup,
    DlqSelection,
    list_groups,
    require_group,
    select_dlq,
)
from mqtool.dlq.targets import RefStoreTarget, ResendTarget
from mqtool.formats.commitlog import CommitLogMessage
from mqtool.formats.errors import usage
from mqtool.query import ProgressFn
from mqtool.store import Store

if TYPE_CHECKING:
    from mqtool.remoting.acl import AclCredentials
    from mqtool.remoting.client import LiveClient

__all__ = [
    "DlqListing",
    "ResendPlan",
    "ResendRun",
    "dlq_records",
    "dlq_source",
    "list_dlq",
    "live_client",
    "plan_resend",
    "run_resend",
]


def dlq_source(store: Path | None, namesrv: str | None) -> str | None:
    """The live name servers when a command reads a live cluster (``namesrv``, else
    ``$NAMESRV_ADDR``), None when it reads ``store``; a usage error when given both or
    neither."""
    from mqtool.remoting.client import namesrv_from

    if store is not None:
        if namesrv:
            raise usage(DlqError("give STORE or --namesrv, not both"))
        return None
    ns = namesrv_from(namesrv)
    if ns is None:
        raise usage(DlqError("give a STORE directory or --namesrv host:port (or set "
                             "NAMESRV_ADDR) for a live cluster"))
    return ns


@contextmanager
def dlq_records(
    store: Path | None,
    namesrv: str | None,
    sel: DlqSelection,
    *,
    open_store: Callable[[Path], Store] = Store.open,
    acl: AclCredentials | None = None,
    timeout: float = 3.0,
    progress: ProgressFn | None = None,
) -> Iterator[tuple[Iterator[CommitLogMessage], Store | None]]:
    """The records ``sel`` selects, of ``store`` when ``namesrv`` is None (``open_store``
    opens it), else of the live cluster; and the store (None when live)."""
    if namesrv is None:
        assert store is not None
        st = open_store(store)
        require_group(st, sel.group)
        yield select_dlq(st, sel, progress=progress), st
        return
    from mqtool.dlq.live import LiveDlq

    with live_client(namesrv, acl, timeout) as client:
        live = LiveDlq(client, sel.group)
        live.require_group()
        yield live.records(sel), None


@dataclass(slots=True)
class DlqListing:
    """``dlq list``: the groups, where they were read (a store root or the name servers) and
    the store (None when live; its findings are the caller's to say)."""

    groups: list[DlqGroup]
    where: str
    store: Store | None


def list_dlq(
    store: Path | None,
    namesrv: str | None,
    *,
    targets: Sequence[Path] = (),
    journals: Sequence[Path] = (),
    open_store: Callable[[Path], Store] = Store.open,
    acl: AclCredentials | None = None,
    timeout: float = 3.0,
    progress: ProgressFn | None = None,
) -> DlqListing:
    """Every ``%DLQ%<group>`` of ``store`` (``namesrv`` None) or of the live cluster, each
    record counted as resent when a journal says so: for a store, its own journal, each
    target store's and ``journals``; live, the default journal of each group and
    ``journals``."""
    from mqtool.dlq.journal import resent_checker

    if namesrv is None:
        assert store is not None
        st = open_store(store)
        paths = [default_journal_path(st.root), *(default_journal_path(t) for t in targets),
                 *journals]
        groups = list_groups(st, resent_ids=resent_checker(paths), progress=progress)
        return DlqListing(groups, str(st.root), st)
    from mqtool.dlq.live import live_groups

    with live_client(namesrv, acl, timeout) as client:
        groups = live_groups(client, resent_ids=lambda g: resent_checker(
            [live_journal_path(namesrv, g), *journals]))
    return DlqListing(groups, namesrv, None)


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
