import RunnerKit

/// `runner forget KEY… | --all`: drop keys from the cache the output directory is, so the next
/// run fetches them afresh (the seeds' "delete cache by keys").
enum ForgetCommand {
    static let all = CommandOption<Bool>.flag("all", help: "Forget every key in the output directory, without asking.")

    static let spec: CommandSpec = CommandSpec(
        name: "forget",
        summary: "Remove keys' payloads, records and validators, and bytes their cut transfers kept, so the next run fetches them afresh.",
        synopsis: "[KEY…]",
        arguments: [("KEY…", "Keys to forget, as in the job files and records.")],
        options: [
            all.spec,
            EngineCommandOptions.out.spec,
        ],
        positionals: (0, nil),
        run: { arguments in
            let all = (try? arguments[all]) ?? false
            guard all != !arguments.positionals.isEmpty else {
                return Runner.usageError(UsageError(all ? "Give either keys or --all, not both" : "Missing expected argument 'KEY…' (or --all)"), spec: spec)
            }
            let out: String
            do { out = try arguments[EngineCommandOptions.out] } catch { return Runner.usageError(error, spec: spec) }
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
            let keys = all ? store.recordedKeys() : arguments.positionals
            var missing = 0
            for key in keys {
                if let forgotten = store.forget(key: key) {
                    Console.out("forgot \(key): removed \(forgotten.removed.joined(separator: ", "))")
                } else {
                    missing += 1
                    Console.err("runner: \(key): no record in \(RunReporter.relative(store.root)); nothing to forget")
                }
            }
            if all && keys.isEmpty { Console.out("nothing to forget in \(RunReporter.relative(store.root))") }
            return missing == 0 ? 0 : 1
        })
}
