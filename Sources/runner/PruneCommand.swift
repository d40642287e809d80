import Glibc
import RunnerKit

/// `runner prune [--out DIR] [--dry-run] [--json]`: remove the payloads no record points to any
/// more (a key that became 404, an output renamed), saying how many and how many bytes. The
/// folder may also be given as an argument, as it was before `--out`.
enum PruneCommand {
    static let dryRun = CommandOption<Bool>.flag("dry-run", help: "Only say what would be removed: every path, and how many bytes.")
    static let json = CommandOption<Bool>.flag(
        "json", help: "Print one JSON object: every path removed (or that would be, with --dry-run) with its bytes, the total, and how many were left as too young.")

    static let spec: CommandSpec = CommandSpec(
        name: "prune",
        summary: "Remove the payloads in an output directory that no record points to, and cut transfers' kept bytes untouched for a week or outdated by a later final record of their key; say how many bytes that frees.",
        synopsis: "[OUT]",
        arguments: [("OUT", "The output directory, as --out gives it (default: out). Records, run logs, every key's last good payload and files written in the last minute stay.")],
        options: [dryRun.spec, json.spec, EngineCommandOptions.out.spec],
        positionals: (0, 1),
        run: { arguments in
            let dry: Bool
            let asJSON: Bool
            let out: String
            do {
                dry = try arguments[dryRun]
                asJSON = try arguments[json]
                if let given = arguments.positionals.first {
                    guard arguments.value(EngineCommandOptions.out.spec.name) == nil else {
                        throw UsageError("Give the output directory once: --out DIR or OUT, not both")
                    }
                    out = given
                } else {
                    out = try arguments[EngineCommandOptions.out]
                }
            } catch { return Runner.usageError(error, spec: spec) }
            let store: OutputStore
            let lock: RunLock
            do {
                guard access(out + "/results", F_OK) == 0 else {
                    Console.error("there is no output directory at \(out) (a run makes one); nothing was changed")
                    return 2
                }
                store = try OutputStore(root: out)
                lock = try RunLock(store: store, wait: false)
            } catch let busy as RunLock.Busy {
                Console.error(busy.description + "; prune it when the run is over")
                return RunCommand.busyExitCode
            } catch {
                Console.error("cannot use the output directory '\(out)': \(error)")
                return 2
            }
            defer { withExtendedLifetime(lock) {} }
            let pruned = store.prune(dryRun: dry)
            if asJSON {
                let files = pruned.files.map { path in
                    JSONValue.object([("path", .string(path)), ("bytes", JSONValue(pruned.sizes[path] ?? 0))])
                }
                Console.out(JSONWriter.string(.object([
                    ("dryRun", .bool(dry)), ("files", .array(files)), ("bytes", JSONValue(pruned.bytes)), ("young", JSONValue(pruned.young)),
                ])))
                return 0
            }
            let count = "\(pruned.files.count) payload\(pruned.files.count == 1 ? "" : "s")"
            let size = Console.size(pruned.bytes)
            // A dry run is read to decide: it lists every path. A removal shows the first 20.
            let shown = dry ? pruned.files.count : 20
            for path in pruned.files.prefix(shown) { Console.out("  \(path)") }
            if pruned.files.count > shown { Console.out("  … and \(pruned.files.count - shown) more (--dry-run or --json lists them all)") }
            if dry {
                Console.out("would remove \(count) no record points to (\(size)) from \(RunReporter.relative(store.root))/")
            } else {
                Console.out("removed \(count) no record points to; \(size) freed in \(RunReporter.relative(store.root))/")
            }
            if pruned.young > 0 {
                Console.out("left \(pruned.young) written in the last minute (a record may be on its way)")
            }
            return 0
        })
}
