import Foundation
import Synchronization

/// Runs jobs: each admitted (a slot, one task per key), its attempts run under the policy and
/// retried, what the kind returned committed, its record written; then its children.
///
/// ```
/// jobs ─► Admission: slot ─► TaskManager (one per key, else `duplicate`) ─► key lock (spool)
///          ─► previous result (RecordWriter: queue or results/)
///          ─► AttemptLoop: host slot ─► host token (pacer) ─► AttemptPolicy { kind.run(context) ─► commit } ─► retry?
///          ─► ResultAssembly (304 carried forward, stale fallback)
///          ─► [children: slot released ─► window of children, each from the top]
///          ─► RecordWriter (record, run log, observer) ─► key released ─► slot released
/// ```
/// The engine knows no job kind: it calls `KindJob.run(in:)`, commits what it returned, and
/// counts statuses.
public final class JobEngine: Sendable {
    public struct Configuration: Sendable {
        public var store: OutputStore
        public var http: any HTTPFetching
        public var monitor: any ConnectivityMonitoring
        public var clock: any Clock<Duration>
        /// Arms attempt deadlines; by default a sleeping task on `clock`.
        public var deadlines: (any DeadlineScheduling)?
        /// Where children's kinds are found, by name.
        public var registry: KindRegistry
        /// What a child may ask (as for the jobs of job files: a child asking more is `invalid`).
        public var limits: JobLimits
        /// Jobs running at once (children included).
        public var concurrency: Int
        public var backoff: Backoff
        /// Where each finished job is appended, for `runner run` and watch sessions.
        public var runLog: RunLog?
        /// Attempts talking to one host at once (a host's `perHost` in `requests` overrides it).
        public var perHost: Int
        /// Requests per host: the rates that pace them (`--rate`, a host's `rate`) and the
        /// hosts' own `perHost`.
        public var requests: RequestConfig
        /// A lock per key across processes (the spool's), taken once the TaskManager admitted
        /// the key; a key held elsewhere ends `duplicate`.
        public var keyLock: (any KeyLocking)?

        /// The default of `perHost`: polite to one server, while a batch over many hosts still
        /// uses all of `concurrency`.
        public static let defaultPerHost = 8

        public init(
            store: OutputStore, http: any HTTPFetching, monitor: any ConnectivityMonitoring = AlwaysReachable(),
            clock: any Clock<Duration> = ContinuousClock(), deadlines: (any DeadlineScheduling)? = nil,
            registry: KindRegistry = KindRegistry(), limits: JobLimits = .none, concurrency: Int = 8, backoff: Backoff = Backoff(),
            runLog: RunLog? = nil, perHost: Int = defaultPerHost, keyLock: (any KeyLocking)? = nil,
            requests: RequestConfig = RequestConfig()
        ) {
            self.requests = requests
            self.limits = limits
            self.store = store
            self.http = http
            self.monitor = monitor
            self.clock = clock
            self.deadlines = deadlines
            self.registry = registry
            self.concurrency = concurrency
            self.backoff = backoff
            self.runLog = runLog
            self.perHost = perHost
            self.keyLock = keyLock
        }
    }

    public let configuration: Configuration
    public var taskManager: TaskManager { admission.taskManager }
    private let admission: Admission
    private let attempts: AttemptLoop
    private let records: RecordWriter
    private let observer: any RunObserver

    public init(configuration: Configuration, taskManager: TaskManager = TaskManager(), observer: any RunObserver = SilentObserver()) {
        self.configuration = configuration
        self.admission = Admission(
            concurrency: configuration.concurrency, perHost: configuration.perHost, keyLock: configuration.keyLock,
            taskManager: taskManager,
            pacer: HostPacer(requests: configuration.requests, clock: configuration.clock, pauseCap: configuration.backoff.retryAfterCap))
        let policy = AttemptPolicy(
            clock: configuration.clock, monitor: configuration.monitor,
            deadlines: configuration.deadlines ?? ClockDeadlines(clock: configuration.clock))
        self.attempts = AttemptLoop(policy: policy, backoff: configuration.backoff, clock: configuration.clock)
        self.records = RecordWriter(store: configuration.store, runLog: configuration.runLog, observer: observer)
        self.observer = observer
    }

    /// How much `perHost` held jobs back so far (for a run's summary).
    public var hostWaits: HostLimiter.Waits { admission.hostLimiter.waits }

    /// How much pacing (`--rate`, `Retry-After` pauses) held jobs back so far.
    public var paceWaits: HostPacer.Waits { admission.pacer.waits }

    /// The pacer every job of this engine shares.
    public var pacer: HostPacer { admission.pacer }

    // MARK: - Running

    /// Runs every job of `jobs`, pulling the next one only when a slot is free (so a stream of
    /// a million jobs is never all in memory), and returns when all have ended. Cancelling the
    /// calling task stops the feed and cancels the running jobs, which end `cancelled`.
    public func run(_ jobs: some Sequence<JobDescriptor>) async -> RunSummary {
        let summary = Locked(RunSummary())
        await withDiscardingTaskGroup { group in
            for job in jobs {
                let slot: Slot
                do {
                    slot = try await admission.acquireSlot()
                } catch {
                    break
                }
                group.addTask {
                    let result = await self.execute(job, slot: slot, awaitRecord: false)
                    summary.withLock { $0.add(result) }
                }
            }
        }
        await records.flush()
        return summary.value
    }

    /// Runs one job (and its children) and returns its result, once its record is written.
    public func run(_ job: JobDescriptor) async -> JobResult {
        await run(job, awaitRecord: true)
    }

    private func run(_ job: JobDescriptor, awaitRecord: Bool) async -> JobResult {
        let slot: Slot
        do {
            slot = try await admission.acquireSlot()
        } catch {
            let now = Date()
            let result = JobResult(
                key: job.key, kind: job.kindName, url: job.recordURL, status: .cancelled, error: "cancelled before it started",
                startedAt: now, finishedAt: now, parent: job.parent)
            await records.write(result, file: OutputStore.recordFileName(forKey: job.key), wait: awaitRecord)
            return result
        }
        return await execute(job, slot: slot, awaitRecord: awaitRecord)
    }

    /// One job under the TaskManager; `slot` is already held and is released here. With
    /// `awaitRecord`, it returns once the record is written, else once it is queued.
    private func execute(_ job: JobDescriptor, slot: Slot, awaitRecord: Bool) async -> JobResult {
        let startedAt = Date()
        let admitted = await admission.admit(key: job.key) {
            await self.perform(job, slot: slot, startedAt: startedAt, awaitRecord: awaitRecord)
        }
        // The slot is released only now that the TaskManager has let go of the key (and the
        // record is queued): a next job of the same key, which may be waiting for this very slot
        // (--concurrency 1), then runs after this one instead of ending `duplicate`.
        slot.release()
        switch admitted {
        case .ran(let result):
            return result
        case .duplicate(let elsewhere):
            let result = JobResult(
                key: job.key, kind: job.kindName, url: job.recordURL, status: .duplicate,
                error: "a task with the key '\(job.key)' is already running" + (elsewhere ? " in another process" : ""),
                startedAt: startedAt, finishedAt: Date(), parent: job.parent)
            // A duplicate's record goes to the run log and the observer, not to results/: the
            // file there belongs to the task that is running.
            await records.write(result, file: nil, wait: awaitRecord)
            return result
        case .lockUnavailable(let reason):
            // Like a duplicate's, its record is not written to results/: it never held the key.
            let result = JobResult(
                key: job.key, kind: job.kindName, url: job.recordURL, status: .failed, error: reason,
                startedAt: startedAt, finishedAt: Date(), parent: job.parent)
            await records.write(result, file: nil, wait: awaitRecord)
            return result
        }
    }

    private func perform(_ job: JobDescriptor, slot: Slot, startedAt: Date, awaitRecord: Bool) async -> JobResult {
        observer.jobStarted(job)
        let started = ContinuousClock.now
        let recordFile = OutputStore.recordFileName(forKey: job.key)
        let previous = records.previous(file: recordFile)
        let store = configuration.store
        let http = configuration.http
        let report = await attempts.run(
            job, hostSlots: admission.hostSlots(for: job.url.host ?? ""), pacer: admission.pacer, observer: observer,
            makeContext: { JobContext(job: job, store: store, http: http, previous: previous, accept: job.accept) },
            operation: { context in try context.commit(try await job.kind.run(in: context)) })
        var result = ResultAssembly.result(of: job, report: report, previous: previous, startedAt: startedAt)
        if let children = report.committed?.children, !children.isEmpty {
            slot.release()  // the children need slots of their own
            let counts = await runChildren(children, of: job)
            ResultAssembly.addChildren(counts, total: children.count, cancelled: Task.isCancelled, to: &result)
        }
        result.finishedAt = Date()
        result.durationMs = AttemptLoop.milliseconds(started.duration(to: .now))
        // The slot is held until the record is queued (or, when the writer is behind, written),
        // so finished jobs never pile up in memory ahead of their records; `execute` releases it.
        await records.write(result, file: recordFile, wait: awaitRecord)
        return result
    }

    /// Children in flight at once per parent: enough to keep every slot busy, few enough that a
    /// list of a million elements holds only this many jobs.
    private var childWindow: Int { max(16, configuration.concurrency * 2) }

    /// Runs the children through a window, each made when the window takes it, through the same
    /// slots and TaskManager; returns counts by status.
    private func runChildren(_ children: ChildJobs, of parent: JobDescriptor) async -> ChildCounts {
        let inherited = parent.inheritedFields
        let registry = configuration.registry
        let limits = configuration.limits
        return await withTaskGroup(of: JobStatus.self) { group in
            var counts = ChildCounts()
            var running = 0
            for index in 0..<children.count {
                // Cancelled: the children not started yet are not made at all.
                if Task.isCancelled { break }
                if running >= childWindow, let status = await group.next() {
                    running -= 1
                    counts.byStatus[status, default: 0] += 1
                }
                var job: JobDescriptor
                switch children.child(at: index) {
                case .success(let child):
                    do {
                        job = try JobDescriptor.decode(child.fields, defaults: inherited, registry: registry, parent: parent.key, limits: limits)
                        // The parent's headers, still bound to the parent's origin.
                        job.headers = parent.headers
                    } catch {
                        counts.invalid += 1
                        if counts.firstInvalid == nil { counts.firstInvalid = "child \(index + 1): \(error)" }
                        continue
                    }
                case .failure(let invalid):
                    counts.invalid += 1
                    if counts.firstInvalid == nil { counts.firstInvalid = "child \(index + 1): \(invalid)" }
                    continue
                }
                running += 1
                group.addTask { await self.run(job, awaitRecord: false).status }
            }
            for await status in group { counts.byStatus[status, default: 0] += 1 }
            return counts
        }
    }

    /// Returns once every record queued so far is written.
    public func flush() async { await records.flush() }
}

/// Counts of one run, by status, for the exit code and the closing summary.
public struct RunSummary: Sendable {
    /// Top-level jobs by status (children are counted into their parents).
    public var counts: [JobStatus: Int] = [:]
    public var total: Int { counts.values.reduce(0, +) }
    /// Whether every job ended `succeeded` or `notModified`.
    public var allSucceeded: Bool { counts.allSatisfy { $0.key.isSuccess || $0.value == 0 } }
    /// The slowest top-level jobs, slowest first.
    public var slowest: [(key: String, durationMs: Int)] = []

    public init() {}

    public mutating func add(_ result: JobResult) {
        counts[result.status, default: 0] += 1
        slowest.append((result.key, result.durationMs))
        if slowest.count > 10 {
            slowest.sort { $0.durationMs > $1.durationMs }
            slowest.removeLast(slowest.count - 5)
        }
    }

    /// The five slowest, slowest first.
    public var slowestFive: [(key: String, durationMs: Int)] {
        Array(slowest.sorted { $0.durationMs > $1.durationMs }.prefix(5))
    }
}
