import Synchronization

/// Caps how many attempts talk to one host at once (`--per-host N`). A job takes its host's
/// slot before an attempt starts, so waiting for it never eats into the attempt's deadline.
public final class HostLimiter: Sendable {
    public let limit: Int
    private let limiters = Mutex<[String: SlotLimiter]>([:])

    public init(limit: Int) {
        precondition(limit > 0, "a host needs at least one slot")
        self.limit = limit
    }

    /// The limiter of `host` (hosts compared case-insensitively).
    public func limiter(for host: String) -> SlotLimiter {
        let name = host.lowercased()
        return limiters.withLock { limiters in
            if let existing = limiters[name] { return existing }
            let limiter = SlotLimiter(limit: limit)
            limiters[name] = limiter
            return limiter
        }
    }
}
