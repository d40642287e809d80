import Synchronization

/// What a watcher writes to the queue as jobs run and end, in the order it asked: records
/// stored in batches (while one statement runs, the next records gather), keys let go of and
/// taken. One lane: a key let go of is gone before this runner asks for it again.
final class QueueWriter: Sendable {
    private enum Operation: Sendable {
        case finish(QueueFinish, CheckedContinuation<String?, Never>)
        case unlock(String)
        case lock(String, CheckedContinuation<Result<Bool, QueueError>, Never>)
        case credit(Int64)
    }

    private struct Lane {
        var operations: [Operation] = []
        var draining = false
        /// Keys that could not be let go of: with the next statement, or the next renewal.
        var stuckUnlocks: [String] = []
        /// Waiting for the lane to be empty.
        var flushed: [CheckedContinuation<Void, Never>] = []
    }

    private let store: any QueueStore & QueueKeyLocks & QueueClaimProgress
    private let runner: String
    private let lane = Mutex(Lane())
    /// Made durable (one `syncfs`) before each batch of records is stored: a record is in the
    /// queue only once it is on this runner's disk.
    private let output = Mutex<OutputStore?>(nil)
    /// Keys a claim locked for this runner, not yet taken by a job of the key.
    private let preLocked = Mutex<Set<String>>([])
    /// Hears the parents whose last child ended with records this writer stored (this
    /// runner's now, to complete).
    private let parentsReady = Mutex<(@Sendable ([Int64]) -> Void)?>(nil)

    init(store: any QueueStore & QueueKeyLocks & QueueClaimProgress, runner: String) {
        self.store = store
        self.runner = runner
    }

    func synchronizing(_ store: OutputStore) { output.withLock { $0 = store } }

    /// `ready` hears the parents whose last child ended with the records stored here.
    func onParentsReady(_ ready: @escaping @Sendable ([Int64]) -> Void) { parentsReady.withLock { $0 = ready } }

    private func tellParentsReady(_ ids: [Int64]) {
        guard !ids.isEmpty, let ready = parentsReady.withLock({ $0 }) else { return }
        ready(ids)
    }

    /// Makes a finished job's record durable and stores it, with the others waiting; nil once
    /// stored, else why not.
    func finish(_ job: QueueFinish) async -> String? {
        await withCheckedContinuation { continuation in submit(.finish(job, continuation)) }
    }

    /// Takes `key` for this runner (after letting go of the keys waiting to be, which may hold it).
    func lockKey(_ key: String) async throws(QueueError) -> Bool {
        let result = await withCheckedContinuation { continuation in submit(.lock(key, continuation)) }
        return try result.get()
    }

    /// Lets go of `key`, without waiting; a later `lockKey` of this runner comes after it.
    /// `withNextRecord`: the job of the key is about to hand in its record, so the key goes in
    /// that record's statement instead of one of its own (nothing is written until something
    /// else is asked).
    func unlockKey(_ key: String, withNextRecord: Bool = false) { submit(.unlock(key), starting: !withNextRecord) }

    /// Credits a running job's claim with durable progress (`QueueClaimProgress.credit`), without waiting.
    func credit(_ id: Int64) { submit(.credit(id)) }

    /// Retries keys that could not be let go of (with each lease renewal).
    func retryUnlocks() {
        let stuck = lane.withLock { lane in
            defer { lane.stuckUnlocks = [] }
            return lane.stuckUnlocks
        }
        for key in stuck { submit(.unlock(key)) }
    }

    /// Returns once everything asked so far was written (or failed).
    func flush() async {
        await withCheckedContinuation { continuation in
            let (now, start) = lane.withLock { lane -> (Bool, Bool) in
                if !lane.draining && lane.operations.isEmpty { return (true, false) }
                lane.flushed.append(continuation)
                // Unlocks waiting for a record that will not come now go alone.
                defer { lane.draining = true }
                return (false, !lane.draining)
            }
            if now { continuation.resume() }
            if start { Task { await drain() } }
        }
    }

    private func submit(_ operation: Operation, starting: Bool = true) {
        let start = lane.withLock { lane -> Bool in
            lane.operations.append(operation)
            guard starting, !lane.draining else { return false }
            lane.draining = true
            return true
        }
        if start { Task { await drain() } }
    }

    /// Writes what is asked, in order, until nothing more is: runs of records and unlocks in one
    /// statement each, a lock after what was asked before it.
    private func drain() async {
        while true {
            let next = lane.withLock { lane -> (operations: [Operation], stuck: [String])? in
                guard !lane.operations.isEmpty else {
                    lane.draining = false
                    return nil
                }
                defer { (lane.operations, lane.stuckUnlocks) = ([], []) }
                return (lane.operations, lane.stuckUnlocks)
            }
            guard let next else { break }
            var jobs: [(QueueFinish, CheckedContinuation<String?, Never>)] = []
            var unlocks = next.stuck
            var credits: [Int64] = []
            for operation in next.operations {
                switch operation {
                case .finish(let job, let continuation):
                    jobs.append((job, continuation))
                case .unlock(let key):
                    unlocks.append(key)
                case .credit(let id):
                    credits.append(id)
                case .lock(let key, let continuation):
                    await write(jobs, unlocking: unlocks)
                    (jobs, unlocks) = ([], [])
                    do {
                        continuation.resume(returning: .success(try await store.lockKey(key, runner: runner)))
                    } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
            }
            await write(jobs, unlocking: unlocks)
            // A credit lost to an outage only makes that claim count as an abandon, as before.
            if !credits.isEmpty { try? await store.credit(ids: credits, runner: runner) }
        }
        let flushed = lane.withLock { lane in
            defer { lane.flushed = [] }
            return lane.draining ? [] : lane.flushed
        }
        for waiter in flushed { waiter.resume() }
    }

    /// One statement for these records and keys (the records made durable first); when it
    /// fails, each record alone, so that one the store refuses holds no other.
    private func write(_ jobs: [(QueueFinish, CheckedContinuation<String?, Never>)], unlocking keys: [String]) async {
        guard !jobs.isEmpty || !keys.isEmpty else { return }
        var failures: [String?] = Array(repeating: nil, count: jobs.count)
        do {
            // The sync and the statement on one thread of the store's: one hop for the batch.
            tellParentsReady(
                try await store.finish(jobs.map(\.0), runner: runner, unlocking: keys, durable: jobs.isEmpty ? nil : output.withLock { $0 }))
        } catch {
            failures = Array(repeating: "\(error)", count: jobs.count)
            lane.withLock { $0.stuckUnlocks.append(contentsOf: keys) }
            if jobs.count > 1, !error.isNotDurable {
                for (index, (job, _)) in jobs.enumerated() {
                    do {
                        tellParentsReady(try await store.finish([job], runner: runner, unlocking: []))
                        failures[index] = nil
                    } catch {
                        failures[index] = "\(error)"
                    }
                }
            }
        }
        for ((_, continuation), failure) in zip(jobs, failures) { continuation.resume(returning: failure) }
    }

    // MARK: - Keys claims locked

    /// Keys a claim locked for this runner: the first job of each to start takes its lock
    /// without a statement.
    func adopt(keys: [String]) {
        guard !keys.isEmpty else { return }
        preLocked.withLock { $0.formUnion(keys) }
    }

    /// Takes the lock a claim took for `key`, if it is still there.
    func takePreLocked(_ key: String) -> Bool {
        preLocked.withLock { $0.remove(key) != nil }
    }

    /// Lets go of the lock a claim took for `key`, if no job took it (its job did not start).
    func releasePreLocked(_ key: String) {
        if takePreLocked(key) { unlockKey(key) }
    }

    /// Lets go of every lock claims took that no job took.
    func releaseAllPreLocked() {
        let keys = preLocked.withLock { keys in
            defer { keys = [] }
            return keys
        }
        for key in keys { unlockKey(key) }
    }
}

/// One task per key across every runner of a queue: a row per running key in the queue.
struct QueueKeyLock: KeyLocking {
    let writer: QueueWriter

    func lock(key: String) async -> KeyLockOutcome {
        let writer = writer
        // Released once the job ran, just before its record is handed in: they go together.
        if writer.takePreLocked(key) { return .acquired(release: { writer.unlockKey(key, withNextRecord: true) }) }
        do {
            guard try await writer.lockKey(key) else { return .heldElsewhere }
        } catch {
            return .unavailable("the queue's key lock could not be taken: \(error)")
        }
        return .acquired(release: { writer.unlockKey(key, withNextRecord: true) })
    }
}

/// `--rate`, a host's `rate`, `Retry-After` pauses, `--limit-rate` and a host's `limitRate`
/// shared by every runner of a queue: each paced request takes the host's next slot in the
/// queue, and transfers reserve their bytes there in chunks. While the queue cannot be reached,
/// each runner paces alone.
struct QueuePacer: SharedPacing {
    let store: any QueuePacing
    let runner: String

    func reserve(host: String, interval: Duration) async -> Duration {
        (try? await store.reservePace(host: host, interval: interval)) ?? .zero
    }

    func pause(host: String, for duration: Duration) async {
        try? await store.pause(host: host, for: duration, from: runner)
    }

    func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async -> Duration? {
        try? await store.reserveBandwidth(name, bytes: bytes, rate: rate)
    }
}
