package perdix.jobs;

import java.util.HashMap;
import java.util.Map;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/**
 * A job whose source reports no backlog: Flink's own rate-limited {@link DataGeneratorSource} into the
 * costly map and a discarding sink, all chained in one task.
 *
 * <p>The generator reports no FLIP-33 {@code pendingRecords}: when the map cannot keep up, the source
 * is slowed by back-pressure and what it did not emit is nowhere to be read. It is the shape of every
 * job whose source is a generator or a connector without FLIP-33, against which Perdix's default
 * queries must still decide.
 *
 * <p>{@code flink run -d -c perdix.jobs.GeneratorJob JAR --rate 3000 --capacity 2000}: {@code --rate} the
 * records/s of the whole source (shared by its subtasks), {@code --capacity} what one map subtask carries,
 * {@code --checkpoint-ms} (0: none), {@code --job-name}.
 */
public final class GeneratorJob {
    private GeneratorJob() {
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> options = parse(args);
        double rate = positive(options, "--rate", "3000");
        double capacity = positive(options, "--capacity", "2000");
        long checkpointMs = Long.parseLong(options.getOrDefault("--checkpoint-ms", "10000"));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs);
        }
        DataGeneratorSource<LogRecord> generator = new DataGeneratorSource<>(
                new Offsets(), Long.MAX_VALUE, RateLimiterStrategy.perSecond(rate), TypeInformation.of(LogRecord.class));
        env.fromSource(generator, WatermarkStrategy.noWatermarks(), "generator")
                .uid("generator")
                .map(new CostlyMap(capacity))
                .name("cost")
                .uid("cost")
                .sinkTo(new DiscardingSink<>())
                .name("discard")
                .uid("discard");
        env.execute(options.getOrDefault("--job-name", "perdix-generator"));
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> options = new HashMap<>();
        for (int i = 0; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --name value pairs, got " + String.join(" ", args));
            }
            options.put(args[i], args[i + 1]);
        }
        return options;
    }

    private static double positive(Map<String, String> options, String name, String fallback) {
        double value = Double.parseDouble(options.getOrDefault(name, fallback));
        if (!(value > 0)) {
            throw new IllegalArgumentException(name + " must be > 0, got " + value);
        }
        return value;
    }

    /** The n-th record generated: one partition, offset n. */
    static final class Offsets implements GeneratorFunction<Long, LogRecord> {
        private static final long serialVersionUID = 1L;

        @Override
        public LogRecord map(Long index) {
            return new LogRecord(0, index);
        }
    }
}
