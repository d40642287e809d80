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
        usage: "FILE… [--out DIR] [--concurrency N] [--per-host N] [--shard I/N] [--http CLIENT] [--wait] [--json] [--metrics FILE] [--no-sync]",
        arguments: [("FILE…", "Job files: one job, a batch {\"defaults\", \"jobs\"}, an array, or JSON Lines (.jsonl).")],
        options: [
            .init(name: "out", value: "DIR", help: "Output directory for payloads, results/ and runs/. (default: ./out)"),
            .init(name: "concurrency", value: "N", help: "Jobs running at once, children included. (default: 8)"),
            .init(name: "per-host", value: "N", help: "Jobs talking to one host at once. (default: 8)"),
            .init(name: "shard", value: "I/N", help: "Run only the jobs whose key hashes to shard I of N (0 ≤ I < N; FNV-1a of the key)."),
            RunCommand.httpOption,
            .init(name: "wait", value: nil, help: "If another run uses the output directory, wait for it instead of exiting 3."),
            .init(name: "json", value: nil, help: "Print each job's result record as one JSON line, children included."),
            .init(name: "metrics", value: "FILE", help: "At the end, write Prometheus metrics to FILE (for node_exporter's textfile collector)."),
            .init(name: "no-sync", value: nil, help: "Do not make what the run wrote durable before it exits (for scratch runs)."),
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

    /// `--http`, shared with `runner demo`.
    static let httpOption = CommandSpec.Option(
        name: "http", value: "CLIENT",
        help: "HTTP client: curl (libcurl's multi interface) or urlsession. (default: $\(HTTPClientKind.environmentVariable), else curl, or urlsession where libcurl cannot be loaded)")

    struct Options {
        var out: String
        var concurrency: Int
        var perHost: Int
        var shard: Shard?
        var wait: Bool
        var json: Bool
        var http: HTTPClientKind
        var metrics: String?
        var sync: Bool

        init(_ arguments: ParsedArguments) throws(UsageError) {
            out = arguments.value("out") ?? "out"
            concurrency = try arguments.int("concurrency", default: 8, range: 1...10_000)
            perHost = try arguments.int("per-host", default: JobEngine.Configuration.defaultPerHost, range: 1...10_000)
            if let text = arguments.value("shard") {
                guard let shard = Shard(text) else {
                    throw UsageError("--shard must be I/N with 0 ≤ I < N, like 0/4, not '\(text)'")
                }
                self.shard = shard
            }
            wait = arguments.flag("wait")
            json = arguments.flag("json")
            metrics = arguments.value("metrics")
            sync = !arguments.flag("no-sync")
            do {
                http = try arguments.value("http").map(HTTPClientKind.named) ?? HTTPClientKind.fromEnvironment()
            } catch {
                throw UsageError("--http or $\(HTTPClientKind.environmentVariable): \(error)")
            }
        }
    }

    /// Exit code when another run holds the output directory.
    static let busyExitCode: Int32 = 3

    /// Up to this many jobs across all files (every shard counted), the jobs validated are kept
    /// and run without reading the files again; beyond it the files are read again to run, so
    /// a batch of millions of lines still runs in flat memory. A kept job takes about 0.7 KB
    /// (half of it its URL), so this bounds the extra memory near 7 MB; reading a line again
    /// costs about 5 µs, a small share of a job, so a higher bound would buy little.
    static let maxKeptJobs = 10_000

    /// Exit codes: 0 all succeeded or notModified, 1 any other status, 2 bad input (nothing ran),
    /// 3 the output directory is in use by another run, 130 interrupted (SIGINT), 143 terminated (SIGTERM).
    static func execute(files: [String], options: Options, displayNames: [String: String] = [:]) async -> Int32 {
        let registry = BuiltInKinds.registry()
        let shard = options.shard
        var invalid = false
        var total = 0
        // The validated jobs of this shard, kept to run unless the files hold too many jobs.
        var kept: [JobDescriptor]? = []
        var read = 0
        for file in files {
            let report = JobFileReader.validate(path: file, registry: registry) { job in
                read += 1
                if read > maxKeptJobs { kept = nil }
                guard shard?.contains(key: job.key) ?? true else { return false }
                kept?.append(job)
                return true
            }
            total += report.jobs
            for error in report.errors {
                var message = error.description
                if let display = displayNames[file], message.hasPrefix(file) { message = display + message.dropFirst(file.count) }
                Console.error(message)
            }
            if !report.errors.isEmpty { invalid = true }
        }
        if invalid {
            Console.err("Nothing was run. See 'runner validate --help'.")
            return 2
        }

        let http: any HTTPFetching
        do {
            http = try options.http.make(maxConnectionsPerHost: options.perHost, maxConnections: max(options.concurrency, options.perHost))
        } catch {
            Console.error("\(error)")
            return 2
        }
        let store: OutputStore
        let lock: RunLock
        let runLog: RunLog
        do {
            store = try OutputStore(root: options.out)
            if options.wait && !options.json { Console.err("runner: waiting for the output directory \(options.out) to be free…") }
            lock = try RunLock(store: store, wait: options.wait)
            store.sweepLeftovers()  // [spool #15] temporary files of crashed runs
            runLog = try RunLog(store: store)
        } catch let busy as RunLock.Busy {
            Console.error(busy.description)
            return busyExitCode
        } catch {
            Console.error("cannot use the output directory '\(options.out)': \(error)")
            return 2
        }
        let reporter = RunReporter(json: options.json, total: total)
        let metrics = options.metrics.map { _ in Metrics() }  // [spool #15]
        let engine = JobEngine(
            configuration: .init(
                store: store, http: http,
                monitor: Runner.makeMonitor(), concurrency: options.concurrency, runLog: runLog, perHost: options.perHost),
            observer: metrics.map { ObserverFanout([reporter, $0]) } ?? reporter)

        let validated = kept.take().map(DrainingJobs.init)
        let runTask = Task {
            if let validated { return await engine.run(validated) }
            let jobs = files.lazy.flatMap { file in
                IteratorSequence(JobFileReader(path: file, registry: registry)).lazy.compactMap { try? $0.get() }
            }.filter { shard?.contains(key: $0.key) ?? true }
            return await engine.run(jobs)
        }
        let signal = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { _ in
            runTask.cancel()
            engine.taskManager.cancelAll()
        }
        let summary = await runTask.value
        let received = signal.stop()
        reporter.printSummary(summary, store: store, runLog: runLog)
        // [spool #15] what the run wrote is on disk before the lock is let go (--no-sync: not).
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
            metrics.recordRunEnd(success: summary.allSucceeded && received == nil && durable)
            do {
                try metrics.write(to: path)
            } catch {
                Console.error("the metrics could not be written: \(error)")
            }
        }
        withExtendedLifetime(lock) {}
        if let received { return 128 + received }
        return summary.allSucceeded && durable ? 0 : 1
    }
}

/// Validated jobs handed to the engine one at a time, each let go as soon as it is taken.
final class DrainingJobs: Sequence, IteratorProtocol, @unchecked Sendable {  // iterated by one task only
    /// Last job first, so that taking one is a pop.
    private var reversed: [JobDescriptor]

    init(_ jobs: consuming [JobDescriptor]) {
        reversed = jobs
        reversed.reverse()
    }

    func next() -> JobDescriptor? { reversed.popLast() }
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
