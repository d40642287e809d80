import Foundation
import RunnerKit

/// `runner connectivity HOST [--watch SECONDS] [--polling]`: a hidden diagnostic that shows
/// what the connectivity monitor thinks of HOST, once or as a timed log of changes.
enum ConnectivityCommand {
    /// How long to log the changes (nil: not given, the state is said once). Any number of
    /// seconds from 0, not only up to a day as `CommandOption.seconds` takes.
    static let watch = CommandOption<Double?>(
        spec: .init(
            name: "watch", value: "SECONDS",
            help: "Print the state, then one line per change with its time (UTC, milliseconds), for this many seconds.")
    ) { text throws(UsageError) in
        guard let text else { return nil }
        guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else {
            throw UsageError("--watch must be a number of seconds, not '\(text)'")
        }
        return seconds
    }
    static let polling = CommandOption<Bool>.flag("polling", help: "Use the polling fallback instead of kernel routing events.")

    static let spec: CommandSpec = CommandSpec(
        name: "connectivity",
        summary: "Print whether HOST is reachable, as the runner's connectivity monitor judges it, and with --watch each change (diagnostic). Exits 0 when HOST is reachable at the end, 1 when it is not.",
        synopsis: "HOST",
        arguments: [("HOST", "An IP address or a host name (names are not resolved: a name is reachable when there is a route out).")],
        options: [watch.spec, polling.spec],
        positionals: (1, 1),
        hidden: true,
        run: { arguments in
            let host = arguments.positionals[0]
            let watchSeconds: Double?
            let usePolling: Bool
            do {
                guard !host.isEmpty else { throw UsageError("Missing expected argument 'HOST'") }
                watchSeconds = try arguments[watch]
                usePolling = try arguments[polling]
            } catch { return Runner.usageError(error, spec: spec) }
            return await run(host: host, watchSeconds: watchSeconds, polling: usePolling)
        })

    /// Says whether `host` is reachable, then for `watchSeconds` each change; the exit status.
    static func run(host: String, watchSeconds: Double?, polling: Bool) async -> Int32 {
        #if os(Linux)
        let monitor = RouteMonitor(configuration: polling ? .polling : RouteMonitor.Configuration())
        defer { monitor.close() }
        if let reason = monitor.fallbackReason { Console.err("note: \(reason)") }

        guard let watchSeconds else {
            let reachable = monitor.isReachable(host: host)
            Console.out(reachable ? "reachable" : "unreachable")
            return reachable ? 0 : 1
        }

        let updates = monitor.updates(for: host)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
                for await update in updates {
                    Console.out("\(update.date.formatted(format)) \(update.isReachable ? "reachable" : "unreachable")")
                }
            }
            group.addTask {
                try? await Task.sleep(for: Duration(seconds: watchSeconds))
            }
            await group.next()
            group.cancelAll()
        }
        return monitor.isReachable(host: host) ? 0 : 1
        #else
        _ = (host, watchSeconds, polling)
        Console.error("'runner connectivity' needs the Linux routing netlink.")
        return 2
        #endif
    }
}
