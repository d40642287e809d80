import Synchronization

/// Caps how many attempts talk to one host at once (`--per-host N`, or the host's `perHost` in
/// the config). A job takes its host's slot before an attempt starts, so waiting for it never
/// eats into the attempt's deadline.
/// `waits` tells how much the cap held jobs back, for the run's summary.
package final class HostLimiter: Sendable {
    /// How much the per-host cap held jobs back, summed over every job and host.
    package struct Waits: Sendable {
        /// The cap (`--per-host`).
        package var limit: Int
        /// The cap of the busiest host, when the config gives it a `perHost` of its own.
        package var busiestHostLimit: Int?
        /// Time jobs waited for a host slot.
        package var waited: Duration
        /// Time jobs held a host slot (their attempts).
        package var held: Duration
        /// The host whose jobs waited longest in all, and how long.
        package var busiestHost: String?
        package var busiestHostWaited: Duration

        /// The share of the time jobs spent at their hosts (waiting for a slot, or holding one)
        /// that was waiting, from 0 to 1.
        package var share: Double {
            let total = waited + held
            return total > .zero ? waited / total : 0
        }

        /// Whether the cap held jobs back for a noticeable share of the run: a quarter or more
        /// of their time at hosts was spent waiting, and at least a second in all.
        package var isNoticeable: Bool { waited >= .seconds(1) && share >= 0.25 }
    }

    package let limit: Int
    /// Hosts whose limiters are kept: past them, the limiters of idle hosts (no slot in use,
    /// nobody waiting) go, the longest unasked first, so a watcher that meets thousands of hosts
    /// keeps the busiest and forgets the rest. A busy host is never forgotten.
    package let kept: Int
    private let requests: RequestConfig

    private struct Entry {
        let limiter: SlotLimiter
        /// When it was last asked for, in the order of asking.
        var asked: UInt64
    }

    private struct Table {
        var limiters: [String: Entry] = [:]
        var asked: UInt64 = 0
        /// What the forgotten hosts' limiters had summed, and the one that waited longest.
        var forgotten = SlotLimiter.Usage()
        var forgottenBusiest: (host: String, waited: Duration, limit: Int)?
        /// Hosts asked for that an entry of the config names (few: the config's size bounds
        /// them), remembered after their limiters go.
        var configured: Set<String> = []
    }
    private let table = Mutex(Table())

    /// `limit` slots per host, except for hosts whose settings in `requests` have a `perHost`.
    package init(limit: Int, requests: RequestConfig = RequestConfig(), kept: Int = 1_000) {
        precondition(limit > 0, "a host needs at least one slot")
        self.limit = limit
        self.requests = requests
        self.kept = max(1, kept)
    }

    /// The cap of `host` (lower-cased): its `perHost` in the config, else `limit`.
    package func limit(forHost host: String) -> Int {
        requests.settings(forHost: host)?.perHost.map { max(1, $0) } ?? limit
    }

    /// The limiter of `host` (hosts compared case-insensitively).
    package func limiter(for host: String) -> SlotLimiter {
        let name = host.lowercased()
        return table.withLock { table in
            table.asked += 1
            if let existing = table.limiters[name] {
                table.limiters[name]!.asked = table.asked
                return existing.limiter
            }
            if table.limiters.count >= kept { forgetIdle(&table) }
            let limiter = SlotLimiter(limit: self.limit(forHost: name))
            table.limiters[name] = Entry(limiter: limiter, asked: table.asked)
            if !requests.hosts.isEmpty, requests.entries(namingNoneOf: [name]).count < requests.hosts.count {
                table.configured.insert(name)
            }
            return limiter
        }
    }

    /// Forgets the idle hosts asked for longest ago, down to three quarters of `kept` (so the
    /// sorting is paid once per many new hosts), their sums kept.
    private func forgetIdle(_ table: inout Table) {
        let idle = table.limiters.filter { $0.value.limiter.available == $0.value.limiter.limit && $0.value.limiter.waiting == 0 }
            .sorted { $0.value.asked < $1.value.asked }
        let excess = table.limiters.count - kept * 3 / 4
        for (host, entry) in idle.prefix(max(0, excess)) {
            let usage = entry.limiter.usage
            table.forgotten.waited += usage.waited
            table.forgotten.held += usage.held
            if usage.waited > table.forgottenBusiest?.waited ?? .zero {
                table.forgottenBusiest = (host, usage.waited, entry.limiter.limit)
            }
            table.limiters[host] = nil
        }
    }

    /// The hosts jobs have taken a slot of (lower-cased), in no order: those kept, and those a
    /// config entry names.
    package var hosts: [String] { table.withLock { Array(Set($0.limiters.keys).union($0.configured)) } }

    /// Every kept host's limiter (lower-cased names), in no order: slots in use and callers waiting now.
    package var hostLimiters: [(host: String, limiter: SlotLimiter)] { table.withLock { $0.limiters.map { ($0.key, $0.value.limiter) } } }

    /// How much the cap held jobs back so far.
    package var waits: Waits {
        let (hosts, forgotten, busiest) = table.withLock { ($0.limiters, $0.forgotten, $0.forgottenBusiest) }
        var waits = Waits(
            limit: limit, busiestHostLimit: nil, waited: forgotten.waited, held: forgotten.held, busiestHost: busiest?.host,
            busiestHostWaited: busiest?.waited ?? .zero)
        if let busiest, busiest.limit != limit { waits.busiestHostLimit = busiest.limit }
        for (host, entry) in hosts {
            let limiter = entry.limiter
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
