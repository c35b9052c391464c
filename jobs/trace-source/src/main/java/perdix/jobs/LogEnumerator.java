package perdix.jobs;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.flink.api.connector.source.ReaderInfo;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.SplitsAssignment;

/**
 * Assigns partition {@code p} to reader {@code p % parallelism}, at the first start and (Flink 2.x) after every restore.
 *
 * <p>On Flink 2.x the source implements {@code SupportsSplitReassignmentOnRecovery}: a restored reader
 * does not keep the splits of its checkpoint but reports them when it registers, and they come back here
 * with their read positions. So after a rescale the owner of a partition is again {@code p % parallelism},
 * as a Kafka consumer group would rebalance, and skew moves with the parallelism in a way Python can
 * compute. A split waits here (and in this enumerator's checkpoint) until its owner has registered.
 * Flink 1.20 has no such interface: restored splits stay with the readers Flink's state redistribution
 * gives them to (see the flink-1 {@code VersionedLogSource}), and only the first start's splits pass
 * through here (and, after a failure, those assigned since the last checkpoint).
 */
final class LogEnumerator implements SplitEnumerator<LogSplit, Collection<LogSplit>> {
    private final SplitEnumeratorContext<LogSplit> context;
    private final TreeMap<Integer, LogSplit> pending = new TreeMap<>();
    private volatile int pendingCount;

    LogEnumerator(SplitEnumeratorContext<LogSplit> context, ProductionSchedule schedule, Collection<LogSplit> restored) {
        this.context = context;
        for (LogSplit split : restored) {
            pending.put(split.partition, split);
        }
        pendingCount = pending.size();
        context.metricGroup().setUnassignedSplitsGauge(() -> (long) pendingCount);
        // The whole log's production, on the JobManager: it keeps reporting while the readers restart.
        context.metricGroup().gauge("producedRecords", () -> schedule.producedAll(System.currentTimeMillis()));
    }

    @Override
    public void start() {
    }

    @Override
    public void handleSplitRequest(int subtaskId, String requesterHostname) {
        // Splits are pushed on registration; readers never ask.
    }

    @Override
    public void addSplitsBack(List<LogSplit> splits, int subtaskId) {
        for (LogSplit split : splits) {
            pending.put(split.partition, split);
        }
        assignPending();
    }

    @Override
    public void addReader(int subtaskId) {
        ReaderInfo reader = context.registeredReaders().get(subtaskId);
        if (reader != null) {
            List<LogSplit> reported = VersionedLogSource.reportedOnRegistration(reader);
            for (LogSplit split : reported) {
                pending.put(split.partition, split);
            }
        }
        assignPending();
    }

    private void assignPending() {
        int parallelism = context.currentParallelism();
        Set<Integer> registered = context.registeredReaders().keySet();
        Map<Integer, List<LogSplit>> assignment = new HashMap<>();
        for (Iterator<LogSplit> it = pending.values().iterator(); it.hasNext(); ) {
            LogSplit split = it.next();
            int owner = split.partition % parallelism;
            if (registered.contains(owner)) {
                assignment.computeIfAbsent(owner, k -> new ArrayList<>()).add(split);
                it.remove();
            }
        }
        pendingCount = pending.size();
        if (!assignment.isEmpty()) {
            context.assignSplits(new SplitsAssignment<>(assignment));
        }
    }

    @Override
    public Collection<LogSplit> snapshotState(long checkpointId) {
        return new ArrayList<>(pending.values());
    }

    @Override
    public void close() {
    }
}
