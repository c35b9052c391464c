package perdix.jobs;

import org.apache.flink.api.connector.source.SourceSplit;

/** One partition of the log and the offset of the next record to read there (immutable: a checkpoint's value). */
public final class LogSplit implements SourceSplit {
    public final int partition;
    public final long nextOffset;

    public LogSplit(int partition, long nextOffset) {
        this.partition = partition;
        this.nextOffset = nextOffset;
    }

    @Override
    public String splitId() {
        return "partition-" + partition;
    }

    @Override
    public String toString() {
        return splitId() + "@" + nextOffset;
    }
}
