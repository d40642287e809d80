/// What a queue watcher asks of the database that its fleet shares: claims under a lease,
/// records, heartbeats, key locks, the fleet's pacing, and notices. `PostgresQueueStore` is the
/// real one (libpq, each call on a thread of its own); `InMemoryQueueStore` keeps the same rules
/// in memory on any clock, for the feed's tests. The same contract tests run on both.
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
    /// The parent `id` whose children all ended, if `runner` is to complete it.
    func parentToComplete(id: Int64, runner: String) async throws(QueueError) -> QueueParentToComplete?
    /// Stores a parent's completed record (`finish.id` the parent's); returns the parents whose
    /// last child that was.
    func completeParent(_ finish: QueueFinish, runner: String) async throws(QueueError) -> [Int64]
    /// Ends the jobs whose records were stored with their hooks pending (`QueueFinish.hooksPending`),
    /// once their hooks ran.
    func hooksEnded(ids: [Int64], runner: String) async throws(QueueError)
    /// Gives claims back at once (not started), for other runners.
    func release(ids: [Int64], runner: String) async throws(QueueError)
    /// Renews the leases of `runner`'s claims and keys, and says it is alive.
    func heartbeat(runner: String) async throws(QueueError)
    /// Ends `failed` the jobs abandoned `JobQueue.maxClaims` times; returns how many.
    func failAbandoned() async throws(QueueError) -> QueueAbandoned
    /// Credits the running jobs `ids` of `runner`: their claim made durable progress, so it is
    /// not counted as an abandon (once per claim).
    func credit(ids: [Int64], runner: String) async throws(QueueError)
    /// Removes finished jobs older than `age`; returns how many.
    func prune(olderThan age: Duration) async throws(QueueError) -> Int
    /// Takes `key` for `runner` unless another runner holds it under a live lease.
    func lockKey(_ key: String, runner: String) async throws(QueueError) -> Bool
    /// Lets go of `runner`'s `keys`.
    func unlockKeys(_ keys: [String], runner: String) async throws(QueueError)
    /// Takes `host`'s next request slot for the fleet, `interval` after the one before and not
    /// before its pause ends; returns how long from now until it.
    func reservePace(host: String, interval: Duration) async throws(QueueError) -> Duration
    /// How the jobs of job `id`'s submitted file (in its batch, children included) ended, by
    /// status, once none is left to run; nil while some are.
    func fileOutcome(of id: Int64) async throws(QueueError) -> [String: Int]?
    /// Reserves `bytes` of the fleet's bandwidth `name` (`""`: all transfers, else a host) at
    /// `rate` bytes a second, after the bytes reserved before; returns how long from now until
    /// the end of their slot.
    func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async throws(QueueError) -> Duration
    /// Holds `host` back for every runner for `duration` (never shortening a pause), and tells them.
    func pause(host: String, for duration: Duration, from runner: String) async throws(QueueError)
    /// The queue's id, and the output folder its first watcher stamped (nil until one did).
    func identity() async throws(QueueError) -> QueueIdentity
    /// Records `folder` (the id in an output folder's stamp, seen at `path` by `runner`) as
    /// the queue's output unless one is recorded already; returns the identity after.
    func recordOutput(folder: String, path: String, runner: String) async throws(QueueError) -> QueueIdentity
    /// The key's last record as the fleet keeps it (nil: none yet).
    func keyRecord(_ key: String) async throws(QueueError) -> String?
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
