import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner submit`, `watch`, `cancel` and `status`: the spool (see `Spool`).
enum SpoolCommands {
    static let spoolOption = CommandSpec.Option(name: "spool", value: "DIR", help: "The spool folder. (default: ./spool)")

    static func spool(_ arguments: ParsedArguments) -> Spool { Spool(root: arguments.value("spool") ?? "spool") }

    // MARK: - submit

    static let submit: CommandSpec = CommandSpec(
        name: "submit",
        summary: "Validate job files and queue them in the spool's inbox for a watcher.",
        usage: "FILE… [--spool DIR]",
        arguments: [("FILE…", "Job files; all are checked before any is queued. Each is copied in whole, atomically.")],
        options: [spoolOption, KindOptions.option],
        positionals: (1, nil),
        run: { arguments in
            guard let registry = KindOptions.registry(arguments) else { return 2 }
            var counts: [Int] = []
            var invalid = false
            for file in arguments.positionals {
                let report = JobFileReader.validate(path: file, registry: registry)
                for error in report.errors { Console.error("\(error)") }
                if !report.errors.isEmpty { invalid = true }
                counts.append(report.jobs)
            }
            if invalid {
                Console.err("Nothing was queued. See 'runner validate --help'.")
                return 2
            }
            let spool = spool(arguments)
            for (file, jobs) in zip(arguments.positionals, counts) {
                do {
                    let name = try spool.submit(file: file)
                    Console.out("queued \(file) as \(RunReporter.relative(spool.inbox))/\(name) (\(jobs) job\(jobs == 1 ? "" : "s"))")
                } catch {
                    Console.error("\(error)")
                    return 1
                }
            }
            return 0
        })

    // MARK: - watch

    static let watch: CommandSpec = CommandSpec(
        name: "watch",
        summary: "Run the job files that arrive in the spool's inbox, until SIGTERM or SIGINT.",
        usage: "[--spool DIR] \(EngineCommandOptions.usage) [--grace SECONDS] [--json]",
        options: [spoolOption] + EngineCommandOptions.options + [
            .init(name: "grace", value: "SECONDS", help: "On SIGTERM or SIGINT, how long running jobs may go on before they are cancelled. (default: 10)"),
            .init(name: "json", value: nil, help: "Print each job's result record as one JSON line."),
        ],
        run: { arguments in
            let engine: EngineOptions
            let grace: Duration
            do {
                engine = try EngineCommandOptions.parse(arguments)
                grace = try seconds(arguments.value("grace"), option: "grace", default: 10)
            } catch {
                return Runner.usageError(error, spec: watch)
            }
            guard let registry = KindOptions.registry(arguments) else { return 2 }
            return await runWatch(spool: spool(arguments), engine: engine, grace: grace, json: arguments.flag("json"), registry: registry)
        })

    static func seconds(_ text: String?, option: String, default defaultValue: Double) throws(UsageError) -> Duration {
        guard let text else { return .milliseconds(Int(defaultValue * 1000)) }
        guard let value = Double(text), value >= 0, value <= 86_400 else {
            throw UsageError("--\(option) must be a number of seconds from 0 to 86400, not '\(text)'")
        }
        return .milliseconds(Int(value * 1000))
    }

    static func runWatch(spool: Spool, engine options: EngineOptions, grace: Duration, json: Bool, registry: KindRegistry) async -> Int32 {
        let assembly: EngineAssembly
        let runLog: RunLog
        do {
            try spool.makeFolders()
            assembly = try EngineAssembly(options: options, registry: registry)
            runLog = try RunLog(store: assembly.store)
        } catch {
            Console.error("\(error)")
            return 2
        }
        let watcher = SpoolWatcher(
            configuration: .init(spool: spool, engine: assembly.configuration(runLog: runLog), registry: registry),
            observer: WatchReporter(json: json),
            onEvent: { log($0, spool: spool, out: assembly.store.root) })
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM]) { number in
            Console.err("runner: \(number == SIGINT ? "SIGINT" : "SIGTERM"): no more files are taken; running jobs have \(grace) to end")
            watcher.shutdown(grace: grace)
        }
        defer { _ = signals.stop() }
        do {
            try await watcher.run()
        } catch {
            Console.error("\(error)")
            return 1
        }
        Console.err("runner: stopped")
        return 0
    }

    static func log(_ event: SpoolWatcher.Event, spool: Spool, out: String) {
        switch event {
        case .started(let id, let recovered):
            Console.err("runner: watching \(RunReporter.relative(spool.inbox)) (watcher \(id)); results in \(RunReporter.relative(out))/")
            if !recovered.isEmpty {
                Console.err("runner: put back in line \(recovered.count) file(s) a watcher left in active/: \(recovered.prefix(10).joined(separator: ", "))")
            }
        case .claimed:
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
                line += String(format: "; first job started %.2f ms after arrival", Double(latency.components.attoseconds) / 1e15 + Double(latency.components.seconds) * 1000)
            }
            if report.outcome == .failed, let reason = report.reason?.split(separator: "\n").first { line += "\n  \(reason)" }
            Console.err(line)
        case .cancelRequested(let key, let cancelledRunning):
            Console.err("runner: cancel \(key): " + (cancelledRunning ? "the running task is cancelled" : "no task with that key is running; waiting jobs with it will not run"))
        case .problem(let message):
            Console.err("runner: \(message)")
        }
    }

    // MARK: - cancel

    static let cancel: CommandSpec = CommandSpec(
        name: "cancel",
        summary: "Cancel the running task with KEY, and waiting jobs with KEY, in every watcher of the spool.",
        usage: "KEY [--spool DIR]",
        arguments: [("KEY", "The job key, as in the job file or `runner status`.")],
        options: [spoolOption],
        positionals: (1, 1),
        run: { arguments in
            let key = arguments.positionals[0]
            guard !key.isEmpty else { return Runner.usageError(UsageError("KEY must not be empty"), spec: cancel) }
            do {
                let path = try spool(arguments).requestCancel(key: key)
                Console.out("cancel requested for \(key) (\(RunReporter.relative(path)))")
                return 0
            } catch {
                Console.error("\(error)")
                return 1
            }
        })

    // MARK: - status

    static let status: CommandSpec = CommandSpec(
        name: "status",
        summary: "Show the spool: queued files, running jobs with their age, done and failed files.",
        usage: "[--spool DIR] [--json]",
        options: [spoolOption, .init(name: "json", value: nil, help: "Print one JSON object, for programs.")],
        run: { arguments in
            let status = SpoolStatus.read(spool(arguments))
            Console.out(arguments.flag("json") ? JSONWriter.string(status.json) : status.text)
            return 0
        })
}

/// What `runner watch` shows of jobs: notices, and with `--json` every record.
final class WatchReporter: RunObserver {
    private let json: Bool

    init(json: Bool) { self.json = json }

    func jobNotice(_ job: JobDescriptor, message: String) { Console.err("runner: \(job.key): \(message)") }
    func problem(_ message: String) { Console.err("runner: \(message)") }
    func jobFinished(_ result: JobResult) {
        if json { Console.out(result.jsonLine) }
    }
}
