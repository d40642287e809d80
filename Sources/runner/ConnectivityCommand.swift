import Foundation
import RunnerKit

// `runner connectivity HOST [--watch SECONDS] [--polling]`: a hidden diagnostic that shows
// what the connectivity monitor thinks of HOST, once or as a timed log of changes.

private let connectivityHelp = """
    OVERVIEW: Show whether a host is reachable, as the runner's connectivity monitor judges it.

    USAGE: runner connectivity <host> [--watch <seconds>] [--polling]

    ARGUMENTS:
      <host>                  An IP address or a host name (names are not resolved: a name is
                              reachable when there is a route out).

    OPTIONS:
      --watch <seconds>       Print the state, then one line per change with its time (UTC,
                              milliseconds), for this many seconds.
      --polling               Use the polling fallback instead of kernel routing events.
      -h, --help              Show help information.

    Exit status: 0 when the host is reachable at the end, 1 when it is not, 2 for a usage error.

    """

/// Runs `runner connectivity`; `arguments` are the ones after the subcommand's name.
/// Returns the exit status.
func runConnectivityCommand(_ arguments: [String]) async -> Int32 {
    var host: String?
    var watchSeconds: Double?
    var polling = false

    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
        switch argument {
        case "-h", "--help":
            writeOut(connectivityHelp)
            return 0
        case "--polling":
            polling = true
        case "--watch":
            guard let value = remaining.popFirst() else {
                return connectivityUsageError("Missing value for '--watch <seconds>'.")
            }
            guard let seconds = Double(value), seconds.isFinite, seconds >= 0 else {
                return connectivityUsageError("The value '\(value)' is invalid for '--watch <seconds>': expected a number of seconds.")
            }
            watchSeconds = seconds
        default:
            if argument.hasPrefix("-") && argument.count > 1 {
                return connectivityUsageError("Unknown option '\(argument)'.")
            }
            guard host == nil else { return connectivityUsageError("Unexpected argument '\(argument)'.") }
            host = argument
        }
    }
    guard let host, !host.isEmpty else { return connectivityUsageError("Missing expected argument '<host>'.") }

    #if os(Linux)
    let monitor = RouteMonitor(configuration: polling ? .polling : RouteMonitor.Configuration())
    defer { monitor.close() }
    if let reason = monitor.fallbackReason { writeError("note: \(reason)\n") }

    guard let watchSeconds else {
        let reachable = monitor.isReachable(host: host)
        writeOut(reachable ? "reachable\n" : "unreachable\n")
        return reachable ? 0 : 1
    }

    let updates = monitor.updates(for: host)
    await withTaskGroup(of: Void.self) { group in
        group.addTask {
            let format = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
            for await update in updates {
                writeOut("\(update.date.formatted(format)) \(update.isReachable ? "reachable" : "unreachable")\n")
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
    _ = (watchSeconds, polling)
    writeError("Error: 'runner connectivity' needs the Linux routing netlink.\n")
    return 2
    #endif
}

private func connectivityUsageError(_ message: String) -> Int32 {
    writeError("""
        Error: \(message)
        Usage: runner connectivity <host> [--watch <seconds>] [--polling]
          See 'runner connectivity --help' for more information.

        """)
    return 2
}

/// Writes straight to the descriptor: each line is out as soon as it is written.
private func writeOut(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
}

private func writeError(_ text: String) {
    FileHandle.standardError.write(Data(text.utf8))
}
