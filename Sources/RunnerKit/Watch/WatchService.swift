import Foundation
import Synchronization

/// A watcher as a service: tells systemd how it is doing (`SystemdNotifier`) and writes
/// Prometheus metrics (`Metrics`) every 10 s and at exit, from the feed's events.
package final class WatchService: Sendable {
    package let notifier: SystemdNotifier?
    package let metrics = Metrics()
    package let metricsPath: String?
    /// How often the metrics file is written while the watcher runs.
    package static let metricsInterval: Duration = .seconds(10)
    private let metricsFailed = Atomic<Bool>(false)

    package init(notifier: SystemdNotifier?, metricsPath: String?) {
        self.notifier = notifier
        self.metricsPath = metricsPath
    }

    /// How often the watcher reports: at half of WATCHDOG_USEC when a watchdog is set, else
    /// every 5 s when someone listens.
    package var heartbeatInterval: Duration? {
        if let watchdog = notifier?.watchdogInterval { return watchdog }
        return notifier != nil || metricsPath != nil ? .seconds(5) : nil
    }

    /// The watcher takes work from now on.
    func ready(_ status: WatchStatus, source: String) {
        record(status)
        notifier?.send("READY=1\n" + Self.status(status, source: source))
    }

    /// Still alive (the watchdog's ping when there is one).
    func heartbeat(_ status: WatchStatus, source: String) {
        record(status)
        notifier?.send((notifier?.watchdogInterval != nil ? "WATCHDOG=1\n" : "") + Self.status(status, source: source))
    }

    /// A stop begins (SIGTERM, SIGINT): `what` the watcher does no more.
    func stopping(_ what: String) {
        notifier?.send("STOPPING=1\nSTATUS=stopping: \(what)")
    }

    /// Writes the metrics now: every `metricsInterval`, at SIGHUP (the file made anew after a
    /// rotation) and at the end. A failure is said through `report` once, not every 10 s.
    func writeMetrics(report: (String) -> Void) {
        guard let metricsPath else { return }
        do {
            try metrics.write(to: metricsPath)
            metricsFailed.store(false, ordering: .relaxed)
        } catch {
            if !metricsFailed.exchange(true, ordering: .relaxed) { report("the metrics could not be written: \(error)") }
        }
    }

    /// Keeps what the feed holds for the metrics (a queue's running jobs are followed instead).
    func record(_ status: WatchStatus) {
        if case .spool(let counts) = status { metrics.record(spool: counts) }
    }

    /// The `STATUS=` line of `status`.
    static func status(_ status: WatchStatus, source: String) -> String {
        switch status {
        case .spool(let counts):
            var line = "STATUS=\(counts.queued) queued"
            if counts.settling > 0 { line += " (\(counts.settling) still being written)" }
            line += ", \(counts.running) running, \(counts.done) done, \(counts.failed) failed"
            return line
        case .queue(let running):
            return "STATUS=\(running) running; watching \(source)"
        }
    }
}
