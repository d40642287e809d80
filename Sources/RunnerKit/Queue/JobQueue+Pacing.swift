/// The fleet's pacing: each host's next request slot and pause (`hosts`) and each bandwidth's
/// bucket (`bandwidth`), taken atomically by every runner.
extension JobQueue {
    /// Takes `host`'s next request slot for the fleet, `interval` after the previous one and
    /// not before its pause ends; returns how long from now until it.
    package func reservePace(host: String, interval: Duration) throws(QueueError) -> Duration {
        let step = "\(max(1, Int(interval / .microseconds(1)))) microseconds"
        let rows = try connection.query(
            """
            INSERT INTO runner.hosts AS h (host, next_at) VALUES ($1, now() + $2::interval)
            ON CONFLICT (host) DO UPDATE SET next_at = greatest(h.next_at, now(), h.paused_until) + $2::interval
            RETURNING extract(epoch FROM h.next_at - now())::float8
            """, [host, step])
        let ahead = Self.value(rows).flatMap(Double.init) ?? 0
        return max(.zero, .seconds(ahead) - interval)
    }

    /// Reserves `bytes` of the fleet's bandwidth `name` (`""`: every transfer, else a host) at
    /// `rate` bytes a second: they are paid for after those reserved before them (or from now,
    /// less a tenth of a second of burst, when the bucket is idle). Returns how long from now
    /// until the end of their slot; they may be spent from `bytes / rate` before it.
    package func reserveBandwidth(_ name: String, bytes: Int, rate: Int) throws(QueueError) -> Duration {
        let cost = "\(max(1, Int64(bytes) * 1_000_000 / Int64(max(1, rate)))) microseconds"
        let rows = try connection.query(
            """
            INSERT INTO runner.bandwidth AS b (name, paid_until) VALUES ($1, now() - interval '100 milliseconds' + $2::interval)
            ON CONFLICT (name) DO UPDATE SET paid_until = greatest(b.paid_until, now() - interval '100 milliseconds') + $2::interval
            RETURNING extract(epoch FROM b.paid_until - now())::float8
            """, [name, cost])
        return .seconds(Self.value(rows).flatMap(Double.init) ?? 0)
    }

    /// Holds `host` back for every runner for `duration` from now (never shortening a pause),
    /// and tells the runners at once (`runner`, the one that was asked, is named in the notice).
    package func pause(host: String, for duration: Duration, from runner: String) throws(QueueError) {
        let milliseconds = max(1, duration.inMilliseconds)
        try connection.query(
            """
            INSERT INTO runner.hosts AS h (host, paused_until) VALUES ($1, now() + $2::interval)
            ON CONFLICT (host) DO UPDATE SET paused_until = greatest(h.paused_until, EXCLUDED.paused_until)
            """, [host, "\(milliseconds) milliseconds"])
        try connection.query("SELECT pg_notify('runner_pause', $1)", ["\(milliseconds) \(runner) \(host)"])
    }
}
