package perdix.jobs;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.java.typeutils.ResultTypeQueryable;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/**
 * A FLIP-27 source over a Kafka-like log whose partitions fill on the {@link ProductionSchedule}.
 *
 * <p>One split per partition; the split's state is the offset of the next record to read, so a
 * restore (rescale or failure) replays from the last checkpoint. Readers read as fast as downstream
 * lets them and never past what the schedule has produced at the current wall time.
 *
 * <p>The job builds a {@code VersionedLogSource}, the one class whose source differs between Flink lines
 * ({@code src/flink-1/java} and {@code src/flink-2/java}): it says how splits find their readers after a restore.
 */
public class LogSource implements Source<LogRecord, LogSplit, Collection<LogSplit>>, ResultTypeQueryable<LogRecord> {
    private static final long serialVersionUID = 1L;

    private final ProductionSchedule schedule;

    public LogSource(ProductionSchedule schedule) {
        this.schedule = schedule;
    }

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.CONTINUOUS_UNBOUNDED;
    }

    @Override
    public SplitEnumerator<LogSplit, Collection<LogSplit>> createEnumerator(SplitEnumeratorContext<LogSplit> context) {
        List<LogSplit> all = new ArrayList<>();
        for (int p = 0; p < schedule.partitions(); p++) {
            all.add(new LogSplit(p, 0L));
        }
        return new LogEnumerator(context, schedule, all);
    }

    @Override
    public SplitEnumerator<LogSplit, Collection<LogSplit>> restoreEnumerator(
            SplitEnumeratorContext<LogSplit> context, Collection<LogSplit> checkpoint) {
        return new LogEnumerator(context, schedule, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<LogSplit> getSplitSerializer() {
        return LogSplitSerializer.INSTANCE;
    }

    @Override
    public SimpleVersionedSerializer<Collection<LogSplit>> getEnumeratorCheckpointSerializer() {
        return LogSplitSerializer.Pending.INSTANCE;
    }

    @Override
    public SourceReader<LogRecord, LogSplit> createReader(SourceReaderContext context) {
        return new LogReader(context, schedule);
    }

    @Override
    public TypeInformation<LogRecord> getProducedType() {
        return TypeInformation.of(LogRecord.class);
    }
}
