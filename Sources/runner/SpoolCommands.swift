import Foundation
import Glibc
import RunnerKinds
import RunnerKit

/// `runner submit`, `cancel` and `status` of the spool (see `Spool`); `watch` is `WatchCommand`.
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
        options: [spoolOption.spec, groupOption.spec, QueueOptions.queue.spec, QueueCommands.uniqueOption.spec,
                  QueueCommands.waitOption.spec, RunCommand.maxFailed.spec] + KindOptions.options,
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
            do { queue = try QueueOptions.url(arguments) } catch { return Runner.usageError(error, spec: submit) }
            let batch: QueueCommands.BatchOptions
            do { batch = try QueueCommands.BatchOptions(arguments, queue: queue) } catch { return Runner.usageError(error, spec: submit) }
            if let queue { return await QueueCommands.submit(inputs, registry: registry, url: queue, batch: batch) }
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

    // MARK: - cancel

    static let cancel: CommandSpec = CommandSpec(
        name: "cancel",
        summary: "Cancel the running task with KEY, and waiting jobs with KEY, in every watcher of the spool.",
        synopsis: "KEY",
        arguments: [("KEY", "The job key, as in the job file or `runner status`.")],
        options: [spoolOption.spec, groupOption.spec, QueueOptions.queue.spec],
        positionals: (1, 1),
        run: { arguments in
            let key = arguments.positionals[0]
            guard !key.isEmpty else { return Runner.usageError(UsageError("KEY must not be empty"), spec: cancel) }
            let queue: String?
            do { queue = try QueueOptions.url(arguments) } catch { return Runner.usageError(error, spec: cancel) }
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
        options: [spoolOption.spec, statusJSON.spec, QueueOptions.queue.spec, QueueCommands.batchOption.spec],
        run: { arguments in
            let status: SpoolStatus
            let json: Bool
            do {
                let batch = try arguments[QueueCommands.batchOption]
                if let queue = try QueueOptions.url(arguments) {
                    if let batch { return QueueCommands.status(url: queue, batch: batch, json: try arguments[statusJSON]) }
                    return QueueCommands.status(url: queue, json: try arguments[statusJSON])
                }
                if batch != nil { throw UsageError("--batch needs --queue (or $RUNNER_QUEUE)") }
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
