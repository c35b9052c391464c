package perdix.jobs;

import java.util.Collections;
import java.util.List;
import org.apache.flink.api.connector.source.ReaderInfo;

/**
 * The log source on Flink 1.x (1.20 LTS), which has no {@code SupportsSplitReassignmentOnRecovery}: a restored
 * reader keeps the splits of its checkpoint, and at a rescale Flink spreads the readers' split state evenly over
 * the new readers (operator list state). Partition {@code p} starts at reader {@code p % parallelism}; after a
 * rescale every reader holds an even share of the partitions (their counts differ by one at most), but which
 * partitions go together follows the old readers' states, not {@code p % parallelism}.
 */
public final class VersionedLogSource extends LogSource {
    private static final long serialVersionUID = 1L;

    public VersionedLogSource(ProductionSchedule schedule) {
        super(schedule);
    }

    /** None: on Flink 1.x a restored reader keeps its splits and reports nothing when it registers. */
    static List<LogSplit> reportedOnRegistration(ReaderInfo reader) {
        return Collections.emptyList();
    }
}
