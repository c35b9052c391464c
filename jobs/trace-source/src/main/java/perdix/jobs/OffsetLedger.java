package perdix.jobs;

import java.util.Arrays;

/**
 * Checks each record's offset against its partition's progress and counts the outcome.
 *
 * <p>{@code verified}: offsets that joined the gap-free prefix 0..next-1 (each counted once).
 * {@code ahead}: offsets seen above a gap, waiting for the gap to fill. {@code duplicates}: offsets
 * seen a second time. {@code lost}: offsets given up on, because a record arrived more than
 * {@code window} offsets above the oldest gap (no reordering in this job reaches that far).
 */
final class OffsetLedger {
    long verified;
    long ahead;
    long duplicates;
    long lost;
    private final long window;

    OffsetLedger(long window) {
        if (window < 64 || window % 64 != 0) {
            throw new IllegalArgumentException("window must be a positive multiple of 64: " + window);
        }
        this.window = window;
    }

    void accept(PartitionProgress progress, long offset) {
        if (offset < progress.next) {
            duplicates++;
            return;
        }
        if (progress.seen == null) {
            if (offset == progress.next) {
                progress.next++;
                verified++;
                return;
            }
            progress.base = progress.next & ~63L;
            progress.seen = new long[4];
        }
        while (offset - progress.base >= window) {
            giveUpOldestGap(progress, offset);
            if (progress.seen == null) {
                accept(progress, offset);
                return;
            }
        }
        int index = (int) (offset - progress.base);
        int word = index >>> 6;
        long bit = 1L << index;
        if (word >= progress.seen.length) {
            progress.seen = Arrays.copyOf(progress.seen, Math.max(word + 1, 2 * progress.seen.length));
        }
        if ((progress.seen[word] & bit) != 0) {
            duplicates++;
            return;
        }
        progress.seen[word] |= bit;
        progress.ahead++;
        ahead++;
        advance(progress);
    }

    /** Move {@code next} over the offsets seen, drop the words below it, drop the bitmap once nothing is ahead. */
    private void advance(PartitionProgress progress) {
        while (true) {
            int index = (int) (progress.next - progress.base);
            int word = index >>> 6;
            if (word >= progress.seen.length || (progress.seen[word] & (1L << index)) == 0) {
                break;
            }
            progress.next++;
            progress.ahead--;
            ahead--;
            verified++;
        }
        rebase(progress);
    }

    private void rebase(PartitionProgress progress) {
        if (progress.ahead == 0) {
            progress.seen = null;
            return;
        }
        int drop = (int) ((progress.next - progress.base) >>> 6);
        if (drop > 0) {
            progress.seen = Arrays.copyOfRange(progress.seen, drop, Math.max(progress.seen.length, drop + 4));
            progress.base += 64L * drop;
        }
    }

    /** Count the oldest gap as lost: move {@code next} to the lowest offset seen above it (or to {@code offset}). */
    private void giveUpOldestGap(PartitionProgress progress, long offset) {
        long target = offset;
        for (int word = 0; word < progress.seen.length; word++) {
            long bits = progress.seen[word];
            if (word == (int) ((progress.next - progress.base) >>> 6)) {
                bits &= -1L << (int) (progress.next - progress.base);
            } else if (64L * word + 63 < progress.next - progress.base) {
                continue;
            }
            if (bits != 0) {
                target = progress.base + 64L * word + Long.numberOfTrailingZeros(bits);
                break;
            }
        }
        lost += target - progress.next;
        progress.next = target;
        if (progress.ahead == 0) {
            progress.seen = null;
            return;
        }
        advance(progress);
    }

    long[] toArray() {
        return new long[] {verified, ahead, duplicates, lost};
    }

    void add(long[] counts) {
        verified += counts[0];
        ahead += counts[1];
        duplicates += counts[2];
        lost += counts[3];
    }
}
