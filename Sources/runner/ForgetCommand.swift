import Foundation
import RunnerKit

/// `runner forget KEY… | --all | --not-in RUNLOG | --not-in-batch ID`: drop keys from the cache
/// the output directory is, so the next run fetches them afresh (the seeds' "delete cache by
/// keys"). `--not-in` and `--not-in-batch` clean a mirror as `rsync --delete` does: every key the
/// last run or batch no longer listed goes.
enum ForgetCommand {
    static let all = CommandOption<Bool>.flag("all", help: "Forget every key in the output directory, without asking.")
    static let notIn = CommandOption<String?>.text(
        "not-in", "RUNLOG",
        help: "Forget every key of the output directory that has no line in this run log (out/runs/<run-id>.jsonl, or its name in the output's runs/): what the catalog or the job file no longer lists, as rsync --delete does. Use the log of a run that ended.",
        completion: .files)
    static let notInBatch = CommandOption<String?>.text(
        "not-in-batch", "ID",
        help: "With --queue: forget every key of the output directory that no job of this batch had, children included; the batch must be over.")
    static let dryRun = CommandOption<Bool>.flag("dry-run", help: "Only list what would be forgotten: each key and the files that would go.")
    static let json = CommandOption<Bool>.flag(
        "json", help: "Print one JSON object: each key forgotten (or that would be, with --dry-run) with the files removed.")

    static let spec: CommandSpec = CommandSpec(
        name: "forget",
        summary: "Remove keys' payloads, records and validators, and bytes their cut transfers kept, so the next run fetches them afresh; with --not-in or --not-in-batch, every key a run or batch did not include.",
        synopsis: "[KEY…]",
        arguments: [("KEY…", "Keys to forget, as in the job files and records.")],
        options: [
            all.spec,
            notIn.spec,
            notInBatch.spec,
            QueueOptions.queue.spec,
            dryRun.spec,
            json.spec,
            EngineCommandOptions.out.spec,
        ],
        positionals: (0, nil),
        run: { arguments in
            let everything: Bool
            let runLog: String?
            let batch: String?
            let dry: Bool
            let asJSON: Bool
            let out: String
            do {
                everything = try arguments[ForgetCommand.all]
                runLog = try arguments[notIn]
                batch = try arguments[notInBatch]
                dry = try arguments[dryRun]
                asJSON = try arguments[json]
                out = try arguments[EngineCommandOptions.out]
                let ways = [everything, runLog != nil, batch != nil, !arguments.positionals.isEmpty].filter { $0 }.count
                if ways == 0 { throw UsageError("Missing expected argument 'KEY…' (or --all, --not-in RUNLOG, --not-in-batch ID)") }
                if ways > 1 { throw UsageError("Give one of keys, --all, --not-in or --not-in-batch") }
                if arguments.value(QueueOptions.queue.spec.name) != nil, batch == nil {
                    throw UsageError("--queue goes with --not-in-batch")
                }
            } catch { return Runner.usageError(error, spec: spec) }
            let store: OutputStore
            let lock: RunLock
            do {
                store = try OutputStore(root: out)
                lock = try RunLock(store: store, wait: false)
            } catch let busy as RunLock.Busy {
                Console.error(busy.description + "; wait for it, pass --wait, or use another --out")
                return RunCommand.busyExitCode
            } catch {
                Console.error("cannot use the output directory '\(out)': \(error)")
                return 2
            }
            defer { withExtendedLifetime(lock) {} }

            // The keys to forget, and whether naming one without a record is a mistake.
            let keys: [String]
            var sparing = Set<String>()
            if runLog != nil || batch != nil {
                let included: Set<String>
                let source: String
                if let runLog {
                    source = "the run log \(runLog)"
                    do {
                        included = try RunLog.includedKeys(atPath: resolveRunLog(runLog, in: store))
                    } catch {
                        Console.error("nothing was forgotten: \(error)")
                        return 2
                    }
                } else {
                    let batch = batch!
                    source = "batch \(batch)"
                    let url: String
                    do {
                        guard let given = try QueueOptions.url(arguments) else {
                            throw UsageError("--not-in-batch needs --queue URL (or $RUNNER_QUEUE): batches live in the queue")
                        }
                        url = given
                    } catch { return Runner.usageError(error, spec: spec) }
                    let found: (keys: Set<String>, pending: Int)
                    do throws(QueueError) {
                        let queue = try JobQueue(url: url)
                        found = try queue.batchKeys(batch)
                    } catch {
                        Console.error("\(error.message); nothing was forgotten")
                        return error.usage ? 2 : 1
                    }
                    guard !found.keys.isEmpty else {
                        Console.error("the queue has no job of batch \(batch) (finished jobs stay for --keep days); nothing was forgotten")
                        return 2
                    }
                    guard found.pending == 0 else {
                        Console.error(
                            "batch \(batch) is not over: \(found.pending) of its jobs are queued or running, and may add children; forget when it ended (submit --wait); nothing was forgotten")
                        return 2
                    }
                    included = found.keys
                }
                // A log or batch of another output shares no key with this one: forgetting by it
                // would empty the mirror.
                let recorded = store.recordedKeys()
                if !recorded.isEmpty, !recorded.contains(where: included.contains) {
                    Console.error(
                        "none of the \(included.count) keys of \(source) has a record in \(RunReporter.relative(store.root)); is it of this output directory? nothing was forgotten")
                    return 2
                }
                keys = store.keys(notIn: included)
                sparing = store.outputs(ofKeys: included)
            } else {
                keys = everything ? store.recordedKeys() : arguments.positionals
            }

            var forgotten: [OutputStore.Forgotten] = []
            var missing = 0
            for key in keys {
                if let done = store.forget(key: key, dryRun: dry, sparing: sparing) {
                    forgotten.append(done)
                    if !asJSON {
                        Console.out(dry ? "would forget \(key): \(done.removed.joined(separator: ", "))" : "forgot \(key): removed \(done.removed.joined(separator: ", "))")
                    }
                } else if runLog == nil && batch == nil && !everything {
                    missing += 1
                    Console.err("runner: \(key): no record in \(RunReporter.relative(store.root)); nothing to forget")
                }
            }
            if asJSON {
                let entries = forgotten.map { done in
                    JSONValue.object([("key", .string(done.key)), ("files", .array(done.removed.map { .string($0) }))])
                }
                Console.out(JSONWriter.string(.object([("dryRun", .bool(dry)), ("keys", .array(entries))])))
            } else if forgotten.isEmpty && (everything || runLog != nil || batch != nil) {
                Console.out("nothing to forget in \(RunReporter.relative(store.root))")
            } else if runLog != nil || batch != nil {
                let count = "\(forgotten.count) key\(forgotten.count == 1 ? "" : "s")"
                let what = runLog != nil ? "the run" : "the batch"
                Console.out(dry ? "would forget \(count) \(what) did not include" : "forgot \(count) \(what) did not include")
            }
            return missing == 0 ? 0 : 1
        })

    /// A run log as given, else by its name (with or without `.jsonl`) in the output's `runs/`.
    static func resolveRunLog(_ given: String, in store: OutputStore) -> String {
        if FileManager.default.fileExists(atPath: given) || given.contains("/") { return given }
        for name in [given, given + ".jsonl"] where FileManager.default.fileExists(atPath: "\(store.root)/runs/\(name)") {
            return "\(store.root)/runs/\(name)"
        }
        return given
    }
}
