import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner submit`, `watch`, `cancel` and `status`: the spool (see `Spool`).
enum SpoolCommands {
    static let spoolOption = CommandSpec.Option(name: "spool", value: "DIR", help: "The spool folder. (default: ./spool)")

    static let groupOption = CommandSpec.Option(
        name: "group", value: "NAME", help: "A producers' group: spool folders are made 2770 with it (default: 0700, the watcher's user only).")

    static func spool(_ arguments: ParsedArguments) -> Spool { Spool(root: arguments.value("spool") ?? "spool") }

    /// The spool with `--group` applied; a group that does not exist is a usage error.
    static func spoolWithGroup(_ arguments: ParsedArguments) throws(UsageError) -> Spool {
        guard let name = arguments.value("group") else { return spool(arguments) }
        do {
            return Spool(root: arguments.value("spool") ?? "spool", group: try Spool.groupID(named: name))
        } catch {
            throw UsageError("--group: \(error)")
        }
    }

    // MARK: - submit

    static let submit: CommandSpec = CommandSpec(
        name: "submit",
        summary: "Validate job files and queue them in the spool's inbox for a watcher.",
        usage: "FILE… [--spool DIR] [--group NAME] [--kinds DIR] [--config FILE]",
        arguments: [("FILE…", "Job files (- is standard input); all are checked before any is queued. Each is copied in whole, atomically and durably.")],
        options: [spoolOption, groupOption] + KindOptions.options,
        positionals: (1, nil),
        run: { arguments in
            guard let registry = KindOptions.registry(arguments, checkingSecrets: false) else { return 2 }
            let inputs: JobFileArguments
            do { inputs = try JobFileArguments(arguments.positionals) } catch { return Runner.usageError(error, spec: submit) }
            defer { inputs.remove() }
            var counts: [Int] = []
            var invalid = false
            for file in inputs.files {
                // The references expand in the watcher's environment, not here: syntax only.
                let report = JobFileReader.validate(path: file, registry: registry, checkingSecrets: false)
                for error in report.errors { Console.error(inputs.display(message: "\(error)")) }
                if !report.errors.isEmpty { invalid = true }
                counts.append(report.jobs)
            }
            if invalid {
                Console.err("Nothing was queued. See 'runner validate --help'.")
                return 2
            }
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

    static let watch: CommandSpec = CommandSpec(
        name: "watch",
        summary: "Run the job files that arrive in the spool's inbox, until SIGTERM, SIGINT or SIGHUP.",
        usage: "[--spool DIR] \(EngineCommandOptions.usage) [--grace SECONDS] [--settle SECONDS] [--rescan SECONDS] [--group NAME] [--metrics FILE] [--json]",
        options: [spoolOption] + EngineCommandOptions.options + [
            .init(name: "grace", value: "SECONDS", help: "On SIGTERM, SIGINT or SIGHUP, how long running jobs may go on before they are cancelled. (default: 10)"),
            .init(name: "settle", value: "SECONDS", help: "A file written in place (not renamed in) is taken once no process writes it and it has not changed for this long. (default: 1)"),
            .init(name: "rescan", value: "SECONDS", help: "How often the inbox is read in full, besides inotify. (default: 2)"),
            groupOption,
            .init(name: "metrics", value: "FILE", help: "Write Prometheus metrics to FILE every 10 s and at exit (for node_exporter's textfile collector)."),
            .init(name: "json", value: nil, help: "Print each job's result record as one JSON line."),
        ],
        run: { arguments in
            var options = WatchOptions()
            do {
                options.engine = try EngineCommandOptions.parse(arguments)
                options.grace = try seconds(arguments.value("grace"), option: "grace", default: 10)
                options.settle = try seconds(arguments.value("settle"), option: "settle", default: 1)
                options.rescan = try seconds(arguments.value("rescan"), option: "rescan", default: 2)
                guard options.rescan >= .milliseconds(10) else { throw UsageError("--rescan must be at least 0.01 seconds") }
                options.spool = try spoolWithGroup(arguments)
            } catch {
                return Runner.usageError(error, spec: watch)
            }
            options.json = arguments.flag("json")
            options.metrics = arguments.value("metrics")
            guard let setup = KindOptions.setup(arguments) else { return 2 }
            options.engine.requests.merge(setup.requests)
            return await runWatch(options, registry: setup.registry)
        })

    /// `runner watch`'s options.
    struct WatchOptions {
        var spool = Spool(root: "spool")
        var engine = EngineOptions()
        var grace: Duration = .seconds(10)
        var settle: Duration = .seconds(1)
        var rescan: Duration = .seconds(2)
        var metrics: String?
        var json = false
    }

    static func seconds(_ text: String?, option: String, default defaultValue: Double) throws(UsageError) -> Duration {
        guard let text else { return .milliseconds(Int(defaultValue * 1000)) }
        guard let value = Double(text), value >= 0, value <= 86_400 else {
            throw UsageError("--\(option) must be a number of seconds from 0 to 86400, not '\(text)'")
        }
        return .milliseconds(Int(value * 1000))
    }

    static func runWatch(_ options: WatchOptions, registry: KindRegistry) async -> Int32 {
        let (spool, grace, json) = (options.spool, options.grace, options.json)
        let assembly: EngineAssembly
        let runLog: RunLog
        do {
            try spool.makeFolders()
            assembly = try EngineAssembly(options: options.engine, registry: registry)
            assembly.store.sweepLeftovers()  // temporary files of crashed runners
            runLog = try RunLog(store: assembly.store)
        } catch {
            Console.error("\(error)")
            return 2
        }
        // Operating as a service: systemd's notify protocol and Prometheus metrics.
        let service = WatchService(notifier: SystemdNotifier.fromEnvironment(ProcessInfo.processInfo.environment), metricsPath: options.metrics)
        var configuration = SpoolWatcher.Configuration(
            spool: spool, engine: assembly.configuration(runLog: runLog), registry: registry, rescanInterval: options.rescan,
            settle: options.settle, heartbeatInterval: service.heartbeatInterval)
        configuration.limits = options.engine.limits
        let watcher = SpoolWatcher(
            configuration: configuration,
            observer: ObserverFanout([WatchReporter(json: json), service.metrics]),
            onEvent: { event in
                service.handle(event)
                log(event, spool: spool, out: assembly.store.root)
            })
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP]) { number in
            service.stopping()
            Console.err("runner: \(signalName(number)): no more files are taken; running jobs have \(grace) to end")
            watcher.shutdown(grace: grace)
        }
        defer { _ = signals.stop() }
        let metricsTask = service.startWritingMetrics()
        do {
            try await watcher.run()
        } catch {
            metricsTask?.cancel()
            Console.error("\(error)")
            return 1
        }
        metricsTask?.cancel()
        service.stopped(counts: watcher.counts)
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

    static func log(_ event: SpoolWatcher.Event, spool: Spool, out: String) {
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
        usage: "KEY [--spool DIR] [--group NAME]",
        arguments: [("KEY", "The job key, as in the job file or `runner status`.")],
        options: [spoolOption, groupOption],
        positionals: (1, 1),
        run: { arguments in
            let key = arguments.positionals[0]
            guard !key.isEmpty else { return Runner.usageError(UsageError("KEY must not be empty"), spec: cancel) }
            do {
                let path = try spoolWithGroup(arguments).requestCancel(key: key)
                Console.out("cancel requested for \(key) (\(RunReporter.relative(path)))")
                return 0
            } catch let error as UsageError {
                return Runner.usageError(error, spec: cancel)
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
