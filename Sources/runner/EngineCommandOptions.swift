import Foundation
import RunnerKinds
import RunnerKit

/// The engine options `runner run` and `runner watch` share: declared once, read into one
/// `JobEngine.Configuration`, so an option added here works in both.
enum EngineCommandOptions {
    /// The environment variable that chooses the HTTP client when `--http` does not.
    static let httpEnvironmentVariable = "RUNNER_HTTP"

    /// Every default comes from the engine's configuration.
    private static let defaults = JobEngine.Configuration.run(registry: KindRegistry())

    static let out = CommandOption<String>.text(
        "out", "DIR", default: defaults.out, shown: "./\(defaults.out)", help: "Output directory for payloads, results/ and runs/.")
    static let concurrency = CommandOption<Int>.int(
        "concurrency", default: defaults.concurrency, range: 1...10_000, help: "Jobs running at once, children included.")
    static let perHost = CommandOption<Int>.int("per-host", default: defaults.perHost, range: 1...10_000, help: "Jobs talking to one host at once.")
    static let rate = CommandOption<Double?>(
        spec: .init(
            name: "rate", value: "N",
            help: "Requests per second to any one host, evenly spaced (e.g. 0.5 or 10); a host's rate in the config overrides it.",
            defaultText: "unpaced"),
        read: parseRate)
    static let limitRate = CommandOption<Int?>(
        spec: .init(
            name: "limit-rate", value: "RATE",
            help: "Bytes a second of every transfer together: 500K, 2M, 1G (powers of 1024) or a number of bytes.",
            defaultText: "unlimited"),
        read: { text throws(UsageError) in
            guard let text else { return nil }
            guard let rate = ByteRate.parse(text) else {
                throw UsageError("--limit-rate must be a number of bytes a second, with K, M or G after it for 1024s (500K, 2M), not '\(text)'")
            }
            return rate
        })
    static let keepPartials = CommandOption<Int>(
        spec: .init(
            name: "keep-partials", value: "SIZE",
            help: "Bytes the kept parts of cut transfers may take in the output together: 500M, 2G (powers of 1024), a number of bytes, or 0 to keep none; past it the oldest go first.",
            defaultText: "1G"),
        read: { text throws(UsageError) in
            guard let text else { return defaults.keepPartials }
            guard let size = text == "0" ? 0 : ByteRate.parse(text) else {
                throw UsageError("--keep-partials must be a number of bytes, with K, M or G after it for 1024s (500M, 2G), or 0, not '\(text)'")
            }
            return size
        })
    static let http = CommandOption<HTTPClientKind>(
        spec: .init(
            name: "http", value: "CLIENT", help: "HTTP client: curl (libcurl's multi interface) or urlsession.",
            defaultText: "$\(httpEnvironmentVariable), else curl, or urlsession where libcurl cannot be loaded",
            completion: .words(HTTPClientKind.allCases.map(\.rawValue))),
        read: { text throws(UsageError) in try httpClient(text) })
    static let cacert = CommandOption<String?>(
        spec: .init(
            name: "cacert", value: "FILE",
            help: "Verify servers' certificates with this CA bundle (PEM) instead of the system's, for hosts without a cacert of their own in the config."),
        read: { path throws(UsageError) in
            guard let path else { return nil }
            guard access(path, R_OK) == 0 else { throw UsageError("--cacert: cannot read \(path): \(String(cString: strerror(errno)))") }
            return path
        })

    static let events = CommandOption<String?>.text(
        "events", "FILE",
        help: "Write one JSON line per event (queued, started, waiting, attempt, progress, finished, hook, dropped) to FILE as it happens: a new file, a FIFO or a device; never through a symbolic link.")
    static let eventsAppend = CommandOption<Bool>.flag(
        "events-append", help: "With --events, add to FILE if it is an existing regular file (refused without this by run; watch always adds).")

    /// `--events FILE` and `--events-append`, checked now (a link, or an existing file without
    /// `--events-append`, is a usage error); nil without `--events`. With `appends` (a watcher,
    /// which a service manager restarts with the same command line), an existing file is added
    /// to as if `--events-append` were given.
    static func eventsTarget(_ arguments: ParsedArguments, appends: Bool = false) throws(UsageError) -> EventsTarget? {
        guard let path = try arguments[events] else { return nil }
        let append = try arguments[eventsAppend] || appends
        if let problem = EventStream.problem(opening: path, append: append) { throw UsageError("--events: \(problem)") }
        return EventsTarget(path: path, append: append)
    }

    struct EventsTarget {
        var path: String
        var append: Bool
        /// A queue's watcher: its name, on every line.
        var runner: String?
        func stream() -> EventStream {
            EventStream(path: path, append: append, runner: runner, report: { Console.errLine("runner: \($0)") })
        }
    }

    static let onFinish = CommandOption<String?>.text(
        "on-finish", "COMMAND",
        help: "Run COMMAND with /bin/sh -c for each finished job once its record is durable: the record on stdin, RUNNER_KEY, RUNNER_KIND, RUNNER_STATUS, RUNNER_URL and RUNNER_OUTPUT in the environment.")
    static let hookConcurrency = CommandOption<Int>.int(
        "hook-concurrency", default: OnFinishHooks.defaultConcurrency, range: 1...64, help: "--on-finish commands running at once.")
    static let hookTimeout = CommandOption<Duration>.seconds(
        "hook-timeout", default: OnFinishHooks.defaultTimeout, help: "How long an --on-finish command may run before its process group is killed.")

    static let options: [CommandSpec.Option] =
        KindOptions.options + [out.spec, concurrency.spec, perHost.spec, rate.spec, limitRate.spec, keepPartials.spec, http.spec, cacert.spec, events.spec, eventsAppend.spec]
        + [onFinish.spec, hookConcurrency.spec, hookTimeout.spec] + TrustOptions.specs

    /// `--on-finish`, `--hook-concurrency` and `--hook-timeout`, or nil without a command.
    static func hook(_ arguments: ParsedArguments) throws(UsageError) -> (command: String, concurrency: Int, timeout: Duration)? {
        guard let command = try arguments[onFinish] else { return nil }
        return (command, try arguments[hookConcurrency], try arguments[hookTimeout])
    }

    /// Ends an event stream, saying on stderr when events were lost.
    static func finish(_ stream: EventStream?) {
        if let stream, let lost = stream.finish() { Console.err("runner: --events: \(lost)") }
    }

    /// Sets what the arguments give on `configuration` (a preset: `run`, or the engine of the
    /// `watch` one); the kinds and the config file's requests are the caller's to add
    /// (`KindOptions.setup`).
    static func apply(_ arguments: ParsedArguments, to configuration: inout JobEngine.Configuration) throws(UsageError) {
        configuration.out = try arguments[out]
        configuration.concurrency = try arguments[concurrency]
        configuration.perHost = try arguments[perHost]
        configuration.client = try arguments[http]
        configuration.requests.cacert = try arguments[cacert]
        // Only the rate: the rest of `requests` (a config file's) is not this option's.
        if let rate = try arguments[rate] { configuration.requests.rate = rate }
        configuration.limitRate = try arguments[limitRate]
        configuration.keepPartials = try arguments[keepPartials]
        let trust = try TrustOptions(arguments)
        configuration.policy = trust.policy
        configuration.limits = trust.limits
    }

    /// The highest `--rate` taken: a thousand requests a second to one host is already more
    /// than pacing is for.
    static let maxRate = 1000.0

    /// `--rate N`: a positive number of requests per second, decimals allowed.
    static func parseRate(_ text: String?) throws(UsageError) -> Double? {
        guard let text else { return nil }
        guard let value = Double(text), value.isFinite, value > 0, value <= maxRate,
            text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") })
        else {
            throw UsageError("--rate must be a number of requests per second above 0 and at most \(Int(maxRate)) (e.g. 0.5 or 10), not '\(text)'")
        }
        return value
    }

    /// The client `--http` names, else `$RUNNER_HTTP`, else the standard one.
    static func httpClient(_ option: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(UsageError) -> HTTPClientKind {
        do {
            if let option { return try HTTPClientKind.named(option) }
            if let name = environment[httpEnvironmentVariable], !name.isEmpty { return try HTTPClientKind.named(name) }
            return .standard
        } catch {
            throw UsageError("--http or $\(httpEnvironmentVariable): \(error)")
        }
    }
}
