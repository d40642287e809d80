import Foundation
import Glibc
import Synchronization

/// Counts what a run or a watcher did, for Prometheus: a `RunObserver` that aggregates every
/// finished job (children included), and a writer of the text exposition format, written
/// atomically (a temporary file, then a rename) so node_exporter's textfile collector never
/// reads half a file.
///
/// ```
/// runner_jobs_total{kind,status}                jobs that ended, by kind and status
/// runner_job_duration_seconds{kind}             histogram of their durations
/// runner_payload_bytes_total{kind}              bytes of payloads written
/// runner_retries_total{kind}                    attempts after the first
/// runner_hook_failures_total                    --on-finish hooks that failed or timed out
/// runner_queued_files, runner_active_files,     (watch) the spool now
/// runner_running_jobs, runner_spool_files_total{outcome}
/// runner_last_run_end_timestamp_seconds,        (run) when the last run ended, and whether
/// runner_last_run_success                       every job succeeded
/// ```
package final class Metrics: RunObserver {
    /// Upper bounds of the duration buckets, in seconds.
    package static let buckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    private struct PerKind {
        var byStatus: [JobStatus: Int] = [:]
        var bucketCounts = [Int](repeating: 0, count: Metrics.buckets.count)
        var durationSum = 0.0
        var count = 0
        var bytes = 0
        var retries = 0
    }

    private struct State {
        var kinds: [String: PerKind] = [:]
        var spool: SpoolFeed.Counts?
        var lastRun: (end: Date, success: Bool)?
        var hookFailures = 0
        /// Counts the jobs running now, for a watcher without a spool (a queue's).
        var running: (@Sendable () -> Int)?
    }

    private let state = Mutex(State())

    package init() {}

    package func jobFinished(_ result: JobResult) {
        let seconds = Double(result.durationMs) / 1000
        state.withLock { state in
            var kind = state.kinds[result.kind, default: PerKind()]
            kind.byStatus[result.status, default: 0] += 1
            for (index, bound) in Self.buckets.enumerated() where seconds <= bound { kind.bucketCounts[index] += 1 }
            kind.durationSum += seconds
            kind.count += 1
            if result.status == .succeeded, !result.stale { kind.bytes += result.bytes ?? 0 }
            kind.retries += max(0, result.attempts - 1)
            state.kinds[result.kind] = kind
        }
    }

    package func hookFailed(_ result: JobResult, reason: String) {
        state.withLock { $0.hookFailures += 1 }
    }

    /// The spool as the watcher last reported it.
    package func record(spool counts: SpoolFeed.Counts) {
        state.withLock { $0.spool = counts }
    }

    /// Where `runner_running_jobs` comes from for a watcher without a spool (a queue's watcher).
    package func follow(running: @escaping @Sendable () -> Int) {
        state.withLock { $0.running = running }
    }

    /// The end of a run, and whether every job ended succeeded or notModified.
    package func recordRunEnd(at end: Date = Date(), success: Bool) {
        state.withLock { $0.lastRun = (end, success) }
    }

    // MARK: - The text format

    /// The metrics in Prometheus' text exposition format (version 0.0.4).
    package var text: String {
        let state = state.withLock { $0 }
        var out = ""
        func family(_ name: String, _ type: String, _ help: String, _ samples: [String]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for sample in samples { out += sample + "\n" }
        }
        let kinds = state.kinds.keys.sorted()
        family("runner_jobs_total", "counter", "Jobs that ended, children included, by kind and status.", kinds.flatMap { kind in
            JobStatus.allCases.compactMap { status in
                state.kinds[kind]!.byStatus[status].map { "runner_jobs_total{kind=\(Self.quoted(kind)),status=\(Self.quoted(status.rawValue))} \($0)" }
            }
        })
        family("runner_job_duration_seconds", "histogram", "How long jobs took, from their start to their record.", kinds.flatMap { kind in
            let k = state.kinds[kind]!
            let label = "kind=\(Self.quoted(kind))"
            return zip(Self.buckets, k.bucketCounts).map { bound, count in
                "runner_job_duration_seconds_bucket{\(label),le=\"\(Self.number(bound))\"} \(count)"
            } + [
                "runner_job_duration_seconds_bucket{\(label),le=\"+Inf\"} \(k.count)",
                "runner_job_duration_seconds_sum{\(label)} \(Self.number(k.durationSum))",
                "runner_job_duration_seconds_count{\(label)} \(k.count)",
            ]
        })
        family("runner_payload_bytes_total", "counter", "Bytes of payloads written, by kind.", kinds.map { kind in
            "runner_payload_bytes_total{kind=\(Self.quoted(kind))} \(state.kinds[kind]!.bytes)"
        })
        family("runner_retries_total", "counter", "Attempts made after a job's first, by kind.", kinds.map { kind in
            "runner_retries_total{kind=\(Self.quoted(kind))} \(state.kinds[kind]!.retries)"
        })
        if state.hookFailures > 0 {
            family(
                "runner_hook_failures_total", "counter", "--on-finish hooks that failed or timed out (the jobs' statuses stand).",
                ["runner_hook_failures_total \(state.hookFailures)"])
        }
        if let spool = state.spool {
            family("runner_queued_files", "gauge", "Job files waiting in the spool's inbox, those still being written included.", ["runner_queued_files \(spool.queued)"])
            family("runner_active_files", "gauge", "Job files claimed by this watcher and not through.", ["runner_active_files \(spool.active)"])
            family("runner_running_jobs", "gauge", "Jobs running now.", ["runner_running_jobs \(spool.running)"])
            family("runner_spool_files_total", "counter", "Job files this watcher moved to done/ or failed/.", [
                "runner_spool_files_total{outcome=\"done\"} \(spool.done)",
                "runner_spool_files_total{outcome=\"failed\"} \(spool.failed)",
            ])
        }
        if state.spool == nil, let running = state.running {
            family("runner_running_jobs", "gauge", "Jobs running now.", ["runner_running_jobs \(running())"])
        }
        if let run = state.lastRun {
            family("runner_last_run_end_timestamp_seconds", "gauge", "When the last run ended, in seconds since 1970.", [
                "runner_last_run_end_timestamp_seconds \(Self.number(run.end.timeIntervalSince1970))"
            ])
            family("runner_last_run_success", "gauge", "1 when every job of the last run ended succeeded or notModified, else 0.", [
                "runner_last_run_success \(run.success ? 1 : 0)"
            ])
        }
        return out
    }

    /// Writes `text` to `path` atomically (readable by all: node_exporter runs as its own user).
    package func write(to path: String) throws {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        do {
            try FileSystem.writeAtomically(Array(text.utf8), to: absolute, mode: 0o644, durable: false)
        } catch {
            throw OutputStore.WriteError(path: absolute, reason: error.reason)
        }
    }

    private static func quoted(_ value: String) -> String {
        var out = "\""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out + "\""
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
