//! Shared helpers of the harness benchmarks (placeholder until the benchmarks land).
