import Foundation
import Glibc
import Synchronization

// The watcher's flow:
//
//   inotify (inbox/, cancel/) ─┐
//   rescan every few seconds ──┼─► wakes ─► main loop ─► claim: rename inbox/X → active/<me>/X
//   a file ended, shutdown ────┘               │              └─► file task: check, validate, run
//                                              └─► cancel/<key>: cancel the running task    its jobs
//                                                                                 │
//        done/X + X.results.jsonl  ◄── every job succeeded ◄────────────────────┤
//        failed/X + X.error.txt    ◄── junk, invalid, or some job did not ◄──────┤
//        inbox/X                   ◄── shutdown came before it was through ◄─────┘
//
// One main loop owns the decisions (what to claim, when to stop); file tasks run in its task
// group and report back through the same stream of wakes.

/// Takes job files from a spool's inbox/ as they arrive and runs their jobs through one engine.
public final class SpoolWatcher: Sendable {
    public struct Configuration: Sendable {
        public var spool: Spool
        /// The engine's configuration; the watcher adds the spool's key lock.
        public var engine: JobEngine.Configuration
        public var registry: KindRegistry
        /// Files claimed at once (default: the engine's concurrency). What is not claimed stays in
        /// inbox/ for other watchers.
        public var filesAtOnce: Int
        /// How often inbox/ and cancel/ are read in full, besides inotify.
        public var rescanInterval: Duration
        /// Largest JSON document taken (JSON Lines stream, so any size).
        public var maxDocumentBytes: Int
        /// How long a cancel request stands (it cancels jobs of files written before it).
        public var cancelRequestLifetime: Duration
        /// The operator's caps on what a job may ask (`--max-bytes`, `--max-timeout`, `--max-retries`).
        public var limits: JobLimits = .none
        /// How long a file that did not arrive by rename must stay unchanged, with no writer,
        /// before it is taken (`SettleCheck`).
        public var settle: Duration
        /// How often the main loop reports `.heartbeat` (for a service manager's watchdog and
        /// status line); nil for never.
        public var heartbeatInterval: Duration?
        /// Makes each move to done/, failed/ or back to inbox/ durable, and a file's payloads and
        /// records before it reaches done/ (off only for tests of what is not durable).
        public var durable: Bool

        public init(
            spool: Spool, engine: JobEngine.Configuration, registry: KindRegistry, filesAtOnce: Int? = nil,
            rescanInterval: Duration = .seconds(2), maxDocumentBytes: Int = 16 << 20,
            cancelRequestLifetime: Duration = .seconds(3600), settle: Duration = .seconds(1),
            heartbeatInterval: Duration? = nil, durable: Bool = true
        ) {
            self.settle = settle
            self.heartbeatInterval = heartbeatInterval
            self.durable = durable
            self.spool = spool
            self.engine = engine
            self.registry = registry
            self.filesAtOnce = max(1, filesAtOnce ?? engine.concurrency)
            self.rescanInterval = rescanInterval
            self.maxDocumentBytes = maxDocumentBytes
            self.cancelRequestLifetime = cancelRequestLifetime
        }
    }

    /// What happened to a file, for the log.
    public struct FileReport: Sendable {
        public enum Outcome: String, Sendable {
            /// Every job ended succeeded or notModified: in done/.
            case done
            /// Junk, invalid, or some job ended otherwise: in failed/ with the reason beside it.
            case failed
            /// Shutdown came before it was through: back in inbox/.
            case returned
        }

        public var name: String
        /// Its name in done/, failed/ or inbox/ (another when the name was taken).
        public var finalName: String
        public var outcome: Outcome
        public var counts: [JobStatus: Int]
        /// For failed files: the first lines of the reason.
        public var reason: String?
        /// From the file's arrival in inbox/ (its last status change) to the start of its first job.
        public var startLatency: Duration?
    }

    /// What the watcher holds now, for a status line.
    public struct Counts: Sendable {
        /// Files seen in inbox/ and not yet claimed (those still being written included).
        public var queued: Int
        /// Files in inbox/ not yet taken because they are still being written or settling.
        public var settling: Int
        /// Files claimed and not through.
        public var active: Int
        /// Jobs running now.
        public var running: Int
        /// Files moved to done/ and failed/ by this watcher.
        public var done: Int
        public var failed: Int
    }

    public enum Event: Sendable {
        case started(watcher: String, recovered: [String])
        /// The first scan of inbox/ is through: the watcher takes files from now on.
        case ready(Counts)
        /// Every `heartbeatInterval`, from the main loop (so a stuck loop stops them).
        case heartbeat(Counts)
        case claimed(name: String)
        case finished(FileReport)
        case cancelRequested(key: String, cancelledRunning: Bool)
        case problem(String)
    }

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

    private struct State {
        var pending: [String] = []
        var pendingSet: Set<String> = []
        var claimed: Set<String> = []
        /// Cancel requests by key file name: when each was made (seconds since 1970).
        var cancelRequests: [String: Double] = [:]
        /// Top-level jobs handed to the engine and not yet started: key → its file's progress.
        var awaitingStart: [String: FileProgress] = [:]
        var draining = false
        var hardStop = false
        /// Names that arrived by rename and are not claimed yet: complete, taken at once.
        var renamed: Set<String> = []
        /// Names not taken because they are still being written or settling; checked again
        /// every settle tick.
        var settling: Set<String> = []
        var filesDone = 0
        var filesFailed = 0
    }

    public let configuration: Configuration
    /// The engine every job runs on; its TaskManager cancels by key.
    public let engine: JobEngine
    private let state = Mutex(State())
    private let wakes: AsyncStream<Wake>
    private let wake: AsyncStream<Wake>.Continuation
    let onEvent: @Sendable (Event) -> Void

    /// `observer` hears every job, as with `JobEngine`; `onEvent` hears what happens to files.
    public init(configuration: Configuration, observer: any RunObserver = SilentObserver(), onEvent: @escaping @Sendable (Event) -> Void = { _ in }) {
        var engineConfiguration = configuration.engine
        engineConfiguration.keyLock = SpoolKeyLock(spool: configuration.spool)
        let forward = Forwarder()
        self.configuration = configuration
        self.engine = JobEngine(configuration: engineConfiguration, observer: forward)
        self.onEvent = onEvent
        (wakes, wake) = AsyncStream.makeStream(of: Wake.self, bufferingPolicy: .unbounded)
        forward.targets.withLock { $0 = Forwarder.Targets(observer: observer, watcher: self) }
    }

    /// Begins a shutdown: claim nothing more, let running jobs end for `grace`, then cancel them;
    /// files not through go back to inbox/. `run()` returns when it is done. Safe from any thread.
    public func shutdown(grace: Duration) {
        wake.yield(.shutdown(grace))
    }

    // MARK: - The main loop

    /// Recovers what dead watchers left in active/, then watches until `shutdown`.
    public func run() async throws(Spool.Error) {
        let spool = configuration.spool
        try spool.makeFolders()
        let lease = try WatcherLease(spool: spool)
        defer { lease.end() }
        let recovered = WatcherLease.recover(spool: spool, except: lease.id)
        // Temporary files that crashed producers and runners left behind (and every few minutes
        // after, for a crash that came less than a minute before this start).
        sweepSpool()
        onEvent(.started(watcher: lease.id, recovered: recovered))

        let events = FolderEvents(folders: [spool.inbox, spool.cancel])
        if events == nil { onEvent(.problem("inotify is not available; polling \(spool.inbox) every 250 ms")) }
        defer { events?.stop() }
        rescan(cancelToo: true)

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
                while (try? await Task.sleep(for: interval)) != nil { wake.yield(.rescan) }
            }
            // Files still being written are looked at again a few times per settle period.
            let tick = max(.milliseconds(20), min(.milliseconds(250), configuration.settle / 4))
            group.addTask {
                while (try? await Task.sleep(for: tick)) != nil {
                    if self.state.withLock({ !$0.settling.isEmpty }) { wake.yield(.settleTick) }
                }
            }
            if let heartbeat = configuration.heartbeatInterval {
                group.addTask {
                    while (try? await Task.sleep(for: heartbeat)) != nil { wake.yield(.heartbeat) }
                }
            }

            var lastSweep = ContinuousClock.now
            claim(lease: lease, group: &group)
            onEvent(.ready(counts))
            for await next in wakes {
                switch next {
                case .arrived(let name, let renamed):
                    state.withLock { state in
                        if renamed { state.renamed.insert(name) }
                        if state.pendingSet.insert(name).inserted { state.pending.append(name) }
                    }
                case .settleTick:
                    state.withLock { state in
                        for name in state.settling.sorted() where state.pendingSet.insert(name).inserted { state.pending.append(name) }
                        state.settling.removeAll()
                    }
                case .heartbeat:
                    onEvent(.heartbeat(counts))
                case .cancel(let name):
                    handleCancelRequest(name)
                case .rescan:
                    _ = WatcherLease.recover(spool: spool, except: lease.id)
                    rescan(cancelToo: true)
                    if lastSweep.duration(to: .now) > .seconds(300) {
                        lastSweep = .now
                        sweepSpool()
                    }
                case .fileEnded:
                    break
                case .shutdown(let grace):
                    let first = state.withLock { state -> Bool in
                        defer { state.draining = true }
                        return !state.draining
                    }
                    if first {
                        group.addTask {
                            try? await Task.sleep(for: grace)
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

    /// Claims files from the front of the line while there is room.
    private func claim(lease: WatcherLease, group: inout DiscardingTaskGroup) {
        let inbox = configuration.spool.inbox
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
                guard state.claimed.count < configuration.filesAtOnce, !state.pending.isEmpty else { return nil }
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
                state.withLock { _ = $0.renamed.remove(name) }
                continue
            }
            // A file that did not arrive by rename is taken only once it is complete.
            if !state.withLock({ $0.renamed.contains(name) }) {
                switch SettleCheck(settle: configuration.settle).verdict(path: source) {
                case .complete: break
                case .gone: continue
                case .beingWritten, .settling:
                    state.withLock { _ = $0.settling.insert(name) }
                    continue
                }
            }
            guard rename(source, "\(lease.folder)/\(name)") == 0 else { continue }
            state.withLock { state in
                state.claimed.insert(name)
                state.renamed.remove(name)
                state.settling.remove(name)
            }
            onEvent(.claimed(name: name))
            let progress = FileProgress(name: name, arrived: entry.changed, written: entry.modified)
            group.addTask {
                let report = await self.process(progress, in: lease)
                self.state.withLock { state in
                    state.claimed.remove(name)
                    if report.outcome == .done { state.filesDone += 1 }
                    if report.outcome == .failed { state.filesFailed += 1 }
                }
                self.onEvent(.finished(report))
                self.wake.yield(.fileEnded(name))
            }
        }
    }

    private func sweepSpool() {
        let spool = configuration.spool
        for folder in [spool.inbox, spool.done, spool.failed, spool.cancel] { Durability.sweepLeftovers(in: folder) }
    }

    /// What the watcher holds now.
    public var counts: Counts {
        let running = engine.taskManager.count
        return state.withLock { state in
            Counts(
                queued: state.pendingSet.union(state.settling).count, settling: state.settling.count,
                active: state.claimed.count, running: running, done: state.filesDone, failed: state.filesFailed)
        }
    }

    /// Reads inbox/ (and cancel/) in full: the safety net under inotify. A name that is not
    /// UTF-8 cannot be named in a record or a log: the file goes to failed/ under a safe name.
    private func rescan(cancelToo: Bool) {
        var strange: [[UInt8]] = []
        let names = FileSystem.names(in: configuration.spool.inbox, notUTF8: { strange.append($0) }).filter(Spool.isCandidate).sorted()
        for raw in strange where raw.first != UInt8(ascii: ".") { quarantine(raw) }
        state.withLock { state in
            for name in names where state.pendingSet.insert(name).inserted { state.pending.append(name) }
        }
        guard cancelToo else { return }
        let now = FileSystem.seconds(FileSystem.now())
        let lifetime = Double(configuration.cancelRequestLifetime.components.seconds)
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
            if !known { handleCancelRequest(name) }
        }
    }

    // MARK: - Cancel requests

    /// cancel/<name> arrived: cancel the running task of that key, and remember the request for
    /// jobs of files written before it.
    private func handleCancelRequest(_ name: String) {
        let path = "\(configuration.spool.cancel)/\(name)"
        guard !name.hasPrefix("."), let entry = FileSystem.entry(path), entry.type == .regular else { return }
        let made = FileSystem.seconds(entry.modified)
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
        onEvent(.cancelRequested(key: key, cancelledRunning: cancelled))
    }

    /// Whether a cancel request stands against `key` for a file written at `written`.
    func isCancelled(key: String, written: timespec) -> Bool {
        let name = OutputStore.fileName(forKey: key)
        guard let made = state.withLock({ $0.cancelRequests[name] }) else { return false }
        return FileSystem.seconds(written) < made
    }

    // MARK: - Observing the engine

    fileprivate func jobStarted(_ job: JobDescriptor) {
        guard job.parent == nil, let progress = state.withLock({ $0.awaitingStart.removeValue(forKey: job.key) }) else { return }
        progress.markStarted()
        if isCancelled(key: job.key, written: progress.written) { engine.taskManager.cancel(key: job.key) }
    }

    /// Hands the engine's observer calls to the caller's observer and to the watcher.
    private final class Forwarder: RunObserver {
        struct Targets {
            var observer: any RunObserver = SilentObserver()
            weak var watcher: SpoolWatcher?
        }

        let targets = Mutex(Targets())

        func jobStarted(_ job: JobDescriptor) {
            let (observer, watcher) = targets.withLock { ($0.observer, $0.watcher) }
            watcher?.jobStarted(job)
            observer.jobStarted(job)
        }

        func jobNotice(_ job: JobDescriptor, message: String) { targets.withLock { $0.observer }.jobNotice(job, message: message) }
        func jobFinished(_ result: JobResult) { targets.withLock { $0.observer }.jobFinished(result) }
        func problem(_ message: String) { targets.withLock { $0.observer }.problem(message) }
    }

    // MARK: - State for file tasks

    var isDraining: Bool { state.withLock { $0.draining } }

    func noteFailedFile() { state.withLock { $0.filesFailed += 1 } }
    var isHardStopped: Bool { state.withLock { $0.hardStop } }

    func awaitStart(key: String, progress: FileProgress) {
        state.withLock { $0.awaitingStart[key] = progress }
    }

    func forgetStart(key: String, progress: FileProgress) {
        state.withLock { state in
            if state.awaitingStart[key] === progress { state.awaitingStart[key] = nil }
        }
    }
}
