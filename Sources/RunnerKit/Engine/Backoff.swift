/// Delay before a retry: exponential with jitter, and a server's `Retry-After` honoured up to a cap.
public struct Backoff: Sendable {
    /// The full delay after the first failed attempt, doubled after each further one up to `cap`;
    /// each delay is drawn between half of it and all of it, so many jobs' retries spread out.
    /// Default 250 ms.
    public var base: Duration
    /// The most the full delay grows to, however many attempts failed. Default 8 s.
    public var cap: Duration
    /// The longest `Retry-After` honoured: a server asking for more is waited for this long,
    /// instead of the backoff. It also bounds the pause a 429's or 503's `Retry-After` puts on
    /// every job of that host. Default 30 s.
    public var retryAfterCap: Duration

    /// A backoff of `base` doubling up to `cap`, and `Retry-After` honoured up to `retryAfterCap`;
    /// each left out is its default.
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
