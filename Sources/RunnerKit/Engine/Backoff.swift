/// Delay before a retry: exponential with jitter, and a server's `Retry-After` honoured up to a cap.
public struct Backoff: Sendable {
    public var base: Duration
    public var cap: Duration
    public var retryAfterCap: Duration

    public init(base: Duration = .milliseconds(250), cap: Duration = .seconds(8), retryAfterCap: Duration = .seconds(30)) {
        self.base = base
        self.cap = cap
        self.retryAfterCap = retryAfterCap
    }

    /// The delay after failed attempt number `attempt` (1-based).
    package func delay(afterAttempt attempt: Int, retryAfter: Duration?, random: Double = Double.random(in: 0...1)) -> Duration {
        if let retryAfter { return min(retryAfter, retryAfterCap) }
        let exponent = min(attempt - 1, 20)
        let full = min(base * (1 << exponent), cap)
        // "Equal jitter": half fixed, half random, so retries of many jobs spread out.
        return full / 2 + full / 2 * random
    }
}
