package perdix.jobs;

import java.util.concurrent.locks.LockSupport;
import org.apache.flink.api.common.functions.RichMapFunction;

/**
 * Passes records through at no more than {@code capacity} records per second per subtask.
 *
 * <p>Each record holds the task's thread for {@code 1 / capacity} seconds of wall time: the operator
 * parks until a work clock that advances by that cost per record. Parking does not use a core, and
 * Flink counts the time as busy (the task is neither waiting for input nor back-pressured), so the
 * busy fraction grows by throughput / capacity on top of Flink's own floor (30-40 ms/s per source
 * subtask here), and a saturated subtask carries {@code capacity} records/s as long as Flink's own
 * work per record stays below the cost.
 *
 * <p>A park that wakes late (the cores were busy) held the thread past its record's cost; the clock
 * runs on, so the next records park less or not at all until it has caught up, and a saturated
 * subtask carries its capacity on loaded cores too. The clock runs at most {@link #MAX_LAG_NANOS}
 * behind: pauses under {@link #GAP_NANOS} between records count as Flink's own work, paid for by the
 * records' cost, and one that was really idle is spent as work up to that much. Only a pause between
 * two records longer than {@link #GAP_NANOS} is idle time (the source waits 10 ms for new records once it has read everything,
 * a network buffer takes as long to fill): the clock restarts at the next record, so idle time is never
 * spent as work. What the clock was behind when the pause began (up to {@link #MAX_CREDIT_NANOS}, the
 * last park's oversleep) is credited to the next record: on shared cores a subtask that is not
 * saturated parks late at the end of every burst, and without the credit its busy time would read
 * high by that much per burst.
 *
 * <p>Every record parks at once rather than in batches: work deferred to a later park would be
 * absorbed by the idle time between bursts, and the busy time would read low.
 */
public final class CostlyMap extends RichMapFunction<LogRecord, LogRecord> {
    private static final long serialVersionUID = 1L;
    static final long GAP_NANOS = 1_000_000L;
    static final long MAX_CREDIT_NANOS = 1_000_000L;
    static final long MAX_LAG_NANOS = 20_000_000L;

    private final double capacity;
    private transient long costNanos;
    /** When the work of the records so far is done, on the System.nanoTime() clock. */
    private transient long due;
    /** When the last record left {@link #map}, on the same clock. */
    private transient long returned;

    public CostlyMap(double capacity) {
        this.capacity = capacity;
    }

    @Override
    public void open(org.apache.flink.api.common.functions.OpenContext context) {
        costNanos = capacity > 0 ? Math.round(1e9 / capacity) : 0L;
        due = System.nanoTime();
        returned = due;
    }

    @Override
    public LogRecord map(LogRecord record) {
        if (costNanos == 0) {
            return record;
        }
        long now = System.nanoTime();
        if (now - returned > GAP_NANOS) {
            due = now - Math.min(MAX_CREDIT_NANOS, Math.max(0L, returned - due));
        } else if (now - due > MAX_LAG_NANOS) {
            due = now - MAX_LAG_NANOS;
        }
        due += costNanos;
        long wait = due - now;
        if (wait > 0) {
            LockSupport.parkNanos(wait);
        }
        returned = System.nanoTime();
        return record;
    }
}
