package perdix.jobs;

import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.functions.RichMapFunction;

/**
 * Passes records through at no more than {@code capacity} records per second per subtask.
 *
 * <p>Each record costs {@code 1 / capacity} seconds of a virtual work clock; the operator parks until
 * the clock when it runs more than a millisecond ahead of the wall clock. Parking holds the task's
 * thread without using a core, and Flink counts the time as busy (it is neither waiting for input nor
 * back-pressured), so busyTimeMsPerSecond reads throughput / capacity and a saturated subtask carries
 * exactly {@code capacity} records/s as long as the real per-record work is below the budget. The
 * clock keeps at most {@link #SLACK_NANOS} of credit from idle time, so a burst after a pause is short.
 */
public final class CostlyMap extends RichMapFunction<LogRecord, LogRecord> {
    private static final long serialVersionUID = 1L;
    static final long SLACK_NANOS = 2_000_000L;
    static final long MIN_PARK_NANOS = 1_000_000L;

    private final double capacity;
    private transient long costNanos;
    private transient long due;

    public CostlyMap(double capacity) {
        this.capacity = capacity;
    }

    @Override
    public void open(org.apache.flink.api.common.functions.OpenContext context) {
        costNanos = capacity > 0 ? Math.round(1e9 / capacity) : 0L;
        due = System.nanoTime();
    }

    @Override
    public LogRecord map(LogRecord record) {
        if (costNanos == 0) {
            return record;
        }
        long now = System.nanoTime();
        if (due - now < -SLACK_NANOS) {
            due = now - SLACK_NANOS;
        }
        due += costNanos;
        long ahead = due - now;
        if (ahead > MIN_PARK_NANOS) {
            LockSupport.parkNanos(ahead);
        }
        return record;
    }
}
