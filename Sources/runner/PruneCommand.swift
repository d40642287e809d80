import Glibc
import RunnerKit

/// `runner prune [OUT] [--dry-run]`: remove the payloads no record points to any more (a key
/// that became 404, an output renamed), saying how many and how many bytes.
enum PruneCommand {
    static let dryRun = CommandOption<Bool>.flag("dry-run", help: "Only say what would be removed.")

    static let spec: CommandSpec = CommandSpec(
        name: "prune",
        summary: "Remove the payloads in an output directory that no record points to, and cut transfers' kept bytes untouched for a week or outdated by a later final record of their key; say how many bytes that frees.",
        synopsis: "[OUT]",
        arguments: [("OUT", "The output directory (default: out). Records, run logs, every key's last good payload and files written in the last minute stay.")],
        options: [dryRun.spec],
        positionals: (0, 1),
        run: { arguments in
            let dry: Bool
            do { dry = try arguments[dryRun] } catch { return Runner.usageError(error, spec: spec) }
            let out = arguments.positionals.first ?? "out"
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
            let count = "\(pruned.files.count) payload\(pruned.files.count == 1 ? "" : "s")"
            let size = Console.size(pruned.bytes)
            for path in pruned.files.prefix(20) { Console.out("  \(path)") }
            if pruned.files.count > 20 { Console.out("  … and \(pruned.files.count - 20) more") }
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
