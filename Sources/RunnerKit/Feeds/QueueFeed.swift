import Foundation
import Synchronization

// The shared queue as a feed of the one engine, built like the spool's:
//
//   next() ─► a claimed job from the buffer, else claim as many as the engine has free slots
//             (under a lease) ─► decode it ─► the engine runs it
//         ◄─ none: wait for a notice of new jobs, --rescan, or the end of a lease
//   ended ─► its record (on disk already, made durable) stored in the row, the claim ended;
//            retried while the store is away, given up --grace + 5 s after a shutdown;
//            with hooks, the claim held until they ended (a runner that dies leaves them to
//            another, which claims the row for its hooks alone and runs them with its record)
//   shutdown ─► claims not started given back at once; after --grace, running jobs released:
//            stopped without a record, their claims given back for another runner
//   children ─► queued with the parent's own record, run by any runner; the runner whose
//            record ends the last of them completes the parent's record with their counts
//   a listener: new jobs ring the bell; a cancel cancels the key's task; a pause another
//               runner was asked for pauses the host here too
//   a scheduler: sleeps until the next tick of the queue's schedules (or --rescan), then fires
//                the due ones: each tick one batch across the fleet, whichever watcher gets there first
//   a renewer: every third of the lease, this runner's claims and keys renewed and jobs
//              abandoned 3 times ended failed; every hour, rows finished before --keep pruned
//
// Every timer (polling, leases, heartbeat, grace, retries) sleeps on the engine's clock, and the
// store is a protocol (PostgreSQL through libpq, or in memory), so a test drives all of it.

/// Takes jobs from a shared queue as this runner has room for them and hands them to its
/// engine; several runners on several machines share one queue.
package final class QueueFeed: JobFeed, @unchecked Sendable {  // mutable state behind `state`
    package struct Configuration: Sendable {
        /// The engine every job runs on (its registry, limits, concurrency and clock are the
        /// feed's too); the feed adds the queue's key lock and shared pacing.
        package var engine: JobEngine.Configuration
        /// The queue: a libpq URL, connected by `prepared()` unless `store` is given. `prepared()`
        /// also makes the engine's output (its `store`, when given) the queue's one output
        /// folder, or refuses it (`QueueOutput`).
        package var url: String?
        package var store: (any Store)?
        /// How long a claim holds unless renewed (`RUNNER_QUEUE_LEASE` in seconds overrides it).
        package var lease: Duration = .seconds(30)
        /// This runner's name in the queue: claims and keys are held under it.
        package var runner: String = QueueFeed.defaultRunnerName()
        /// How often the queue is read when no notice came.
        package var rescanInterval: Duration = .seconds(2)
        /// How long finished rows stay (nil: for ever).
        package var keep: Duration? = .seconds(7 * 86_400)
        /// How many jobs one claim takes at least when the engine has fewer slots free (they
        /// wait for a slot under the lease); nil: a quarter of the concurrency, at most 16.
        package var prefetch: Int?
        /// On shutdown, how long running jobs may go on before they are handed back to the queue.
        package var grace: Duration = .seconds(10)
        /// After the grace, how long records the store refuses are still retried; then the
        /// feed ends, the records on disk (the jobs run again once their leases end).
        package var storeGrace: Duration = .seconds(5)
        /// How often `.heartbeat` is reported (a service manager's watchdog); nil: never.
        package var heartbeatInterval: Duration?
        /// The output made durable before records are stored in the queue (off only for tests).
        package var durable = true
        /// Hear every job the fleet's other runners end (`Event.fleetFinished`), for a live
        /// page's event stream; the runners tell them only while such a watcher is alive.
        package var followsFleetEvents = false
        /// The job's `--on-finish` hooks, given its record as one line of JSON; returns once they
        /// ended. With them, a job is done in the queue only once they ended: its record is
        /// stored first with the hooks pending, and if this runner dies before they end, another
        /// runner claims the job for its hooks alone and runs them with that record (at least
        /// once, with the job's own status). Nil: no hooks.
        package var hooks: (@Sendable ([UInt8]) async -> Void)?

        package init(engine: JobEngine.Configuration, url: String? = nil, store: (any Store)? = nil) {
            self.engine = engine
            self.url = url
            self.store = store
        }

        /// The preset of `runner watch --queue URL`: the queue's defaults around the engine's
        /// `run` preset; a watcher's jobs are written by others, so they may not read its secrets.
        package static func watch(queue url: String, registry: KindRegistry) -> Configuration {
            var configuration = Configuration(engine: .run(registry: registry), url: url)
            configuration.engine.limits.allowsSecretReferences = false
            if let seconds = ProcessInfo.processInfo.environment["RUNNER_QUEUE_LEASE"].flatMap(Double.init), seconds > 0 {
                configuration.lease = .seconds(seconds)
            }
            return configuration
        }

        /// This configuration with its engine prepared and its store connected (libpq's
        /// connections made on a thread of their own).
        package func prepared() async throws(QueueError) -> Configuration {
            var configuration = self
            if configuration.store == nil {
                guard let url else { throw QueueError("no queue: give a URL or a store", usage: true) }
                configuration.store = try await PostgresQueueStore.connect(url: url, lease: lease)
            }
            if let output = configuration.engine.store, let store = configuration.store {
                try await QueueOutput.claim(output, queue: store, runner: runner)
            }
            return configuration
        }

        var claimAhead: Int { max(1, prefetch ?? min(16, engine.concurrency / 4)) }
    }

    /// What happens to the watcher, for its log and its service manager: `started` and `ready`
    /// once it is listed in the fleet, `heartbeat` with the jobs running here, `fileEnded`,
    /// `fleetFinished` (with `followsFleetEvents`), `scheduleFired` (`dropped` above 0 and no
    /// batch for `--catch-up none`), and `problem` for what it goes on through (the store away, a
    /// record kept on disk only).
    package typealias Event = WatchEvent

    /// What wakes the main loop: the listener, the timers, side work asked for from any thread,
    /// a shutdown, and the engine's end.
    private enum Wake: Sendable {
        case notice(QueueNotice)
        /// A third of the lease went by: renew.
        case renew
        case renewed
        case heartbeat
        /// Work beside the engine's (a parent to complete, hooks a dead runner left), run in the
        /// feed's task group; the feed ends once it ended.
        case sideWork(@Sendable () async -> Void)
        case sideWorkEnded
        case shutdown(grace: Duration, unstarted: [Int64])
        case graceOver
        case engineEnded
    }

    package let configuration: Configuration
    package let store: any Store
    package let engine: JobEngine
    package var runner: String { configuration.runner }
    private let writer: QueueWriter
    /// Rung by a notice of new jobs or schedules: the schedules are looked at again.
    let scheduleBell = Bell()
    private let clock: any Clock<Duration>
    private let timeline: any Timeline
    let onEvent: @Sendable (Event) -> Void
    /// When this runner's leases were last renewed (on `timeline`).
    private let renewed: Locked<Duration?>
    /// Hears hooks that failed because runners left them (metrics, the event stream).
    private let observer: any RunObserver
    private let bell = Bell()
    private let wakes: AsyncStream<Wake>
    private let wake: AsyncStream<Wake>.Continuation
    /// The most jobs claimed in one statement.
    static let batchLimit = 64

    private struct State {
        var stopping = false
        /// From a shutdown: when storing records is given up (on `timeline`).
        var giveUpAt: Duration?
        /// The queue could not be read: said once, and again when it is back.
        var unreachable = false
        /// Claimed and not yet handed to the engine, oldest first.
        var buffer: [(claim: QueueClaim, at: Duration)] = []
        /// Claimed and not started (buffered, or handed out and waiting for a slot), by id.
        var unstarted: Set<Int64> = []
        /// Claimed here and not ended (started or not), by id.
        var held: Set<Int64> = []
        /// Given back by a shutdown before they started: they must not start here.
        var givenBack: Set<Int64> = []
        /// Keys a cancel was asked for, and when: a job of the key claimed before then does not run.
        var cancels: [String: Duration] = [:]
        /// By submitted file and batch (two batches of one file name apart): jobs claimed here
        /// and not ended, and how many ended here since.
        var files: [SubmittedFile: (open: Int, ended: Int)] = [:]
        /// When finished rows were last pruned (on `timeline`).
        var pruned: Duration?
        /// Children of jobs running here, from their kinds, until the jobs' records are stored.
        var children: [Int64: ChildJobs] = [:]
        /// The claim of each key running here (started, not ended).
        var runningIDs: [String: Int64] = [:]
    }
    private let state = Mutex(State())

    /// A feed over `configuration.store` (see `Configuration.prepared()`) and its own engine.
    /// - Throws: one line, when the engine cannot be made.
    package init(
        configuration: Configuration, taskManager: TaskManager = TaskManager(), observer: any RunObserver = SilentObserver(),
        onEvent: @escaping @Sendable (Event) -> Void = { _ in }
    ) throws(JobEngine.Configuration.Problem) {
        guard let store = configuration.store else { throw JobEngine.Configuration.Problem("the queue feed has no store (prepare its configuration)") }
        let writer = QueueWriter(store: store, runner: configuration.runner)
        var engineConfiguration = configuration.engine
        engineConfiguration.keyLock = QueueKeyLock(writer: writer)
        engineConfiguration.locksKeysInOutput = false  // the queue holds each key for the whole fleet
        let renewed = Locked<Duration?>(nil)
        let leaseClock = makeTimeline(configuration.engine.clock)
        engineConfiguration.claimHeld = { [lease = store.lease] in
            // Renewed within the lease (the last renewal, or the start): no one else took a job.
            renewed.withLock { last in last.map { leaseClock.now - $0 < lease } ?? true }
        }
        self.renewed = renewed
        engineConfiguration.sharedPacing = QueuePacer(store: store, runner: configuration.runner)
        let engine = try JobEngine(configuration: engineConfiguration, taskManager: taskManager, observer: observer)
        if configuration.durable { writer.synchronizing(engine.store) }
        self.configuration = configuration
        self.store = store
        self.writer = writer
        self.engine = engine
        self.clock = configuration.engine.clock
        self.timeline = makeTimeline(configuration.engine.clock)
        self.onEvent = onEvent
        self.observer = observer
        (wakes, wake) = AsyncStream.makeStream(of: Wake.self, bufferingPolicy: .unbounded)
        var watcher = QueueWatcher(
            name: configuration.runner, host: Self.hostName(), version: RunnerVersion.current, kinds: configuration.engine.registry.names,
            lease: store.lease)
        watcher.followsEvents = configuration.followsFleetEvents
        watcher.slots = configuration.engine.concurrency
        self.watcher = watcher
        writer.onParentsReady { [weak self] ids in
            for id in ids { self?.completeParent(id) }
        }
        // A partial that grew and was synced is durable progress: this claim is no abandon.
        engine.store.onPartialCheckpoint { [weak self] key in
            guard let self, let id = self.state.withLock({ $0.runningIDs[key] }) else { return }
            self.writer.credit(id)
        }
    }

    /// `host-pid`: unique in a fleet, and says where to look.
    package static func defaultRunnerName() -> String { "\(hostName())-\(getpid())" }

    static func hostName() -> String {
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count)
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Jobs running here now.
    package var running: Int { configuration.engine.concurrency - engine.freeSlots }

    // MARK: - Running and stopping

    /// This watcher as the fleet lists it (one value for the life of the feed: the process that
    /// holds its name).
    private let watcher: QueueWatcher
    private let registered = Atomic<Bool>(false)

    /// Lists this watcher in the fleet under its name. Refused (a usage error) when another
    /// live watcher holds the name; when the process that held it died, the jobs it held come
    /// back to the queue at once (this watcher claims them like any). `run()` registers if this
    /// was not called.
    package func register() async throws(QueueError) {
        try await store.register(watcher)
        registered.store(true, ordering: .relaxed)
    }

    /// Runs the engine on this feed until `shutdown` and every job handed out has ended (its
    /// record stored, or given up on), and the work beside it (parents completed, hooks a dead
    /// runner left, claims given back) is through.
    ///
    /// Built as the spool's feed is: the listener and the timers only wake the main loop, which
    /// does what is quick itself and starts what waits on the store as a task of its group.
    package func run() async {
        if !registered.load(ordering: .relaxed) {
            do { try await register() } catch { report("this watcher could not be listed in the queue: \(error)") }
        }
        renewed.withLock { $0 = timeline.now }
        onEvent(.started(watcher: runner, recovered: []))
        onEvent(.ready(.queue(running: 0)))
        await withDiscardingTaskGroup { group in
            let (wake, clock, lease) = (self.wake, self.clock, store.lease)
            group.addTask { await self.listen() }
            group.addTask { await self.maintain() }
            group.addTask {
                while (try? await clock.sleep(for: lease / 3)) != nil { wake.yield(.renew) }
            }
            group.addTask { await self.fireSchedules() }
            if let heartbeat = configuration.heartbeatInterval {
                group.addTask {
                    while (try? await clock.sleep(for: heartbeat)) != nil { wake.yield(.heartbeat) }
                }
            }
            group.addTask {
                _ = await self.engine.run(self)
                wake.yield(.engineEnded)
            }
            var (engineEnded, sideWork, renewing) = (false, 0, false)
            for await next in wakes {
                switch next {
                case .notice(let notice):
                    hear(notice)
                case .renew:
                    guard !renewing else { break }
                    renewing = true
                    group.addTask {
                        await self.renew()
                        wake.yield(.renewed)
                    }
                case .renewed:
                    renewing = false
                case .heartbeat:
                    onEvent(.heartbeat(.queue(running: running)))
                case .sideWork(let work):
                    sideWork += 1
                    group.addTask {
                        await work()
                        wake.yield(.sideWorkEnded)
                    }
                case .sideWorkEnded:
                    sideWork -= 1
                case .shutdown(let grace, let unstarted):
                    if !unstarted.isEmpty {
                        sideWork += 1
                        group.addTask {
                            await self.giveBack(unstarted)
                            wake.yield(.sideWorkEnded)
                        }
                    }
                    group.addTask {
                        guard (try? await clock.sleep(for: grace)) != nil else { return }
                        wake.yield(.graceOver)
                    }
                case .graceOver:
                    // Stopping a watcher is the fleet's business, not the jobs' end: what still
                    // runs goes back to the queue (its partial kept and synced) for another watcher.
                    engine.taskManager.releaseAll()
                case .engineEnded:
                    engineEnded = true
                }
                if engineEnded && sideWork == 0 { break }
            }
            group.cancelAll()
        }
        await writer.flush()
        try? await store.unregister(runner: runner)
    }

    /// The kinds this runner has loaded: it claims jobs of these only.
    private var kinds: [String] { configuration.engine.registry.names }

    /// Begins a shutdown: nothing more is claimed, claims not started go back at once, running
    /// jobs have `grace` (the configuration's by default) before they are stopped and given back
    /// to the queue (never recorded `cancelled`: the watcher stops, not the job). `run()`
    /// returns when it is done. Safe from any thread; a second call does nothing.
    package func shutdown(grace: Duration? = nil) {
        let grace = grace ?? configuration.grace
        let now = timeline.now
        let unstarted = state.withLock { state -> [Int64]? in
            guard !state.stopping else { return nil }
            state.stopping = true
            state.giveUpAt = now + grace + configuration.storeGrace
            state.buffer = []
            state.givenBack.formUnion(state.unstarted)
            defer { state.unstarted = [] }
            return Array(state.unstarted)
        }
        guard let unstarted else { return }
        bell.ring()
        writer.releaseAllPreLocked()
        wake.yield(.shutdown(grace: grace, unstarted: unstarted))
    }

    /// Gives claims that did not start back to the queue, their keys first: a runner that takes
    /// these jobs must find their keys free.
    private func giveBack(_ unstarted: [Int64]) async {
        await writer.flush()
        do {
            try await store.release(ids: unstarted, runner: runner)
        } catch {
            report("\(unstarted.count) claim\(unstarted.count == 1 ? "" : "s") could not be given back (their lease will end): \(error)")
        }
    }

    private var stopping: Bool { state.withLock { $0.stopping } }
    var isStopping: Bool { stopping }

    private func report(_ message: String) { onEvent(.problem(message)) }

    // MARK: - Feeding

    package func next() async -> FeedJob? {
        while !stopping {
            guard let (claim, claimedAt) = await nextClaim() else { continue }
            guard let (job, stored) = await decode(claim) else {
                state.withLock { state in
                    state.unstarted.remove(claim.id)
                    state.held.remove(claim.id)
                }
                writer.releasePreLocked(claim.key)
                await tally(SubmittedFile(claim), id: claim.id, ended: true)
                continue
            }
            let (id, key, file) = (claim.id, claim.key, SubmittedFile(claim))
            return FeedJob(
                job,
                start: { [self] in
                    state.withLock { state in
                        // Given back by a shutdown: another runner may hold it already.
                        if state.givenBack.contains(id) { return .skip }
                        state.unstarted.remove(id)
                        if let asked = state.cancels[key], asked >= claimedAt { return .cancel("cancelled (runner cancel)") }
                        state.runningIDs[key] = id
                        return .run
                    }
                },
                ended: { [self] end in
                    await ended(id: id, key: key, job: job, stored: stored, end)
                    if case .recorded = end { await tally(file, id: id, ended: true) } else { await tally(file, id: id, ended: false) }
                },
                lastRecord: claim.previous.flatMap { try? JSONParser.parse(Array($0.utf8)) },
                takesChildren: { [self] children in state.withLock { $0.children[id] = children } })
        }
        // Stopping: nothing more; what was handed out and not started goes back through `ended`.
        return nil
    }

    /// A claimed job: the oldest buffered one, else as many as the engine has free slots for
    /// (at least `claimAhead`) claimed at once. Nil: none now, or the queue could not be read
    /// (waited meanwhile).
    private func nextClaim() async -> (QueueClaim, at: Duration)? {
        if let buffered = state.withLock({ $0.buffer.isEmpty ? nil : $0.buffer.removeFirst() }) { return buffered }
        let claimedAt = timeline.now
        let limit = min(Self.batchLimit, max(configuration.claimAhead, engine.freeSlots))
        var claims: [QueueClaim]
        do {
            claims = try await store.claim(runner: runner, limit: limit, kinds: kinds)
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
        // A job of this runner's whose lease ran out while it ran here (the renewals failed, or
        // came late) may come back in a claim: it runs here already.
        let held = state.withLock { $0.held }
        claims.removeAll { held.contains($0.id) }
        // Jobs that ended on a runner that died before their hooks did: their hooks alone run
        // here; and parents whose children all ended, left to complete by a runner that died.
        claims.removeAll { claim in
            guard let outcome = claim.outcome else { return false }
            if claim.completesParent {
                completeParent(claim.id)
            } else {
                runLeftHooks(id: claim.id, key: claim.key, record: Array(outcome.utf8))
            }
            return true
        }
        // One job of a key at a time, fleet-wide, and none ends `duplicate`: a claim whose key
        // another runner took first, and the later jobs of a key that came in this same claim,
        // go back at once. The claim passes over keys that are held, so they wait in the queue
        // until the key is let go of (and this runner, whose slot that frees, claims again).
        var keys = Set<String>()
        var back: [Int64] = []
        claims.removeAll { claim in
            guard claim.keyLocked, keys.insert(claim.key).inserted else {
                back.append(claim.id)
                return true
            }
            return false
        }
        if !back.isEmpty { try? await store.release(ids: back, runner: runner) }
        guard let first = claims.first else {
            // Until a notice, --rescan, or the end of a lease another runner may have left behind.
            let leaseEnd = (try? await store.nextLeaseEnd()).flatMap { $0 }.map { $0 + .milliseconds(50) }
            await sleepOrBell(min(configuration.rescanInterval, leaseEnd ?? configuration.rescanInterval))
            return nil
        }
        let kept = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.unstarted.formUnion(claims.map(\.id))
            state.held.formUnion(claims.map(\.id))
            for claim in claims { state.files[SubmittedFile(claim), default: (0, 0)].open += 1 }
            state.buffer.append(contentsOf: claims.dropFirst().map { ($0, claimedAt) })
            return true
        }
        let locked = claims.filter(\.keyLocked).map(\.key)
        guard kept else {
            // A shutdown came while claiming: these go back too, their keys first.
            for key in locked { writer.unlockKey(key) }
            await writer.flush()
            try? await store.release(ids: claims.map(\.id), runner: runner)
            return nil
        }
        writer.adopt(keys: locked)
        // Pauses the fleet holds now, before any of these jobs can send (their notice may be late).
        for pause in first.pauses { engine.pacer.pause(host: pause.host, for: pause.left, fromFleet: true) }
        return (first, claimedAt)
    }

    /// The claim's job, decoded as this runner's registry and limits allow, and as stored; nil
    /// (and the job ended failed, saying why) when it cannot be.
    private func decode(_ claim: QueueClaim) async -> (JobDescriptor, JSONValue)? {
        do {
            let stored = try JSONParser.parse(Array(claim.job.utf8))
            return (try decodeStored(stored), stored)
        } catch {
            let reason = JobResult.capped("not a job this runner can run: \(error)")
            let record = JSONWriter.string(.object([
                ("key", .string(claim.key)), ("kind", .string(claim.kind)), ("status", .string("failed")), ("error", .string(reason)),
            ]))
            _ = await writer.finish(QueueFinish(id: claim.id, status: "failed", error: reason, record: record, isKeyRecord: false))
            return nil
        }
    }

    /// A job as the queue stores it: `{"job", "defaults"}` as submitted, or a child, `{"child",
    /// "of"}`, made as the engine makes a parent's children (inheriting from its parent, with
    /// the parent's headers).
    private func decodeStored(_ stored: JSONValue) throws -> JobDescriptor {
        let registry = configuration.engine.registry
        let limits = configuration.engine.limits
        if let child = stored["child"]?.objectValue, let of = stored["of"] {
            let parent = try decodeStored(of)
            var job = try JobDescriptor.decode(child, registry: registry, parent: parent, limits: limits)
            job.headers = parent.headers
            return job
        }
        guard let object = stored["job"]?.objectValue else { throw JobSpecError(field: nil, "the stored job is not an object") }
        return try JobDescriptor.decode(object, defaults: stored["defaults"]?.objectValue ?? [], registry: registry, limits: limits)
    }

    /// A parent's children as the queue stores them (`{"child", "of"}`), each checked as the
    /// engine would make it; the elements that cannot be made counted, with the first reason.
    private func queueable(_ children: ChildJobs, of parent: JobDescriptor, stored: JSONValue) -> QueueFinish.Children {
        let registry = configuration.engine.registry
        let limits = configuration.engine.limits
        var made = QueueFinish.Children()
        made.jobs.reserveCapacity(children.count)
        for index in 0..<children.count {
            switch children.job(at: index, of: parent, registry: registry, limits: limits) {
            case .success(let (job, child)):
                made.jobs.append((job.key, job.kindName, JSONWriter.string(.object([("child", .object(child.fields)), ("of", stored)]))))
            case .failure(let unmade):
                made.invalid += 1
                if made.firstInvalid == nil { made.firstInvalid = unmade.description }
            }
        }
        return made
    }

    /// The file a job was submitted in, and its batch.
    struct SubmittedFile: Hashable {
        var name: String
        var batch: String?

        init(_ claim: QueueClaim) {
            name = claim.file
            batch = claim.batch
        }
    }

    /// One job of `file` (job `id`) ended here (`ended` false: given back). When none of the
    /// file's jobs is left here, the queue says whether any is left in the fleet; once none is,
    /// how they all ended is said once (by the watcher that ended the last of them), however
    /// many claims brought them here.
    private func tally(_ file: SubmittedFile, id: Int64, ended: Bool) async {
        let last = state.withLock { state -> Bool in
            guard var entry = state.files[file] else { return false }
            entry.open -= 1
            if ended { entry.ended += 1 }
            guard entry.open <= 0 else {
                state.files[file] = entry
                return false
            }
            state.files[file] = nil
            return entry.ended > 0
        }
        guard last, let outcome = try? await store.fileOutcome(of: id), !outcome.isEmpty else { return }
        var counts: [JobStatus: Int] = [:]
        for (status, count) in outcome { counts[JobStatus(rawValue: status) ?? .failed, default: 0] += count }
        onEvent(.fileEnded(name: file.name, counts: counts))
    }

    private func ended(id: Int64, key: String, job: JobDescriptor, stored: JSONValue, _ end: FeedJob.End) async {
        let (givenBack, children) = state.withLock { state in
            state.unstarted.remove(id)
            state.held.remove(id)
            if state.runningIDs[key] == id { state.runningIDs[key] = nil }
            return (state.givenBack.remove(id) != nil, state.children.removeValue(forKey: id))
        }
        switch end {
        case .notStarted:
            // A key a claim locked for a job that never took it goes back.
            writer.releasePreLocked(key)
            guard !givenBack else { return }
            await writer.flush()  // the key first, as above
            do { try await store.release(ids: [id], runner: runner) } catch { report("a claim could not be given back (its lease will end): \(error)") }
        case .recorded(let result, var line):
            // The record is written; once durable, the store gets it with the others that ended
            // meanwhile (retried while the store is away, until a shutdown's grace is over).
            let hooks = configuration.hooks
            var finish = QueueFinish(
                id: id, status: result.status.rawValue, error: result.error, record: String(decoding: line, as: UTF8.self),
                hooksPending: hooks != nil)
            if let children {
                // Its children go to the queue with its record, and it waits for them; when
                // none can be made, its record is complete now.
                finish.children = queueable(children, of: job, stored: stored)
                if finish.children.jobs.isEmpty {
                    line = await rewriteCompleted(
                        key: result.key, record: line, counts: [:], invalid: finish.children.invalid,
                        firstInvalid: finish.children.firstInvalid, total: finish.children.invalid, into: &finish)
                    finish.children = QueueFinish.Children()
                } else {
                    finish.hooksPending = false  // they run once its record is complete
                }
            }
            let stored = await retryingWhileTheStoreIsAway(
                { [writer] in await writer.finish(finish) },
                failed: { "\(result.key): the record could not be stored in the queue (\($0)); retrying" },
                back: "the queue is back: \(result.key)'s record is stored",
                givenUp: "\(result.key): the record was not stored in the queue; it is on disk, and the job runs again once its lease ends")
            if stored, let hooks, finish.children.jobs.isEmpty {
                await hooks(line)
                await endHooks(id: id, key: result.key)
            }
        }
    }

    /// Runs `attempt` (nil: done, else why not) until it is done, again and again with a growing
    /// pause while the store is away, until a shutdown's grace is over; says the first failure,
    /// the comeback and giving up. Whether it was done.
    private func retryingWhileTheStoreIsAway(
        _ attempt: () async -> String?, failed: (String) -> String, back: String, givenUp: String
    ) async -> Bool {
        var delay = Duration.milliseconds(200)
        for number in 1... {
            guard let failure = await attempt() else {
                if number > 1 { report(back) }
                return true
            }
            if number == 1 { report(failed(failure)) }
            let left = state.withLock { $0.giveUpAt }.map { $0 - timeline.now }
            if let left, left <= .zero {
                report(givenUp)
                return false
            }
            try? await clock.sleep(for: min(delay, left ?? delay))
            delay = min(delay * 2, .seconds(5))
        }
        return false
    }

    // MARK: - Parents

    /// Completes a parent whose children all ended (its claim this runner's): its record with
    /// their counts, written to the output and stored, then its hooks. If this runner stops
    /// first, the parent's lease ends and another completes it.
    private func completeParent(_ id: Int64) {
        wake.yield(.sideWork { await self.complete(parent: id) })
    }

    private func complete(parent id: Int64) async {
        do {
            guard let parent = try await store.parentToComplete(id: id, runner: runner) else { return }
            var finish = QueueFinish(id: id, status: "", error: nil, record: "", hooksPending: configuration.hooks != nil)
            let line = await rewriteCompleted(
                key: parent.key, record: Array(parent.record.utf8), counts: parent.counts, invalid: parent.invalid,
                firstInvalid: parent.firstInvalid, total: parent.total, into: &finish)
            if configuration.durable {
                let output = engine.store
                if let problem = await configuration.engine.blocking.perform(on: .syncs, { () -> String? in
                    do { try output.synchronize() } catch { return "\(error)" }
                    return nil
                }) {
                    return report("\(parent.key): its completed record is not durable (\(problem)); it is completed again once its lease ends")
                }
            }
            let next = try await store.completeParent(finish, runner: runner)
            if let hooks = configuration.hooks {
                await hooks(line)
                await endHooks(id: id, key: parent.key)
            }
            for parent in next { completeParent(parent) }
        } catch {
            report("a parent's record could not be completed (\(error)); it is completed again once its lease ends")
        }
    }

    /// The record `record` completed with its children's counts (as the engine completes a
    /// parent's), written through the engine's record writer in place of the key's record (and
    /// as the key's last line in the run log: its first, written when its own fetch ended, could
    /// not carry them), and set in `finish`.
    private func rewriteCompleted(
        key: String, record: [UInt8], counts: [String: Int], invalid: Int, firstInvalid: String?, total: Int,
        into finish: inout QueueFinish
    ) async -> [UInt8] {
        let parsed = (try? JSONParser.parse(record)) ?? .object([])
        let completed = ResultAssembly.completed(parsed, counts: counts, invalid: invalid, firstInvalid: firstInvalid, total: total)
        var line = await engine.write(completed: completed, key: key)
        if line.isEmpty { line = Array(JSONWriter.string(completed).utf8) }
        finish.status = completed["status"]?.stringValue ?? "failed"
        finish.error = completed["error"]?.stringValue
        finish.record = String(decoding: line, as: UTF8.self)
        return line
    }


    // MARK: - Hooks

    /// Runs the hooks of a job another runner ended and left them (claimed here for them alone),
    /// with its record; a runner without hooks only ends the job.
    private func runLeftHooks(id: Int64, key: String, record: [UInt8]) {
        let hooks = configuration.hooks
        if hooks != nil { report("\(key): its --on-finish hooks, left by a runner that stopped, run here") }
        wake.yield(.sideWork {
            await hooks?(record)
            await self.endHooks(id: id, key: key)
        })
    }

    /// Ends a job whose hooks ran (retried while the store is away, until a shutdown's grace is
    /// over: then its lease ends and another runner runs its hooks again).
    private func endHooks(id: Int64, key: String) async {
        let (store, runner) = (store, runner)
        _ = await retryingWhileTheStoreIsAway(
            {
                do {
                    try await store.hooksEnded(ids: [id], runner: runner)
                    return nil
                } catch {
                    return "\(error)"
                }
            },
            failed: { "\(key): its hooks ended, but the queue could not be told (\($0)); retrying" },
            back: "the queue is back: \(key) is done",
            givenUp: "\(key): the queue was not told that its hooks ended; they run again once its lease ends")
    }

    // MARK: - Waking

    /// Sleeps on the clock for `duration`, or until the bell rings (new jobs, a shutdown).
    private func sleepOrBell(_ duration: Duration) async {
        let (clock, bell) = (clock, bell)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await clock.sleep(for: duration) }
            group.addTask { await bell.wait() }
            await group.next()
            group.cancelAll()
        }
    }

    /// The notices of the queue, until the feed ends (its task is cancelled).
    private func listen() async {
        var lost = false
        while !Task.isCancelled {
            do {
                let notices = try await store.notifications(waitingUpTo: .milliseconds(250))
                if lost {
                    report("the queue's notices are back")
                    lost = false
                }
                for notice in notices { wake.yield(.notice(notice)) }
            } catch {
                if Task.isCancelled { return }
                if !lost { report("the queue's notices stopped (\(error)); reading it every --rescan until they are back") }
                lost = true
                guard (try? await clock.sleep(for: .seconds(1))) != nil else { return }
            }
        }
    }

    private func hear(_ notice: QueueNotice) {
        switch notice {
        case .jobs:
            bell.ring()
            scheduleBell.ring()
        case .cancel(let key):
            let now = timeline.now
            state.withLock { state in
                state.cancels[key] = now
                // Kept an hour: long enough for any job claimed before it to start.
                state.cancels = state.cancels.filter { now - $0.value < .seconds(3600) }
            }
            onEvent(.cancelRequested(key: key, cancelledRunning: engine.taskManager.cancel(key: key)))
        case .pause(let host, let milliseconds, let from):
            if from != runner { engine.pacer.pause(host: host, for: .milliseconds(milliseconds), fromFleet: true) }
        case .finished(let key, let kind, let status, let from):
            if configuration.followsFleetEvents && from != runner { onEvent(.fleetFinished(key: key, kind: kind, status: status, runner: from)) }
        }
    }

    /// At the start and after each renewal: jobs abandoned 3 times failed, old rows pruned hourly.
    private func maintain() async {
        if let abandoned = try? await store.failAbandoned() {  // (an outage is said by the renewal)
            for (key, record, reason) in abandoned.hooksFailed {
                // Never silently: said, counted, and in the event stream.
                report("\(key): \(reason)")
                if let result = JobResult(record: Array(record.utf8)) { observer.hookFailed(result, reason: reason) }
            }
        }
        let now = timeline.now
        guard let keep = configuration.keep, state.withLock({ state in
            guard state.pruned.map({ now - $0 >= .seconds(3600) }) ?? true else { return false }
            state.pruned = now
            return true
        }) else { return }
        do {
            let count = try await store.prune(olderThan: keep)
            if count > 0 { report("\(count) finished job\(count == 1 ? "" : "s") older than --keep removed from the queue") }
        } catch {
            report("finished jobs could not be pruned: \(error)")
        }
    }

    /// Every third of the lease: this runner's claims and keys renewed, key unlocks that failed
    /// retried, then `maintain()`.
    private func renew() async {
        do {
            let asked = timeline.now
            try await store.heartbeat(runner: runner)
            renewed.withLock { $0 = asked }
        } catch {
            report("leases could not be renewed: \(error)")
        }
        writer.retryUnlocks()
        await maintain()
    }
}

/// A bell that wakes one waiter: rung before anyone waits, the next wait returns at once.
final class Bell: Sendable {
    private let state = Mutex<(rung: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func ring() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.rung = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns once rung (or at once if it was), or when the task is cancelled.
    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.rung || Task.isCancelled {
                        state.rung = false
                        return true
                    }
                    state.waiter?.resume()
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }
}

extension QueueFeed: WatchFeed {
    package var source: String { "the queue \(store.display) as \(runner)" }
    package var stopNotice: String { "no more jobs are claimed" }
    package var grace: Duration { configuration.grace }
    package var status: WatchStatus { .queue(running: running) }
}
