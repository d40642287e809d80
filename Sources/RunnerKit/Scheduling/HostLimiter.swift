import Synchronization

/// Caps how many attempts talk to one host at once (`--per-host N`, or the host's `perHost` in
/// the config). A job takes its host's slot before an attempt starts, so waiting for it never
/// eats into the attempt's deadline.
/// `waits` tells how much the cap held jobs back, for the run's summary.
public final class HostLimiter: Sendable {
    /// How much the per-host cap held jobs back, summed over every job and host.
    public struct Waits: Sendable {
        /// The cap (`--per-host`).
        public var limit: Int
        /// The cap of the busiest host, when the config gives it a `perHost` of its own.
        public var busiestHostLimit: Int?
        /// Time jobs waited for a host slot.
        public var waited: Duration
        /// Time jobs held a host slot (their attempts).
        public var held: Duration
        /// The host whose jobs waited longest in all, and how long.
        public var busiestHost: String?
        public var busiestHostWaited: Duration

        /// The share of the time jobs spent at their hosts (waiting for a slot, or holding one)
        /// that was waiting, from 0 to 1.
        public var share: Double {
            let total = waited + held
            return total > .zero ? waited / total : 0
        }

        /// Whether the cap held jobs back for a noticeable share of the run: a quarter or more
        /// of their time at hosts was spent waiting, and at least a second in all.
        public var isNoticeable: Bool { waited >= .seconds(1) && share >= 0.25 }
    }

    public let limit: Int
    private let requests: RequestConfig
    private let limiters = Mutex<[String: SlotLimiter]>([:])

    /// `limit` slots per host, except for hosts whose settings in `requests` have a `perHost`.
    public init(limit: Int, requests: RequestConfig = RequestConfig()) {
        precondition(limit > 0, "a host needs at least one slot")
        self.limit = limit
        self.requests = requests
    }

    /// The cap of `host` (lower-cased): its `perHost` in the config, else `limit`.
    public func limit(forHost host: String) -> Int {
        requests.settings(forHost: host)?.perHost.map { max(1, $0) } ?? limit
    }

    /// The limiter of `host` (hosts compared case-insensitively).
    public func limiter(for host: String) -> SlotLimiter {
        let name = host.lowercased()
        return limiters.withLock { limiters in
            if let existing = limiters[name] { return existing }
            let limiter = SlotLimiter(limit: self.limit(forHost: name))
            limiters[name] = limiter
            return limiter
        }
    }

    /// The hosts jobs have taken a slot of (lower-cased), in no order.
    public var hosts: [String] { limiters.withLock { Array($0.keys) } }

    /// Every host's limiter (lower-cased names), in no order: slots in use and callers waiting now.
    public var hostLimiters: [(host: String, limiter: SlotLimiter)] { limiters.withLock { $0.map { ($0.key, $0.value) } } }

    /// How much the cap held jobs back so far.
    public var waits: Waits {
        let hosts = limiters.withLock { $0 }
        var waits = Waits(limit: limit, busiestHostLimit: nil, waited: .zero, held: .zero, busiestHost: nil, busiestHostWaited: .zero)
        for (host, limiter) in hosts {
            let usage = limiter.usage
            waits.waited += usage.waited
            waits.held += usage.held
            if usage.waited > waits.busiestHostWaited {
                waits.busiestHost = host
                waits.busiestHostWaited = usage.waited
                waits.busiestHostLimit = limiter.limit == limit ? nil : limiter.limit
            }
        }
        return waits
    }
}
