/* mqtool judge: replaces the DLedger commit log (enableDLegerCommitLog stays false in the judge);
 * constructing it fails loudly. */
package org.apache.rocketmq.store.dledger;

import org.apache.rocketmq.store.CommitLog;
import org.apache.rocketmq.store.DefaultMessageStore;

public class DLedgerCommitLog extends CommitLog {
    public DLedgerCommitLog(final DefaultMessageStore defaultMessageStore) {
        super(defaultMessageStore);
        throw new UnsupportedOperationException("judge build: DLedger commit log is not built");
    }

    public Server getdLedgerServer() {
        throw new UnsupportedOperationException("judge build: DLedger commit log is not built");
    }

    public static final class Server {
        public Config getdLedgerConfig() {
            throw new UnsupportedOperationException();
        }
    }

    public static final class Config {
        public String getDataStorePath() {
            throw new UnsupportedOperationException();
        }
    }
}
