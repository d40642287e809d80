import Foundation
import Synchronization

/// Runs jobs: each admitted (a slot, one task per key), its attempts run under the policy and
/// retried, what the kind returned committed, its record written; then its children.
///
/// ```
/// jobs ─► Admission: slot ─► TaskManager (one per key, else `duplicate`) ─► key locks (spool, output)
///          ─► previous result (RecordWriter: queue or results/)
///          ─► AttemptLoop: host slot ─► host token (pacer) ─► AttemptPolicy { kind.run(context) ─► commit } ─► retry?
///          ─► ResultAssembly (304 carried forward, stale fallback)
///          ─► [children: slot released ─► window of children, each from the top]
///          ─► RecordWriter (record, run log, observer) ─► key released ─► slot released
/// ```
/// The engine knows no job kind: it calls `DecodedJob.run(in:)`, commits what it returned, and
/// counts statuses. A job runs in one task, which its deadlines cancel (see `JobCancellation`).
public final class JobEngine: Sendable {
    /// The configuration the engine runs with, as prepared: `http`, `store` and `monitor` are the
    /// ones it made when the given configuration had none.
    public let configuration: Configuration
    /// Where payloads and records go (`configuration.store`, or the one made for `out`).
    public let store: OutputStore
    /// The HTTP client every job shares (`configuration.http`, or the one made for the settings).
    public let http: any HTTPFetching
    /// The tasks running now, by key. To cancel a job, use `cancel(key:reason:)`, which also
    /// reaches jobs waiting for a slot.
    package var taskManager: TaskManager { admission.taskManager }
    /// Jobs handed to the engine that wait for a slot, by key: what `cancel(key:reason:)`
    /// reaches before the TaskManager holds them.
    let waiting = WaitingJobs()
    private let admission: Admission
    private let attempts: AttemptLoop
    private let records: RecordWriter
    private let observer: any RunObserver
    /// `--limit-rate`, shared by every transfer of this engine.
    private let bandwidth: BandwidthLimit?
    /// The limits of hosts with a `limitRate` of their own, by host, made on first need.
    private let hostBandwidth = Mutex<[String: BandwidthLimit]>([:])
    /// Whether the engine made its connectivity monitor (none was given), so `shutdown()` closes it.
    let ownsMonitor: Bool

    /// An engine of `configuration`; what it does not give (the HTTP client, the output store)
    /// is made from its settings.
    /// - Throws: one line, when the client cannot be made or the output directory not used.
    public convenience init(configuration: Configuration, observer: any RunObserver = SilentObserver()) throws(Configuration.Problem) {
        try self.init(configuration: configuration, taskManager: TaskManager(), observer: observer)
    }

    /// An engine whose jobs run under `taskManager`, which a feed may share.
    package init(
        configuration given: Configuration, taskManager: TaskManager, observer: any RunObserver = SilentObserver()
    ) throws(Configuration.Problem) {
        let configuration = try given.prepared()
        self.ownsMonitor = given.monitor == nil
        self.configuration = configuration
        self.store = configuration.store!
        self.http = configuration.http!
        self.admission = Admission(
            concurrency: configuration.concurrency, perHost: configuration.perHost,
            keyLocks: [configuration.keyLock, configuration.locksKeysInOutput ? store.keyLock : nil].compactMap { $0 },
            taskManager: taskManager,
            pacer: HostPacer(requests: configuration.requests, clock: configuration.clock, pauseCap: configuration.backoff.retryAfterCap,
                shared: configuration.sharedPacing))
        let policy = AttemptPolicy(
            clock: configuration.clock, monitor: configuration.monitor ?? AlwaysReachable(),
            deadlines: configuration.deadlines ?? ClockDeadlines(clock: configuration.clock))
        self.attempts = AttemptLoop(policy: policy, backoff: configuration.backoff, clock: configuration.clock)
        self.records = RecordWriter(
            store: store, runLog: configuration.runLog, observer: observer,
            knownRecords: configuration.storeHeldAlone ? store.recordFileNames() : nil, claimHeld: configuration.claimHeld)
        self.observer = observer
        // Held alone, the store needs no look on disk for a partial's sidecar a job has not.
        if configuration.storeHeldAlone { store.listsSidecars() }
        self.bandwidth = configuration.limitRate.map { rate in
            BandwidthLimit(rate: rate, shared: Self.sharedBandwidth("", rate: rate, configuration.sharedPacing))
        }
    }

    /// The fleet's share of a bandwidth limit, for the runners of a queue (nil: this one's alone).
    private static func sharedBandwidth(_ name: String, rate: Int, _ pacing: (any SharedPacing)?) -> SharedBandwidth? {
        guard let pacing else { return nil }
        return SharedBandwidth(name: name, rate: rate) { name, bytes, rate in await pacing.reserveBandwidth(name, bytes: bytes, rate: rate) }
    }

    /// The limit a transfer from `host` takes its bytes from: the host's own (`limitRate` in the
    /// config, made once per host and held within `--limit-rate`), else `--limit-rate`'s.
    private func bandwidth(forHost host: String) -> BandwidthLimit? {
        guard !configuration.requests.hosts.isEmpty, let rate = configuration.requests.limitRate(forHost: host) else { return bandwidth }
        return hostBandwidth.withLock { limits in
            if let limit = limits[host] { return limit }
            let limit = BandwidthLimit(rate: rate, within: bandwidth, shared: Self.sharedBandwidth(host, rate: rate, configuration.sharedPacing))
            limits[host] = limit
            return limit
        }
    }

    /// How much `perHost` held jobs back so far (for a run's summary).
    package var hostWaits: HostLimiter.Waits { admission.hostLimiter.waits }
    /// The hosts of the jobs that ran (children's included), lower-cased.
    package var hostsContacted: [String] { admission.hostLimiter.hosts }

    /// How much pacing (`--rate`, `Retry-After` pauses) held jobs back so far.
    package var paceWaits: HostPacer.Waits { admission.pacer.waits }

    /// Concurrency slots free right now.
    package var freeSlots: Int { admission.freeSlots }

    /// The pacer every job of this engine shares.
    package var pacer: HostPacer { admission.pacer }

    /// What one host holds right now: slots in use of its cap, jobs waiting for one, its pace.
    package struct HostActivity: Sendable {
        public var host: String
        public var inUse: Int
        public var limit: Int
        /// Jobs waiting for a slot, and for their turn at a paced host.
        public var waiting: Int
        /// Requests a second, nil when unpaced.
        public var rate: Double?
        /// What is left of a `Retry-After` pause (zero when none).
        public var pausedFor: Duration
    }

    /// Every host jobs have taken a slot of, by name.
    package var hostActivity: [HostActivity] {
        let pacer = admission.pacer
        return admission.hostLimiter.hostLimiters.map { host, limiter in
            HostActivity(
                host: host, inUse: limiter.limit - limiter.available, limit: limiter.limit,
                waiting: limiter.waiting + pacer.waiting(host: host), rate: pacer.rate(forHost: host), pausedFor: pacer.pauseLeft(host: host))
        }.sorted { $0.host < $1.host }
    }

    // MARK: - Running

    /// Runs every job of `jobs`, pulling the next one only when the last has a task (so a
    /// stream of a million jobs is never all in memory), and returns when all have ended.
    /// Cancelling the calling task stops the feed and cancels the running jobs, which end
    /// `cancelled`.
    public func run(_ jobs: some Sequence<JobDescriptor>) async -> RunSummary {
        await run(SequenceFeed(jobs))
    }

    /// Runs every job `feed` hands out, telling it how each ended, until it has no more; returns
    /// once every job has ended and every record is written. Cancelling the calling task stops
    /// taking jobs and cancels the running ones, which end `cancelled`.
    public func run(_ feed: some JobFeed) async -> RunSummary {
        let summary = Locked(RunSummary())
        let continuations = Continuations()
        await continuations.cancelledWithCaller {
            await withDiscardingTaskGroup { group in
                while var entry = await feed.next() {
                    entry.job = configuration.jobDefaults.apply(to: entry.job, limits: configuration.limits)
                    // Cancellable by key from the moment it is reported queued.
                    let ticket = waiting.add(entry.job.key)
                    observer.jobQueued(entry.job)
                    let slot: Slot
                    do {
                        slot = try await admission.acquireSlot()
                    } catch {
                        waiting.remove(ticket)
                        await entry.ended?(.notStarted)
                        break
                    }
                    group.addTask {
                        let end = await self.execute(
                            entry.job, slot: slot, ticket: ticket, start: entry.start, lastRecord: entry.lastRecord,
                            takesChildren: entry.takesChildren, awaitRecord: entry.ended != nil, continuations: continuations)
                        if case .recorded(let result, _) = end { summary.withLock { $0.add(result) } }
                        guard let ended = entry.ended else { return }
                        if Task.isCancelled && !continuations.isCancelled {
                            // A deadline cancelled this task, for good: what the feed does with the
                            // end (store it, run hooks, retry a store that is away) runs in one that
                            // only a cancel of the run reaches, as for a job that never timed out.
                            await continuations.inFreshTask { await ended(end) }
                        } else {
                            await ended(end)
                        }
                    }
                }
            }
        }
        await records.flush()
        await PartialDownload.settle()
        return summary.value
    }

    /// Runs one job (and its children) and returns its result, once its record is written.
    public func run(_ job: JobDescriptor) async -> JobResult {
        let job = configuration.jobDefaults.apply(to: job, limits: configuration.limits)
        let continuations = Continuations()
        return await continuations.cancelledWithCaller {
            // In a task of its own, which a deadline cancels without cancelling the caller.
            await withTaskGroup(of: JobResult.self) { group in
                group.addTask { await self.run(job, awaitRecord: true, continuations: continuations) }
                return await group.next()!
            }
        }
    }

    private func run(_ job: JobDescriptor, awaitRecord: Bool, continuations: Continuations) async -> JobResult {
        let ticket = waiting.add(job.key)
        observer.jobQueued(job)
        let slot: Slot
        do {
            slot = try await admission.acquireSlot()
        } catch {
            let reason = waiting.remove(ticket)
            let file = OutputStore.recordFileName(forKey: job.key)
            let result = JobResult.ended(
                job, .cancelled, error: reason ?? "cancelled before it started", startedAt: Date(), previous: records.previous(file: file))
            await records.write(result, file: file, wait: awaitRecord)
            return result
        }
        guard
            case .recorded(let result, _) = await execute(
                job, slot: slot, ticket: ticket, start: nil, lastRecord: nil, takesChildren: nil, awaitRecord: awaitRecord,
                continuations: continuations)
        else {
            preconditionFailure("a job without a feed is never skipped")
        }
        return result
    }

    /// One job under the TaskManager; `slot` is already held and is released here. `start`, the
    /// feed's, says whether it runs once its key is held. With `awaitRecord`, it returns once
    /// the record is written (and with the record's line), else once it is queued. `lastRecord`:
    /// the key's last record as a shared feed knows it (`FeedJob.lastRecord`). The job runs in
    /// the calling task; `continuations` is its group, whose cancel reaches a fresh task the job
    /// may go on in after a deadline.
    private func execute(
        _ job: JobDescriptor, slot: Slot, ticket: WaitingJobs.Ticket, start: (@Sendable () -> FeedJob.Start)?, lastRecord: JSONValue?,
        takesChildren: (@Sendable (ChildJobs) -> Void)?, awaitRecord: Bool, continuations: Continuations
    ) async -> FeedJob.End {
        let startedAt = Date()
        // Before the key: the feed may leave the job (shutdown). Once the key is held, only a
        // cancel stops it: a request that came meanwhile is seen there or cancels the task.
        if start?() == .skip {
            waiting.remove(ticket)
            slot.release()
            return .notStarted
        }
        let waiting = self.waiting
        let admitted = await admission.admit(key: job.key, continuations: continuations) { cancellation async -> FeedJob.End in
            // The TaskManager holds the key now, so a cancel by key reaches the task from here
            // on; one asked for while the job waited is seen here.
            let cancelledWaiting = waiting.remove(ticket)
            if case .cancel(let reason) = cancelledWaiting.map(FeedJob.Start.cancel) ?? start?() ?? .run {
                // Through the TaskManager like any: never written beside a running task of the key.
                let file = OutputStore.recordFileName(forKey: job.key)
                let result = JobResult.ended(
                    job, .cancelled, error: reason, startedAt: startedAt, previous: self.records.previous(file: file, shared: lastRecord))
                return await self.record(result, file: file, wait: awaitRecord)
            }
            return await self.perform(
                job, slot: slot, startedAt: startedAt, lastRecord: lastRecord, takesChildren: takesChildren, awaitRecord: awaitRecord,
                cancellation: cancellation)
        }
        // The slot is released only now that the TaskManager has let go of the key (and the
        // record is queued): a next job of the same key, which may be waiting for this very slot
        // (--concurrency 1), then runs after this one instead of ending `duplicate`.
        waiting.remove(ticket)
        slot.release()
        switch admitted {
        case .ran(let end):
            return end
        case .duplicate(let elsewhere):
            let result = JobResult.ended(
                job, .duplicate,
                error: "a task with the key '\(job.key)' is already running" + (elsewhere ? " in another process or engine" : ""),
                startedAt: startedAt)
            // A duplicate's record goes to the run log and the observer, not to results/: the
            // file there belongs to the task that is running.
            return await record(result, file: nil, wait: awaitRecord)
        case .lockUnavailable(let reason):
            // Like a duplicate's, its record is not written to results/: it never held the key.
            var result = JobResult.ended(job, .failed, error: reason, startedAt: startedAt)
            result.reason = .storage
            return await record(result, file: nil, wait: awaitRecord)
        }
    }

    /// Queues (with `wait`, writes) a result's record.
    private func record(_ result: JobResult, file: String?, wait: Bool) async -> FeedJob.End {
        .recorded(result, line: await records.write(result, file: file, wait: wait) ?? [])
    }

    private func perform(
        _ job: JobDescriptor, slot: Slot, startedAt: Date, lastRecord: JSONValue?, takesChildren: (@Sendable (ChildJobs) -> Void)?,
        awaitRecord: Bool, cancellation: JobCancellation
    ) async -> FeedJob.End {
        observer.jobStarted(job)
        let started = ContinuousClock.now
        let recordFile = OutputStore.recordFileName(forKey: job.key)
        let previous = records.previous(file: recordFile, shared: lastRecord)
        let store = self.store
        let http = self.http
        let (requests, blocking) = (configuration.requests, configuration.blocking)
        let host = job.url.host ?? ""
        let bandwidth = bandwidth(forHost: host)
        let observer = self.observer
        let report = await attempts.run(
            job, host: host, hostSlots: admission.hostSlots(for: host), pacer: admission.pacer, observer: observer,
            cancellation: cancellation,
            makeContext: {
                JobContext(
                    job: job, store: store, http: http, previous: previous, accept: job.accept, requests: requests, bandwidth: bandwidth,
                    progress: observer, blocking: blocking, log: { line in observer.jobLog(job, line: line) })
            },
            operation: { context in try context.commit(try await job.parameters.run(in: context)) })
        var result = ResultAssembly.result(of: job, report: report, previous: previous, startedAt: startedAt)
        if result.status == .cancelled, let reason = cancellation.reason { result.error = reason }
        if result.status == .cancelled, cancellation.isReleased {
            // Its runner stops (`TaskManager.releaseAll`): not the job's end. No record; the feed
            // hands the job back, and a partial it left is resumed by whoever runs it next.
            return .notStarted
        }
        if let children = report.committed?.children, !children.isEmpty, let takesChildren {
            takesChildren(children)  // a shared queue runs them, for any runner
        } else if let children = report.committed?.children, !children.isEmpty {
            slot.release()  // the children need slots of their own
            let counts: ChildCounts
            if report.deadlineCancelledTask {
                // The deadline came as the parent's attempt ended and cancelled this task: the
                // children run in a fresh one.
                counts = await cancellation.inFreshTask { await self.runChildren(children, of: job) }
            } else {
                counts = await runChildren(children, of: job)
            }
            ResultAssembly.addChildren(
                counts, total: children.count, cancelled: AttemptLoop.isCancelled(report, cancellation), to: &result)
        }
        result.finishedAt = Date()
        result.durationMs = started.duration(to: .now).inMilliseconds
        // The slot is held until the record is queued (or, when the writer is behind, written),
        // so finished jobs never pile up in memory ahead of their records; `execute` releases it.
        return await record(result, file: recordFile, wait: awaitRecord)
    }

    /// Children in flight at once per parent: enough to keep every slot busy, few enough that a
    /// list of a million elements holds only this many jobs.
    private var childWindow: Int { max(16, configuration.concurrency * 2) }

    /// Runs the children through a window, each made when the window takes it, through the same
    /// slots and TaskManager; returns counts by status.
    private func runChildren(_ children: ChildJobs, of parent: JobDescriptor) async -> ChildCounts {
        let registry = configuration.registry
        let limits = configuration.limits
        let continuations = Continuations()
        return await continuations.cancelledWithCaller {
            await withTaskGroup(of: JobResult.self) { group in
                var counts = ChildCounts()
                var running = 0
                for index in 0..<children.count {
                    // Cancelled: the children not started yet are not made at all.
                    if Task.isCancelled { break }
                    if running >= childWindow, let child = await group.next() {
                        running -= 1
                        counts.add(child)
                    }
                    let job: JobDescriptor
                    switch children.job(at: index, of: parent, registry: registry, limits: limits) {
                    case .success(let made):
                        job = made.job
                    case .failure(let unmade):
                        counts.invalid += 1
                        if counts.firstInvalid == nil { counts.firstInvalid = unmade.description }
                        continue
                    }
                    running += 1
                    group.addTask { await self.run(job, awaitRecord: false, continuations: continuations) }
                }
                for await child in group { counts.add(child) }
                return counts
            }
        }
    }

    /// Returns once every record queued so far is written (and every partial download's sidecar).
    /// Writes a parent's record completed with its children's counts (by a queue's runner that
    /// ended the last of them) in place of its key's, through the one writer of records; returns
    /// it as one line of JSON.
    package func write(completed record: JSONValue, key: String) async -> [UInt8] {
        await records.write(completed: record, key: key)
    }

    package func flush() async {
        await records.flush()
        await PartialDownload.settle()
    }
}

/// Counts of one run, by status, for the exit code and the closing summary.
public struct RunSummary: Sendable {
    /// Every job by status, children included.
    public var counts: [JobStatus: Int] = [:]
    /// The top-level jobs (those of the files) by status.
    public var topLevel: [JobStatus: Int] = [:]
    /// Elements of parents' payloads that could not be made into jobs.
    public var invalidChildren = 0
    /// Jobs that failed the run: top-level jobs that did not succeed (nor were not modified),
    /// children that did not succeed other than `notFound` and `duplicate`, and invalid elements.
    public var failures = 0
    /// Every job counted, children included; elements not made into jobs are not
    /// (`invalidChildren`).
    public var total: Int { counts.values.reduce(0, +) }
    /// Whether no job failed the run.
    public var allSucceeded: Bool { failures == 0 }
    /// Whether some top-level job succeeded or was not modified (or there were none).
    package var anyTopLevelSucceeded: Bool { topLevel.isEmpty || topLevel.contains { $0.key.isSuccess && $0.value > 0 } }
    /// The slowest top-level jobs by their own time (`JobResult.ownMs`: without waits for their
    /// host's slot or pace), slowest first.
    package var slowest: [(key: String, ownMs: Int)] = []

    /// A summary of no jobs.
    package init() {}

    /// How many failures a run may have and still exit 0 (`--max-failed N` or `P%` of every job).
    package enum FailureAllowance: Sendable, Equatable {
        case count(Int)
        case percent(Double)

        /// `N` or `P%` (0 to 100); nil when it is neither.
        package init?(_ text: String) {
            if text.hasSuffix("%"), let percent = Double(text.dropLast()), percent.isFinite, (0...100).contains(percent) {
                self = .percent(percent)
            } else if let count = Int(text), count >= 0 {
                self = .count(count)
            } else {
                return nil
            }
        }

        func allows(_ failures: Int, of total: Int) -> Bool {
            switch self {
            case .count(let count): return failures <= count
            case .percent(let percent): return Double(failures) <= Double(total) * percent / 100
            }
        }
    }

    /// The exit code of a run that went through: 0 when no job failed it (or no more than
    /// `allowing`), 4 when no top-level job succeeded (nothing was fetched: a refused token, the
    /// network down), else 1.
    package func exitCode(allowing allowance: FailureAllowance? = nil) -> Int32 {
        if failures == 0 { return 0 }
        if let allowance, allowance.allows(failures, of: total + invalidChildren) { return 0 }
        return anyTopLevelSucceeded ? 1 : 4
    }

    /// Adds a top-level job, and the jobs it started.
    package mutating func add(_ result: JobResult) {
        add(result.status, count: 1)
        add(descendants: result.descendants)
        slowest.append((result.key, result.ownMs))
        if slowest.count > 10 {
            slowest.sort { $0.ownMs > $1.ownMs }
            slowest.removeLast(slowest.count - 5)
        }
    }

    /// Adds `count` top-level jobs that ended `status`: each fails the run unless it succeeded
    /// or was not modified.
    package mutating func add(_ status: JobStatus, count: Int) {
        guard count > 0 else { return }
        counts[status, default: 0] += count
        topLevel[status, default: 0] += count
        if !status.isSuccess { failures += count }
    }

    /// Adds jobs that top-level jobs started, judged as children: `notFound` and `duplicate`
    /// are answers, not failures; elements not made into jobs are counted, not failures.
    package mutating func add(descendants: JobResult.Descendants) {
        for (status, count) in descendants.byStatus { counts[status, default: 0] += count }
        invalidChildren += descendants.invalid
        failures += descendants.failures
    }

    /// `4 jobs: 3 succeeded, 1 notFound`: every job by status, and the elements not made into jobs.
    package var countsText: String {
        let parts = JobStatus.allCases.compactMap { status in counts[status].map { "\($0) \(status.rawValue)" } }
            + (invalidChildren > 0 ? ["\(invalidChildren) not made into jobs"] : [])
        return "\(total) job\(total == 1 ? "" : "s"): \(parts.joined(separator: ", "))"
    }

    /// The five slowest, slowest first.
    package var slowestFive: [(key: String, ownMs: Int)] {
        Array(slowest.sorted { $0.ownMs > $1.ownMs }.prefix(5))
    }
}
