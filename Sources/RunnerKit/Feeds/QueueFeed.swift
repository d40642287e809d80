import Foundation
import Synchronization

// The PostgreSQL queue as a feed of the one engine:
//
//   next() ─► a claimed job from the buffer, else claim as many as the engine has free slots
//             (FOR UPDATE SKIP LOCKED, a lease) ─► decode it ─► the engine runs it
//         ◄─ none: wait for NOTIFY runner_jobs, or --rescan
//   ended ─► its record (on disk already) stored in the row, the claim ended
//   shutdown ─► claims not started (buffered, or waiting for a slot) given back at once
//   a listener thread: NOTIFY runner_jobs rings the bell; NOTIFY runner_cancel cancels the key's
//             task; NOTIFY runner_pause pauses a host here too
//   a renewer: every third of the lease, this runner's claims and keys renewed and jobs
//             abandoned 3 times ended failed; every hour, rows finished before --keep pruned

/// Takes jobs from a `JobQueue` as this runner has room for them and hands them to one engine;
/// several runners on several machines share one queue.
public final class QueueFeed: JobFeed, @unchecked Sendable {  // mutable state behind `state`
    public let queue: JobQueue
    public let runner: String
    private let listener: PostgresConnection
    /// Records and key locks, on a connection and a thread of their own.
    private let writer: QueueWriter
    private let registry: KindRegistry
    private let limits: JobLimits
    private let rescan: Duration
    private let keep: Duration?
    private let prefetch: Int
    private let report: @Sendable (String) -> Void
    /// The most jobs claimed in one transaction.
    static let batchLimit = 64

    private struct State {
        var stopping = false
        var rung = false
        /// The queue could not be read: said once, and again when it is back.
        var unreachable = false
        /// Claimed and not yet handed to the engine, oldest first.
        var buffer: [(claim: JobQueue.Claim, at: ContinuousClock.Instant)] = []
        /// Claimed and not started (buffered, or handed out and waiting for a slot), by id.
        var unstarted: Set<Int64> = []
        /// Given back by a shutdown before they started: they must not start here.
        var givenBack: Set<Int64> = []
        /// Handed to the engine and not ended: while any is, leases are renewed and cancels
        /// heard, shutdown or not.
        var active = 0
        /// Keys a cancel was asked for, and when: a job of the key claimed before then does not run.
        var cancels: [String: ContinuousClock.Instant] = [:]
    }
    private let state = Mutex(State())
    /// Cancels a running task by key (the engine's TaskManager), once the engine exists.
    public let cancelKey = Locked<(@Sendable (String) -> Void)?>(nil)
    /// The engine's free slots: how many jobs one claim takes (at least one). Unset: one.
    public let freeSlots = Locked<(@Sendable () -> Int)?>(nil)
    /// The engine's pacer, which a pause another runner was asked for reaches.
    public let pacer = Locked<HostPacer?>(nil)

    /// `runner`: this runner's name in the queue (claims and keys are held under it); `keep`:
    /// how long finished rows stay (nil: for ever); `syncing`: the output store made durable
    /// before records are stored in the queue (nil: not synchronized, for tests of the queue);
    /// `prefetch`: how many jobs one claim takes at least, when the engine has fewer free slots
    /// (they wait for a slot under the lease; more claims fewer statements, fewer leaves more
    /// for the other runners).
    public init(
        url: String, runner: String, registry: KindRegistry, limits: JobLimits = .none, rescan: Duration = .seconds(2),
        lease: Duration = .seconds(30), keep: Duration? = .seconds(7 * 86_400), syncing: OutputStore? = nil, prefetch: Int = 1,
        report: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(QueueError) {
        queue = try JobQueue(url: url, lease: lease)
        writer = QueueWriter(queue: try JobQueue(url: url, lease: lease), runner: runner, store: syncing)
        listener = try PostgresConnection(url: url)
        try listener.query("LISTEN runner_jobs")
        try listener.query("LISTEN runner_cancel")
        try listener.query("LISTEN runner_pause")
        self.runner = runner
        self.keep = keep
        self.prefetch = max(1, prefetch)
        self.registry = registry
        self.limits = limits
        self.rescan = rescan
        self.report = report
        let thread = Thread { [self] in listen() }
        thread.name = "runner queue listener"
        thread.start()
        Task.detached { [self] in await renew() }
    }

    /// The key lock every runner of the queue shares.
    public var keyLock: any KeyLocking { QueueKeyLock(writer: writer) }

    /// The pacing every runner of the queue shares.
    public var sharedPacing: any SharedPacing { QueuePacing(queue: queue, runner: runner) }

    /// Stops claiming; jobs claimed and not started are given back at once, for other runners.
    public func shutdown() {
        let unstarted = state.withLock { state -> [Int64] in
            state.stopping = true
            state.buffer = []
            state.givenBack.formUnion(state.unstarted)
            defer { state.unstarted = [] }
            return Array(state.unstarted)
        }
        writer.releaseAllPreLocked()
        guard !unstarted.isEmpty else { return }
        do {
            try queue.release(ids: unstarted, runner: runner)
        } catch {
            report("\(unstarted.count) claim\(unstarted.count == 1 ? "" : "s") could not be given back (their lease will end): \(error)")
        }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }
    /// Stopping, and every job handed out has ended.
    private var through: Bool { state.withLock { $0.stopping && $0.active == 0 } }

    // MARK: - Feeding

    public func next() async -> FeedJob? {
        while !stopping {
            guard let (claim, claimedAt) = await nextClaim() else { continue }
            guard let job = decode(claim) else {
                state.withLock { _ = $0.unstarted.remove(claim.id) }
                writer.releasePreLocked(claim.key)
                continue
            }
            let (id, key) = (claim.id, claim.key)
            state.withLock { $0.active += 1 }
            return FeedJob(
                job,
                start: { [self] in
                    state.withLock { state in
                        // Given back by a shutdown: another runner may hold it already.
                        if state.givenBack.contains(id) { return .skip }
                        state.unstarted.remove(id)
                        if let asked = state.cancels[key], asked >= claimedAt { return .cancel("cancelled (runner cancel)") }
                        return .run
                    }
                },
                ended: { [self] end in await ended(id: id, key: key, end) })
        }
        // Stopping: nothing more; what was handed out and not started goes back through `ended`.
        return nil
    }

    /// A claimed job: the oldest buffered one, else as many as the engine has free slots for
    /// (at least `prefetch`) are claimed in one statement (nil: none now, or the queue could not be read; waited).
    private func nextClaim() async -> (JobQueue.Claim, at: ContinuousClock.Instant)? {
        if let buffered = state.withLock({ $0.buffer.isEmpty ? nil : $0.buffer.removeFirst() }) { return buffered }
        let claimedAt = ContinuousClock.now
        let limit = min(Self.batchLimit, max(prefetch, freeSlots.value?() ?? 1))
        let claims: [JobQueue.Claim]
        do {
            claims = try queue.claim(runner: runner, limit: limit)
        } catch {
            if !state.withLock({ $0.unreachable }) { report("the queue could not be read: \(error); trying again every second") }
            state.withLock { $0.unreachable = true }
            await sleepOrBell(.seconds(1))
            return nil
        }
        let wasUnreachable = state.withLock { state in
            defer { state.unreachable = false }
            return state.unreachable
        }
        if wasUnreachable { report("the queue is back") }
        guard let first = claims.first else {
            // Until a bell, --rescan, or the end of a lease another runner may have left behind.
            let leaseEnd = (try? queue.nextLeaseEnd()).flatMap { $0 }.map { $0 + .milliseconds(50) }
            await sleepOrBell(min(rescan, leaseEnd ?? rescan))
            return nil
        }
        let kept = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.unstarted.formUnion(claims.map(\.id))
            state.buffer.append(contentsOf: claims.dropFirst().map { ($0, claimedAt) })
            return true
        }
        let locked = claims.filter(\.keyLocked).map(\.key)
        guard kept else {
            // A shutdown came while claiming: these go back too, and the keys they locked.
            try? queue.release(ids: claims.map(\.id), runner: runner)
            for key in locked { writer.unlockKey(key) }
            return nil
        }
        writer.adopt(keys: locked)
        return (first, claimedAt)
    }

    private func decode(_ claim: JobQueue.Claim) -> JobDescriptor? {
        do {
            let stored = try JSONParser.parse(Array(claim.job.utf8))
            guard let object = stored["job"]?.objectValue else { throw JobSpecError(field: nil, "the stored job is not an object") }
            return try JobDescriptor.decode(object, defaults: stored["defaults"]?.objectValue ?? [], registry: registry, limits: limits)
        } catch {
            let reason = "not a job this runner can run: \(error)"
            let record = JSONWriter.string(.object([
                ("key", .string(claim.key)), ("kind", .string(claim.kind)), ("status", .string("failed")), ("error", .string(reason)),
            ]))
            try? queue.finish([JobQueue.Finish(id: claim.id, status: "failed", error: reason, record: record)], runner: runner)
            return nil
        }
    }

    private func ended(id: Int64, key: String, _ end: FeedJob.End) async {
        let (givenBack, idle) = state.withLock { state in
            state.active -= 1
            state.unstarted.remove(id)
            return (state.givenBack.remove(id) != nil, state.active == 0 && state.buffer.isEmpty)
        }
        // A key a claim locked for a job that never took it goes back; with nothing claimed
        // left, none is kept.
        if case .notStarted = end { writer.releasePreLocked(key) }
        if idle { writer.releaseAllPreLocked() }
        switch end {
        case .notStarted:
            guard !givenBack else { return }
            do { try queue.release(ids: [id], runner: runner) } catch { report("a claim could not be given back (its lease will end): \(error)") }
        case .recorded(let result, let line):
            // The record is written; once durable, the database gets it with the others that
            // ended meanwhile (retried while the database is away).
            let finish = JobQueue.Finish(id: id, status: result.status.rawValue, error: result.error, record: String(decoding: line, as: UTF8.self))
            var delay = Duration.milliseconds(200)
            for attempt in 1... {
                guard let failure = await writer.finish(finish) else {
                    if attempt > 1 { report("the queue is back: \(result.key)'s record is stored") }
                    return
                }
                if attempt == 1 { report("\(result.key): the record could not be stored in the queue (\(failure)); retrying") }
                if attempt >= 60 { return report("\(result.key): the record was not stored in the queue; it is on disk") }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    // MARK: - Waking

    private func sleepOrBell(_ duration: Duration) async {
        let end = ContinuousClock.now + duration
        while ContinuousClock.now < end {
            let rung = state.withLock { state in
                defer { state.rung = false }
                return state.rung || state.stopping
            }
            if rung { return }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The listener thread: LISTEN's notifications until the feed stops.
    private func listen() {
        var lost = false
        while !through {
            do {
                for (channel, payload) in try listener.notifications(waitingUpTo: .milliseconds(250)) {
                    if channel == "runner_cancel" {
                        let now = ContinuousClock.now
                        state.withLock { state in
                            state.cancels[payload] = now
                            // Kept an hour: long enough for any job claimed before it to start.
                            state.cancels = state.cancels.filter { now - $0.value < .seconds(3600) }
                        }
                        cancelKey.value?(payload)
                    } else if channel == "runner_pause" {
                        // "milliseconds runner host": a pause another runner was asked for.
                        let words = payload.split(separator: " ", maxSplits: 2).map(String.init)
                        if words.count == 3, words[1] != runner, let milliseconds = Int(words[0]) {
                            pacer.value?.pause(host: words[2], for: .milliseconds(milliseconds), fromFleet: true)
                        }
                    } else {
                        state.withLock { $0.rung = true }
                    }
                }
            } catch {
                if !lost { report("the queue's notifications stopped (\(error)); reading it every --rescan until they are back") }
                lost = true
                Thread.sleep(forTimeInterval: 1)
                // Listening again on a connection made anew (the statement reconnects).
                if ["runner_jobs", "runner_cancel", "runner_pause"].allSatisfy({ (try? listener.query("LISTEN \($0)")) != nil }) {
                    report("the queue's notifications are back")
                    lost = false
                }
            }
        }
    }

    private func renew() async {
        var pruned: ContinuousClock.Instant?
        while !through {
            _ = try? queue.failAbandoned()  // (an outage is said by the renewal below)
            if let keep, pruned.map({ ContinuousClock.now - $0 >= .seconds(3600) }) ?? true {
                pruned = .now
                do {
                    let count = try queue.prune(olderThan: keep)
                    if count > 0 { report("\(count) finished job\(count == 1 ? "" : "s") older than --keep removed from the queue") }
                } catch {
                    report("finished jobs could not be pruned: \(error)")
                }
            }
            try? await Task.sleep(for: queue.lease / 3)
            guard !through else { break }
            do { try queue.renew(runner: runner) } catch { report("leases could not be renewed: \(error)") }
            writer.retryUnlocks()
        }
    }
}

/// What a watcher writes to the queue as jobs run and end, on a connection and a serial queue
/// of their own (never on the engine's threads while it waits): records stored in batches
/// (while one statement runs, the next records gather), keys taken and let go of in order.
final class QueueWriter: Sendable {
    private let queue: JobQueue
    private let runner: String
    /// Synchronized (one `syncfs`) before each batch of records is stored: a record is in the
    /// database only once it is durable on this runner's disk.
    private let store: OutputStore?
    private let dispatch = DispatchQueue(label: "runner queue writer")
    private struct Pending {
        var jobs: [(JobQueue.Finish, CheckedContinuation<String?, Never>)] = []
        /// Keys to let go of, with the next statement.
        var unlocks: [String] = []
        /// A batch is queued or being written.
        var busy = false
    }
    private let pending = Mutex(Pending())
    /// Keys a claim locked for this runner, not yet taken by a job of the key.
    private let preLocked = Mutex<Set<String>>([])

    init(queue: JobQueue, runner: String, store: OutputStore?) {
        self.queue = queue
        self.runner = runner
        self.store = store
    }

    /// Makes a finished job's record durable and stores it, with the others waiting; nil once
    /// stored, else why not.
    func finish(_ job: JobQueue.Finish) async -> String? {
        await withCheckedContinuation { continuation in
            let idle = pending.withLock { pending in
                pending.jobs.append((job, continuation))
                defer { pending.busy = true }
                return !pending.busy
            }
            if idle { dispatch.async { self.writeBatch() } }
        }
    }

    /// One statement for every record and key waiting (the records made durable first); again
    /// later while more wait (key locks asked for meanwhile go first). Keys that could not be let
    /// go of wait for the next statement.
    private func writeBatch() {
        let (batch, unlocks) = pending.withLock { pending in
            defer { (pending.jobs, pending.unlocks) = ([], []) }
            return (pending.jobs, pending.unlocks)
        }
        var failure: String?
        var failures: [String?] = Array(repeating: nil, count: batch.count)
        do {
            if !batch.isEmpty { try store?.synchronize() }
            try queue.finish(batch.map(\.0), runner: runner, unlocking: unlocks)
        } catch {
            failure = "\(error)"
            failures = Array(repeating: failure, count: batch.count)
            pending.withLock { $0.unlocks.append(contentsOf: unlocks) }
            // One record the database refuses must not hold the others: each is tried alone
            // (while the database is away, each fails too, and is retried as before).
            if batch.count > 1 {
                for (index, (job, _)) in batch.enumerated() {
                    do {
                        try queue.finish([job], runner: runner)
                        failures[index] = nil
                    } catch {
                        failures[index] = "\(error)"
                    }
                }
            }
        }
        for ((_, continuation), failure) in zip(batch, failures) { continuation.resume(returning: failure) }
        let more = pending.withLock { pending in
            // Keys alone that failed wait for the next record, key lock or renewal.
            pending.busy = !pending.jobs.isEmpty || (failure == nil && !pending.unlocks.isEmpty)
            return pending.busy
        }
        if more { dispatch.async { self.writeBatch() } }
    }

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

    /// Takes `key` for this runner (after letting go of the keys waiting to be, which may hold it).
    func lockKey(_ key: String) throws(QueueError) -> Bool {
        let outcome: Result<Bool, QueueError> = dispatch.sync {
            Result { () throws(QueueError) -> Bool in
                try flushUnlocks()
                return try queue.lockKey(key, runner: runner)
            }
        }
        return try outcome.get()
    }

    /// Lets go of `key` with the next statement, without waiting; a later `lockKey` of this
    /// runner comes after it.
    func unlockKey(_ key: String) {
        let idle = pending.withLock { pending in
            pending.unlocks.append(key)
            defer { pending.busy = true }
            return !pending.busy
        }
        if idle { dispatch.async { self.writeBatch() } }
    }

    /// Lets go of the keys waiting to be, now (on the writer's queue).
    private func flushUnlocks() throws(QueueError) {
        let keys = pending.withLock { pending in
            defer { pending.unlocks = [] }
            return pending.unlocks
        }
        do {
            try queue.unlockKeys(keys, runner: runner)
        } catch {
            pending.withLock { $0.unlocks.append(contentsOf: keys) }
            throw error
        }
    }

    /// Retries keys that could not be let go of (called with each lease renewal).
    func retryUnlocks() {
        dispatch.async { try? self.flushUnlocks() }
    }
}

/// One task per key across every runner of a queue: a row per running key in `runner.keys`.
struct QueueKeyLock: KeyLocking {
    let writer: QueueWriter

    func tryLock(key: String) -> (@Sendable () -> Void)? {
        guard case .acquired(let release) = lock(key: key) else { return nil }
        return release
    }

    func lock(key: String) -> KeyLockOutcome {
        let writer = writer
        if writer.takePreLocked(key) { return .acquired(release: { writer.unlockKey(key) }) }
        do {
            guard try writer.lockKey(key) else { return .heldElsewhere }
        } catch {
            return .unavailable("the queue's key lock could not be taken: \(error)")
        }
        return .acquired(release: { writer.unlockKey(key) })
    }
}

/// `--rate`, a host's `rate` and `Retry-After` pauses shared by every runner of a queue: each
/// paced request takes the host's next slot in `runner.hosts`. While the database cannot be
/// reached, each runner paces alone.
struct QueuePacing: SharedPacing {
    let queue: JobQueue
    let runner: String

    func reserve(host: String, interval: Duration) -> Duration {
        (try? queue.reservePace(host: host, interval: interval)) ?? .zero
    }

    func pause(host: String, for duration: Duration) {
        try? queue.pause(host: host, for: duration, from: runner)
    }
}
