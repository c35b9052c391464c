package perdix.jobs;

/**
 * The offsets of one partition the verifier has seen (keyed state; a Flink POJO).
 *
 * <p>Every offset below {@code next} was seen exactly once. Offsets at or above {@code next} that
 * arrived early (the split shape rebalances records over several map subtasks, so one partition's
 * records can overtake each other) are bits of {@code seen}: bit {@code i} of word {@code w} is
 * offset {@code base + 64 * w + i}, with {@code base} a multiple of 64 at most {@code next}.
 * {@code seen} is null while nothing above {@code next} has been seen, the in-order case.
 */
public class PartitionProgress {
    public long next;
    public long base;
    public long[] seen;
    /** Offsets above {@code next} seen so far (set bits of {@code seen} at or above next). */
    public long ahead;

    public PartitionProgress() {
    }
}
