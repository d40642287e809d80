import Glibc
import Synchronization

/// `--limit-rate`: the bytes a second of every transfer together (or, from a config's host
/// entry's `limitRate`, of every transfer from that host), as curl's `--limit-rate` and rclone's
/// `--bwlimit` keep them. The HTTP clients take each piece of a body from it as it arrives: libcurl's
/// client pauses a transfer that is ahead (`delay()`, then `charge`) and its thread goes on with the
/// others, so the server's sends slow down with it (TCP's flow control) and no other transfer
/// waits; URLSession's waits on the transfer's own queue (`take`). A burst of a tenth of a second
/// passes at once.
public final class BandwidthLimit: Sendable {
    /// Bytes a second.
    public let rate: Int
    /// When (on the monotonic clock, in nanoseconds) the bytes taken so far are paid for.
    private let paidUntil = Mutex<UInt64>(0)

    /// A host's limit (its `limitRate` in the config) is also held to the overall one (`within`).
    private let within: BandwidthLimit?

    public init(rate: Int, within: BandwidthLimit? = nil) {
        self.rate = max(1, rate)
        self.within = within
    }

    /// The burst that passes at once, in nanoseconds.
    private static let burst = UInt64(100_000_000)

    /// Takes `count` bytes of the limit (and of the one it is within), waiting first when the
    /// transfers are ahead of it.
    public func take(_ count: Int) {
        guard count > 0 else { return }
        let wait = delay()
        if wait > 0 {
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
        return max(own, within?.delay() ?? 0)
    }

    /// Takes `count` bytes without waiting (after `delay()` said 0).
    func charge(_ count: Int) {
        let now = Self.now()
        let cost = UInt64(count) * 1_000_000_000 / UInt64(rate)
        paidUntil.withLock { paid in paid = max(paid, now > Self.burst ? now - Self.burst : 0) + cost }
        within?.charge(count)
    }

    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
