import Foundation
import Synchronization

// What a program that embeds the engine calls: jobs in from any async sequence, results out as
// they end, cancel by key, shutdown.

extension JobEngine {
    /// Runs the jobs of `jobs` as they arrive, at most `concurrency` at a time (the next is taken
    /// only once the last has a slot), and yields each one's result once its record is written,
    /// in the order they end. Children run as with `run(_:)`; their counts are in their parent's
    /// result (`details.children`, `descendants`), and only the jobs of `jobs` are yielded.
    ///
    /// The sequence ends once `jobs` has ended and every job taken from it has ended. Stopping
    /// the iteration (leaving the loop, cancelling its task) stops taking jobs and cancels the
    /// running ones. Results not read yet are kept until they are read.
    ///
    /// ```swift
    /// let (jobs, input) = AsyncStream.makeStream(of: JobDescriptor.self)
    /// for await result in engine.results(for: jobs) { … }
    /// ```
    public func results<Jobs: AsyncSequence>(for jobs: sending Jobs) -> AsyncStream<JobResult>
    where Jobs.Element == JobDescriptor, Jobs.Failure == Never {
        let feed: AsyncJobsFeed = AsyncSequenceFeed(jobs)
        let (stream, continuation) = AsyncStream.makeStream(of: JobResult.self)
        let task = Task {
            _ = await self.run(ResultFeed(feed) { continuation.yield($0) })
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// `results(for:)` for a sequence that may throw: its error ends the stream once the jobs
    /// taken before it have ended.
    public func results<Jobs: AsyncSequence>(for jobs: sending Jobs) -> AsyncThrowingStream<JobResult, any Error>
    where Jobs.Element == JobDescriptor {
        let feed: AsyncJobsFeed = AsyncSequenceFeed(jobs)
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: JobResult.self)
        let task = Task {
            _ = await self.run(ResultFeed(feed) { continuation.yield($0) })
            continuation.finish(throwing: feed.error)
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// Runs every job of an async sequence as it arrives (an `AsyncStream` as it is, with no
    /// adapter), bounded by `concurrency`, and returns once the sequence has ended and every job
    /// taken from it has ended. An error of the sequence stops taking jobs and is thrown once
    /// the jobs taken before it have ended. Cancelling the calling task stops taking jobs and
    /// cancels the running ones.
    public func run<Jobs: AsyncSequence>(_ jobs: sending Jobs) async throws(Jobs.Failure) -> RunSummary
    where Jobs.Element == JobDescriptor {
        let feed = AsyncSequenceFeed(jobs)
        let summary = await run(feed)
        if let failure = feed.failure { throw failure }
        return summary
    }

    /// Cancels the job of `key`: the one running (its attempt stops and it ends `cancelled`), and
    /// any the engine was handed that waits for a slot (it ends `cancelled` without running, as
    /// soon as it would have started). The record's `error` is `reason`. Returns whether a job of
    /// the key was running or waiting.
    @discardableResult
    public func cancel(key: String, reason: String = "cancelled") -> Bool {
        let waited = waiting.cancel(key: key, reason: reason)
        let ran = taskManager.cancel(key: key, reason: reason)
        return waited || ran
    }

    /// Whether a job of `key` runs now.
    public func isRunning(key: String) -> Bool { taskManager.isRunning(key: key) }

    /// The keys of the jobs running now, with when each started.
    public var running: [(key: String, startedAt: Date)] { taskManager.running }

    /// Stops the engine: cancels every running job (each ends `cancelled` with `reason`), waits
    /// until every record is written, and stops the threads the engine started for itself (the
    /// connectivity monitor it made when none was given). An engine that was shut down must not
    /// be handed more jobs. The HTTP client's connections and the process-wide deadline timer
    /// and hashing thread are shared, idle without jobs, and end with the process.
    public func shutdown(reason: String = "the engine was shut down") async {
        for (key, _) in taskManager.running { cancel(key: key, reason: reason) }
        waiting.cancelAll(reason: reason)
        while taskManager.count > 0 { try? await Task.sleep(for: .milliseconds(5)) }
        await flush()
        if ownsMonitor, let monitor = configuration.monitor as? RouteMonitor { monitor.close() }
    }
}

/// The jobs handed to an engine that wait for a slot, so a cancel by key reaches them before
/// the TaskManager holds them. Each job holds a ticket from when it is queued until it takes
/// its key (or is dropped).
final class WaitingJobs: Sendable {
    struct Ticket: Sendable {
        let key: String
        let id: UInt64
    }

    /// By key, by ticket: the cancel reason, once one was asked for.
    private let state = Mutex<(next: UInt64, jobs: [String: [UInt64: String?]])>((0, [:]))

    func add(_ key: String) -> Ticket {
        state.withLock { state in
            state.next += 1
            state.jobs[key, default: [:]][state.next] = .some(nil)
            return Ticket(key: key, id: state.next)
        }
    }

    /// Removes the ticket; returns the reason when its job was cancelled while it waited.
    @discardableResult
    func remove(_ ticket: Ticket) -> String? {
        state.withLock { state in
            guard let reason = state.jobs[ticket.key]?.removeValue(forKey: ticket.id) else { return nil }
            if state.jobs[ticket.key]?.isEmpty == true { state.jobs[ticket.key] = nil }
            return reason
        }
    }

    /// Marks every waiting job of `key` cancelled; whether there was one.
    func cancel(key: String, reason: String) -> Bool {
        state.withLock { state in
            guard let tickets = state.jobs[key] else { return false }
            for id in tickets.keys { state.jobs[key]?[id] = .some(reason) }
            return true
        }
    }

    func cancelAll(reason: String) {
        state.withLock { state in
            for key in state.jobs.keys {
                for id in state.jobs[key]!.keys { state.jobs[key]?[id] = .some(reason) }
            }
        }
    }

    var count: Int { state.withLock { $0.jobs.values.reduce(0) { $0 + $1.count } } }
}

/// The jobs of an async sequence, as a feed: the engine asks for one at a time, from one task
/// at a time, so the iterator (which need not be Sendable) is never used by two at once. An
/// error of the sequence ends the feed and is kept in `failure`.
class AsyncJobsFeed: JobFeed, @unchecked Sendable {
    /// The sequence's error, once it threw.
    var error: (any Error)? { nil }

    func next() async -> FeedJob? { nil }
}

final class AsyncSequenceFeed<Jobs: AsyncSequence>: AsyncJobsFeed, @unchecked Sendable where Jobs.Element == JobDescriptor {
    private var iterator: Jobs.AsyncIterator
    private var ended = false
    private(set) var failure: Jobs.Failure?

    init(_ jobs: sending Jobs) { iterator = jobs.makeAsyncIterator() }

    override var error: (any Error)? { failure }

    override func next() async -> FeedJob? {
        guard !ended else { return nil }
        do throws(Jobs.Failure) {
            if let job = try await iterator.next(isolation: nil) { return FeedJob(job) }
        } catch {
            failure = error
        }
        ended = true
        return nil
    }
}

/// A feed whose jobs report their results as they end (`JobEngine.results(for:)`).
struct ResultFeed<Base: JobFeed>: JobFeed {
    let base: Base
    let yield: @Sendable (JobResult) -> Void

    init(_ base: Base, yield: @escaping @Sendable (JobResult) -> Void) {
        self.base = base
        self.yield = yield
    }

    func next() async -> FeedJob? {
        guard var entry = await base.next() else { return nil }
        let ended = entry.ended
        let yield = self.yield
        entry.ended = { end in
            if case .recorded(let result, _) = end { yield(result) }
            await ended?(end)
        }
        return entry
    }
}
