package perdix.jobs;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.metrics.Counter;
import org.apache.flink.metrics.MetricGroup;

/**
 * Reads the reader's partitions round-robin, a burst at a time, never past what is produced.
 *
 * <p>Everything but the gauges runs on the task's mailbox thread, so a checkpoint's read positions
 * are exactly the records emitted before the barrier. The gauges run on the metric reporter's
 * thread and read the positions through volatile fields.
 */
final class LogReader implements SourceReader<LogRecord, LogSplit> {
    /** Records taken from one partition before the next partition's turn. */
    static final int BURST = 64;
    /** How long to wait before looking again when every partition is read up to its end (each wake-up costs busy time). */
    static final long IDLE_WAIT_MS = 10;
    /** Partition ends are re-read from the clock at least this often while records are pending. */
    static final long REFRESH_MS = 5;

    private final ProductionSchedule schedule;
    private final List<Cursor> cursors = new ArrayList<>();
    private volatile Cursor[] published = new Cursor[0];
    private final ScheduledExecutorService timer;
    /** FLIP-33 numRecordsIn of the source: records taken from the log (Flink counts numRecordsOut itself). */
    private final Counter recordsIn;
    /**
     * Per-partition gauges, named as Flink's KafkaSource names its own
     * ({@code KafkaSourceReader.topic.T.partition.P.currentOffset}): what the agent counts the partitions by.
     */
    private final MetricGroup partitionMetrics;

    private int current;
    private int burst;
    /** Sum over cursors of (end - next) at the last refresh, counted down as records go out. */
    private long readable;
    private long refreshedAtMs = Long.MIN_VALUE;
    private CompletableFuture<Void> wake = CompletableFuture.completedFuture(null);

    /** One partition's read position and its end as last read from the schedule. */
    static final class Cursor {
        final int partition;
        volatile long next;
        long end;

        Cursor(int partition, long next) {
            this.partition = partition;
            this.next = next;
            this.end = next;
        }
    }

    LogReader(SourceReaderContext context, ProductionSchedule schedule) {
        this.schedule = schedule;
        this.timer = Executors.newSingleThreadScheduledExecutor(runnable -> {
            Thread thread = new Thread(runnable, "log-reader-wake-" + context.getIndexOfSubtask());
            thread.setDaemon(true);
            return thread;
        });
        recordsIn = context.metricGroup().getIOMetricGroup().getNumRecordsInCounter();
        context.metricGroup().setPendingRecordsGauge(this::pendingRecords);
        context.metricGroup().gauge("producedRecords", this::producedRecords);
        partitionMetrics = context.metricGroup().addGroup("LogSourceReader").addGroup("topic", "log");
    }

    @Override
    public void start() {
    }

    @Override
    public InputStatus pollNext(ReaderOutput<LogRecord> output) {
        long now = System.currentTimeMillis();
        if (readable == 0 || now - refreshedAtMs >= REFRESH_MS) {
            refresh(now);
        }
        if (readable == 0) {
            sleep();
            return InputStatus.NOTHING_AVAILABLE;
        }
        Cursor cursor = cursors.get(current);
        while (cursor.next >= cursor.end || burst >= BURST) {
            current = (current + 1) % cursors.size();
            burst = 0;
            cursor = cursors.get(current);
        }
        output.collect(new LogRecord(cursor.partition, cursor.next));
        recordsIn.inc();
        cursor.next = cursor.next + 1;
        burst++;
        readable--;
        return InputStatus.MORE_AVAILABLE;
    }

    private void refresh(long now) {
        double total = schedule.total(now);
        long sum = 0;
        for (Cursor cursor : cursors) {
            cursor.end = Math.max(cursor.next, schedule.produced(cursor.partition, total));
            sum += cursor.end - cursor.next;
        }
        readable = sum;
        refreshedAtMs = now;
    }

    private void sleep() {
        if (wake.isDone()) {
            CompletableFuture<Void> future = new CompletableFuture<>();
            wake = future;
            timer.schedule(() -> future.complete(null), IDLE_WAIT_MS, TimeUnit.MILLISECONDS);
        }
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        return wake;
    }

    @Override
    public void addSplits(List<LogSplit> splits) {
        for (LogSplit split : splits) {
            Cursor cursor = new Cursor(split.partition, split.nextOffset);
            cursors.add(cursor);
            partitionMetrics
                    .addGroup("partition", String.valueOf(split.partition))
                    .gauge("currentOffset", () -> cursor.next);
        }
        cursors.sort((a, b) -> Integer.compare(a.partition, b.partition));
        published = cursors.toArray(new Cursor[0]);
        current = 0;
        burst = 0;
        readable = 0;
        wake.complete(null);
    }

    @Override
    public void notifyNoMoreSplits() {
    }

    @Override
    public List<LogSplit> snapshotState(long checkpointId) {
        List<LogSplit> splits = new ArrayList<>(cursors.size());
        for (Cursor cursor : cursors) {
            splits.add(new LogSplit(cursor.partition, cursor.next));
        }
        return splits;
    }

    /** FLIP-33 pendingRecords: records produced in this reader's partitions and not read yet. */
    private long pendingRecords() {
        double total = schedule.total(System.currentTimeMillis());
        long pending = 0;
        for (Cursor cursor : published) {
            pending += Math.max(0, schedule.produced(cursor.partition, total) - cursor.next);
        }
        return pending;
    }

    /** Records produced so far in this reader's partitions. */
    private long producedRecords() {
        double total = schedule.total(System.currentTimeMillis());
        return Arrays.stream(published).mapToLong(c -> schedule.produced(c.partition, total)).sum();
    }

    @Override
    public void close() {
        timer.shutdownNow();
    }
}
