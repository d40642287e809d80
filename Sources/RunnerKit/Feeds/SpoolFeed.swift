import Foundation
import Glibc
import Synchronization

// The spool as a feed of the one engine:
//
//   inotify (inbox/, cancel/) ─┐
//   rescan every few seconds ──┼─► wakes ─► main loop ─► claim: rename inbox/X → active/<me>/X
//   a file ended, shutdown ────┘               │              └─► check and validate X: junk → failed/X
//                                              │                                    valid → ready
//                                              └─► cancel/<key>: cancel the running task
//
//   engine ─► next(): a job of a ready file (round robin over them) ─► slots, key, attempts, record
//            ─► ended: its record line beside X; the file's last job ─► done/X, failed/X, inbox/X
//
//        done/X + X.results.jsonl  ◄── every job succeeded or notModified
//        failed/X + X.error.txt    ◄── junk, invalid, or some job did not
//        inbox/X                   ◄── shutdown came before it was through
//
// One main loop owns the decisions (what to claim, when to stop); the engine takes jobs as it
// has slots, and what ends a file runs in the task of its last job. Every timer (rescan, settle,
// heartbeat, grace) sleeps on the engine's clock, so a test clock drives all of it.

/// Takes job files from a spool's inbox/ as they arrive and hands their jobs to one engine.
package final class SpoolFeed: JobFeed {
    package struct Configuration: Sendable {
        package var spool: Spool
        /// The engine every job runs on (its registry, limits, concurrency and clock are the
        /// feed's too); the feed adds the spool's key lock.
        package var engine: JobEngine.Configuration
        /// Files claimed at once; nil: the engine's concurrency. What is not claimed stays in
        /// inbox/ for other watchers.
        package var filesAtOnce: Int?
        /// How often inbox/ and cancel/ are read in full, besides inotify.
        package var rescanInterval: Duration = .seconds(2)
        /// Largest JSON document taken (JSON Lines stream, so any size).
        package var maxDocumentBytes = 16 << 20
        /// How long a cancel request stands (it cancels jobs of files written before it).
        package var cancelRequestLifetime: Duration = .seconds(3600)
        /// How long a file that did not arrive by rename must stay unchanged, with no writer,
        /// before it is taken (`SettleCheck`).
        package var settle: Duration = .seconds(1)
        /// On shutdown, how long running jobs may go on before they are cancelled.
        package var grace: Duration = .seconds(10)
        /// How often the main loop reports `.heartbeat` (for a service manager's watchdog and
        /// status line); nil for never.
        package var heartbeatInterval: Duration?
        /// Makes each move to done/, failed/ or back to inbox/ durable, and a file's payloads and
        /// records before it reaches done/ (off only for tests of what is not durable).
        package var durable = true
        /// Watches inbox/ and cancel/ with inotify; off (or where inotify cannot be used), they
        /// are read every `rescanInterval`, at most 250 ms apart.
        package var inotify = true
        /// Awaited once a file's jobs ended and its records are durable, before it moves to
        /// done/ or failed/ (`--on-finish`: the hooks of every job finished so far), so a crash
        /// before then runs the file, and its hooks, again.
        package var beforeMove: (@Sendable () async -> Void)?
        /// Hears the record of each job that had ended under a watcher that died before its file
        /// was through (the file runs again, that job not): `--on-finish` runs its hooks with it.
        package var replayed: (@Sendable ([UInt8]) -> Void)?

        package init(spool: Spool, engine: JobEngine.Configuration) {
            self.spool = spool
            self.engine = engine
        }

        /// The preset of `runner watch`: the spool's defaults around the engine's `run` preset.
        package static func watch(spool: Spool, registry: KindRegistry) -> Configuration {
            Configuration(spool: spool, engine: .run(registry: registry))
        }

        var claimLimit: Int { max(1, filesAtOnce ?? engine.concurrency) }
    }

    /// What happened to a file, for the log.
    package struct FileReport: Sendable {
        package enum Outcome: String, Sendable {
            /// Every job ended succeeded or notModified: in done/.
            case done
            /// Junk, invalid, or some job ended otherwise: in failed/ with the reason beside it.
            case failed
            /// Shutdown came before it was through: back in inbox/.
            case returned
        }

        package var name: String
        /// Its name in done/, failed/ or inbox/ (another when the name was taken).
        package var finalName: String
        package var outcome: Outcome
        package var counts: [JobStatus: Int]
        /// For failed files: the first lines of the reason.
        package var reason: String?
        /// From the file's arrival in inbox/ (its last status change) to the start of its first job.
        package var startLatency: Duration?
    }

    /// What the watcher holds now, for a status line.
    package struct Counts: Sendable {
        /// Files seen in inbox/ and not yet claimed (those still being written included).
        package var queued: Int
        /// Files in inbox/ not yet taken because they are still being written or settling.
        package var settling: Int
        /// Files claimed and not through.
        package var active: Int
        /// Jobs running now.
        package var running: Int
        /// Files moved to done/ and failed/ by this watcher.
        package var done: Int
        package var failed: Int
    }

    /// What happens to the feed: `ready` once the first scan of inbox/ is through.
    package typealias Event = WatchEvent

    private enum Wake: Sendable {
        case arrived(String, renamed: Bool)
        case cancel(String)
        case rescan
        case settleTick
        case heartbeat
        case fileEnded(String)
        case shutdown(Duration)
        case graceOver
    }

    /// A file seen still settling: as it was, and since when (on the feed's timeline).
    private struct Settling {
        var signature: SettleCheck.Signature?
        var since: Duration
    }

    private struct State {
        var pending: [String] = []
        var pendingSet: Set<String> = []
        /// Files claimed and not through (being checked, ready, or with jobs running).
        var claimed: Set<String> = []
        /// Claimed files with jobs still to hand out, in the order the engine takes from them.
        var ready: [SpoolFile] = []
        /// The engine, waiting in `next()` for a ready file.
        var waiter: CheckedContinuation<Void, Never>?
        /// Cancel requests by key file name: when each was made (seconds since 1970).
        var cancelRequests: [String: Double] = [:]
        var draining = false
        var hardStop = false
        /// Names that arrived by rename and are not claimed yet: complete, taken at once.
        var renamed: Set<String> = []
        /// Names not taken because they are still being written or settling; checked again
        /// every settle tick.
        var settling: [String: Settling] = [:]
        var filesDone = 0
        var filesFailed = 0
        /// Files recovery took from dead watchers into this one's folder, with the records of
        /// their jobs that ended there; opened as claimed at the next claim.
        var adopted: [String] = []
    }

    package let configuration: Configuration
    /// The engine every job runs on; its TaskManager cancels by key.
    package let engine: JobEngine
    private let state = Mutex(State())
    private let timeline: any Timeline
    private let wakes: AsyncStream<Wake>
    private let wake: AsyncStream<Wake>.Continuation
    let onEvent: @Sendable (Event) -> Void

    /// `observer` hears every job, as with `JobEngine`; `onEvent` hears what happens to files.
    /// - Throws: one line, when the engine cannot be made (`JobEngine.init`).
    package init(
        configuration: Configuration, taskManager: TaskManager = TaskManager(), observer: any RunObserver = SilentObserver(),
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) throws(JobEngine.Configuration.Problem) {
        var engineConfiguration = configuration.engine
        engineConfiguration.keyLock = SpoolKeyLock(spool: configuration.spool)
        self.configuration = configuration
        self.engine = try JobEngine(configuration: engineConfiguration, taskManager: taskManager, observer: observer)
        self.timeline = makeTimeline(configuration.engine.clock)
        self.onEvent = onEvent
        (wakes, wake) = AsyncStream.makeStream(of: Wake.self, bufferingPolicy: .unbounded)
    }

    /// Begins a shutdown: claim nothing more, let running jobs end for `grace` (the
    /// configuration's by default), then cancel them; files not through go back to inbox/.
    /// `run()` returns when it is done. Safe from any thread.
    package func shutdown(grace: Duration? = nil) {
        wake.yield(.shutdown(grace ?? configuration.grace))
    }

    // MARK: - The main loop

    /// Recovers what dead watchers left in active/, then runs the engine on this feed until
    /// `shutdown`.
    package func run() async throws(Spool.Error) {
        let spool = configuration.spool
        let clock = configuration.engine.clock
        try spool.makeFolders()
        let startedAt = FileSystem.seconds(FileSystem.now())
        let lease = try WatcherLease(spool: spool)
        defer { lease.end() }
        let recovered = recover(lease: lease)
        // Temporary files that crashed producers and runners left behind (and every few minutes
        // after, for a crash that came less than a minute before this start).
        sweepSpool()
        onEvent(.started(watcher: lease.id, recovered: recovered.returned + recovered.adopted))

        let events = configuration.inotify ? FolderEvents(folders: [spool.inbox, spool.cancel]) : nil
        if configuration.inotify, events == nil { onEvent(.problem("inotify is not available; polling \(spool.inbox) every 250 ms")) }
        defer { events?.stop() }
        // Requests standing from before this start apply to the jobs of older files, silently:
        // each was said when it was made.
        rescan(quietBefore: startedAt)

        await withDiscardingTaskGroup { group in
            let wake = self.wake
            if let events {
                group.addTask {
                    for await event in events.events {
                        switch event {
                        case .arrived(let folder, let name, _) where folder == spool.cancel: wake.yield(.cancel(name))
                        case .arrived(_, let name, let renamed): wake.yield(.arrived(name, renamed: renamed))
                        case .overflow: wake.yield(.rescan)
                        }
                    }
                }
            }
            let interval = events == nil ? min(configuration.rescanInterval, .milliseconds(250)) : configuration.rescanInterval
            group.addTask {
                while (try? await clock.sleep(for: interval)) != nil { wake.yield(.rescan) }
            }
            // Files still being written are looked at again a few times per settle period.
            let tick = max(.milliseconds(20), min(.milliseconds(250), configuration.settle / 4))
            group.addTask {
                while (try? await clock.sleep(for: tick)) != nil {
                    if self.state.withLock({ !$0.settling.isEmpty }) { wake.yield(.settleTick) }
                }
            }
            if let heartbeat = configuration.heartbeatInterval {
                group.addTask {
                    while (try? await clock.sleep(for: heartbeat)) != nil { wake.yield(.heartbeat) }
                }
            }
            group.addTask {
                _ = await self.engine.run(self)
            }

            var lastSweep = timeline.now
            claim(lease: lease, group: &group)
            onEvent(.ready(.spool(counts)))
            for await next in wakes {
                switch next {
                case .arrived(let name, let renamed):
                    state.withLock { state in
                        if renamed { state.renamed.insert(name) }
                        if state.pendingSet.insert(name).inserted { state.pending.append(name) }
                    }
                case .settleTick:
                    state.withLock { state in
                        for name in state.settling.keys.sorted() where state.pendingSet.insert(name).inserted { state.pending.append(name) }
                    }
                case .heartbeat:
                    onEvent(.heartbeat(.spool(counts)))
                case .cancel(let name):
                    handleCancelRequest(name)
                case .rescan:
                    _ = recover(lease: lease)
                    rescan()
                    if timeline.now - lastSweep > .seconds(300) {
                        lastSweep = timeline.now
                        sweepSpool()
                    }
                case .fileEnded:
                    break
                case .shutdown(let grace):
                    if beginDraining() {
                        group.addTask {
                            try? await clock.sleep(for: grace)
                            wake.yield(.graceOver)
                        }
                    }
                case .graceOver:
                    state.withLock { $0.hardStop = true }
                    engine.taskManager.cancelAll()
                    group.cancelAll()
                }
                let (draining, busy) = state.withLock { ($0.draining, !$0.claimed.isEmpty) }
                if draining {
                    if !busy { break }
                } else {
                    claim(lease: lease, group: &group)
                }
            }
            group.cancelAll()
        }
    }

    /// Stops handing out jobs: the engine's `next()` ends; a ready file with jobs left goes back
    /// to inbox/ once its running jobs end (at once when none runs), one whose jobs were all
    /// taken goes on to done/ or failed/. Returns whether this was the first call.
    private func beginDraining() -> Bool {
        let (first, ready, waiter) = state.withLock { state in
            defer {
                state.draining = true
                state.ready.removeAll()
                state.waiter = nil
            }
            return (!state.draining, state.ready, state.waiter)
        }
        waiter?.resume()
        for file in ready where file.stopTaking() {
            Task { await self.finish(file) }
        }
        return first
    }

    /// Recovers what dead watchers left: files back to inbox/, or into `lease`'s folder with
    /// their records, to be opened at the next claim; says which records were not believed.
    private func recover(lease: WatcherLease) -> WatcherLease.Recovered {
        let recovered = WatcherLease.recover(spool: configuration.spool, into: lease)
        for refusal in recovered.refused { onEvent(.problem(refusal)) }
        if !recovered.adopted.isEmpty { state.withLock { $0.adopted += recovered.adopted } }
        return recovered
    }

    /// Claims files from the front of the line while there is room; first the files recovery
    /// took from dead watchers.
    private func claim(lease: WatcherLease, group: inout DiscardingTaskGroup) {
        let inbox = configuration.spool.inbox
        for name in state.withLock({ state in defer { state.adopted.removeAll() }; return state.adopted }) {
            guard let entry = FileSystem.entry("\(lease.folder)/\(name)") else { continue }
            state.withLock { _ = $0.claimed.insert(name) }
            onEvent(.claimed(name: name))
            let file = SpoolFile(name: name, folder: lease.folder, arrived: entry.changed, written: entry.modified)
            group.addTask { await self.open(file) }
        }
        var postponed: [String] = []
        defer {
            if !postponed.isEmpty {
                state.withLock { state in
                    for name in postponed where state.pendingSet.insert(name).inserted { state.pending.append(name) }
                }
            }
        }
        while true {
            let next: String? = state.withLock { state in
                guard state.claimed.count < configuration.claimLimit, !state.pending.isEmpty else { return nil }
                let name = state.pending.removeFirst()
                state.pendingSet.remove(name)
                return name
            }
            guard let name = next else { return }
            guard Spool.isCandidate(name) else { continue }
            if state.withLock({ $0.claimed.contains(name) }) {
                postponed.append(name)  // the last file of that name is still running here
                continue
            }
            let source = "\(inbox)/\(name)"
            guard let entry = FileSystem.entry(source) else {  // taken by another watcher
                state.withLock { state in
                    state.renamed.remove(name)
                    state.settling[name] = nil
                }
                continue
            }
            // A file that did not arrive by rename is taken only once it is complete.
            if !state.withLock({ $0.renamed.contains(name) }), !isComplete(name: name, path: source) { continue }
            guard rename(source, "\(lease.folder)/\(name)") == 0 else { continue }
            // A replay file beside it in inbox/ is not taken: the records of jobs that ended
            // under a watcher that died never pass through inbox/, where producers write.
            state.withLock { state in
                state.claimed.insert(name)
                state.renamed.remove(name)
                state.settling[name] = nil
            }
            onEvent(.claimed(name: name))
            let file = SpoolFile(name: name, folder: lease.folder, arrived: entry.changed, written: entry.modified)
            group.addTask { await self.open(file) }
        }
    }

    /// Whether a file that did not arrive by rename is complete; if not, it is looked at again
    /// at the next settle tick.
    private func isComplete(name: String, path: String) -> Bool {
        let verdict = SettleCheck(settle: configuration.settle).verdict(path: path)
        let now = timeline.now
        let complete = state.withLock { state -> Bool in
            switch verdict {
            case .complete:
                return true
            case .gone:
                state.settling[name] = nil
                return false
            case .beingWritten:
                state.settling[name] = Settling(signature: nil, since: now)
                return false
            case .settling(let signature):
                // Unchanged for `settle` on this feed's own clock also counts.
                if let seen = state.settling[name], seen.signature == signature {
                    return now - seen.since >= configuration.settle
                }
                state.settling[name] = Settling(signature: signature, since: now)
                return false
            }
        }
        return complete
    }

    /// A claimed file checked: junk or invalid goes to failed/, a valid one joins the files the
    /// engine takes jobs from.
    private func open(_ file: SpoolFile) async {
        if let reason = junkReason(file) {
            await finish(file, outcome: .failed, reason: reason)
            return
        }
        _ = file.loadReplay()
        if let problem = file.openResults(mode: configuration.spool.fileMode) {
            await finish(file, outcome: .returned, reason: problem)
            return
        }
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>?? in
            if state.draining { return .none }
            state.ready.append(file)
            defer { state.waiter = nil }
            return .some(state.waiter)
        }
        guard let waiter else {
            // Shutdown came while it was checked: back to inbox/ untouched.
            _ = file.interrupt()
            await finish(file)
            return
        }
        waiter?.resume()
    }

    private func sweepSpool() {
        let spool = configuration.spool
        for folder in [spool.inbox, spool.done, spool.failed, spool.cancel] { Durability.sweepLeftovers(in: folder) }
    }

    /// What the watcher holds now.
    package var counts: Counts {
        let running = engine.taskManager.count
        return state.withLock { state in
            let settling = Set(state.settling.keys)
            return Counts(
                queued: state.pendingSet.union(settling).count, settling: settling.count,
                active: state.claimed.count, running: running, done: state.filesDone, failed: state.filesFailed)
        }
    }

    /// Reads inbox/ (and cancel/) in full: the safety net under inotify. A name that is not
    /// UTF-8 cannot be named in a record or a log: the file goes to failed/ under a safe name.
    private func rescan(quietBefore: Double? = nil) {
        var strange: [[UInt8]] = []
        let names = FileSystem.names(in: configuration.spool.inbox, notUTF8: { strange.append($0) }).filter(Spool.isCandidate).sorted()
        for raw in strange where raw.first != UInt8(ascii: ".") { quarantine(raw) }
        state.withLock { state in
            for name in names where state.pendingSet.insert(name).inserted { state.pending.append(name) }
        }
        let now = FileSystem.seconds(FileSystem.now())
        let lifetime = configuration.cancelRequestLifetime.inSeconds
        for name in FileSystem.names(in: configuration.spool.cancel) where !name.hasPrefix(".") {
            let path = "\(configuration.spool.cancel)/\(name)"
            guard let entry = FileSystem.entry(path) else { continue }
            let made = FileSystem.seconds(entry.modified)
            if now - made > lifetime {
                unlink(path)
                state.withLock { _ = $0.cancelRequests.removeValue(forKey: name) }
                continue
            }
            let known = state.withLock { $0.cancelRequests[name] == made }
            if !known { handleCancelRequest(name, announcing: made >= quietBefore ?? 0) }
        }
    }

    // MARK: - The feed

    private enum Step {
        case take(SpoolFile)
        case wait
        case end
    }

    /// The next job of the ready files, taking one from each in turn, so a small file that
    /// arrives behind a large one does not wait for all of it. Waits while no file is ready;
    /// nil once the feed drains.
    package func next() async -> FeedJob? {
        while !Task.isCancelled {
            let step = state.withLock { state -> Step in
                if state.draining { return .end }
                return state.ready.isEmpty ? .wait : .take(state.ready.removeFirst())
            }
            switch step {
            case .end:
                return nil
            case .take(let file):
                guard let job = file.takeJob() else {
                    if file.exhaust() { await finish(file) }
                    continue
                }
                if let line = file.replayed(key: job.key), let result = JobResult(record: line) {
                    // It ended under a watcher that died: its record stands (and its hooks run
                    // with it), it does not run again.
                    configuration.replayed?(line)
                    state.withLock { state in if !state.draining { state.ready.append(file) } }
                    if file.jobEnded(.recorded(result, line: line)) { await finish(file) }
                    continue
                }
                let draining = state.withLock { state in
                    if !state.draining { state.ready.append(file) }
                    return state.draining
                }
                if draining { _ = file.interrupt() }  // the job just taken is skipped at its start
                return feedJob(job, of: file)
            case .wait:
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        let now = state.withLock { state -> Bool in
                            if state.draining || !state.ready.isEmpty { return true }
                            state.waiter = continuation
                            return false
                        }
                        if now { continuation.resume() }
                    }
                } onCancel: {
                    state.withLock { state in
                        defer { state.waiter = nil }
                        return state.waiter
                    }?.resume()
                }
            }
        }
        return nil
    }

    /// A job of `file` as the engine takes it: skipped once the feed drains, cancelled when a
    /// cancel request names its key; its record goes beside the file as it ends.
    private func feedJob(_ job: JobDescriptor, of file: SpoolFile) -> FeedJob {
        FeedJob(
            job,
            start: { [weak self] in
                // A skipped job's file goes back to inbox/ (`jobEnded(.notStarted)`).
                guard let self, !self.isDraining else { return .skip }
                file.markStarted()
                if self.isCancelled(key: job.key, written: file.written) { return .cancel("cancelled by request before it started") }
                return .run
            },
            ended: { [weak self] end in
                if file.jobEnded(end) { await self?.finish(file) }
            })
    }

    var isDraining: Bool { state.withLock { $0.draining } }
    var isHardStopped: Bool { state.withLock { $0.hardStop } }

    /// A file is through (moved where its outcome says): room for the next.
    func fileEnded(_ file: SpoolFile, outcome: FileReport.Outcome) {
        state.withLock { state in
            state.claimed.remove(file.name)
            if outcome == .done { state.filesDone += 1 }
            if outcome == .failed { state.filesFailed += 1 }
        }
        wake.yield(.fileEnded(file.name))
    }

    func noteFailedFile() { state.withLock { $0.filesFailed += 1 } }

    // MARK: - Cancel requests

    /// cancel/<name> arrived: cancel the running task of that key, and remember the request for
    /// jobs of files written before it.
    private func handleCancelRequest(_ name: String, announcing: Bool = true) {
        let path = "\(configuration.spool.cancel)/\(name)"
        guard !name.hasPrefix("."), let entry = FileSystem.entry(path), entry.type == .regular else { return }
        let made = FileSystem.seconds(entry.modified)
        // Remembered before the running tasks are looked at: a job starting meanwhile sees it.
        state.withLock { $0.cancelRequests[name] = made }
        var cancelled = false
        for (key, _) in engine.taskManager.running where OutputStore.fileName(forKey: key) == name {
            cancelled = engine.taskManager.cancel(key: key) || cancelled
        }
        // Read without following a link or blocking, and at most 4 KiB: a FIFO or a huge sparse
        // file planted here must not stall the main loop.
        let text = FileSystem.readSmall(path, cap: 4096).flatMap { String(validating: $0, as: UTF8.self) }?
            .trimmingCharacters(in: .newlines)
        let key = text.flatMap { $0.isEmpty ? nil : $0 } ?? name
        if announcing || cancelled { onEvent(.cancelRequested(key: key, cancelledRunning: cancelled)) }
    }

    /// Whether a cancel request stands against `key` for a file written at `written`.
    func isCancelled(key: String, written: timespec) -> Bool {
        let name = OutputStore.fileName(forKey: key)
        guard let made = state.withLock({ $0.cancelRequests[name] }) else { return false }
        return FileSystem.seconds(written) < made
    }
}

extension SpoolFeed: WatchFeed {
    package var source: String { configuration.spool.inbox }
    package var stopNotice: String { "no more files are taken" }
    package var grace: Duration { configuration.grace }
    package var status: WatchStatus { .spool(counts) }
}
