import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner watch`: runs the jobs others hand in, from the spool folder or, with `--queue`, from a
/// queue a fleet shares, until SIGTERM or SIGINT (SIGHUP reopens its files). It parses the
/// options and builds one `Watcher` (the feed, the page, metrics, notices, signals) and runs it;
/// what both feeds share is made once: the engine and its output, what hears the jobs.
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
            + [QueueOptions.queue.spec, QueueOptions.keep.spec, QueueOptions.name.spec] + LiveOptions.specs,
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
        // Caught from the start: a signal while the watcher starts stops it once it runs.
        let signals = SignalWatcher.stream(of: [SIGINT, SIGTERM, SIGHUP])
        var options: Options
        let queue: String?
        do {
            queue = try QueueOptions.url(arguments)
            if queue != nil, let given = spoolOnly.first(where: { arguments.value($0) != nil }) {
                throw UsageError("--\(given) is an option of the spool's watcher; a watcher of a queue (--queue) takes no spool folder")
            }
            if queue == nil, arguments.value(QueueOptions.keep.spec.name) != nil { throw UsageError("--keep needs --queue") }
            if queue == nil, arguments.value(QueueOptions.name.spec.name) != nil { throw UsageError("--name needs --queue") }
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
                keepDays = try arguments[QueueOptions.keep]
                name = try QueueOptions.watcherName(arguments)
            } catch {
                return Runner.usageError(error, spec: spec)
            }
            return await watchQueue(options, url: queue, keepDays: keepDays, name: name, signals: signals)
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
        return await watchSpool(feed, options, signals: signals)
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

    /// The service: systemd's notify protocol (from the environment) and `--metrics`.
    static func service(_ options: Options) -> WatchService {
        WatchService(notifier: SystemdNotifier.fromEnvironment(ProcessInfo.processInfo.environment), metricsPath: options.metrics)
    }

    /// What the watcher runs beside its feed: the page, the `--events` file, the hooks left when
    /// the feed ends, its lines on standard error.
    static func watching(
        _ options: Options, service: WatchService, live: (server: LiveServer, observers: [any RunObserver])?, observers: JobObservers,
        out: String
    ) -> Watcher.Configuration {
        var configuration = Watcher.Configuration(service: service, out: out, say: { Console.err($0) })
        if let live, let settings = options.live {
            configuration.page = Watcher.Page(
                server: live.server, host: settings.host, tokenFile: settings.tokenPath, readToken: { try LiveOptions.readToken($0) })
        }
        configuration.events = observers.events
        if let hooks = observers.hooks { configuration.afterFeed = { await hooks.finish() } }
        configuration.clock = options.engine.clock
        return configuration
    }

    // MARK: - The spool's watcher

    static func watchSpool(_ given: SpoolFeed.Configuration, _ options: Options, signals: AsyncStream<Int32>) async -> Int32 {
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
        let service = service(options)
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
        let watcher: Watcher
        do {
            watcher = try Watcher(configuration: watching(options, service: service, live: live, observers: observers, out: store.root)) { onEvent in
                try SpoolFeed(configuration: configuration, observer: observers.observer, onEvent: onEvent)
            }
        } catch {
            Console.error("\(error)")
            return 2
        }
        engine.withLock { $0 = watcher.engine }
        return await watcher.run(signals: signals)
    }

    // MARK: - A queue's watcher

    /// A watcher of the queue: the same engine, output and observers as the spool's watcher,
    /// its jobs from the queue.
    static func watchQueue(_ given: Options, url: String, keepDays: Int, name: String?, signals: AsyncStream<Int32>) async -> Int32 {
        var options = given
        var configuration = QueueFeed.Configuration.watch(queue: url, registry: options.engine.registry)
        if let name { configuration.runner = name }
        // Each event names the watcher, as the fleet's ends on the page's stream do.
        options.events?.runner = configuration.runner
        configuration.engine = options.engine
        configuration.grace = options.grace
        configuration.rescanInterval = options.rescan
        configuration.keep = .seconds(keepDays * 86_400)
        configuration.followsFleetEvents = options.live != nil
        guard prepareOutput(&configuration.engine) else { return 2 }
        let store = configuration.engine.store!
        let service = service(options)
        configuration.heartbeatInterval = service.heartbeatInterval
        let queueStore: any QueueStore
        do {
            configuration = try await configuration.prepared()
            queueStore = configuration.store!
        } catch {
            return QueueOptions.fail(error)
        }
        defer { queueStore.close() }
        // The live page and API (--listen), from a snapshot, asking through the store.
        let engine = Locked<JobEngine?>(nil)
        var source: QueueLiveSource?
        var live: (server: LiveServer, observers: [any RunObserver])?
        if let settings = options.live, let producing = queueStore as? any QueueStore & QueueProducing {
            let page = QueueLiveSource(store: producing, registry: configuration.engine.registry, runner: configuration.runner)
            live = LiveSite.make(
                settings, source: page, registry: configuration.engine.registry, hosts: { engine.value?.hostActivity ?? [] },
                runner: configuration.runner)
            source = page
        }
        let observers = Self.observers(
            options, store: store, metrics: service.metrics, sync: configuration.durable, live: live?.observers ?? [], hooksRunByFeed: true)
        defer { EngineCommandOptions.finish(observers.events) }
        // A job is done in the queue only once its hooks ended; the feed runs them.
        if let hooks = observers.hooks { configuration.hooks = { line in await hooks.run(record: line) } }
        var watching = watching(options, service: service, live: live, observers: observers, out: store.root)
        if let source {
            let clock = options.engine.clock
            watching.alongside = [{ await source.refreshing(every: .seconds(1), clock: clock) }]
        }
        let watcher: Watcher
        let feed: QueueFeed
        do {
            let made = try Watcher(configuration: watching) { onEvent in
                try QueueFeed(configuration: configuration, observer: observers.observer, onEvent: onEvent)
            }
            watcher = made
            feed = made.feed as! QueueFeed  // made just above
        } catch {
            Console.error("\(error)")
            return 2
        }
        // The name is this process's from now on, or the watcher does not start.
        do { try await feed.register() } catch { return QueueOptions.fail(error) }
        engine.withLock { $0 = watcher.engine }
        return await watcher.run(signals: signals)
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
