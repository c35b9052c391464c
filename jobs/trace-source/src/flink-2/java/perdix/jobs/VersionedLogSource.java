package perdix.jobs;

import java.util.List;
import org.apache.flink.api.connector.source.ReaderInfo;
import org.apache.flink.api.connector.source.SupportsSplitReassignmentOnRecovery;

/**
 * The log source on Flink 2.x: a restored reader hands the splits of its checkpoint back to the enumerator when it
 * registers ({@link SupportsSplitReassignmentOnRecovery}), which gives partition {@code p} to reader
 * {@code p % parallelism} after every rescale and failover, as a Kafka consumer group rebalances.
 */
public final class VersionedLogSource extends LogSource implements SupportsSplitReassignmentOnRecovery {
    private static final long serialVersionUID = 1L;

    public VersionedLogSource(ProductionSchedule schedule) {
        super(schedule);
    }

    /** The splits a restored reader reported when it registered (the checkpoint's, with their positions). */
    static List<LogSplit> reportedOnRegistration(ReaderInfo reader) {
        return reader.getReportedSplitsOnRegistration();
    }
}
