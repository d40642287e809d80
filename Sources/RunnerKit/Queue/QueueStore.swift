/// The core of what a queue watcher asks of the database that its fleet shares: claims under a
/// lease, records that end them, claims given back, the watcher listed and alive, and notices.
/// The rest comes as capabilities, each a protocol of its own that a store adopts: key locks
/// (`QueueKeyLocks`), parents (`QueueParents`), a claim's progress (`QueueClaimProgress`), the
/// fleet's housekeeping (`QueueMaintenance`), pacing (`QueuePacing`), the shared output
/// (`QueueSharedOutput`), a file's outcome (`QueueFileOutcomes`), schedules
/// (`ScheduleFiring`) and a live page's calls (`QueueProducing`). `PostgresQueueStore` is the real one (libpq, each call on a thread of
/// its own); `InMemoryQueueStore` keeps the same rules in memory on any clock, for the feed's
/// tests. Both have every capability, and the same contract tests run on both.
package protocol QueueStore: Sendable {
    /// How long a claim holds unless renewed.
    var lease: Duration { get }
    /// The queue as it may be shown (no password).
    var display: String { get }

    /// Takes up to `limit` jobs for `runner`: queued ones, and running ones whose lease ran out
    /// that were claimed fewer than `JobQueue.maxClaims` times, whose key no runner holds
    /// under a live lease, oldest first, each under a new
    /// lease, of `kinds` only (nil: any). The keys of those no runner holds are locked for
    /// `runner` too (`keyLocked`); each claim carries the hosts the fleet holds back (`pauses`).
    func claim(runner: String, limit: Int, kinds: [String]?) async throws(QueueError) -> [QueueClaim]
    /// Lists `watcher` in the fleet, as `status` shows it; `heartbeat` keeps it alive.
    func register(_ watcher: QueueWatcher) async throws(QueueError)
    /// Takes `runner` off the fleet's list (it stopped).
    func unregister(runner: String) async throws(QueueError)
    /// How long until the first lease of a running job that may be claimed again ends (nil: none).
    func nextLeaseEnd() async throws(QueueError) -> Duration?
    /// Stores the records of jobs `runner` finished and ends their claims; lets go of `keys`.
    /// With `durable`, that output is made durable first (one `syncfs`, on the same thread as
    /// the statement): a record is in the queue only once it is on the runner's disk. A job
    /// with children waits for them, its children queued with it. Returns the parents whose
    /// last child ended with these: `runner`'s now, to complete.
    @discardableResult
    func finish(_ jobs: [QueueFinish], runner: String, unlocking keys: [String], durable: OutputStore?) async throws(QueueError) -> [Int64]
    /// Gives claims back at once (not started), for other runners.
    func release(ids: [Int64], runner: String) async throws(QueueError)
    /// Renews the leases of `runner`'s claims and keys, and says it is alive.
    func heartbeat(runner: String) async throws(QueueError)
    /// The notices that came, waiting up to `timeout` for one (listening first if not yet).
    func notifications(waitingUpTo timeout: Duration) async throws(QueueError) -> [QueueNotice]
    /// Closes what the store holds open (its connections and threads).
    func close()
}

extension QueueStore {
    package func claim(runner: String, limit: Int) async throws(QueueError) -> [QueueClaim] {
        try await claim(runner: runner, limit: limit, kinds: nil)
    }

    @discardableResult
    package func finish(_ jobs: [QueueFinish], runner: String, unlocking keys: [String]) async throws(QueueError) -> [Int64] {
        try await finish(jobs, runner: runner, unlocking: keys, durable: nil)
    }
}

extension QueueError {
    /// The output could not be made durable, so no record was stored (no statement was made).
    static func notDurable(_ failure: Durability.Failure) -> QueueError {
        QueueError("the records are not durable on disk: \(failure)", sqlState: notDurableState)
    }

    static let notDurableState = "runner: not durable"

    /// Whether the statement was never made because the output was not durable.
    var isNotDurable: Bool { sqlState == Self.notDurableState }
}
