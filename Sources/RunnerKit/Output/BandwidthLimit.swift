import Glibc
import Synchronization

/// `--limit-rate`: the bytes a second of every transfer together. Each body's bytes take their
/// share as they arrive, on the HTTP client's own thread (never the concurrency pool), which
/// waits when the transfers went faster than the limit: the client then reads no more until the
/// pace is back, and the server's sends slow down with it (TCP's flow control), as curl's
/// `--limit-rate` and rclone's `--bwlimit` do. A burst of a tenth of a second passes at once.
public final class BandwidthLimit: Sendable {
    /// Bytes a second.
    public let rate: Int
    /// When (on the monotonic clock, in nanoseconds) the bytes taken so far are paid for.
    private let paidUntil = Mutex<UInt64>(0)

    public init(rate: Int) {
        self.rate = max(1, rate)
    }

    /// Takes `count` bytes of the limit, waiting first when the transfers are ahead of it.
    public func take(_ count: Int) {
        guard count > 0 else { return }
        let now = Self.now()
        let cost = UInt64(count) * 1_000_000_000 / UInt64(rate)
        let burst = UInt64(100_000_000)
        let due = paidUntil.withLock { paid -> UInt64 in
            paid = max(paid, now > burst ? now - burst : 0) + cost
            return paid
        }
        guard due > now + burst else { return }
        var wait = timespec(tv_sec: Int((due - now - burst) / 1_000_000_000), tv_nsec: Int((due - now - burst) % 1_000_000_000))
        var left = timespec()
        while nanosleep(&wait, &left) != 0 && errno == EINTR { wait = left }
    }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// `500K`, `2M`, `1G` (powers of 1024, as curl reads them), or bytes; nil when it is not one.
    public static func parse(_ text: String) -> Int? {
        let units: [Character: Int] = ["K": 1024, "k": 1024, "M": 1 << 20, "m": 1 << 20, "G": 1 << 30, "g": 1 << 30]
        var digits = Substring(text)
        var factor = 1
        if let last = digits.last, let unit = units[last] {
            factor = unit
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), let value = Double(digits),
            value.isFinite, value > 0
        else { return nil }
        let bytes = value * Double(factor)
        guard bytes >= 1, bytes <= Double(Int.max / 2) else { return nil }
        return Int(bytes)
    }
}
