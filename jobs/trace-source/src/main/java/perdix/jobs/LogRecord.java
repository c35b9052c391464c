package perdix.jobs;

/** One record of the log: its partition and its offset there (a Flink POJO, so no Kryo). */
public class LogRecord {
    public int partition;
    public long offset;

    public LogRecord() {
    }

    public LogRecord(int partition, long offset) {
        this.partition = partition;
        this.offset = offset;
    }

    @Override
    public String toString() {
        return partition + "@" + offset;
    }
}
