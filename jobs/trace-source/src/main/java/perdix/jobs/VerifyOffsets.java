package perdix.jobs;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.metrics.MetricGroup;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

/**
 * The counting sink: checks every record's offset against its partition's progress (keyed by partition).
 *
 * <p>Both the per-partition progress (keyed state) and the subtask's counts (operator list state, one
 * entry per subtask, redistributed on rescale so their sum is kept) are checkpointed with the source's
 * read positions at the same barrier. A restore therefore rolls the counts back together with the
 * positions, and a replayed record is never counted twice: after a restore, a record counts as a
 * duplicate only if the source replays something the sink's state has already seen, and a gap only if
 * the source skipped it. The gauges are the counts of the current, not yet checkpointed, history; they
 * drop back to the checkpoint's values at a restore.
 */
public final class VerifyOffsets extends KeyedProcessFunction<Integer, LogRecord, Long> implements CheckpointedFunction {
    private static final long serialVersionUID = 1L;
    /** Reordering this job can produce is bounded by its network buffers, far below 2^20 records. */
    static final long WINDOW = 1L << 20;

    private transient ValueState<PartitionProgress> progress;
    private transient ListState<long[]> countsState;
    private transient OffsetLedger ledger;

    @Override
    public void initializeState(FunctionInitializationContext context) throws Exception {
        ledger = new OffsetLedger(WINDOW);
        countsState = context.getOperatorStateStore().getListState(
                new ListStateDescriptor<>("verify-counts", PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
        for (long[] counts : countsState.get()) {
            ledger.add(counts);
        }
    }

    @Override
    public void open(OpenContext context) {
        progress = getRuntimeContext().getState(new ValueStateDescriptor<>("progress", PartitionProgress.class));
        MetricGroup metrics = getRuntimeContext().getMetricGroup();
        metrics.gauge("verifiedRecords", () -> ledger.verified);
        metrics.gauge("aheadRecords", () -> ledger.ahead);
        metrics.gauge("duplicateRecords", () -> ledger.duplicates);
        metrics.gauge("lostRecords", () -> ledger.lost);
    }

    @Override
    public void processElement(LogRecord record, Context context, Collector<Long> out) throws Exception {
        PartitionProgress current = progress.value();
        if (current == null) {
            current = new PartitionProgress();
        }
        ledger.accept(current, record.offset);
        progress.update(current);
    }

    @Override
    public void snapshotState(FunctionSnapshotContext context) throws Exception {
        countsState.update(java.util.List.of(ledger.toArray()));
    }
}
