import Dispatch
import Foundation
import Glibc
import RunnerKinds
import RunnerKit
import Synchronization

/// `runner run FILE…`: validate every file, then run every job, then report.
enum RunCommand {
    static let shard = CommandOption<Shard?>(
        spec: .init(name: "shard", value: "I/N", help: "Run only the jobs whose key hashes to shard I of N (0 ≤ I < N; FNV-1a of the key)."),
        read: { text throws(UsageError) in
            guard let text else { return nil }
            guard let shard = Shard(text) else { throw UsageError("--shard must be I/N with 0 ≤ I < N, like 0/4, not '\(text)'") }
            return shard
        })
    static let resume = CommandOption<String?>.text(
        "resume", "RUNLOG|DIR",
        help: "Run only the jobs whose key did not end succeeded or notModified in this run log (out/runs/<run-id>.jsonl) or output directory (each key's last record).")
    static let wait = CommandOption<Bool>.flag("wait", help: "If another run uses the output directory, wait for it instead of exiting 3.")
    static let json = CommandOption<Bool>.flag("json", help: "Print each job's result record as one JSON line, children included.")
    static let metrics = CommandOption<String?>.text(
        "metrics", "FILE", help: "At the end, write Prometheus metrics to FILE (for node_exporter's textfile collector).")
    static let noSync = CommandOption<Bool>.flag("no-sync", help: "Do not make what the run wrote durable before it exits (for scratch runs).")
    static let maxFailed = CommandOption<RunSummary.FailureAllowance?>(
        spec: .init(
            name: "max-failed", value: "N|P%",
            help: "Exit 0 when at most N jobs (or P% of every job, children included) failed; they are still reported. Without it any failure exits 1 (4 when no top-level job succeeded)."),
        read: { text throws(UsageError) in
            guard let text else { return nil }
            guard let allowance = RunSummary.FailureAllowance(text) else {
                throw UsageError("--max-failed must be a number of jobs (like 3) or a percentage from 0% to 100% (like 2%), not '\(text)'")
            }
            return allowance
        })

    private static let ownOptions: [CommandSpec.Option] = [shard.spec, resume.spec, wait.spec, json.spec, metrics.spec, noSync.spec, maxFailed.spec]

    static let spec: CommandSpec = CommandSpec(
        name: "run",
        summary: "Run the jobs of job files: fetch, validate and write payloads and result records.",
        synopsis: "FILE…",
        arguments: [("FILE…", "Job files: one job, a batch {\"defaults\", \"jobs\"}, an array, or JSON Lines (.jsonl); - is standard input.")],
        options: EngineCommandOptions.options + ownOptions,
        positionals: (1, nil),
        run: { arguments in
            let options: Options
            let inputs: JobFileArguments
            do {
                options = try Options(arguments)
                inputs = try JobFileArguments(arguments.positionals)
            } catch {
                return Runner.usageError(error, spec: spec)
            }
            defer { inputs.remove() }
            return await execute(files: inputs.files, options: options, displayNames: inputs.displayNames)
        })

    struct Options {
        var engine: JobEngine.Configuration
        var shard: Shard?
        var wait: Bool
        var json: Bool
        var metrics: String?
        var events: EngineCommandOptions.EventsTarget?
        /// `--on-finish`, `--hook-concurrency`, `--hook-timeout`.
        var hook: (command: String, concurrency: Int, timeout: Duration)?
        var sync: Bool
        var maxFailed: RunSummary.FailureAllowance?
        /// `--resume RUNLOG|DIR`: the run log or output directory, and its keys that need no further run.
        var resume: (path: String, settled: Set<String>)?
        /// `--kinds` folders.
        var kindFolders: [String] = []
        var config: String?

        init(_ arguments: ParsedArguments) throws(UsageError) {
            engine = .run(registry: KindRegistry())
            try EngineCommandOptions.apply(arguments, to: &engine)
            shard = try arguments[RunCommand.shard]
            if let path = try arguments[RunCommand.resume] {
                do {
                    resume = (path, try RunLog.settledKeys(atPath: path))
                } catch {
                    throw UsageError("--resume: \(error)")
                }
            }
            wait = try arguments[RunCommand.wait]
            json = try arguments[RunCommand.json]
            metrics = try arguments[RunCommand.metrics]
            events = try EngineCommandOptions.eventsTarget(arguments)
            hook = try EngineCommandOptions.hook(arguments)
            sync = !(try arguments[noSync])
            maxFailed = try arguments[RunCommand.maxFailed]
            kindFolders = try arguments[KindOptions.kinds]
            config = try arguments[KindOptions.config]
        }
    }

    /// Exit code when another run holds the output directory.
    static let busyExitCode: Int32 = 3

    /// Exit codes: 0 every job (children included) succeeded or was not modified (a child's
    /// notFound is an answer), or no more failed than --max-failed allows; 1 some failed (or a
    /// file changed while it was read, or the output could not be made durable); 2 bad input
    /// (nothing ran); 3 the output directory is in use by another run; 4 no top-level job
    /// succeeded; 128 + the signal when interrupted (SIGINT 130, SIGTERM 143, SIGHUP 129).
    static func execute(files: [String], options given: Options, displayNames: [String: String] = [:]) async -> Int32 {
        guard let setup = KindOptions.setup(kinds: given.kindFolders, config: given.config) else { return 2 }
        let registry = setup.registry
        var options = given
        options.engine.registry = registry
        options.engine.requests.merge(setup.requests)
        let feed = BatchFeed(
            files: files, registry: registry, shard: options.shard, skipping: options.resume?.settled ?? [], limits: options.engine.limits)
        let validation = feed.validate()
        func show(_ error: JobFileError) {
            var message = error.description
            if let (file, display) = displayNames.first(where: { message.hasPrefix($0.key) }) {
                message = display + message.dropFirst(file.count)
            }
            Console.error(message)
        }
        if !validation.errors.isEmpty {
            validation.errors.forEach(show)
            Console.err("Nothing was run. See 'runner validate --help'.")
            return 2
        }
        if let resume = options.resume {
            let skipped = validation.skipped
            Console.err("runner: --resume: \(skipped) job\(skipped == 1 ? "" : "s") skipped (settled in \(resume.path)), \(validation.total) to run")
        }

        var configuration: JobEngine.Configuration
        let store: OutputStore
        let lock: RunLock
        let runLog: RunLog
        do {
            configuration = try options.engine.prepared()
            store = configuration.store!
            if options.wait { Console.err("runner: waiting for the output directory \(options.engine.out) to be free…") }
            lock = try RunLock(store: store, wait: options.wait)
            store.sweepLeftovers()  // temporary files of crashed runs
            runLog = try RunLog(store: store)
            if let resume = options.resume { runLog.appendSettled(validation.skippedKeys, source: resume.path) }
            configuration.runLog = runLog
            configuration.storeHeldAlone = true  // the lock keeps other runs and forget out
        } catch let busy as RunLock.Busy {
            Console.error(busy.description + "; wait for it, pass --wait, or use another --out")
            return busyExitCode
        } catch {
            Console.error("\(error)")
            return 2
        }
        let reporter = RunReporter(json: options.json, total: validation.total)
        let metrics = options.metrics.map { _ in Metrics() }
        let observers = JobObservers(
            reporter: reporter, metrics: metrics, events: options.events, hook: options.hook, store: store, sync: options.sync)
        defer { EngineCommandOptions.finish(observers.events) }
        let engine: JobEngine
        do {
            engine = try JobEngine(configuration: configuration, observer: observers.observer)
        } catch {
            Console.error("\(error)")
            return 2
        }
        // The signals are watched before any job starts: a SIGINT that comes as the first
        // requests go out must cancel the run, not be lost (the run would go on to its end).
        let started = Locked<(task: Task<RunSummary, Never>?, interrupted: Bool)>((nil, false))
        let signal = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in
            let task = started.withLock { state in
                state.interrupted = true
                return state.task
            }
            task?.cancel()
            engine.taskManager.cancelAll()
        }
        let runTask = Task { await engine.run(feed) }
        let interrupted = started.withLock { state in
            state.task = runTask
            return state.interrupted
        }
        if interrupted { runTask.cancel() }
        let summary = await runTask.value
        let received = signal.stop()
        reporter.printSummary(summary, store: store, runLog: runLog, hostWaits: engine.hostWaits, paceWaits: engine.paceWaits)
        let unused = configuration.requests.entries(namingNoneOf: engine.hostsContacted)
        if !unused.isEmpty, !engine.hostsContacted.isEmpty {
            let listed = unused.map { "'\($0)'" }.joined(separator: ", ")
            Console.err("runner: warning: the config's hosts \(unused.count == 1 ? "entry" : "entries") \(listed) named no job's host in this run (its headers went nowhere); an entry without ':port' covers every port of its host")
        }
        let changes = feed.changes
        if let first = changes.first {
            show(first)
            Console.err("runner: \(changes.count) line(s) changed after the files were validated and were not run; write job files elsewhere and rename them in place")
        }
        // Every job's hook has ended before the run does (each bounded by --hook-timeout).
        if let hooks = observers.hooks {
            await hooks.finish()
            if hooks.failures > 0 {
                Console.err("runner: \(hooks.failures) --on-finish hook\(hooks.failures == 1 ? "" : "s") failed (above); the jobs' statuses stand")
            }
        }
        // What the run wrote is on disk before the lock is let go (--no-sync: not).
        var durable = true
        if options.sync {
            do {
                try store.synchronize()
            } catch {
                Console.error("\(error); the payloads and records of this run may not survive a power loss")
                durable = false
            }
        }
        if let metrics, let path = options.metrics {
            metrics.recordRunEnd(success: summary.allSucceeded && received == nil && durable && changes.isEmpty)
            do {
                try metrics.write(to: path)
            } catch {
                Console.error("the metrics could not be written: \(error)")
            }
        }
        withExtendedLifetime(lock) {}
        if let received { return 128 + received }
        guard changes.isEmpty && durable else { return 1 }
        return summary.exitCode(allowing: options.maxFailed)
    }
}
