import Dispatch
import Foundation
import Glibc
import RunnerKinds
import RunnerKit
import Synchronization

/// `runner run FILE…`: validate every file, then run every job, then report.
enum RunCommand {
    static let spec: CommandSpec = CommandSpec(
        name: "run",
        summary: "Run the jobs of job files: fetch, validate and write payloads and result records.",
        usage: "FILE… \(EngineCommandOptions.usage) [--shard I/N] [--wait] [--json]",
        arguments: [("FILE…", "Job files: one job, a batch {\"defaults\", \"jobs\"}, an array, or JSON Lines (.jsonl).")],
        options: EngineCommandOptions.options + [
            .init(name: "shard", value: "I/N", help: "Run only the jobs whose key hashes to shard I of N (0 ≤ I < N; FNV-1a of the key)."),
            .init(name: "wait", value: nil, help: "If another run uses the output directory, wait for it instead of exiting 3."),
            .init(name: "json", value: nil, help: "Print each job's result record as one JSON line, children included."),
        ],
        positionals: (1, nil),
        run: { arguments in
            do {
                let options = try Options(arguments)
                return await execute(files: arguments.positionals, options: options)
            } catch {
                return Runner.usageError(error, spec: spec)
            }
        })

    struct Options {
        var engine: EngineOptions
        var shard: Shard?
        var wait: Bool
        var json: Bool
        /// `--kinds` folders.
        var kindFolders: [String] = []

        init(_ arguments: ParsedArguments) throws(UsageError) {
            engine = try EngineCommandOptions.parse(arguments)
            if let text = arguments.value("shard") {
                guard let shard = Shard(text) else {
                    throw UsageError("--shard must be I/N with 0 ≤ I < N, like 0/4, not '\(text)'")
                }
                self.shard = shard
            }
            wait = arguments.flag("wait")
            json = arguments.flag("json")
            kindFolders = arguments.allValues("kinds")
        }
    }

    /// Exit code when another run holds the output directory.
    static let busyExitCode: Int32 = 3

    /// Exit codes: 0 all succeeded or notModified, 1 any other status (or a file changed while
    /// it was read), 2 bad input (nothing ran), 3 the output directory is in use by another run,
    /// 130 interrupted (SIGINT), 143 terminated (SIGTERM).
    static func execute(files: [String], options: Options, displayNames: [String: String] = [:]) async -> Int32 {
        guard let registry = KindOptions.registry(given: options.kindFolders) else { return 2 }
        let feed = BatchFeed(files: files, registry: registry, shard: options.shard)
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

        let assembly: EngineAssembly
        let lock: RunLock
        let runLog: RunLog
        do {
            assembly = try EngineAssembly(options: options.engine, registry: registry)
            if options.wait && !options.json { Console.err("runner: waiting for the output directory \(options.engine.out) to be free…") }
            lock = try RunLock(store: assembly.store, wait: options.wait)
            runLog = try RunLog(store: assembly.store)
        } catch let busy as RunLock.Busy {
            Console.error(busy.description + "; wait for it, pass --wait, or use another --out")
            return busyExitCode
        } catch {
            Console.error("\(error)")
            return 2
        }
        let reporter = RunReporter(json: options.json, total: validation.total)
        let engine = JobEngine(configuration: assembly.configuration(runLog: runLog), observer: reporter)
        let runTask = Task { await engine.run(feed) }
        let signal = SignalWatcher(signals: [SIGINT, SIGTERM]) { _ in
            runTask.cancel()
            engine.taskManager.cancelAll()
        }
        let summary = await runTask.value
        let received = signal.stop()
        reporter.printSummary(summary, store: assembly.store, runLog: runLog)
        let changes = feed.changes
        if let first = changes.first {
            show(first)
            Console.err("runner: \(changes.count) line(s) changed after the files were validated and were not run; write job files elsewhere and rename them in place")
        }
        withExtendedLifetime(lock) {}
        if let received { return 128 + received }
        return summary.allSucceeded && changes.isEmpty ? 0 : 1
    }
}

/// Turns signals into a callback on a dispatch queue, instead of the default of dying.
final class SignalWatcher: @unchecked Sendable {  // sources are immutable; DispatchSource is thread-safe
    private let sources: [any DispatchSourceSignal]
    private let received = Locked<Int32>(0)

    init(signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) {
        var sources: [any DispatchSourceSignal] = []
        for number in signals {
            Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            sources.append(source)
        }
        self.sources = sources
        for (source, number) in zip(sources, signals) {
            let received = self.received
            source.setEventHandler {
                received.withLock { $0 = number }
                handler(number)
            }
            source.resume()
        }
    }

    /// Stops watching and returns the signal that arrived, if one did.
    func stop() -> Int32? {
        for source in sources { source.cancel() }
        let number = received.value
        return number == 0 ? nil : number
    }

    /// Waits until one of the signals arrives.
    static func wait(for signals: [Int32]) async -> Int32 {
        let stream = AsyncStream<Int32> { continuation in
            let watcher = SignalWatcher(signals: signals) { continuation.yield($0) }
            continuation.onTermination = { _ in _ = watcher.stop() }
        }
        for await number in stream { return number }
        return 0
    }
}
