import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner submit`, `watch`, `cancel` and `status`: the spool (see `Spool`).
enum SpoolCommands {
    static let spoolOption = CommandOption<String>.text(
        "spool", "DIR", default: Spool.defaultRoot, shown: "./\(Spool.defaultRoot)", help: "The spool folder.")

    static let groupOption = CommandOption<String?>.text(
        "group", "NAME", help: "A producers' group: spool folders are made 2770 with it.", defaultText: "0700, the watcher's user only")

    static func spool(_ arguments: ParsedArguments) throws(UsageError) -> Spool { Spool(root: try arguments[spoolOption]) }

    /// The spool with `--group` applied; a group that does not exist is a usage error.
    static func spoolWithGroup(_ arguments: ParsedArguments) throws(UsageError) -> Spool {
        guard let name = try arguments[groupOption] else { return try spool(arguments) }
        do {
            return Spool(root: try arguments[spoolOption], group: try Spool.groupID(named: name))
        } catch {
            throw UsageError("--group: \(error)")
        }
    }

    // MARK: - submit

    static let submit: CommandSpec = CommandSpec(
        name: "submit",
        summary: "Validate job files and queue them in the spool's inbox for a watcher.",
        synopsis: "FILE…",
        arguments: [("FILE…", "Job files (- is standard input); all are checked before any is queued. Each is copied in whole, atomically and durably.")],
        options: [spoolOption.spec, groupOption.spec, QueueCommands.queueOption.spec] + KindOptions.options,
        positionals: (1, nil),
        run: { arguments in
            guard let registry = KindOptions.registry(arguments, checkingSecrets: false) else { return 2 }
            let inputs: JobFileArguments
            do { inputs = try JobFileArguments(arguments.positionals) } catch { return Runner.usageError(error, spec: submit) }
            defer { inputs.remove() }
            var counts: [Int] = []
            var invalid = false
            for file in inputs.files {
                // A watcher expands no secret reference of a job: refused here already.
                let report = JobFileReader.validate(path: file, registry: registry, limits: .producer, checkingSecrets: false)
                for error in report.errors { Console.error(inputs.display(message: "\(error)")) }
                if !report.errors.isEmpty { invalid = true }
                counts.append(report.jobs)
            }
            if invalid {
                Console.err("Nothing was queued. See 'runner validate --help'.")
                return 2
            }
            let queue: String?
            do { queue = try QueueCommands.url(arguments) } catch { return Runner.usageError(error, spec: submit) }
            if let queue { return QueueCommands.submit(inputs, registry: registry, url: queue) }
            let spool: Spool
            do {
                spool = try spoolWithGroup(arguments)
            } catch {
                return Runner.usageError(error, spec: submit)
            }
            for (file, jobs) in zip(inputs.files, counts) {
                do {
                    let name = try spool.submit(file: file)
                    Console.out("queued \(inputs.display(file)) as \(RunReporter.relative(spool.inbox))/\(name) (\(jobs) job\(jobs == 1 ? "" : "s"))")
                } catch {
                    Console.error(inputs.display(message: "\(error)"))
                    return 1
                }
            }
            return 0
        })

    // MARK: - watch

    private static let feedDefaults = SpoolFeed.Configuration.watch(spool: Spool(root: Spool.defaultRoot), registry: KindRegistry())

    static let grace = CommandOption<Duration>.seconds(
        "grace", default: feedDefaults.grace, help: "On SIGTERM, SIGINT or SIGHUP, how long running jobs may go on before they are cancelled.")
    static let settle = CommandOption<Duration>.seconds(
        "settle", default: feedDefaults.settle,
        help: "A file written in place (not renamed in) is taken once no process writes it and it has not changed for this long.")
    static let rescan = CommandOption<Duration>.seconds("rescan", default: feedDefaults.rescanInterval, help: "How often the inbox is read in full, besides inotify.")
    static let watchMetrics = CommandOption<String?>.text(
        "metrics", "FILE", help: "Write Prometheus metrics to FILE every 10 s and at exit (for node_exporter's textfile collector).")
    static let watchJSON = CommandOption<Bool>.flag("json", help: "Print each job's result record as one JSON line.")

    private static let watchOptions: [CommandSpec.Option] = [
        grace.spec, settle.spec, rescan.spec, groupOption.spec, watchMetrics.spec, watchJSON.spec, QueueCommands.queueOption.spec,
        QueueCommands.keepOption.spec,
    ] + LiveOptions.specs

    static let watch: CommandSpec = CommandSpec(
        name: "watch",
        summary: "Run the job files that arrive in the spool's inbox, until SIGTERM, SIGINT or SIGHUP.",
        options: [spoolOption.spec] + EngineCommandOptions.options + watchOptions,
        run: { arguments in
            var options: WatchOptions
            do {
                var feed = SpoolFeed.Configuration.watch(spool: try spoolWithGroup(arguments), registry: KindRegistry())
                try EngineCommandOptions.apply(arguments, to: &feed.engine)
                // Whoever drops or submits a job is not the operator: no secret references.
                feed.engine.limits.allowsSecretReferences = false
                feed.grace = try arguments[grace]
                feed.settle = try arguments[settle]
                feed.rescanInterval = try arguments[rescan]
                guard feed.rescanInterval >= .milliseconds(10) else { throw UsageError("--rescan must be at least 0.01 seconds") }
                options = WatchOptions(
                    feed: feed, metrics: try arguments[watchMetrics], json: try arguments[watchJSON],
                    events: try EngineCommandOptions.eventsTarget(arguments), hook: try EngineCommandOptions.hook(arguments),
                    live: try LiveOptions.settings(arguments), queue: try QueueCommands.url(arguments),
                    keepDays: try arguments[QueueCommands.keepOption])
            } catch {
                return Runner.usageError(error, spec: watch)
            }
            guard let setup = KindOptions.setup(arguments) else { return 2 }
            options.feed.engine.registry = setup.registry
            options.feed.engine.requests.merge(setup.requests)
            return await runWatch(options)
        })

    /// `runner watch`'s options: the feed's configuration (the engine's inside it) and what is
    /// shown.
    struct WatchOptions {
        var feed: SpoolFeed.Configuration
        var metrics: String?
        var json = false
        var events: EngineCommandOptions.EventsTarget?
        var hook: (command: String, concurrency: Int, timeout: Duration)?
        var live: LiveOptions.Settings?
        /// A PostgreSQL queue to take jobs from instead of the spool folder.
        var queue: String?
        /// How many days the queue keeps finished jobs.
        var keepDays = 7
    }

    static func runWatch(_ options: WatchOptions) async -> Int32 {
        if let queue = options.queue { return await QueueCommands.watch(options, url: queue) }
        var configuration = options.feed
        let (spool, grace, json) = (configuration.spool, configuration.grace, options.json)
        do {
            try spool.makeFolders()
            configuration.engine = try configuration.engine.prepared()
            let store = configuration.engine.store!
            store.sweepLeftovers()  // temporary files of crashed runners
            configuration.engine.runLog = try RunLog(store: store)
        } catch {
            Console.error("\(error)")
            return 2
        }
        let out = configuration.engine.store!.root
        // Operating as a service: systemd's notify protocol and Prometheus metrics.
        let service = WatchService(notifier: SystemdNotifier.fromEnvironment(ProcessInfo.processInfo.environment), metricsPath: options.metrics)
        configuration.heartbeatInterval = service.heartbeatInterval
        let events = options.events.map { $0.stream() }
        defer { EngineCommandOptions.finish(events) }
        // Hooks: a file moves on only once the hooks of its jobs ended.
        let hooks = options.hook.map { hook in
            OnFinishHooks(
                command: hook.command, store: configuration.engine.store!, concurrency: hook.concurrency, timeout: hook.timeout,
                sync: configuration.durable, observer: ObserverFanout([service.metrics] + (events.map { [$0] } ?? [])),
                report: { Console.err($0) })
        }
        if let hooks { configuration.beforeMove = { await hooks.settle() } }
        // The live page and API: the board follows the engine, the server's readers its events.
        let engine = Locked<JobEngine?>(nil)
        let live = options.live.map { settings in
            LiveSite.make(
                settings, source: SpoolLiveSource(spool: spool, registry: configuration.engine.registry),
                registry: configuration.engine.registry, hosts: { engine.value?.hostActivity ?? [] })
        }
        let feed: SpoolFeed
        do {
            feed = try SpoolFeed(
                configuration: configuration,
                observer: ObserverFanout(
                    [WatchReporter(json: json), service.metrics] + (events.map { [$0] } ?? []) + (hooks.map { [$0] } ?? [])
                        + (live?.observers ?? [])),
                onEvent: { event in
                    service.handle(event)
                    log(event, spool: spool, out: out)
                })
        } catch {
            Console.error("\(error)")
            return 2
        }
        engine.withLock { $0 = feed.engine }
        if let live, let settings = options.live, !LiveSite.start(live.server, settings) { return 2 }
        defer { live?.server.stop() }
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { number in
            service.stopping()
            Console.err("runner: \(signalName(number)): no more files are taken; running jobs have \(grace) to end")
            feed.shutdown()
        }
        defer { _ = signals.stop() }
        let metricsTask = service.startWritingMetrics()
        do {
            try await feed.run()
        } catch {
            metricsTask?.cancel()
            Console.error("\(error)")
            return 1
        }
        metricsTask?.cancel()
        // Hooks of jobs that ended as the watcher stopped (their files went back to inbox/).
        await hooks?.finish()
        service.stopped(counts: feed.counts)
        Console.err("runner: stopped")
        return 0
    }

    static func signalName(_ number: Int32) -> String {
        switch number {
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        default: return "SIGTERM"
        }
    }

    static func log(_ event: SpoolFeed.Event, spool: Spool, out: String) {
        switch event {
        case .started(let id, let recovered):
            Console.err("runner: watching \(RunReporter.relative(spool.inbox)) (watcher \(id)); results in \(RunReporter.relative(out))/")
            if !recovered.isEmpty {
                Console.err("runner: put back in line \(recovered.count) file(s) a watcher left in active/: \(recovered.prefix(10).joined(separator: ", "))")
            }
        case .claimed, .ready, .heartbeat:
            break
        case .finished(let report):
            let counts = JobStatus.allCases.compactMap { status in report.counts[status].map { "\($0) \(status.rawValue)" } }
            var line = "runner: \(report.name): "
            switch report.outcome {
            case .done: line += "done"
            case .failed: line += "failed"
            case .returned: line += "back in inbox (not finished before shutdown)"
            }
            if report.finalName != report.name { line += " as \(report.finalName)" }
            if !counts.isEmpty { line += "; " + counts.joined(separator: ", ") }
            if let latency = report.startLatency {
                line += String(format: "; first job started %.2f ms after arrival", latency.inSeconds * 1000)
            }
            if report.outcome == .failed, let reason = report.reason?.split(separator: "\n").first { line += "\n  \(reason)" }
            Console.err(line)
        case .cancelRequested(let key, let cancelledRunning):
            Console.errLine("runner: cancel \(key): " + (cancelledRunning ? "the running task is cancelled" : "no task with that key is running; waiting jobs with it will not run"))
        case .problem(let message):
            Console.err("runner: \(message)")
        }
    }

    // MARK: - cancel

    static let cancel: CommandSpec = CommandSpec(
        name: "cancel",
        summary: "Cancel the running task with KEY, and waiting jobs with KEY, in every watcher of the spool.",
        synopsis: "KEY",
        arguments: [("KEY", "The job key, as in the job file or `runner status`.")],
        options: [spoolOption.spec, groupOption.spec, QueueCommands.queueOption.spec],
        positionals: (1, 1),
        run: { arguments in
            let key = arguments.positionals[0]
            guard !key.isEmpty else { return Runner.usageError(UsageError("KEY must not be empty"), spec: cancel) }
            let queue: String?
            do { queue = try QueueCommands.url(arguments) } catch { return Runner.usageError(error, spec: cancel) }
            if let queue { return QueueCommands.cancel(key: key, url: queue) }
            let spool: Spool
            do { spool = try spoolWithGroup(arguments) } catch { return Runner.usageError(error, spec: cancel) }
            guard spool.exists else { return noSpool(spool) }
            // The kinds of $RUNNER_KINDS and $RUNNER_CONFIG, to find keys files leave to be derived.
            let registry = KindOptions.setup(kinds: [], config: nil, checkingSecrets: false)?.registry ?? BuiltInKinds.registry()
            let running = spool.running(key: key)
            let waiting = spool.filesHolding(key: key, registry: registry)
            guard !running.isEmpty || !waiting.isEmpty else {
                Console.err("runner: nothing with the key \(key) is running or waiting in \(RunReporter.relative(spool.root)); no cancel request made")
                return 1
            }
            let path: String
            do {
                path = try spool.requestCancel(key: key)
            } catch {
                Console.error("\(error)")
                return 1
            }
            var found: [String] = []
            if !running.isEmpty { found.append("its running task (watcher pid \(running.map(String.init).joined(separator: ", "))) is cancelled") }
            if !waiting.isEmpty {
                let names = waiting.prefix(5).joined(separator: ", ") + (waiting.count > 5 ? ", …" : "")
                found.append("its jobs in \(waiting.count) waiting file\(waiting.count == 1 ? "" : "s") (\(names)) will not run")
            }
            Console.out("cancel requested for \(key) (\(RunReporter.relative(path))): " + found.joined(separator: "; "))
            return 0
        })

    /// `cancel` and `status` read a spool; they make none.
    static func noSpool(_ spool: Spool) -> Int32 {
        Console.error("there is no spool at \(RunReporter.relative(spool.root)) (runner submit or runner watch makes one); nothing was changed")
        return 2
    }

    // MARK: - status

    static let status: CommandSpec = CommandSpec(
        name: "status",
        summary: "Show the spool: queued files, running jobs with their age, done and failed files.",
        options: [spoolOption.spec, statusJSON.spec, QueueCommands.queueOption.spec],
        run: { arguments in
            let status: SpoolStatus
            let json: Bool
            do {
                if let queue = try QueueCommands.url(arguments) { return QueueCommands.status(url: queue, json: try arguments[statusJSON]) }
                let spool = try spool(arguments)
                guard spool.exists else { return noSpool(spool) }
                status = SpoolStatus.read(spool)
                json = try arguments[statusJSON]
            } catch {
                return Runner.usageError(error, spec: SpoolCommands.status)
            }
            Console.out(json ? JSONWriter.string(status.json) : status.text)
            return 0
        })

    static let statusJSON = CommandOption<Bool>.flag("json", help: "Print one JSON object, for programs.")
}

/// What `runner watch` shows of jobs: notices, and with `--json` every record.
final class WatchReporter: RunObserver {
    private let json: Bool

    init(json: Bool) { self.json = json }

    func jobNotice(_ job: JobDescriptor, message: String) { Console.errLine("runner: \(job.key): \(message)") }
    func problem(_ message: String) { Console.errLine("runner: \(message)") }
    func jobFinished(_ result: JobResult) {
        if json { Console.out(result.jsonLine) }
    }
}
