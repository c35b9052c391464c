"""The lab's real Flink: a loopback session cluster and the trace-driven log job (jobs/trace-source).

Nothing here runs in the pod: benchmarks, CLI commands and tests use it to measure a real job.
"""
