/// Pacing for the fleet: `--rate`, a host's `rate`, `Retry-After` pauses and bandwidth limits
/// shared by every runner of the queue, taken atomically in the store.
package protocol QueuePacing: Sendable {
    /// Takes `host`'s next request slot for the fleet, `interval` after the one before and not
    /// before its pause ends; returns how long from now until it.
    func reservePace(host: String, interval: Duration) async throws(QueueError) -> Duration
    /// Reserves `bytes` of the fleet's bandwidth `name` (`""`: all transfers, else a host) at
    /// `rate` bytes a second, after the bytes reserved before; returns how long from now until
    /// the end of their slot.
    func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async throws(QueueError) -> Duration
    /// Holds `host` back for every runner for `duration` (never shortening a pause), and tells them.
    func pause(host: String, for duration: Duration, from runner: String) async throws(QueueError)
}
