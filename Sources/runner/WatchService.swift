import Foundation
import RunnerKit
import Synchronization

/// `runner watch` as a service: tells systemd how it is doing (`SystemdNotifier`) and writes
/// Prometheus metrics every 10 s and at exit (`Metrics`), from the watcher's events.
final class WatchService: Sendable {
    let notifier: SystemdNotifier?
    let metrics = Metrics()
    let metricsPath: String?
    private let metricsFailed = Atomic<Bool>(false)

    init(notifier: SystemdNotifier?, metricsPath: String?) {
        self.notifier = notifier
        self.metricsPath = metricsPath
    }

    /// How often the watcher reports: at half of WATCHDOG_USEC when a watchdog is set, else
    /// every 5 s when someone listens.
    var heartbeatInterval: Duration? {
        if let watchdog = notifier?.watchdogInterval { return watchdog }
        return notifier != nil || metricsPath != nil ? .seconds(5) : nil
    }

    func handle(_ event: SpoolFeed.Event) {
        switch event {
        case .ready(let counts):
            metrics.record(spool: counts)
            notifier?.send("READY=1\n" + Self.status(counts))
        case .heartbeat(let counts):
            metrics.record(spool: counts)
            notifier?.send((notifier?.watchdogInterval != nil ? "WATCHDOG=1\n" : "") + Self.status(counts))
        default:
            break
        }
    }

    /// A stop begins (SIGTERM, SIGINT, SIGHUP).
    func stopping() {
        notifier?.send("STOPPING=1\nSTATUS=stopping: no more files are taken")
    }

    /// The watcher ended: the last metrics.
    func stopped(counts: SpoolFeed.Counts?) {
        if let counts { metrics.record(spool: counts) }
        writeMetrics()
    }

    /// Writes the metrics every 10 s until cancelled; nil without `--metrics`.
    func startWritingMetrics() -> Task<Void, Never>? {
        guard metricsPath != nil else { return nil }
        return Task {
            repeat { writeMetrics() } while (try? await Task.sleep(for: .seconds(10))) != nil
        }
    }

    private func writeMetrics() {
        guard let metricsPath else { return }
        do {
            try metrics.write(to: metricsPath)
            metricsFailed.store(false, ordering: .relaxed)
        } catch {
            // Said once, not every 10 s.
            if !metricsFailed.exchange(true, ordering: .relaxed) { Console.err("runner: the metrics could not be written: \(error)") }
        }
    }

    static func status(_ counts: SpoolFeed.Counts) -> String {
        var line = "STATUS=\(counts.queued) queued"
        if counts.settling > 0 { line += " (\(counts.settling) still being written)" }
        line += ", \(counts.running) running, \(counts.done) done, \(counts.failed) failed"
        return line
    }
}
