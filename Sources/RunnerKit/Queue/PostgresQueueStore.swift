import Synchronization

/// The queue in PostgreSQL, through libpq. Three connections, each with a thread of its own, so
/// no libpq call blocks a thread of the concurrency pool and none waits for another's: claims,
/// leases and pacing on one; records and key locks on another (stored as jobs end, while claims
/// go on); LISTEN on the third. A watcher's live page asks through a fourth, made when it first
/// asks, so a page's question never waits behind a claim or a record, nor they behind it.
package final class PostgresQueueStore: QueueStore {
    let main: JobQueue
    private let writer: JobQueue
    private let listener: PostgresConnection
    let mainThread = BlockingThread(name: "runner queue")
    private let writerThread = BlockingThread(name: "runner queue writer")
    private let listenerThread = BlockingThread(name: "runner queue listener")
    /// Whether `listener` has LISTENed since it last failed (a new connection has not).
    private let listening = Mutex(false)
    private let url: String
    /// The page's thread and connection, once a page asked (the connection is only ever touched
    /// on that thread).
    private let pageThread = Mutex<BlockingThread?>(nil)
    private let pageQueue = Mutex<JobQueue?>(nil)

    package var lease: Duration { main.lease }
    package var display: String { main.connection.display }

    /// The channels every watcher listens on.
    static let channels = ["runner_jobs", "runner_cancel", "runner_pause", "runner_events"]

    /// Connects (three times) and makes or checks the schema; blocks: see `connect`.
    package init(url: String, lease: Duration = .seconds(30)) throws(QueueError) {
        main = try JobQueue(url: url, lease: lease)
        writer = try JobQueue(url: url, lease: lease)
        listener = try PostgresConnection(url: url)
        self.url = url
    }

    /// Connects on a thread of its own.
    package static func connect(url: String, lease: Duration = .seconds(30)) async throws(QueueError) -> PostgresQueueStore {
        let thread = BlockingThread(name: "runner queue connect")
        defer { thread.stop() }
        return try await thread.run { () throws(QueueError) -> PostgresQueueStore in try PostgresQueueStore(url: url, lease: lease) }
    }

    package func close() {
        mainThread.stop()
        writerThread.stop()
        listenerThread.stop()
        pageThread.withLock { $0?.stop() }
    }

    package func claim(runner: String, limit: Int, kinds: [String]?) async throws(QueueError) -> [QueueClaim] {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> [QueueClaim] in try main.claim(runner: runner, limit: limit, kinds: kinds) }
    }

    package func register(_ watcher: QueueWatcher) async throws(QueueError) {
        let main = main
        try await mainThread.run { () throws(QueueError) in try main.register(watcher) }
    }

    package func unregister(runner: String) async throws(QueueError) {
        let main = main
        try await mainThread.run { () throws(QueueError) in try main.unregister(runner: runner) }
    }

    package func nextLeaseEnd() async throws(QueueError) -> Duration? {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> Duration? in try main.nextLeaseEnd() }
    }

    package func finish(_ jobs: [QueueFinish], runner: String, unlocking keys: [String], durable: OutputStore?) async throws(QueueError) -> [Int64] {
        let writer = writer
        return try await writerThread.run { () throws(QueueError) -> [Int64] in
            do throws(Durability.Failure) {
                try durable?.synchronize()
            } catch {
                throw .notDurable(error)
            }
            return try writer.finish(jobs, runner: runner, unlocking: keys)
        }
    }

    package func release(ids: [Int64], runner: String) async throws(QueueError) {
        let main = main
        try await mainThread.run { () throws(QueueError) in try main.release(ids: ids, runner: runner) }
    }

    package func heartbeat(runner: String) async throws(QueueError) {
        let main = main
        try await mainThread.run { () throws(QueueError) in try main.renew(runner: runner) }
    }

    package func notifications(waitingUpTo timeout: Duration) async throws(QueueError) -> [QueueNotice] {
        try await listenerThread.run { [self] () throws(QueueError) -> [QueueNotice] in
            do throws(QueueError) {
                if !listening.withLock({ $0 }) {
                    // A connection made anew (the statement reconnects) listens again.
                    for channel in Self.channels { try listener.query("LISTEN \(channel)") }
                    listening.withLock { $0 = true }
                }
                return try listener.notifications(waitingUpTo: timeout).compactMap { QueueNotice(channel: $0.channel, payload: $0.payload) }
            } catch {
                listening.withLock { $0 = false }
                throw error
            }
        }
    }
}

extension PostgresQueueStore: QueueKeyLocks {
    package func lockKey(_ key: String, runner: String) async throws(QueueError) -> Bool {
        let writer = writer
        return try await writerThread.run { () throws(QueueError) -> Bool in try writer.lockKey(key, runner: runner) }
    }

    package func unlockKeys(_ keys: [String], runner: String) async throws(QueueError) {
        let writer = writer
        try await writerThread.run { () throws(QueueError) in try writer.unlockKeys(keys, runner: runner) }
    }
}

extension PostgresQueueStore: QueueParents {
    package func parentToComplete(id: Int64, runner: String) async throws(QueueError) -> QueueParentToComplete? {
        let writer = writer
        return try await writerThread.run { () throws(QueueError) -> QueueParentToComplete? in try writer.parentToComplete(id: id, runner: runner) }
    }

    package func completeParent(_ finish: QueueFinish, runner: String) async throws(QueueError) -> [Int64] {
        let writer = writer
        return try await writerThread.run { () throws(QueueError) -> [Int64] in try writer.completeParent(finish, runner: runner) }
    }
}

extension PostgresQueueStore: QueueClaimProgress {
    package func hooksEnded(ids: [Int64], runner: String) async throws(QueueError) {
        let writer = writer
        try await writerThread.run { () throws(QueueError) in try writer.hooksEnded(ids: ids, runner: runner) }
    }

    package func credit(ids: [Int64], runner: String) async throws(QueueError) {
        let writer = writer
        try await writerThread.run { () throws(QueueError) in try writer.credit(ids: ids, runner: runner) }
    }
}

extension PostgresQueueStore: QueueMaintenance {
    package func failAbandoned() async throws(QueueError) -> QueueAbandoned {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> QueueAbandoned in try main.failAbandoned() }
    }

    package func prune(olderThan age: Duration) async throws(QueueError) -> Int {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> Int in try main.prune(olderThan: age) }
    }
}

extension PostgresQueueStore: QueuePacing {
    package func reservePace(host: String, interval: Duration) async throws(QueueError) -> Duration {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> Duration in try main.reservePace(host: host, interval: interval) }
    }

    package func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async throws(QueueError) -> Duration {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> Duration in try main.reserveBandwidth(name, bytes: bytes, rate: rate) }
    }

    package func pause(host: String, for duration: Duration, from runner: String) async throws(QueueError) {
        let main = main
        try await mainThread.run { () throws(QueueError) in try main.pause(host: host, for: duration, from: runner) }
    }
}

extension PostgresQueueStore: QueueSharedOutput {
    package func identity() async throws(QueueError) -> QueueIdentity {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> QueueIdentity in try main.identity() }
    }

    package func recordOutput(folder: String, path: String, runner: String) async throws(QueueError) -> QueueIdentity {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> QueueIdentity in try main.recordOutput(folder: folder, path: path, runner: runner) }
    }

    package func keyRecord(_ key: String) async throws(QueueError) -> String? {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> String? in try main.keyRecord(key) }
    }
}

extension PostgresQueueStore: QueueFileOutcomes {
    package func fileOutcome(of id: Int64) async throws(QueueError) -> [String: Int]? {
        let main = main
        return try await mainThread.run { () throws(QueueError) -> [String: Int]? in try main.fileOutcome(of: id) }
    }
}

extension PostgresQueueStore: QueueProducing {
    package func producerStatus() async throws(QueueError) -> QueueProducerStatus {
        try await onPageThread { queue throws(QueueError) -> QueueProducerStatus in
            let status = try queue.status()
            return QueueProducerStatus(status: status, scheduled: (try? queue.scheduleNames(batches: status.batches.map(\.id))) ?? [:])
        }
    }

    package func queueJobs(_ jobs: [QueueSubmission]) async throws(QueueError) -> QueueSubmitted {
        try await onPageThread { queue throws(QueueError) -> QueueSubmitted in try queue.submit(jobs) }
    }

    package func cancelJobs(key: String) async throws(QueueError) -> (queued: Int, running: [String]) {
        try await onPageThread { queue throws(QueueError) -> (queued: Int, running: [String]) in try queue.cancel(key: key) }
    }

    /// Runs `body` with the page's connection on the page's thread, both made the first time.
    private func onPageThread<Value: Sendable>(_ body: @escaping @Sendable (JobQueue) throws(QueueError) -> Value) async throws(QueueError) -> Value {
        let thread = pageThread.withLock { thread -> BlockingThread in
            if let thread { return thread }
            let made = BlockingThread(name: "runner queue page")
            thread = made
            return made
        }
        return try await thread.run { [self] () throws(QueueError) -> Value in
            let queue: JobQueue
            if let open = pageQueue.withLock({ $0 }) {
                queue = open
            } else {
                queue = try JobQueue(url: url, lease: lease)
                pageQueue.withLock { $0 = queue }
            }
            return try body(queue)
        }
    }
}
