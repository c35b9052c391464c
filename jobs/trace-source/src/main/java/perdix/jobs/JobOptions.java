package perdix.jobs;

import java.io.Serializable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The job's arguments, parsed from {@code --key value} pairs.
 *
 * <p>Every option has a default except the workload: exactly one of {@code --rate} and
 * {@code --trace}. A bad value fails with one line naming the option, so a REST submission's
 * error says what to fix.
 */
public final class JobOptions implements Serializable {
    private static final long serialVersionUID = 1L;

    /** The job shapes (see README.md). */
    public enum Shape {
        /** source + costly map chained in one task, then the keyed verifier + sink: two vertices. */
        CHAINED,
        /** source | rebalance | costly map | hash | verifier + sink: three vertices, each scalable alone. */
        SPLIT
    }

    static final List<String> KEYS = List.of(
            "job-name", "partitions", "skew", "seed", "rate", "trace", "compress", "scale", "epoch-ms",
            "end-s", "capacity", "shape", "checkpoint-interval-ms", "source-parallelism", "cost-parallelism",
            "verify-parallelism", "verify-max-parallelism", "at-ms");

    public String jobName = "perdix-trace-source";
    public int partitions = 12;
    public double skew = 1.0;
    public long seed = 0;
    /** Fixed production rate, records per wall second over all partitions; NaN in trace mode. */
    public double rate = Double.NaN;
    /** Path of a {@code time_s,rate} CSV; null in fixed-rate mode. */
    public String trace;
    public double compress = 1.0;
    public double scale = 1.0;
    public long epochMs;
    /** Wall seconds after the epoch at which production stops; infinite when not given. */
    public double endS = Double.POSITIVE_INFINITY;
    /** Records per second one subtask of the costly map carries; 0 means no cost. */
    public double capacity = 5000.0;
    public Shape shape = Shape.CHAINED;
    /** Checkpoint interval in ms; 0 keeps the cluster's configuration. */
    public long checkpointIntervalMs;
    /** Per-vertex parallelism at submission; 0 keeps the job's default parallelism. */
    public int sourceParallelism;
    public int costParallelism;
    public int verifyParallelism;
    /** The verifier's max parallelism (1: a non-parallel operator, as windowAll makes); 0 keeps Flink's default. */
    public int verifyMaxParallelism;
    /** Wall times (ms) the schedule tool prints the production at; unused by the job. */
    public long[] atMs = new long[0];

    /** Parse {@code --key value} pairs; {@code now} is the epoch when {@code --epoch-ms} is not given. */
    public static JobOptions parse(String[] args, long now) {
        Map<String, String> raw = new LinkedHashMap<>();
        for (int i = 0; i < args.length; i++) {
            String key = args[i];
            if (!key.startsWith("--") || !KEYS.contains(key.substring(2))) {
                throw new IllegalArgumentException("unknown argument " + key + " (known: --" + String.join(", --", KEYS) + ")");
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException(key + ": missing value");
            }
            raw.put(key.substring(2), args[++i]);
        }
        JobOptions o = new JobOptions();
        o.epochMs = now;
        for (Map.Entry<String, String> entry : raw.entrySet()) {
            String key = entry.getKey();
            String value = entry.getValue();
            switch (key) {
                case "job-name" -> o.jobName = value;
                case "partitions" -> o.partitions = (int) integer(key, value, 1, 100_000);
                case "skew" -> o.skew = number(key, value, 0.0, 10.0);
                case "seed" -> o.seed = integer(key, value, Long.MIN_VALUE, Long.MAX_VALUE);
                case "rate" -> o.rate = number(key, value, 0.0, 1e12);
                case "trace" -> o.trace = value;
                case "compress" -> o.compress = positive(key, value);
                case "scale" -> o.scale = number(key, value, 0.0, 1e12);
                case "epoch-ms" -> o.epochMs = integer(key, value, 0, Long.MAX_VALUE);
                case "end-s" -> o.endS = positive(key, value);
                case "capacity" -> o.capacity = number(key, value, 0.0, 1e9);
                case "shape" -> o.shape = shape(value);
                case "checkpoint-interval-ms" -> o.checkpointIntervalMs = integer(key, value, 10, Long.MAX_VALUE);
                case "source-parallelism" -> o.sourceParallelism = (int) integer(key, value, 1, 32768);
                case "cost-parallelism" -> o.costParallelism = (int) integer(key, value, 1, 32768);
                case "verify-parallelism" -> o.verifyParallelism = (int) integer(key, value, 1, 32768);
                case "verify-max-parallelism" -> o.verifyMaxParallelism = (int) integer(key, value, 1, 32768);
                case "at-ms" -> o.atMs = times(key, value);
                default -> throw new IllegalStateException(key);
            }
        }
        if (Double.isNaN(o.rate) == (o.trace == null)) {
            throw new IllegalArgumentException("give exactly one of --rate RECORDS_PER_S and --trace CSV");
        }
        return o;
    }

    private static Shape shape(String value) {
        try {
            return Shape.valueOf(value.toUpperCase(java.util.Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("--shape: " + value + " is not one of chained, split");
        }
    }

    private static double number(String key, String value, double min, double max) {
        double parsed;
        try {
            parsed = Double.parseDouble(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + key + ": not a number: " + value);
        }
        if (!(parsed >= min && parsed <= max)) {
            throw new IllegalArgumentException("--" + key + ": " + value + " is outside [" + min + ", " + max + "]");
        }
        return parsed;
    }

    private static double positive(String key, String value) {
        double parsed = number(key, value, 0.0, Double.MAX_VALUE);
        if (parsed <= 0) {
            throw new IllegalArgumentException("--" + key + ": must be positive, got " + value);
        }
        return parsed;
    }

    private static long integer(String key, String value, long min, long max) {
        long parsed;
        try {
            parsed = Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + key + ": not an integer: " + value);
        }
        if (parsed < min || parsed > max) {
            throw new IllegalArgumentException("--" + key + ": " + value + " is outside [" + min + ", " + max + "]");
        }
        return parsed;
    }

    private static long[] times(String key, String value) {
        String[] parts = value.split(",");
        long[] out = new long[parts.length];
        for (int i = 0; i < parts.length; i++) {
            out[i] = integer(key, parts[i].trim(), Long.MIN_VALUE, Long.MAX_VALUE);
        }
        return out;
    }
}
