import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `submit`, `watch`, `cancel` and `status` on a PostgreSQL queue (`--queue URL` or
/// `$RUNNER_QUEUE`) instead of the spool folder: runners on many machines share its jobs.
enum QueueCommands {
    static let queueOption = CommandOption<String?>.text(
        "queue", "URL",
        help: "A PostgreSQL queue that runners on many machines share, instead of the spool folder: a libpq URL such as postgresql://runner@db.example/jobs.",
        defaultText: "$RUNNER_QUEUE, else the spool folder")

    static let keepOption = CommandOption<Int>.int(
        "keep", "DAYS", default: 7, range: 0...36_500,
        help: "With --queue: how many days finished jobs stay in the queue (for status and records) before they are removed.")

    /// The queue's URL: `--queue`, else a non-empty `$RUNNER_QUEUE`; nil: the spool folder.
    static func url(_ arguments: ParsedArguments) throws(UsageError) -> String? {
        if let given = try arguments[queueOption] { return given }
        let environment = ProcessInfo.processInfo.environment["RUNNER_QUEUE"] ?? ""
        return environment.isEmpty ? nil : environment
    }

    /// A queue error in one line: exit 2 for the command line's fault, 1 for the database's.
    static func fail(_ error: QueueError) -> Int32 {
        Console.error(error.message)
        return error.usage ? 2 : 1
    }

    // MARK: - submit

    /// Every job of every file in one transaction, or none. The files are valid (checked first).
    static func submit(_ inputs: JobFileArguments, registry: KindRegistry, url: String) -> Int32 {
        var submissions: [JobQueue.Submission] = []
        var counts: [Int] = []
        for file in inputs.files {
            guard let jobs = Self.submissions(of: file, name: (inputs.display(file) as NSString).lastPathComponent, registry: registry) else {
                Console.error(inputs.display(message: "changed while it was being queued; nothing was queued"))
                return 1
            }
            submissions += jobs
            counts.append(jobs.count)
        }
        let queue: JobQueue
        do {
            queue = try JobQueue(url: url)
            try queue.submit(submissions)
        } catch {
            Console.err("Nothing was queued.")
            return fail(error)
        }
        for (file, jobs) in zip(inputs.files, counts) {
            Console.out("queued \(inputs.display(file)) in \(queue.connection.display) (\(jobs) job\(jobs == 1 ? "" : "s"))")
        }
        return 0
    }

    /// The jobs of a valid job file as rows of the queue (nil: it is not valid any more).
    static func submissions(of file: String, name: String, registry: KindRegistry) -> [JobQueue.Submission]? {
        let reader = JobFileReader(path: file, registry: registry, limits: .producer, checkingSecrets: false)
        var submissions: [JobQueue.Submission] = []
        while let element = reader.next() {
            guard case .success(let job) = element, let stored = reader.lastJob else { return nil }
            let value: JSONValue = .object([("job", .object(stored.object)), ("defaults", .object(stored.defaults))])
            submissions.append(JobQueue.Submission(key: job.key, kind: job.kindName, job: JSONWriter.string(value), file: name))
        }
        return submissions
    }

    // MARK: - status

    static func status(url: String, json: Bool) -> Int32 {
        let status: JobQueue.Status
        let display: String
        do {
            let queue = try JobQueue(url: url)
            status = try queue.status()
            display = queue.connection.display
        } catch {
            return fail(error)
        }
        let now = Date()
        if json {
            Console.out(JSONWriter.string(.object(statusJSON(status, display: display, now: now))))
            return 0
        }
        var lines = ["queue:    \(display)", "queued:   \(status.queued)", "running:  \(status.running.count)"]
        for job in status.running.prefix(20) {
            lines.append("  \(Printable.escaped(job.key))  \(SpoolStatus.age(now.timeIntervalSince(job.startedAt)))  (runner \(job.runner))")
        }
        lines.append("done:     \(status.done)")
        lines.append("failed:   \(status.failed)")
        for failed in status.latestFailed.prefix(5) {
            lines.append(Printable.escaped("  \(failed.key)  \(failed.status)" + (failed.reason.map { ": \($0)" } ?? "")))
        }
        if status.cancelled > 0 { lines.append("cancelled: \(status.cancelled)") }
        Console.out(lines.joined(separator: "\n"))
        return 0
    }

    /// `status --queue --json`'s members.
    static func statusJSON(_ status: JobQueue.Status, display: String, now: Date) -> [(key: String, value: JSONValue)] {
        let latest: JSONValue = status.latestFailed.first.map { failed in
            var fields: [(key: String, value: JSONValue)] = [
                ("key", .string(failed.key)), ("status", .string(failed.status)), ("at", .string(Timestamp.iso8601(failed.at))),
            ]
            if let reason = failed.reason { fields.append(("reason", .string(reason))) }
            return .object(fields)
        } ?? .null
        return [
            ("queue", .string(display)),
            ("queued", .object([("count", JSONValue(status.queued))])),
            ("running", .array(status.running.map { job in
                .object([
                    ("key", .string(job.key)), ("runner", .string(job.runner)), ("startedAt", .string(Timestamp.iso8601(job.startedAt))),
                    ("ageMs", JSONValue(max(0, Int(now.timeIntervalSince(job.startedAt) * 1000)))),
                ])
            })),
            ("done", .object([("count", JSONValue(status.done))])),
            ("failed", .object([
                ("count", JSONValue(status.failed)), ("latest", latest),
                ("recent", .array(status.latestFailed.map { failed in
                    .object([("key", .string(failed.key)), ("status", .string(failed.status)), ("reason", failed.reason.map { .string($0) } ?? .null)])
                })),
            ])),
            ("cancelled", .object([("count", JSONValue(status.cancelled))])),
        ]
    }

    // MARK: - cancel

    static func cancel(key: String, url: String) -> Int32 {
        let outcome: (queued: Int, running: [String])
        let display: String
        do {
            let queue = try JobQueue(url: url)
            outcome = try queue.cancel(key: key)
            display = queue.connection.display
        } catch {
            return fail(error)
        }
        guard outcome.queued > 0 || !outcome.running.isEmpty else {
            Console.err("runner: nothing with the key \(key) is running or queued in \(display)")
            return 1
        }
        var found: [String] = []
        if !outcome.running.isEmpty { found.append("its running task (runner \(outcome.running.joined(separator: ", "))) is cancelled") }
        if outcome.queued > 0 { found.append("\(outcome.queued) queued job\(outcome.queued == 1 ? "" : "s") cancelled") }
        Console.out("cancel requested for \(key) in \(display): " + found.joined(separator: "; "))
        return 0
    }

    // MARK: - watch

    /// A watcher of the queue: the same engine and options as the folder's watcher.
    static func watch(_ options: SpoolCommands.WatchOptions, url: String) async -> Int32 {
        var configuration = options.feed.engine
        do {
            configuration = try configuration.prepared()
            configuration.store!.sweepLeftovers()
            configuration.runLog = try RunLog(store: configuration.store!)
        } catch {
            Console.error("\(error)")
            return 2
        }
        let lease = ProcessInfo.processInfo.environment["RUNNER_QUEUE_LEASE"].flatMap(Double.init).map { Duration.seconds($0) } ?? .seconds(30)
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, host.count)
        let runner = "\(String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))-\(getpid())"
        let feed: QueueFeed
        do {
            feed = try QueueFeed(
                url: url, runner: runner, registry: configuration.registry, limits: configuration.limits,
                rescan: options.feed.rescanInterval, lease: lease, keep: .seconds(options.keepDays * 86_400),
                syncing: options.feed.durable ? configuration.store : nil,
                // While every slot is busy, a claim takes a quarter of the slots' worth ahead.
                prefetch: min(16, configuration.concurrency / 4),
                report: { Console.err("runner: \($0)") })
        } catch {
            return fail(error)
        }
        configuration.keyLock = feed.keyLock
        configuration.sharedPacing = feed.sharedPacing
        let events = options.events.map { $0.stream() }
        defer { EngineCommandOptions.finish(events) }
        // Prometheus metrics (--metrics): the jobs' counters and the jobs running now.
        let service = WatchService(notifier: nil, metricsPath: options.metrics)
        let hooks = options.hook.map { hook in
            OnFinishHooks(
                command: hook.command, store: configuration.store!, concurrency: hook.concurrency, timeout: hook.timeout,
                sync: options.feed.durable, observer: ObserverFanout([service.metrics] + (events.map { [$0] } ?? [])),
                report: { Console.err($0) })
        }
        // The live page and API (--listen), over a connection of their own.
        let engineHolder = Locked<JobEngine?>(nil)
        let live: (server: LiveServer, observers: [any RunObserver])?
        do {
            live = try options.live.map { settings throws(QueueError) in
                LiveSite.make(
                    settings, source: QueueLiveSource(queue: try JobQueue(url: url), registry: configuration.registry),
                    registry: configuration.registry, hosts: { engineHolder.value?.hostActivity ?? [] })
            }
        } catch {
            return fail(error)
        }
        let engine: JobEngine
        do {
            engine = try JobEngine(
                configuration: configuration,
                observer: ObserverFanout(
                    [WatchReporter(json: options.json), service.metrics] + (events.map { [$0] } ?? []) + (hooks.map { [$0] } ?? [])
                        + (live?.observers ?? [])))
        } catch {
            Console.error("\(error)")
            return 2
        }
        engineHolder.withLock { $0 = engine }
        if let live, let settings = options.live, !LiveSite.start(live.server, settings) { return 2 }
        defer { live?.server.stop() }
        feed.freeSlots.withLock { $0 = { engine.freeSlots } }
        let concurrency = configuration.concurrency
        service.metrics.follow(running: { concurrency - engine.freeSlots })
        feed.pacer.withLock { $0 = engine.pacer }
        feed.cancelKey.withLock { $0 = { key in
            if engine.taskManager.cancel(key: key) { Console.errLine("runner: cancel \(key): the running task is cancelled") }
        } }
        let grace = options.feed.grace
        // Under systemd (Type=notify): READY=1 once connected, a STATUS= line and WATCHDOG=1 at
        // every heartbeat, STOPPING=1 on a signal.
        let notifier = SystemdNotifier.fromEnvironment(ProcessInfo.processInfo.environment)
        let status: @Sendable () -> String = {
            "STATUS=\(concurrency - engine.freeSlots) running; watching the queue \(feed.queue.connection.display) as \(runner)"
        }
        let heartbeat = notifier.map { notifier in
            Task {
                notifier.send("READY=1\n" + status())
                while (try? await Task.sleep(for: notifier.watchdogInterval ?? .seconds(5))) != nil {
                    notifier.send((notifier.watchdogInterval != nil ? "WATCHDOG=1\n" : "") + status())
                }
            }
        }
        defer { heartbeat?.cancel() }
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { number in
            notifier?.send("STOPPING=1\nSTATUS=stopping: no more jobs are claimed")
            Console.err("runner: \(SpoolCommands.signalName(number)): no more jobs are claimed; running jobs have \(grace) to end")
            feed.shutdown()
            Task {
                try? await Task.sleep(for: grace)
                engine.taskManager.cancelAll()
            }
        }
        defer { _ = signals.stop() }
        Console.err("runner: watching the queue \(feed.queue.connection.display) as \(runner); results in \(RunReporter.relative(configuration.store!.root))/")
        let metricsTask = service.startWritingMetrics()
        _ = await engine.run(feed)
        await hooks?.finish()
        metricsTask?.cancel()
        service.stopped(counts: nil)
        Console.err("runner: stopped")
        return 0
    }
}

/// The queue as a live page's source: fleet-wide counts and status, jobs posted queued in one
/// transaction, cancels as `runner cancel KEY --queue`.
struct QueueLiveSource: LiveSource {
    let queue: JobQueue
    let registry: KindRegistry

    func counts(runningHere: Int) -> [(String, Int)] {
        guard let status = try? queue.status() else { return [("jobs running here", runningHere)] }
        return [
            ("jobs queued", status.queued), ("jobs running", max(status.running.count, runningHere)), ("running here", runningHere),
            ("jobs done", status.done), ("jobs failed", status.failed),
        ]
    }

    func status() -> [(key: String, value: JSONValue)] {
        do {
            return QueueCommands.statusJSON(try queue.status(), display: queue.connection.display, now: Date())
        } catch {
            return [("queue", .string(queue.connection.display)), ("error", .string("\(error)"))]
        }
    }

    func queue(file path: String, name: String) throws -> String {
        guard let jobs = QueueCommands.submissions(of: path, name: name, registry: registry) else {
            throw QueueError("the job file changed while it was being queued; nothing was queued")
        }
        try queue.submit(jobs)
        return name
    }

    func cancel(key: String) -> LiveServer.Response {
        let outcome: (queued: Int, running: [String])
        do {
            outcome = try queue.cancel(key: key)
        } catch {
            return .json(500, .object([("error", .string("\(error)"))]))
        }
        guard outcome.queued > 0 || !outcome.running.isEmpty else {
            return .json(404, .object([("error", .string("nothing with the key \(key) is running or queued"))]))
        }
        return .json(202, .object([
            ("key", .string(key)), ("running", .bool(!outcome.running.isEmpty)), ("runners", .array(outcome.running.map { .string($0) })),
            ("queuedCancelled", JSONValue(outcome.queued)),
        ]))
    }
}
