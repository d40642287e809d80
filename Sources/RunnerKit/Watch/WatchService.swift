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
            ready(status: Self.status(counts))
        case .heartbeat(let counts):
            metrics.record(spool: counts)
            heartbeat(status: Self.status(counts))
        default:
            break
        }
    }

    /// The watcher takes work from now on; `status` is a `STATUS=` line.
    func ready(status: String) { notifier?.send("READY=1\n" + status) }

    /// Still alive (the watchdog's ping when there is one); `status` is a `STATUS=` line.
    func heartbeat(status: String) { notifier?.send((notifier?.watchdogInterval != nil ? "WATCHDOG=1\n" : "") + status) }

    /// A stop begins (SIGTERM, SIGINT): `what` the watcher does no more.
    func stopping(_ what: String) {
        notifier?.send("STOPPING=1\nSTATUS=stopping: \(what)")
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

    /// Writes the metrics now (SIGHUP: the file is made anew after a rotation).
    func writeMetricsNow() { writeMetrics() }

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
