package perdix.jobs;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import org.apache.flink.core.io.SimpleVersionedSerializer;

/** Splits in checkpoints and events: (int partition, long next offset). */
final class LogSplitSerializer implements SimpleVersionedSerializer<LogSplit> {
    static final LogSplitSerializer INSTANCE = new LogSplitSerializer();

    @Override
    public int getVersion() {
        return 1;
    }

    @Override
    public byte[] serialize(LogSplit split) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream(12);
        try (DataOutputStream out = new DataOutputStream(bytes)) {
            out.writeInt(split.partition);
            out.writeLong(split.nextOffset);
        }
        return bytes.toByteArray();
    }

    @Override
    public LogSplit deserialize(int version, byte[] serialized) throws IOException {
        checkVersion(version);
        try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
            return new LogSplit(in.readInt(), in.readLong());
        }
    }

    static void checkVersion(int version) throws IOException {
        if (version != 1) {
            throw new IOException("unknown serialization version " + version);
        }
    }

    /** The enumerator's checkpoint: the splits not assigned to any reader. */
    static final class Pending implements SimpleVersionedSerializer<Collection<LogSplit>> {
        static final Pending INSTANCE = new Pending();

        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Collection<LogSplit> splits) throws IOException {
            ByteArrayOutputStream bytes = new ByteArrayOutputStream(4 + 12 * splits.size());
            try (DataOutputStream out = new DataOutputStream(bytes)) {
                out.writeInt(splits.size());
                for (LogSplit split : splits) {
                    out.writeInt(split.partition);
                    out.writeLong(split.nextOffset);
                }
            }
            return bytes.toByteArray();
        }

        @Override
        public Collection<LogSplit> deserialize(int version, byte[] serialized) throws IOException {
            checkVersion(version);
            try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(serialized))) {
                int count = in.readInt();
                List<LogSplit> splits = new ArrayList<>(count);
                for (int i = 0; i < count; i++) {
                    splits.add(new LogSplit(in.readInt(), in.readLong()));
                }
                return splits;
            }
        }
    }
}
