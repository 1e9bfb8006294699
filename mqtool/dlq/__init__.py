"""Dead-letter queues: read ``%DLQ%<group>`` and resend its records, exactly once.

Rooms:

* :mod:`~mqtool.dlq.selection`: list groups, select records (filters), export shapes (read only);
* :mod:`~mqtool.dlq.outgoing`: the resent copy of a record (what it keeps, drops, where it goes);
* :mod:`~mqtool.dlq.journal`: the write-ahead, fsynced, group-committed resend journal;
* :mod:`~mqtool.dlq.targets`: where copies go (a store directory) and the target safety check;
* :mod:`~mqtool.dlq.resend`: the run (skip done, resolve pending, send, report);
* :mod:`~mqtool.dlq.live`: a live cluster's %DLQ% as a source and the cluster as a target;
* :mod:`~mqtool.dlq.actions`: what each ``mqtool dlq`` command does (where it reads and writes).
"""

from mqtool.dlq.selection import *  # noqa: F403 - the package's face is the read side
from mqtool.dlq.selection import __all__ as __all__
