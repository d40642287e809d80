import Foundation
import Synchronization

// The PostgreSQL queue as a feed of the one engine:
//
//   next() ─► claim a job (FOR UPDATE SKIP LOCKED, a lease) ─► decode it ─► the engine runs it
//         ◄─ none: wait for NOTIFY runner_jobs, or --rescan
//   ended ─► its record (on disk already) stored in the row, the claim ended
//   a listener thread: NOTIFY runner_jobs rings the bell; NOTIFY runner_cancel cancels the key's task
//   a renewer: every third of the lease, this runner's claims and keys renewed

/// Takes jobs from a `JobQueue` as this runner has room for them and hands them to one engine;
/// several runners on several machines share one queue.
public final class QueueFeed: JobFeed, @unchecked Sendable {  // mutable state behind `state`
    public let queue: JobQueue
    public let runner: String
    private let listener: PostgresConnection
    private let registry: KindRegistry
    private let limits: JobLimits
    private let rescan: Duration
    private let report: @Sendable (String) -> Void

    private struct State {
        var stopping = false
        var rung = false
        /// The queue could not be read: said once, and again when it is back.
        var unreachable = false
        /// Claimed and not yet ended, by id.
        var claimed: Set<Int64> = []
        /// Keys a cancel was asked for, and when: a job of the key claimed before then does not run.
        var cancels: [String: ContinuousClock.Instant] = [:]
    }
    private let state = Mutex(State())
    /// Cancels a running task by key (the engine's TaskManager), once the engine exists.
    public let cancelKey = Locked<(@Sendable (String) -> Void)?>(nil)

    /// `runner`: this runner's name in the queue (claims and keys are held under it).
    public init(
        url: String, runner: String, registry: KindRegistry, limits: JobLimits = .none, rescan: Duration = .seconds(2),
        lease: Duration = .seconds(30), report: @escaping @Sendable (String) -> Void = { _ in }
    ) throws(QueueError) {
        queue = try JobQueue(url: url, lease: lease)
        listener = try PostgresConnection(url: url)
        try listener.query("LISTEN runner_jobs")
        try listener.query("LISTEN runner_cancel")
        self.runner = runner
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
    public var keyLock: any KeyLocking { QueueKeyLock(queue: queue, runner: runner) }

    /// Stops claiming; jobs claimed and not started are given back at once.
    public func shutdown() {
        state.withLock { $0.stopping = true }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }

    // MARK: - Feeding

    public func next() async -> FeedJob? {
        while !stopping {
            let claims: [JobQueue.Claim]
            do {
                claims = try queue.claim(runner: runner)
            } catch {
                if !state.withLock({ $0.unreachable }) { report("the queue could not be read: \(error); trying again every second") }
                state.withLock { $0.unreachable = true }
                await sleepOrBell(.seconds(1))
                continue
            }
            let wasUnreachable = state.withLock { state in
                defer { state.unreachable = false }
                return state.unreachable
            }
            if wasUnreachable { report("the queue is back") }
            guard let claim = claims.first else {
                await sleepOrBell(rescan)
                continue
            }
            guard let job = decode(claim) else { continue }
            state.withLock { _ = $0.claimed.insert(claim.id) }
            let (id, key, claimedAt) = (claim.id, claim.key, ContinuousClock.now)
            return FeedJob(
                job,
                start: { [self] in
                    state.withLock { state in
                        if let asked = state.cancels[key], asked >= claimedAt { return .cancel("cancelled (runner cancel)") }
                        return state.stopping ? .skip : .run
                    }
                },
                ended: { [self] end in await ended(id: id, end) })
        }
        // Stopping: nothing more; what was claimed and not started goes back through `ended`.
        return nil
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
            try? queue.finish(id: claim.id, runner: runner, status: "failed", error: reason, record: record)
            return nil
        }
    }

    private func ended(id: Int64, _ end: FeedJob.End) async {
        state.withLock { _ = $0.claimed.remove(id) }
        switch end {
        case .notStarted:
            do { try queue.release(ids: [id], runner: runner) } catch { report("a claim could not be given back (its lease will end): \(error)") }
        case .recorded(let result, let line):
            // The record is on disk; the database gets it once it answers (retried while it is away).
            var delay = Duration.milliseconds(200)
            for attempt in 1... {
                do {
                    try queue.finish(id: id, runner: runner, status: result.status.rawValue, error: result.error, record: String(decoding: line, as: UTF8.self))
                    if attempt > 1 { report("the queue is back: \(result.key)'s record is stored") }
                    return
                } catch {
                    if attempt == 1 { report("\(result.key): the record could not be stored in the queue (\(error)); retrying") }
                    if attempt >= 60 { return report("\(result.key): the record was not stored in the queue; it is on disk") }
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(5))
                }
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
        while !stopping {
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
                    } else {
                        state.withLock { $0.rung = true }
                    }
                }
            } catch {
                if !lost { report("the queue's notifications stopped (\(error)); reading it every --rescan until they are back") }
                lost = true
                Thread.sleep(forTimeInterval: 1)
                // Listening again on a connection made anew (the statement reconnects).
                if (try? listener.query("LISTEN runner_jobs")) != nil, (try? listener.query("LISTEN runner_cancel")) != nil {
                    report("the queue's notifications are back")
                    lost = false
                }
            }
        }
    }

    private func renew() async {
        while !stopping {
            try? await Task.sleep(for: queue.lease / 3)
            guard !stopping else { break }
            do { try queue.renew(runner: runner) } catch { report("leases could not be renewed: \(error)") }
        }
    }
}

/// One task per key across every runner of a queue: a row per running key in `runner.keys`.
struct QueueKeyLock: KeyLocking {
    let queue: JobQueue
    let runner: String

    func tryLock(key: String) -> (@Sendable () -> Void)? {
        guard case .acquired(let release) = lock(key: key) else { return nil }
        return release
    }

    func lock(key: String) -> KeyLockOutcome {
        do {
            guard try queue.lockKey(key, runner: runner) else { return .heldElsewhere }
        } catch {
            return .unavailable("the queue's key lock could not be taken: \(error)")
        }
        let (queue, runner) = (queue, runner)
        return .acquired(release: { try? queue.unlockKey(key, runner: runner) })
    }
}
