package perdix.jobs;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.DataStreamSource;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * The trace-driven log job: log source, costly map, verifying sink (see README.md for the shapes).
 *
 * <p>Submit with {@code flink run -d -c perdix.jobs.TraceSourceJob JAR --rate 6000 ...} or through
 * the REST API's /jars/{id}/run; the arguments are {@link JobOptions}'s.
 */
public final class TraceSourceJob {
    private TraceSourceJob() {
    }

    public static void main(String[] args) throws Exception {
        JobOptions options = JobOptions.parse(args, System.currentTimeMillis());
        ProductionSchedule schedule = ProductionSchedule.of(options);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        if (options.checkpointIntervalMs > 0) {
            env.enableCheckpointing(options.checkpointIntervalMs);
        }
        DataStreamSource<LogRecord> source = env.fromSource(new VersionedLogSource(schedule), WatermarkStrategy.noWatermarks(), "log");
        source.uid("log");
        if (options.sourceParallelism > 0) {
            source.setParallelism(options.sourceParallelism);
        }
        // chained: the map follows the source in the same task (forward edge, same parallelism).
        // split: a rebalance edge puts the map in a vertex of its own, scalable apart from the source.
        DataStream<LogRecord> read = options.shape == JobOptions.Shape.SPLIT ? source.rebalance() : source;
        SingleOutputStreamOperator<LogRecord> costed = read.map(new CostlyMap(options.capacity)).name("cost").uid("cost");
        if (options.costParallelism > 0) {
            costed.setParallelism(options.costParallelism);
        }
        SingleOutputStreamOperator<Long> verified = costed
                .keyBy(new ByPartition(), Types.INT)
                .process(new VerifyOffsets(), Types.LONG)
                .name("verify")
                .uid("verify");
        if (options.verifyParallelism > 0) {
            verified.setParallelism(options.verifyParallelism);
        }
        if (options.verifyMaxParallelism > 0) {
            verified.setMaxParallelism(options.verifyMaxParallelism);
        }
        verified.sinkTo(new DiscardingSink<>()).name("discard").uid("discard");
        env.execute(options.jobName);
    }

    /** The verifier's key: the record's partition. */
    static final class ByPartition implements KeySelector<LogRecord, Integer> {
        private static final long serialVersionUID = 1L;

        @Override
        public Integer getKey(LogRecord record) {
            return record.partition;
        }
    }
}
