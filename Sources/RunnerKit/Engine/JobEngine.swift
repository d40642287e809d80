import Dispatch
import Foundation
import Synchronization

/// Runs jobs: bounded concurrency, one task per key, the wait-then-deadline policy around each
/// attempt, retries, child jobs, and a record per job written atomically.
///
/// ```
/// jobs ─► slot (SlotLimiter) ─► TaskManager (one per key, else `duplicate`)
///          ─► attempts: AttemptPolicy { kind.run(context) } ─► retry on transient failure
///          ─► [children: slot released ─► each: slot ─► TaskManager ─► …] ─► record queued
///          ─► key released ─► slot released
/// ```
/// The engine knows no job kind: it calls `JobKind.run(in:)` and counts statuses.
public final class JobEngine: Sendable {
    public struct Configuration: Sendable {
        public var store: OutputStore
        public var http: any HTTPFetching
        public var monitor: any ConnectivityMonitoring
        public var clock: any Clock<Duration>
        /// Jobs running at once (children included).
        public var concurrency: Int
        public var backoff: Backoff
        /// Where each finished job is appended, for `runner run` and watch sessions.
        public var runLog: RunLog?
        /// Attempts talking to one host at once.
        public var perHost: Int
        /// A lock per key across processes (the spool's), taken once the TaskManager admitted
        /// the key; a key held elsewhere ends `duplicate`.
        public var keyLock: (any KeyLocking)?

        /// The default of `perHost`: polite to one server, while a batch over many hosts still
        /// uses all of `concurrency`.
        public static let defaultPerHost = 8

        public init(
            store: OutputStore, http: any HTTPFetching, monitor: any ConnectivityMonitoring = AlwaysReachable(),
            clock: any Clock<Duration> = ContinuousClock(), concurrency: Int = 8, backoff: Backoff = Backoff(),
            runLog: RunLog? = nil, perHost: Int = defaultPerHost, keyLock: (any KeyLocking)? = nil
        ) {
            self.perHost = perHost
            self.store = store
            self.http = http
            self.monitor = monitor
            self.clock = clock
            self.concurrency = concurrency
            self.backoff = backoff
            self.runLog = runLog
            self.keyLock = keyLock
        }
    }

    public let configuration: Configuration
    public let taskManager: TaskManager
    private let limiter: SlotLimiter
    private let hosts: HostLimiter
    private let policy: AttemptPolicy
    private let observer: any RunObserver
    private let writer = DispatchQueue(label: "runner.engine.records")
    /// Finished jobs handed to the writer and not yet written, in order; the writer takes them
    /// all at once (`drainRecords`).
    private let recordQueue = Mutex<[QueuedRecord]>([])
    private let pendingRecords = Atomic<Int>(0)

    public init(configuration: Configuration, taskManager: TaskManager = TaskManager(), observer: any RunObserver = SilentObserver()) {
        self.configuration = configuration
        self.taskManager = taskManager
        self.limiter = SlotLimiter(limit: max(1, configuration.concurrency))
        self.hosts = HostLimiter(limit: max(1, configuration.perHost))
        self.policy = AttemptPolicy(clock: configuration.clock, monitor: configuration.monitor)
        self.observer = observer
    }

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
                    slot = try await acquireSlot()
                } catch {
                    break
                }
                group.addTask {
                    let result = await self.execute(job, slot: slot, awaitRecord: false)
                    summary.withLock { $0.add(result) }
                }
            }
        }
        await flushRecords()
        return summary.value
    }

    /// Runs one job (and its children) and returns its result, once its record is written.
    public func run(_ job: JobDescriptor) async -> JobResult {
        await run(job, awaitRecord: true)
    }

    private func run(_ job: JobDescriptor, awaitRecord: Bool) async -> JobResult {
        do {
            return await execute(job, slot: try await acquireSlot(), awaitRecord: awaitRecord)
        } catch {
            let now = Date()
            let result = JobResult(key: job.key, kind: job.kindName, status: .cancelled, error: "cancelled before it started", startedAt: now, finishedAt: now, parent: job.parent)
            return await finish(result, record: true, wait: awaitRecord)
        }
    }

    private func acquireSlot() async throws -> Slot {
        try await limiter.acquire()
        return Slot(limiter)
    }

    /// One job under the TaskManager; `slot` is already held and is released here. With
    /// `awaitRecord`, it returns once the record is written, else once it is queued.
    private func execute(_ job: JobDescriptor, slot: Slot, awaitRecord: Bool) async -> JobResult {
        let startedAt = Date()
        let keyLock = configuration.keyLock
        let admitted = await taskManager.run(key: job.key) { () async -> JobResult? in
            var release: (@Sendable () -> Void)?
            if let keyLock {
                // [spool #15] a lock that cannot be taken is never "no lock": the job fails, saying why.
                switch keyLock.lock(key: job.key) {
                case .acquired(let held): release = held
                case .heldElsewhere: return nil
                case .unavailable(let reason):
                    let result = JobResult(key: job.key, kind: job.kindName, status: .failed, error: reason, startedAt: startedAt, finishedAt: Date(), parent: job.parent)
                    return await self.finish(result, record: false, wait: awaitRecord)
                }
            }
            defer { release?() }
            return await self.perform(job, slot: slot, startedAt: startedAt, awaitRecord: awaitRecord)
        }
        // The slot is released only now that the TaskManager has let go of the key (and the
        // record is queued): a next job of the same key, which may be waiting for this very slot
        // (--concurrency 1), then runs after this one instead of ending `duplicate`.
        slot.release()
        if let result = admitted ?? nil {
            return result
        }
        let elsewhere = admitted != nil
        let result = JobResult(
            key: job.key, kind: job.kindName, status: .duplicate,
            error: "a task with the key '\(job.key)' is already running" + (elsewhere ? " in another process" : ""),
            startedAt: startedAt, finishedAt: Date(), parent: job.parent)
        // A duplicate's record goes to the run log and the observer, not to results/: the file
        // there belongs to the task that is running.
        return await finish(result, record: false, wait: awaitRecord)
    }

    private func perform(_ job: JobDescriptor, slot: Slot, startedAt: Date, awaitRecord: Bool) async -> JobResult {
        observer.jobStarted(job)
        let started = ContinuousClock.now
        var attempts = 0
        var waited = Duration.zero
        var outcome: JobOutcome?
        var failure: JobFailure?
        var validators: Validators?
        let recordFile = OutputStore.recordFileName(forKey: job.key)
        let previous = lastGoodRecord(file: recordFile)
        let host = job.url.host ?? ""
        let observer = self.observer
        let store = configuration.store
        let http = configuration.http

        let hostSlots = hosts.limiter(for: host)
        while true {
            attempts += 1
            do {
                try await hostSlots.acquire()
            } catch {
                failure = JobFailure(.cancelled, "cancelled")
                break
            }
            let context = JobContext(job: job, store: store, http: http, previous: previous)
            let report = await policy.attempt(
                host: host, timeout: job.timeout, noticeAfter: job.noticeAfter,
                onNotice: { observer.jobNotice(job, message: "no network connection") }
            ) {
                try await job.kind.run(in: context)
            }
            hostSlots.release()
            context.discardLeftovers()
            validators = context.validators
            waited += report.waitedForNetwork
            switch report.outcome {
            case .completed(.success(let value)):
                outcome = value
                failure = nil
            case .completed(.failure(let error)):
                failure = Self.classify(error)
            case .offline:
                failure = JobFailure(.offline, "no network connection to \(host) within the deadline of \(Self.seconds(job.timeout))", isTransient: true)
            case .timedOut:
                failure = JobFailure(.timedOut, "the fetch did not finish within the deadline of \(Self.seconds(job.timeout))", isTransient: true)
            case .cancelled:
                failure = JobFailure(.cancelled, "cancelled")
            }
            guard let current = failure, current.isTransient, attempts <= job.retries, !Task.isCancelled else { break }
            let delay = configuration.backoff.delay(afterAttempt: attempts, retryAfter: current.retryAfter)
            do {
                try await configuration.clock.sleep(for: delay, tolerance: nil)
            } catch {
                failure = JobFailure(.cancelled, "cancelled")
                break
            }
        }

        var result = JobResult(
            key: job.key, kind: job.kindName, status: .failed, attempts: attempts,
            waitedForNetworkMs: Self.milliseconds(waited), startedAt: startedAt, finishedAt: startedAt, parent: job.parent)
        if let outcome {
            result.status = outcome.status
            result.output = outcome.output
            result.error = outcome.error
            result.httpStatus = outcome.httpStatus
            result.bytes = outcome.bytes
            result.sha256 = outcome.sha256
            result.details = outcome.details
            result.validators = validators
            if outcome.status == .notModified, let previous { carryForward(previous, into: &result) }
            if !outcome.children.isEmpty {
                slot.release()  // the children need slots of their own
                let counts = await runChildren(outcome.children)
                result.details.append(("children", .object(JobStatus.allCases.compactMap { status in
                    counts[status].map { (status.rawValue, JSONValue($0)) }
                })))
                let bad = counts.filter { !$0.key.isAcceptableForChild }.values.reduce(0, +)
                if Task.isCancelled, counts[.cancelled, default: 0] > 0 {
                    // [spool #15] the parent's task was cancelled: it ends cancelled, not failed.
                    result.status = .cancelled
                    result.error = "cancelled while its children ran (\(counts[.cancelled, default: 0]) of \(outcome.children.count) cancelled)"
                } else if bad > 0, result.status.isSuccess {
                    result.status = .failed
                    result.error = "\(bad) of \(outcome.children.count) child jobs did not succeed"
                }
            }
        } else if let failure {
            result.status = failure.status
            result.error = failure.message
            result.httpStatus = failure.httpStatus
            if failure.status == .notModified {
                if let previous {
                    carryForward(previous, into: &result)
                    result.error = nil
                    result.validators = validators ?? Validators(record: previous)
                } else {
                    result.status = .failed
                    result.error = "the server said 304 Not Modified, but there is no earlier payload of this key"
                }
            }
        }
        result.finishedAt = Date()
        result.durationMs = Self.milliseconds(started.duration(to: .now))
        // The slot is held until the record is queued (or, when the writer is behind, written),
        // so finished jobs never pile up in memory ahead of their records; `execute` releases it.
        return await finish(result, record: true, wait: awaitRecord, recordFile: recordFile)
    }

    /// Runs child jobs through the same slots and TaskManager; returns counts by status.
    private func runChildren(_ children: [JobDescriptor]) async -> [JobStatus: Int] {
        await withTaskGroup(of: JobStatus.self) { group in
            for child in children {
                group.addTask { await self.run(child, awaitRecord: false).status }
            }
            var counts: [JobStatus: Int] = [:]
            for await status in group { counts[status, default: 0] += 1 }
            return counts
        }
    }

    /// The key's last record, if it holds a good payload that is still on disk.
    private func lastGoodRecord(file: String) -> JSONValue? {
        let store = configuration.store
        guard let record = store.readRecord(fileName: file), let output = record["output"]?.stringValue,
            record["status"]?.stringValue.flatMap(JobStatus.init(rawValue:))?.isSuccess == true || record["stale"] == .bool(true),
            (try? JobDescriptor.validateOutput(output)) != nil,
            // [spool #15] only a payload of the record's size counts (a power loss can empty it)
            store.holdsPayload(output, bytes: record["bytes"]?.intValue)
        else { return nil }
        return record
    }

    private func lastGoodOutput(file: String) -> String? {
        lastGoodRecord(file: file)?["output"]?.stringValue
    }

    /// A 304 keeps the earlier payload: its path, size, hash and details stand.
    private func carryForward(_ previous: JSONValue, into result: inout JobResult) {
        result.output = previous["output"]?.stringValue
        result.bytes = previous["bytes"]?.intValue
        result.sha256 = previous["sha256"]?.stringValue
        result.httpStatus = 304
        var details = previous["details"]?.objectValue?.filter { $0.key != "children" } ?? []
        for (key, value) in result.details where !details.contains(where: { $0.key == key }) { details.append((key, value)) }
        result.details = details
        if result.validators == nil { result.validators = Validators(record: previous) }
    }

    /// Hands a result to the record writer, which completes it (the stale fallback), writes its
    /// record and run-log line and tells the observer. With `wait`, or when more than
    /// `recordBacklog` records are queued, it returns the completed result once it is written;
    /// else it returns at once, with the result as it came (its status is final either way).
    ///
    /// File I/O stays off the concurrency pool (a burst of finishing jobs cannot hold up the
    /// deadlines of others); one writer serializes the records, so the stale fallback sees every
    /// earlier record of the key (and two threads never contend for an ext4 folder's lock); and a
    /// job does not wait for the writer's turn unless the writer is behind (a hop there and back
    /// costs more than the write itself).
    private func finish(_ result: JobResult, record: Bool, wait: Bool, recordFile: String? = nil) async -> JobResult {
        let recordFile = record ? recordFile ?? OutputStore.recordFileName(forKey: result.key) : nil
        let queued = pendingRecords.add(1, ordering: .relaxed).newValue
        if wait || queued > Self.recordBacklog {
            return await withCheckedContinuation { (continuation: CheckedContinuation<JobResult, Never>) in
                enqueueRecord(QueuedRecord(result: result, file: recordFile, written: { continuation.resume(returning: $0) }))
            }
        }
        enqueueRecord(QueuedRecord(result: result, file: recordFile, written: nil))
        return result
    }

    /// Records queued and not yet written, past which a finishing job waits for its own.
    static let recordBacklog = 256

    /// A finished job on its way to the writer; `file` is its record's file name, or nil for the
    /// run log only.
    private struct QueuedRecord: Sendable {
        var result: JobResult
        var file: String?
        var written: (@Sendable (JobResult) -> Void)?
    }

    /// Queues a record; the writer is sent for only when the queue was empty, as a drain that
    /// is already on its way takes this record too.
    private func enqueueRecord(_ record: QueuedRecord) {
        let wasEmpty = recordQueue.withLock { queue in
            queue.append(record)
            return queue.count == 1
        }
        if wasEmpty { writer.async { self.drainRecords() } }
    }

    /// On the writer queue: writes every queued record, in order, then their run-log lines in
    /// one write. When the writer keeps up that is one record per drain; when it is behind (a
    /// slow disk), a drain takes many, and the run log costs one write for all of them.
    private func drainRecords() {
        var batch = recordQueue.withLock { queue in
            defer { queue.removeAll(keepingCapacity: true) }
            return queue
        }
        guard !batch.isEmpty else { return }
        var lines: [JSONValue] = []
        lines.reserveCapacity(batch.count)
        for index in batch.indices {
            let json: JSONValue
            (batch[index].result, json) = write(batch[index].result, record: batch[index].file)
            lines.append(json)
        }
        configuration.runLog?.append(records: lines)
        for item in batch {
            observer.jobFinished(item.result)
            pendingRecords.subtract(1, ordering: .relaxed)
            item.written?(item.result)
        }
    }

    /// Completes a result (the stale fallback) and writes its record, when it has one; returns
    /// the result and its JSON.
    private func write(_ result: JobResult, record: String?) -> (JobResult, JSONValue) {
        var result = result
        if let record, result.status.allowsStaleFallback, let previous = lastGoodOutput(file: record) {
            result.output = previous
            result.stale = true
        }
        let json = result.json
        if let record {
            do {
                try configuration.store.writeRecord(json, fileName: record)
            } catch {
                observer.problem("\(result.key): the result record could not be written: \(error)")
            }
        }
        return (result, json)
    }

    /// Returns once every record queued so far is written.
    private func flushRecords() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            writer.async { continuation.resume() }
        }
    }

    // MARK: - Helpers

    static func classify(_ error: any Error) -> JobFailure {
        switch JobContext.failure(for: error) {
        case let failure as JobFailure: return failure
        case is CancellationError: return JobFailure(.cancelled, "cancelled")
        default: return JobFailure(.failed, String(describing: error))
        }
    }

    static func milliseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }

    static func seconds(_ duration: Duration) -> String {
        let ms = milliseconds(duration)
        return ms % 1000 == 0 ? "\(ms / 1000) s" : String(format: "%.1f s", Double(ms) / 1000)
    }
}

/// A held concurrency slot, released exactly once.
final class Slot: Sendable {
    private let limiter: SlotLimiter
    private let released = Atomic<Bool>(false)

    init(_ limiter: SlotLimiter) { self.limiter = limiter }

    func release() {
        if !released.exchange(true, ordering: .acquiringAndReleasing) { limiter.release() }
    }

    deinit { release() }
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

    mutating func add(_ result: JobResult) {
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
