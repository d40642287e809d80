import Glibc
import Synchronization

/// `--limit-rate`: the bytes a second of every transfer together (or, from a config's host
/// entry's `limitRate`, of every transfer from that host), as curl's `--limit-rate` and rclone's
/// `--bwlimit` keep them. The HTTP clients take each piece of a body from it as it arrives: libcurl's
/// client pauses a transfer that is ahead (`delay()`, then `charge`) and its thread goes on with the
/// others, so the server's sends slow down with it (TCP's flow control) and no other transfer
/// waits; URLSession's waits on the transfer's own queue (`take`). A burst of a tenth of a second
/// passes at once.
package final class BandwidthLimit: Sendable {
    /// Bytes a second.
    package let rate: Int
    /// When (on the monotonic clock, in nanoseconds) the bytes taken so far are paid for.
    private let paidUntil = Mutex<UInt64>(0)

    /// A host's limit (its `limitRate` in the config) is also held to the overall one (`within`).
    private let within: BandwidthLimit?
    /// The fleet's share of this limit, for the runners of a queue (nil: this process's alone).
    private let shared: SharedBandwidth?

    package init(rate: Int, within: BandwidthLimit? = nil, shared: SharedBandwidth? = nil) {
        self.rate = max(1, rate)
        self.within = within
        self.shared = shared
    }

    /// The burst that passes at once, in nanoseconds.
    private static let burst = UInt64(100_000_000)

    /// Takes `count` bytes of the limit (and of the one it is within), waiting first when the
    /// transfers are ahead of it.
    package func take(_ count: Int) {
        guard count > 0 else { return }
        while true {
            let wait = delay()
            guard wait > 0 else { break }
            var time = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
            var left = timespec()
            while nanosleep(&time, &left) != 0 && errno == EINTR { time = left }
        }
        charge(count)
    }

    /// Nanoseconds until the bytes taken so far are paid for, less the burst (0: take now).
    func delay() -> UInt64 {
        let now = Self.now()
        let due = paidUntil.withLock { $0 }
        let own = due > now + Self.burst ? due - now - Self.burst : 0
        return max(own, shared?.delay(now: now) ?? 0, within?.delay() ?? 0)
    }

    /// Takes `count` bytes without waiting (after `delay()` said 0).
    func charge(_ count: Int) {
        let now = Self.now()
        let cost = UInt64(count) * 1_000_000_000 / UInt64(rate)
        paidUntil.withLock { paid in paid = max(paid, now > Self.burst ? now - Self.burst : 0) + cost }
        shared?.charge(count)
        within?.charge(count)
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}

/// A bandwidth limit that the runners of a queue hold together: the bytes a second are the
/// fleet's, kept as a token bucket in the database (`reserve`: the bucket's name, how many bytes,
/// at what rate; how long from now until the end of the slot those bytes were given, nil while
/// the database cannot be reached). The bytes are reserved ahead in chunks (an eighth of a
/// second's worth, 64 KiB to 1 MiB), so the database sees a few statements a second per
/// transferring runner, not one per read; the transfers spend each chunk from the start of its
/// slot, paced locally by the limit that holds this. A runner that transfers alone gets every
/// slot, so the whole rate; two share it. While the database cannot be reached, chunks are
/// granted locally at the full rate (each runner alone, as before).
package final class SharedBandwidth: Sendable {
    package typealias Reserve = @Sendable (_ name: String, _ bytes: Int, _ rate: Int) async -> Duration?

    package let name: String
    package let rate: Int
    private let reserve: Reserve
    private struct State {
        /// Bytes reserved and not yet spent (below zero: spent ahead of a reservation).
        var allowance = 0
        /// When (monotonic nanoseconds) the reserved bytes may be spent.
        var usableAt: UInt64 = 0
        /// A reservation is on its way.
        var pending = false
        /// While the database cannot be reached: when the bytes granted locally are paid for.
        var localPaid: UInt64 = 0
    }
    private let state = Mutex(State())

    package init(name: String, rate: Int, reserve: @escaping Reserve) {
        self.name = name
        self.rate = max(1, rate)
        self.reserve = reserve
    }

    /// The bytes one reservation takes.
    var chunk: Int { min(1 << 20, max(64 << 10, rate / 8)) }

    /// How long a transfer that holds a piece now waits (0: spend it now); starts a reservation
    /// when the reserved bytes ran out.
    func delay(now: UInt64) -> UInt64 {
        let (wait, start) = state.withLock { state -> (UInt64, Bool) in
            if state.allowance > 0 { return (state.usableAt > now ? state.usableAt - now : 0, false) }
            guard !state.pending else { return (Self.poll, false) }
            state.pending = true
            return (Self.poll, true)
        }
        if start {
            Task.detached { await self.refill() }
        }
        return wait
    }

    /// How often a transfer waiting for a reservation looks again (5 ms).
    static let poll = UInt64(5_000_000)

    func charge(_ count: Int) {
        state.withLock { $0.allowance -= count }
    }

    private func refill() async {
        let owed = state.withLock { max(0, -$0.allowance) }
        let bytes = chunk + owed
        let cost = UInt64(bytes) * 1_000_000_000 / UInt64(rate)
        let slotEnd = await reserve(name, bytes, rate)
        let now = BandwidthLimit.now()
        state.withLock { state in
            if let slotEnd {
                let end = now + UInt64(max(0, slotEnd.inSeconds) * 1e9)
                state.usableAt = end > cost ? end - cost : 0
            } else {
                state.localPaid = max(state.localPaid, now) + cost
                state.usableAt = state.localPaid - cost
            }
            state.allowance += bytes
            state.pending = false
        }
    }
}
