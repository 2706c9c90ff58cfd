//! The process's own metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …),
//! read on each scrape by `metrics-process` and written as Prometheus names them.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
};

/// Writes the process's metrics on each scrape (those the platform has).
#[derive(Debug)]
pub(super) struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let now = metrics_process::collector::collect();
        if let Some(seconds) = now.cpu_seconds_total {
            let counter = ConstCounter::new(seconds);
            counter.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                counter.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                now.resident_memory_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                now.virtual_memory_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                now.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                now.max_fds,
            ),
            ("process_threads", "Number of OS threads", now.threads),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                now.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            let Some(value) = value.and_then(|value| i64::try_from(value).ok()) else {
                continue;
            };
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}
