"""The streaming job of the real-Flink tests: datagen source -> calculation -> keyed aggregate -> blackhole sink.

Submitted with ``bin/flink run -d --python job.py --job-name NAME --rate ROWS_PER_SECOND``; runs in the
flink venv (PyFlink), never in the project's. Pure SQL (no Python UDF), so no Python worker runs per task.
The GROUP BY splits the job into two vertices (source+calc, aggregate+sink), so per-vertex rescaling has
something to act on, and its state makes the checkpoints carry data.
"""

import argparse

from pyflink.table import EnvironmentSettings, TableEnvironment


def main() -> None:
    """Build the pipeline and submit it (the ``-d`` flag of ``flink run`` makes the submission detached)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--job-name", default="perdix-e2e")
    parser.add_argument("--rate", type=int, default=2000, help="rows per second of the datagen source (all subtasks)")
    args = parser.parse_args()

    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    env.get_config().set("pipeline.name", args.job_name)
    env.execute_sql(
        f"""
        CREATE TABLE src (
            k INT,
            v DOUBLE,
            payload STRING
        ) WITH (
            'connector' = 'datagen',
            'rows-per-second' = '{args.rate}',
            'fields.k.min' = '0',
            'fields.k.max' = '63',
            'fields.v.min' = '0',
            'fields.v.max' = '1000',
            'fields.payload.length' = '16'
        )
        """
    )
    env.execute_sql("CREATE TABLE snk (k INT, n BIGINT, total DOUBLE, longest INT) WITH ('connector' = 'blackhole')")
    env.execute_sql(
        """
        INSERT INTO snk
        SELECT k, COUNT(*), SUM(v * 1.5 + 2), MAX(CHAR_LENGTH(UPPER(payload)))
        FROM src
        WHERE v >= 0
        GROUP BY k
        """
    )


if __name__ == "__main__":
    main()
