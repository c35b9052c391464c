package perdix.jobs;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * Checks {@link OffsetLedger} against a plain set over random reordered, duplicated and lossy streams.
 *
 * <p>Run by the Python tests ({@code java -cp JAR perdix.jobs.SelfCheck [SEQUENCES]}); prints
 * {@code ok N} or the first disagreement, and exits non-zero on one. Needs only the JDK.
 */
public final class SelfCheck {
    private SelfCheck() {
    }

    public static void main(String[] args) {
        int sequences = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        Random random = new Random(42);
        for (int n = 0; n < sequences; n++) {
            String problem = check(random, n);
            if (problem != null) {
                System.out.println("FAIL sequence " + n + ": " + problem);
                System.exit(1);
            }
        }
        System.out.println("ok " + sequences);
    }

    private static String check(Random random, int n) {
        int length = 1 + random.nextInt(n % 10 == 0 ? 20000 : 600);
        int displacement = random.nextInt(4) == 0 ? 0 : 1 + random.nextInt(300);
        boolean lossy = random.nextInt(3) == 0;
        long window = 64L * (1 + random.nextInt(8));
        // Offsets 0..length-1, shuffled within blocks (bounded reordering), some dropped, some repeated.
        List<Long> offsets = new ArrayList<>();
        for (long o = 0; o < length; o++) {
            offsets.add(o);
        }
        if (displacement > 0) {
            for (int start = 0; start < length; start += displacement) {
                Collections.shuffle(offsets.subList(start, Math.min(length, start + displacement)), random);
            }
        }
        List<Long> stream = new ArrayList<>();
        Set<Long> dropped = new HashSet<>();
        for (long offset : offsets) {
            if (lossy && random.nextInt(50) == 0) {
                dropped.add(offset);
                continue;
            }
            stream.add(offset);
            if (random.nextInt(40) == 0) {
                stream.add(offset);
            }
        }
        if (random.nextInt(5) == 0 && !stream.isEmpty()) {
            stream.add(stream.get(random.nextInt(stream.size())));
        }
        OffsetLedger ledger = new OffsetLedger(window);
        PartitionProgress progress = new PartitionProgress();
        Set<Long> seen = new HashSet<>();
        long duplicates = 0;
        for (long offset : stream) {
            if (!seen.add(offset)) {
                duplicates++;
            }
            ledger.accept(progress, offset);
        }
        long prefix = 0;
        while (seen.contains(prefix)) {
            prefix++;
        }
        long counted = ledger.verified + ledger.ahead + ledger.lost;
        long highest = seen.isEmpty() ? 0 : Collections.max(seen) + 1;
        // Without losses and with reordering inside the window the ledger is exact.
        boolean exact = dropped.isEmpty() && displacement + 64 <= window;
        if (exact && (ledger.verified != prefix || ledger.ahead != seen.size() - prefix || ledger.lost != 0)) {
            return "exact case: " + counts(ledger) + " expected verified " + prefix + " ahead " + (seen.size() - prefix);
        }
        if (exact && ledger.duplicates != duplicates) {
            return "duplicates " + ledger.duplicates + " expected " + duplicates;
        }
        // Always: verified + ahead counts each distinct offset at most once; lost counts offsets never verified.
        if (ledger.verified + ledger.ahead > seen.size() || ledger.duplicates > stream.size() - seen.size() + ledger.lost) {
            return "over-counted: " + counts(ledger) + " distinct " + seen.size();
        }
        if (counted > highest || progress.next > highest) {
            return "beyond the highest offset: " + counts(ledger) + " highest " + highest;
        }
        if (ledger.verified + ledger.lost != progress.next) {
            return "prefix mismatch: " + counts(ledger) + " next " + progress.next;
        }
        return null;
    }

    private static String counts(OffsetLedger ledger) {
        return "verified " + ledger.verified + " ahead " + ledger.ahead + " duplicates " + ledger.duplicates + " lost " + ledger.lost;
    }
}
