import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner watch`: runs the jobs others hand in, from the spool folder or, with `--queue`, from a
/// queue a fleet shares, until SIGTERM or SIGINT (SIGHUP reopens its files). What both watchers
/// share is made here, once: their options, the engine and its output, what hears the jobs
/// (`JobObservers`), the service's notices and metrics, and the signals.
enum WatchCommand {
    private static let spoolDefaults = SpoolFeed.Configuration.watch(spool: Spool(root: Spool.defaultRoot), registry: KindRegistry())

    static let grace = CommandOption<Duration>.seconds(
        "grace", default: spoolDefaults.grace, help: "On SIGTERM or SIGINT, how long running jobs may go on before they are cancelled (a folder's files go back to inbox/) or, with --queue, handed back to the queue.")
    static let settle = CommandOption<Duration>.seconds(
        "settle", default: spoolDefaults.settle,
        help: "A file written in place (not renamed in) is taken once no process writes it and it has not changed for this long (not with --queue).")
    static let rescan = CommandOption<Duration>.seconds(
        "rescan", default: spoolDefaults.rescanInterval, help: "How often the inbox (or the queue) is read in full, besides inotify (or the queue's notices).")
    static let metrics = CommandOption<String?>.text(
        "metrics", "FILE", help: "Write Prometheus metrics to FILE every 10 s and at exit (for node_exporter's textfile collector).")
    static let json = CommandOption<Bool>.flag("json", help: "Print each job's result record as one JSON line.")

    /// The options of the spool's watcher alone: refused with `--queue`, never ignored.
    private static let spoolOnly = [SpoolCommands.spoolOption.spec.name, settle.spec.name, SpoolCommands.groupOption.spec.name]

    static let spec: CommandSpec = CommandSpec(
        name: "watch",
        summary: "Run the job files that arrive in the spool's inbox (or the jobs of a shared queue, with --queue), until SIGTERM or SIGINT; SIGHUP reopens its files.",
        options: [SpoolCommands.spoolOption.spec] + EngineCommandOptions.options
            + [grace.spec, settle.spec, rescan.spec, SpoolCommands.groupOption.spec, metrics.spec, json.spec]
            + [QueueCommands.queueOption.spec, QueueCommands.keepOption.spec, QueueCommands.nameOption.spec] + LiveOptions.specs,
        run: { arguments in await run(arguments) })

    /// What both watchers take.
    struct Options {
        /// The engine's configuration, its kinds and the config's requests in it.
        var engine: JobEngine.Configuration
        var grace: Duration
        var rescan: Duration
        var metrics: String?
        var json: Bool
        var events: EngineCommandOptions.EventsTarget?
        var hook: (command: String, concurrency: Int, timeout: Duration)?
        var live: LiveOptions.Settings?
    }

    static func run(_ arguments: ParsedArguments) async -> Int32 {
        var options: Options
        let queue: String?
        do {
            queue = try QueueCommands.url(arguments)
            if queue != nil, let given = spoolOnly.first(where: { arguments.value($0) != nil }) {
                throw UsageError("--\(given) is an option of the spool's watcher; a watcher of a queue (--queue) takes no spool folder")
            }
            if queue == nil, arguments.value(QueueCommands.keepOption.spec.name) != nil { throw UsageError("--keep needs --queue") }
            if queue == nil, arguments.value(QueueCommands.nameOption.spec.name) != nil { throw UsageError("--name needs --queue") }
            var engine = JobEngine.Configuration.run(registry: KindRegistry())
            try EngineCommandOptions.apply(arguments, to: &engine)
            // Whoever drops or submits a job is not the operator: no secret references.
            engine.limits.allowsSecretReferences = false
            options = Options(
                engine: engine, grace: try arguments[grace], rescan: try arguments[rescan], metrics: try arguments[metrics],
                json: try arguments[json], events: try EngineCommandOptions.eventsTarget(arguments, appends: true),
                hook: try EngineCommandOptions.hook(arguments), live: try LiveOptions.settings(arguments))
            guard options.rescan >= .milliseconds(10) else { throw UsageError("--rescan must be at least 0.01 seconds") }
        } catch {
            return Runner.usageError(error, spec: spec)
        }
        guard let setup = KindOptions.setup(arguments) else { return 2 }
        options.engine.registry = setup.registry
        options.engine.requests.merge(setup.requests)
        if let queue {
            let keepDays: Int
            let name: String?
            do {
                keepDays = try arguments[QueueCommands.keepOption]
                name = try QueueCommands.watcherName(arguments)
            } catch {
                return Runner.usageError(error, spec: spec)
            }
            return await QueueCommands.watch(options, url: queue, keepDays: keepDays, name: name)
        }
        var feed: SpoolFeed.Configuration
        do {
            feed = SpoolFeed.Configuration(spool: try SpoolCommands.spoolWithGroup(arguments), engine: options.engine)
            feed.settle = try arguments[settle]
        } catch {
            return Runner.usageError(error, spec: spec)
        }
        feed.grace = options.grace
        feed.rescanInterval = options.rescan
        return await watchSpool(feed, options)
    }

    // MARK: - What both watchers share

    /// The engine's output made ready for a watcher: the store opened (or made), temporary files
    /// of crashed runners swept, this session's run log begun. False (said) when it cannot be.
    static func prepareOutput(_ engine: inout JobEngine.Configuration) -> Bool {
        do {
            engine = try engine.prepared()
            let store = engine.store!
            store.sweepLeftovers()
            engine.runLog = try RunLog(store: store)
            return true
        } catch {
            Console.error("\(error)")
            return false
        }
    }

    /// The reporter, the metrics, the events, the hooks and the live page's observers.
    static func observers(
        _ options: Options, store: OutputStore, metrics: Metrics, sync: Bool, live: [any RunObserver], hooksRunByFeed: Bool = false
    ) -> JobObservers {
        JobObservers(
            reporter: WatchReporter(json: options.json), metrics: metrics, events: options.events, hook: options.hook, store: store,
            sync: sync, live: live, hooksRunByFeed: hooksRunByFeed)
    }

    /// What a watcher serves while it runs: the live page (`--listen`), and the signals that stop
    /// it (SIGINT, SIGTERM) or reopen its files (SIGHUP). Nil (said) when the page cannot be served.
    struct Serving {
        let live: LiveServer?
        let signals: SignalWatcher
        let reopen: SignalWatcher

        init?(
            live: LiveServer?, options: Options, service: WatchService, events: EventStream?, stopping: String, grace: Duration,
            stop: @escaping @Sendable () -> Void
        ) {
            if let live, let settings = options.live, !LiveSite.start(live, settings) { return nil }
            self.live = live
            signals = onStopSignal(service, what: stopping, grace: grace, stop)
            reopen = onReopenSignal(events: events, service: service, live: live.flatMap { live in options.live.map { (live, $0) } })
        }

        func end() {
            _ = signals.stop()
            _ = reopen.stop()
            live?.stop()
        }
    }

    /// Calls `stop` on the first SIGINT or SIGTERM, after saying so (the service manager too),
    /// and on each one after.
    static func onStopSignal(_ service: WatchService, what: String, grace: Duration, _ stop: @escaping @Sendable () -> Void) -> SignalWatcher {
        SignalWatcher(signals: [SIGINT, SIGTERM]) { number in
            service.stopping(what)
            Console.err("runner: \(signalName(number)): \(what); running jobs have \(grace) to end")
            stop()
        }
    }

    /// SIGHUP, as logrotate's postrotate sends it: the files the watcher writes and reads are
    /// opened anew (`--events`, `--metrics`, the `--listen-token` file), said in one line (a file
    /// not opened anew is said with why, not as reopened); the watcher goes on.
    static func onReopenSignal(
        events: EventStream?, service: WatchService, live: (server: LiveServer, settings: LiveOptions.Settings)?
    ) -> SignalWatcher {
        SignalWatcher(signals: [SIGHUP]) { _ in
            var reopened: [String] = []
            // What was not reopened, and why: said as such, never as reopened.
            var notes: [String] = []
            if let events {
                switch events.reopen() {
                case .reopened: reopened.append("--events \(events.path)")
                case .waitingForReader: notes.append("--events \(events.path) has no reader now; opened anew when one comes")
                case .pending: notes.append("--events \(events.path) waits for its reader to take what it is behind; opened anew then")
                case .failed(let reason): notes.append("--events not reopened: \(reason)")
                }
            }
            if let path = service.metricsPath {
                service.writeMetricsNow()
                reopened.append("--metrics \(path)")
            }
            if let live, let path = live.settings.tokenPath {
                do {
                    live.server.setToken(try LiveOptions.readToken(path))
                    reopened.append("--listen-token \(path)")
                } catch {
                    Console.err("runner: SIGHUP: \(error); the token read before stands")
                }
            }
            let said = (reopened.isEmpty ? (notes.isEmpty ? ["no file to reopen"] : []) : ["reopened " + reopened.joined(separator: ", ")]) + notes
            Console.err("runner: SIGHUP: " + said.joined(separator: "; ") + "; still watching")
        }
    }

    static func signalName(_ number: Int32) -> String {
        switch number {
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        default: return "SIGTERM"
        }
    }

    // MARK: - The spool's watcher

    static func watchSpool(_ given: SpoolFeed.Configuration, _ options: Options) async -> Int32 {
        var configuration = given
        let spool = configuration.spool
        do {
            try spool.makeFolders()
        } catch {
            Console.error("\(error)")
            return 2
        }
        guard prepareOutput(&configuration.engine) else { return 2 }
        let store = configuration.engine.store!
        // Operating as a service: systemd's notify protocol and Prometheus metrics.
        let service = WatchService(notifier: SystemdNotifier.fromEnvironment(ProcessInfo.processInfo.environment), metricsPath: options.metrics)
        configuration.heartbeatInterval = service.heartbeatInterval
        // The live page and API: the board follows the engine, the server's readers its events.
        let engine = Locked<JobEngine?>(nil)
        let live = options.live.map { settings in
            LiveSite.make(
                settings, source: SpoolLiveSource(spool: spool, registry: configuration.engine.registry),
                registry: configuration.engine.registry, hosts: { engine.value?.hostActivity ?? [] })
        }
        let observers = Self.observers(options, store: store, metrics: service.metrics, sync: configuration.durable, live: live?.observers ?? [])
        defer { EngineCommandOptions.finish(observers.events) }
        // Hooks: a file moves on only once the hooks of its jobs ended.
        if let hooks = observers.hooks {
            configuration.beforeMove = { await hooks.settle() }
            configuration.replayed = { hooks.replay(record: $0) }
        }
        let feed: SpoolFeed
        do {
            feed = try SpoolFeed(
                configuration: configuration, observer: observers.observer,
                onEvent: { event in
                    service.handle(event)
                    log(event, spool: spool, out: store.root)
                })
        } catch {
            Console.error("\(error)")
            return 2
        }
        engine.withLock { $0 = feed.engine }
        guard let serving = Serving(
            live: live?.server, options: options, service: service, events: observers.events, stopping: "no more files are taken",
            grace: configuration.grace, stop: { feed.shutdown() })
        else { return 2 }
        defer { serving.end() }
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
        await observers.hooks?.finish()
        service.stopped(counts: feed.counts)
        Console.err("runner: stopped")
        return 0
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
}

/// What `runner watch` shows of jobs: notices, and with `--json` every record.
final class WatchReporter: RunObserver {
    private let json: Bool

    init(json: Bool) { self.json = json }

    func jobNotice(_ job: JobDescriptor, message: String) { Console.errLine("runner: \(job.key): \(message)") }
    /// A kind's program's stderr: `<key>: <line>`.
    func jobLog(_ job: JobDescriptor, line: String) { Console.errLine("\(job.key): \(line)") }
    func problem(_ message: String) { Console.errLine("runner: \(message)") }
    func jobFinished(_ result: JobResult) {
        if json { Console.out(result.jsonLine) }
    }
}
