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
 * Assigns partition {@code p} to reader {@code p % parallelism}, at the first start and after every restore.
 *
 * <p>The source implements {@code SupportsSplitReassignmentOnRecovery}: a restored reader does not
 * keep the splits of its checkpoint but reports them when it registers, and they come back here with
 * their read positions. So after a rescale the owner of a partition is again {@code p % parallelism},
 * as a Kafka consumer group would rebalance, and skew moves with the parallelism in a way Python can
 * compute. A split waits here (and in this enumerator's checkpoint) until its owner has registered.
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
            List<LogSplit> reported = reader.getReportedSplitsOnRegistration();
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
