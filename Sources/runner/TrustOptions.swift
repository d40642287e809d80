import RunnerKit

/// The options of `run` and `watch` that say what a job or a server may make the runner do
/// and what it may ask: the address policy and the caps on what a job may ask.
struct TrustOptions {
    var policy: AddressPolicy
    var limits: JobLimits

    static let allowHost = CommandOption<[String]>.list(
        "allow-host", "PATTERN",
        help: "Connect only to hosts a pattern names: a host, *.suffix, an address or a CIDR block; repeatable, or comma-separated. Also lets link-local addresses through.")
    static let denyPrivate = CommandOption<Bool>.flag(
        "deny-private", help: "Also refuse loopback, private (RFC 1918, 100.64.0.0/10, fc00::/7) addresses. (Link-local ones are always refused.)")
    static let maxBytes = CommandOption<Int?>(
        spec: .init(name: "max-bytes", value: "N", help: "Refuse jobs whose maxBytes is larger than N.", defaultText: "no cap"),
        read: { text throws(UsageError) in try text.map { text throws(UsageError) in try whole("max-bytes", text, 1...Int(Int64.max)) } })
    static let maxTimeout = CommandOption<Duration?>(
        spec: .init(name: "max-timeout", value: "SECONDS", help: "Refuse jobs whose timeout is longer.", defaultText: "no cap"),
        read: { text throws(UsageError) in
            guard let text else { return nil }
            guard let seconds = Double(text), seconds > 0, seconds <= 86_400 else {
                throw UsageError("--max-timeout must be a number of seconds greater than 0 and at most 86400, not '\(text)'")
            }
            return Duration(seconds: seconds)
        })
    static let maxRetries = CommandOption<Int?>(
        spec: .init(name: "max-retries", value: "N", help: "Refuse jobs that ask for more retries.", defaultText: "no cap"),
        read: { text throws(UsageError) in try text.map { text throws(UsageError) in try whole("max-retries", text, 0...100) } })

    static let specs: [CommandSpec.Option] = [allowHost.spec, denyPrivate.spec, maxBytes.spec, maxTimeout.spec, maxRetries.spec]

    private static func whole(_ name: String, _ text: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw UsageError("--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return value
    }

    init(_ arguments: ParsedArguments) throws(UsageError) {
        var patterns: [HostPattern] = []
        let given = try arguments[Self.allowHost]
        for value in given {
            for text in value.split(separator: ",") {
                do {
                    patterns.append(try HostPattern(parsing: String(text)))
                } catch {
                    throw UsageError("--allow-host: \(error)")
                }
            }
        }
        if !given.isEmpty && patterns.isEmpty { throw UsageError("--allow-host needs a pattern") }
        policy = AddressPolicy(denyPrivate: try arguments[Self.denyPrivate], allowedHosts: patterns)
        limits = JobLimits()
        limits.maxBytes = try arguments[Self.maxBytes]
        limits.maxTimeout = try arguments[Self.maxTimeout]
        limits.maxRetries = try arguments[Self.maxRetries]
    }
}
