package perdix.jobs;

import java.io.IOException;
import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * How many records each partition of the log holds at a wall time: a pure function of the time.
 *
 * <p>Every reader, the enumerator and the Python mirror ({@code lab/flink/schedule.py}) compute the
 * same numbers from the same arguments, so the backlog (produced minus read) is real consumer lag
 * and survives restarts and rescales: nothing about production is kept in state. The arithmetic is
 * plain IEEE double (+, -, *, / and {@code Math.pow} for the weights), in the order written here;
 * the mirror repeats it operation by operation.
 *
 * <p>With {@code s = clamp((nowMs - epochMs) / 1000.0, 0, endS)} wall seconds since the epoch:
 * <ul>
 *   <li>fixed rate: {@code total(s) = rate * s};
 *   <li>trace: the trace time is {@code tau = s * compress} and the rate at trace time {@code tau} is
 *       {@code scale * r(tau)}, {@code r} linear between the CSV's points, held flat before the first
 *       and after the last; records are produced at that rate per <em>wall</em> second, so
 *       {@code total(s) = I(tau) / compress} with {@code I} the integral of {@code scale * r} over
 *       trace time (trapezoids). {@code --compress 60} replays one trace minute per wall second at the
 *       trace's rates.
 * </ul>
 * Partition {@code p} holds {@code floor(weights[p] * total(s))} records (offsets 0, 1, ...).
 */
public final class ProductionSchedule implements Serializable {
    private static final long serialVersionUID = 1L;

    private final long epochMs;
    private final double endS;
    private final double[] weights;
    private final double rate;
    private final double compress;
    private final double[] times;
    private final double[] rates;
    /** cumulative[i] = integral of the (scaled) rate over trace time [0, times[i]]. */
    private final double[] cumulative;

    private ProductionSchedule(long epochMs, double endS, double[] weights, double rate, double compress,
                               double[] times, double[] rates) {
        this.epochMs = epochMs;
        this.endS = endS;
        this.weights = weights;
        this.rate = rate;
        this.compress = compress;
        this.times = times;
        this.rates = rates;
        this.cumulative = new double[times.length];
        if (times.length > 0) {
            cumulative[0] = rates[0] * times[0];
            for (int i = 1; i < times.length; i++) {
                cumulative[i] = cumulative[i - 1] + (times[i] - times[i - 1]) * (rates[i - 1] + rates[i]) / 2.0;
            }
        }
    }

    /** The schedule the options describe (reads the trace CSV in trace mode). */
    public static ProductionSchedule of(JobOptions options) {
        double[] weights = weights(options.partitions, options.skew, options.seed);
        if (options.trace == null) {
            return new ProductionSchedule(options.epochMs, options.endS, weights, options.rate, 1.0, new double[0], new double[0]);
        }
        List<double[]> points = readTrace(Path.of(options.trace));
        double[] times = new double[points.size()];
        double[] rates = new double[points.size()];
        for (int i = 0; i < times.length; i++) {
            times[i] = points.get(i)[0];
            rates[i] = options.scale * points.get(i)[1];
        }
        return new ProductionSchedule(options.epochMs, options.endS, weights, Double.NaN, options.compress, times, rates);
    }

    /**
     * Partition weights: Zipf with exponent {@code skew} over ranks, ranks shuffled by {@code seed}.
     *
     * <p>{@code raw[k] = Math.pow(k + 1, -skew)} for rank k = 0..n-1, {@code weight[k] = raw[k] / sum(raw)}
     * (summed in rank order). Partition p gets the weight of rank {@code perm[p]}, where {@code perm}
     * is the identity shuffled by Fisher-Yates from the top ({@code for i = n-1 down to 1:
     * j = next() mod (i + 1), unsigned; swap perm[i], perm[j]}) with SplitMix64 seeded by {@code seed}.
     */
    public static double[] weights(int partitions, double skew, long seed) {
        double[] byRank = new double[partitions];
        double sum = 0.0;
        for (int k = 0; k < partitions; k++) {
            byRank[k] = Math.pow(k + 1, -skew);
            sum += byRank[k];
        }
        for (int k = 0; k < partitions; k++) {
            byRank[k] = byRank[k] / sum;
        }
        int[] perm = new int[partitions];
        for (int i = 0; i < partitions; i++) {
            perm[i] = i;
        }
        SplitMix64 random = new SplitMix64(seed);
        for (int i = partitions - 1; i > 0; i--) {
            int j = (int) Long.remainderUnsigned(random.next(), i + 1);
            int swap = perm[i];
            perm[i] = perm[j];
            perm[j] = swap;
        }
        double[] weights = new double[partitions];
        for (int p = 0; p < partitions; p++) {
            weights[p] = byRank[perm[p]];
        }
        return weights;
    }

    public int partitions() {
        return weights.length;
    }

    /** Records produced over all partitions up to {@code nowMs}, before the per-partition rounding. */
    public double total(long nowMs) {
        double s = (nowMs - epochMs) / 1000.0;
        if (!(s > 0.0)) {
            return 0.0;
        }
        if (s > endS) {
            s = endS;
        }
        if (times.length == 0) {
            return rate * s;
        }
        return integral(s * compress) / compress;
    }

    /** Records partition {@code partition} holds when {@code total} records were produced in all. */
    public long produced(int partition, double total) {
        return (long) Math.floor(weights[partition] * total);
    }

    /** Records partition {@code partition} holds at {@code nowMs}. */
    public long produced(int partition, long nowMs) {
        return produced(partition, total(nowMs));
    }

    /** Records all partitions hold at {@code nowMs} (the sum of the per-partition counts). */
    public long producedAll(long nowMs) {
        double total = total(nowMs);
        long sum = 0;
        for (int p = 0; p < weights.length; p++) {
            sum += produced(p, total);
        }
        return sum;
    }

    private double integral(double tau) {
        int last = times.length - 1;
        if (tau < times[0]) {
            return rates[0] * tau;
        }
        if (tau >= times[last]) {
            return cumulative[last] + (tau - times[last]) * rates[last];
        }
        // The segment i with times[i] <= tau < times[i + 1].
        int lo = 0;
        int hi = last;
        while (hi - lo > 1) {
            int mid = (lo + hi) >>> 1;
            if (times[mid] <= tau) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        double d = tau - times[lo];
        double at = rates[lo] + (rates[lo + 1] - rates[lo]) * d / (times[lo + 1] - times[lo]);
        return cumulative[lo] + d * (rates[lo] + at) / 2.0;
    }

    private static List<double[]> readTrace(Path path) {
        List<String> lines;
        try {
            lines = Files.readAllLines(path, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("--trace: cannot read " + path + ": " + e.getMessage());
        }
        if (lines.isEmpty() || !lines.get(0).trim().equals("time_s,rate")) {
            throw new IllegalArgumentException(path + ":1: the header must be time_s,rate");
        }
        List<double[]> points = new ArrayList<>();
        for (int i = 1; i < lines.size(); i++) {
            String line = lines.get(i).trim();
            if (line.isEmpty()) {
                continue;
            }
            String[] cells = line.split(",");
            double time;
            double value;
            try {
                time = Double.parseDouble(cells[0]);
                value = Double.parseDouble(cells[1]);
            } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
                throw new IllegalArgumentException(path + ":" + (i + 1) + ": not two numbers: " + line);
            }
            if (!(time >= 0.0) || (!points.isEmpty() && !(time > points.get(points.size() - 1)[0]))) {
                throw new IllegalArgumentException(path + ":" + (i + 1) + ": time_s must be >= 0 and increasing, got " + cells[0]);
            }
            if (!(value >= 0.0) || Double.isInfinite(value)) {
                throw new IllegalArgumentException(path + ":" + (i + 1) + ": negative or infinite rate " + cells[1]);
            }
            points.add(new double[] {time, value});
        }
        if (points.isEmpty()) {
            throw new IllegalArgumentException(path + ": no points");
        }
        return points;
    }

    /**
     * Prints the weights and the production at {@code --at-ms} times, for the Python mirror's contract test.
     *
     * <p>Lines: {@code weight P BITS} (the IEEE bits of the weight as a signed long) and
     * {@code produced AT_MS TOTAL_BITS P COUNT}.
     */
    public static void main(String[] args) {
        JobOptions options = JobOptions.parse(args, System.currentTimeMillis());
        ProductionSchedule schedule = of(options);
        StringBuilder out = new StringBuilder();
        for (int p = 0; p < schedule.partitions(); p++) {
            out.append("weight ").append(p).append(' ').append(Double.doubleToRawLongBits(schedule.weights[p])).append('\n');
        }
        for (long at : options.atMs) {
            double total = schedule.total(at);
            for (int p = 0; p < schedule.partitions(); p++) {
                out.append("produced ").append(at).append(' ').append(Double.doubleToRawLongBits(total)).append(' ')
                        .append(p).append(' ').append(schedule.produced(p, total)).append('\n');
            }
        }
        System.out.print(out);
    }

    /** SplitMix64 (Steele, Lea, Flood 2014): tiny, and easy to repeat in Python with 64-bit masks. */
    static final class SplitMix64 {
        private long state;

        SplitMix64(long seed) {
            this.state = seed;
        }

        long next() {
            state += 0x9E3779B97F4A7C15L;
            long z = state;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            return z ^ (z >>> 31);
        }
    }
}
