import Foundation
import Synchronization

/// What a watcher is doing now, kept from the engine's events for its live page and API: the jobs
/// running with their phase, counts by status, the last jobs finished and how many finished in each
/// of the last minutes' 10-second spans.
package final class LiveBoard: RunObserver, Sendable {
    /// A job between its start and its end.
    package struct RunningJob: Sendable {
        package var key: String
        package var kind: String
        package var url: String
        package var startedAt: Date
        /// What it does now, in words: "starting", "running", "running (attempt 2)", "waiting for
        /// the network", "waiting for a slot at its host", "waiting for its turn at its host",
        /// "retrying in 2.0 s: …".
        package var phase: String
        package var phaseSince: Date
        package var attempt: Int
        /// Bytes of its body so far, of `total` when the server said, coming at `bytesPerSecond`
        /// (between its last two progress reports): set for a job that has reported progress.
        package var bytes: Int?
        package var total: Int?
        package var bytesPerSecond: Double?
        var bytesAt: Date?
    }

    /// A job that ended.
    package struct FinishedJob: Sendable {
        package var key: String
        package var kind: String
        package var status: JobStatus
        package var finishedAt: Date
        package var milliseconds: Int
        package var message: String?
    }

    package struct Snapshot: Sendable {
        package var since: Date
        package var running: [RunningJob]
        package var counts: [JobStatus: Int]
        /// The newest first.
        package var finished: [FinishedJob]
        /// Jobs finished in each span of `spanSeconds`, oldest first, the last one the current span.
        package var throughput: [Int]
        package var spanSeconds: Int
    }

    /// Finished jobs kept for the page.
    package static let finishedKept = 20
    /// The chart: 60 spans of 10 s, the last ten minutes.
    package static let spans = 60
    package static let spanSeconds = 10

    private struct State {
        var running: [String: RunningJob] = [:]
        var counts: [JobStatus: Int] = [:]
        var finished: [FinishedJob] = []
        /// Finished jobs by span number (seconds since 1970 / spanSeconds), the last `spans` kept.
        var bySpan: [Int: Int] = [:]
    }

    private let state = Mutex(State())
    private let since = Date()
    private let now: @Sendable () -> Date

    package init(now: @escaping @Sendable () -> Date = { Date() }) { self.now = now }

    // MARK: - Events

    package func jobStarted(_ job: JobDescriptor) {
        let at = now()
        let entry = RunningJob(
            key: job.key, kind: job.kindName, url: job.recordURL, startedAt: at, phase: "starting", phaseSince: at, attempt: 0,
            bytes: nil, total: nil, bytesPerSecond: nil, bytesAt: nil)
        state.withLock { $0.running[job.key] = entry }
    }

    package func jobWaiting(_ job: JobDescriptor, for reason: WaitReason) {
        switch reason {
        case .network: set(job.key, phase: "waiting for the network")
        case .host: set(job.key, phase: "waiting for a slot at its host")
        case .pace: set(job.key, phase: "waiting for its turn at its host")
        }
    }

    package func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {
        let at = now()
        state.withLock { state in
            guard var entry = state.running[job.key] else { return }
            if let before = entry.bytes, let then = entry.bytesAt, at > then, bytes >= before {
                entry.bytesPerSecond = Double(bytes - before) / at.timeIntervalSince(then)
            }
            entry.bytes = bytes
            entry.total = total
            entry.bytesAt = at
            state.running[job.key] = entry
        }
    }

    package func jobAttempting(_ job: JobDescriptor, attempt: Int) {
        set(job.key, phase: attempt == 1 ? "running" : "running (attempt \(attempt))", attempt: attempt)
    }

    package func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        set(job.key, phase: String(format: "retrying in %.1f s: ", delay.inSeconds) + reason)
    }

    package func jobFinished(_ result: JobResult) {
        let at = now()
        let finished = FinishedJob(
            key: result.key, kind: result.kind, status: result.status, finishedAt: at, milliseconds: result.ownMs, message: result.error)
        let span = Self.span(of: at)
        state.withLock { state in
            // A duplicate never started: the job running with its key goes on.
            if result.status != .duplicate { state.running[result.key] = nil }
            state.counts[result.status, default: 0] += 1
            state.finished.append(finished)
            if state.finished.count > Self.finishedKept * 2 { state.finished.removeFirst(state.finished.count - Self.finishedKept) }
            state.bySpan[span, default: 0] += 1
            if state.bySpan.count > Self.spans + 1 {
                state.bySpan = state.bySpan.filter { $0.key > span - Self.spans }
            }
        }
    }

    private func set(_ key: String, phase: String, attempt: Int? = nil) {
        let at = now()
        state.withLock { state in
            guard state.running[key] != nil else { return }
            state.running[key]!.phase = phase
            state.running[key]!.phaseSince = at
            if let attempt { state.running[key]!.attempt = attempt }
        }
    }

    private static func span(of date: Date) -> Int { Int(date.timeIntervalSince1970) / spanSeconds }

    // MARK: - Reading

    package var snapshot: Snapshot {
        let current = Self.span(of: now())
        return state.withLock { state in
            Snapshot(
                since: since,
                running: state.running.values.sorted { ($0.startedAt, $0.key) < ($1.startedAt, $1.key) },
                counts: state.counts,
                finished: Array(state.finished.suffix(Self.finishedKept).reversed()),
                throughput: (current - Self.spans + 1...current).map { state.bySpan[$0] ?? 0 },
                spanSeconds: Self.spanSeconds)
        }
    }
}
