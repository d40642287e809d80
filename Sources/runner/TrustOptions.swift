import RunnerKit

/// The options of `run` and `watch` that say what a job or a server may make the runner do
/// (DESIGN section 11): the address policy and the caps on what a job may ask.
struct TrustOptions {
    var policy: AddressPolicy
    var limits: JobLimits

    static let specs: [CommandSpec.Option] = [
        .init(name: "allow-host", value: "PATTERN",
              help: "Connect only to hosts a pattern names: a host, *.suffix, an address or a CIDR block; repeatable, or comma-separated. Also lets link-local addresses through."),
        .init(name: "deny-private", value: nil,
              help: "Also refuse loopback, private (RFC 1918, 100.64.0.0/10, fc00::/7) addresses. (Link-local ones are always refused.)"),
        .init(name: "max-bytes", value: "N", help: "Refuse jobs whose maxBytes is larger than N. (default: no cap)"),
        .init(name: "max-timeout", value: "SECONDS", help: "Refuse jobs whose timeout is longer. (default: no cap)"),
        .init(name: "max-retries", value: "N", help: "Refuse jobs that ask for more retries. (default: no cap)"),
    ]

    init(_ arguments: ParsedArguments) throws(UsageError) {
        var patterns: [HostPattern] = []
        for value in arguments.allValues("allow-host") {
            for text in value.split(separator: ",") {
                do {
                    patterns.append(try HostPattern(parsing: String(text)))
                } catch {
                    throw UsageError("--allow-host: \(error)")
                }
            }
        }
        if arguments.values["allow-host"] != nil && patterns.isEmpty { throw UsageError("--allow-host needs a pattern") }
        policy = AddressPolicy(denyPrivate: arguments.flag("deny-private"), allowedHosts: patterns)
        limits = JobLimits()
        if arguments.value("max-bytes") != nil {
            limits.maxBytes = try arguments.int("max-bytes", default: 0, range: 1...Int(Int64.max))
        }
        if let text = arguments.value("max-timeout") {
            guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                throw UsageError("--max-timeout must be a number of seconds greater than 0 and at most 86400, not '\(text)'")
            }
            limits.maxTimeout = .milliseconds(Int64((seconds * 1000).rounded()))
        }
        if arguments.value("max-retries") != nil {
            limits.maxRetries = try arguments.int("max-retries", default: 0, range: 0...100)
        }
    }
}
