import Foundation
import RunnerKit

/// The engine options `runner run` and `runner watch` share: one table, one parser, so an
/// option added here works in both.
enum EngineCommandOptions {
    /// The environment variable that chooses the HTTP client when `--http` does not.
    static let httpEnvironmentVariable = "RUNNER_HTTP"

    static let http = CommandSpec.Option(
        name: "http", value: "CLIENT",
        help: "HTTP client: curl (libcurl's multi interface) or urlsession. (default: $\(httpEnvironmentVariable), else curl, or urlsession where libcurl cannot be loaded)",
        completion: .words(HTTPClientKind.allCases.map(\.rawValue)))

    static let options: [CommandSpec.Option] = KindOptions.options + [
        .init(name: "out", value: "DIR", help: "Output directory for payloads, results/ and runs/. (default: ./out)"),
        .init(name: "concurrency", value: "N", help: "Jobs running at once, children included. (default: 8)"),
        .init(name: "per-host", value: "N", help: "Jobs talking to one host at once. (default: 8)"),
        .init(name: "rate", value: "N", help: "Requests per second to any one host, evenly spaced (e.g. 0.5 or 10); a host's rate in the config overrides it. (default: unpaced)"),
        http,
        .init(name: "cacert", value: "FILE", help: "Verify servers' certificates with this CA bundle (PEM) instead of the system's, for hosts without a cacert of their own in the config."),
    ] + TrustOptions.specs

    static let usage = "[--kinds DIR]… [--config FILE] [--out DIR] [--concurrency N] [--per-host N] [--rate N] [--http CLIENT] [--cacert FILE] [--allow-host PATTERN]… [--deny-private] [--max-bytes N] [--max-timeout SECONDS] [--max-retries N]"

    static func parse(_ arguments: ParsedArguments) throws(UsageError) -> EngineOptions {
        var options = EngineOptions()
        options.out = arguments.value("out") ?? "out"
        options.concurrency = try arguments.int("concurrency", default: EngineOptions.defaultConcurrency, range: 1...10_000)
        options.perHost = try arguments.int("per-host", default: JobEngine.Configuration.defaultPerHost, range: 1...10_000)
        options.http = try httpClient(arguments.value("http"))
        if let cacert = arguments.value("cacert") {
            guard access(cacert, R_OK) == 0 else {
                throw UsageError("--cacert: cannot read \(cacert): \(String(cString: strerror(errno)))")
            }
            options.requests.cacert = cacert
        }
        // Only the rate: the rest of `requests` (a config file's) is not this option's.
        if let rate = try rate(arguments.value("rate")) { options.requests.rate = rate }
        let trust = try TrustOptions(arguments)
        options.policy = trust.policy
        options.limits = trust.limits
        return options
    }

    /// The highest `--rate` taken: a thousand requests a second to one host is already more
    /// than pacing is for.
    static let maxRate = 1000.0

    /// `--rate N`: a positive number of requests per second, decimals allowed.
    static func rate(_ text: String?) throws(UsageError) -> Double? {
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
