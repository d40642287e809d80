import Synchronization

/// Pacing shared with other processes (the runners of one queue): a request to a paced host
/// also takes the fleet's next slot of that host, and a pause one runner was asked for holds
/// for all.
package protocol SharedPacing: Sendable {
    /// Takes `host`'s next request slot for the fleet, `interval` after the one before it and
    /// not before the host's pause ends; returns how long from now until that slot (zero: now).
    func reserve(host: String, interval: Duration) async -> Duration
    /// Tells the fleet that `host` asked to be left alone for `duration` from now; returns once
    /// the fleet can know it (stored where every runner looks before it sends).
    func pause(host: String, for duration: Duration) async
    /// Reserves `bytes` of the fleet's bandwidth `name` (`""`: all transfers, else a host) at
    /// `rate` bytes a second; how long from now until the end of their slot (nil: not shared
    /// now, each runner paces alone).
    func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async -> Duration?
}

extension SharedPacing {
    package func reserveBandwidth(_ name: String, bytes: Int, rate: Int) async -> Duration? { nil }
}

/// Paces requests per host (`--rate`, a host's `rate` in the config) and holds a host back while
/// it asked to be left alone (`Retry-After` on a 429 or 503). One pacer serves every job of an
/// engine, children included, so the pace is the process's, not a job's.
///
/// Each host has a token bucket of capacity 1: a request takes the token, and the next one comes
/// `1/rate` later. Requests to one host are thus evenly spaced, like curl's `--rate`, and an idle
/// host never saves up a burst: in any one second at most `rate` requests start, plus the one
/// whose token was waiting at the start of that second. Waiters are served first come, first
/// served; one cancelled while waiting leaves the line without taking a token.
///
/// With `shared` pacing (runners of one queue), the head of a paced host's line also takes the
/// fleet's slot before it goes, so the rate holds for every runner together.
///
/// With no rate anywhere and no pause ever asked for, `acquire` costs one atomic load.
package final class HostPacer: Sendable {
    /// How much pacing held jobs back, summed over every job and host.
    package struct Waits: Sendable {
        /// Time jobs waited for a token or for a host's pause to end.
        package var waited: Duration
        /// The host whose jobs waited longest in all, and how long.
        package var busiestHost: String?
        package var busiestHostWaited: Duration
        /// Requests per second to the busiest host (nil: it was only paused).
        package var busiestHostRate: Double?
        /// Pauses hosts asked for (`Retry-After` on a 429 or 503).
        package var pauses: Int

        /// Whether pacing held jobs back for at least a second in all.
        package var isNoticeable: Bool { waited >= .seconds(1) }
    }

    private struct Waiter {
        let id: UInt64
        /// Set once the waiter parks; resumed when it becomes the head of the line.
        var continuation: CheckedContinuation<Void, any Error>?
        /// Made the head while it was not parked yet: it must not park.
        var promoted = false
    }

    private struct Host {
        /// Time between tokens; nil: unpaced (only pauses hold it back).
        let interval: Duration?
        /// When the next token is there.
        var tokenAt: Duration = .zero
        /// Until when the host asked to be left alone.
        var pausedUntil: Duration = .zero
        var line: [Waiter] = []
        var waited: Duration = .zero
        var ready: Duration { max(tokenAt, pausedUntil) }
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var nextID: UInt64 = 0
        var pauses = 0
        /// What the forgotten hosts had waited, and the one that waited longest.
        var forgottenWaited: Duration = .zero
        var forgottenBusiest: (host: String, waited: Duration, interval: Duration?)?
    }

    /// Hosts whose pace is kept: past them, hosts nobody waits for whose next token is there and
    /// whose pause is over are forgotten (a fresh entry would be the same), so thousands of
    /// hosts keep a bounded table.
    package static let keptHosts = 1_000

    /// The longest pause a `Retry-After` may ask for (as `Backoff.retryAfterCap`).
    package let pauseCap: Duration
    /// Where the rates come from.
    package let requests: RequestConfig
    private let timeline: any Timeline
    private let shared: (any SharedPacing)?
    /// Whether any host is paced or was ever paused; when not, `acquire` returns at once.
    private let engaged: Atomic<Bool>
    private let state = Mutex(State())

    /// A pacer with the rates of `requests` (`rate(forHost:)`), on `clock`.
    /// With `shared`, paced hosts take the fleet's slots too and pauses are told to the fleet.
    package init(
        requests: RequestConfig, clock: any Clock<Duration> = ContinuousClock(), pauseCap: Duration = .seconds(30),
        shared: (any SharedPacing)? = nil
    ) {
        self.requests = requests
        self.shared = shared
        self.timeline = makeTimeline(clock)
        self.pauseCap = pauseCap
        self.engaged = Atomic(requests.rate != nil || requests.hosts.contains { $0.settings.rate != nil })
    }

    /// Requests per second to `host` (lower-cased), nil when unpaced.
    package func rate(forHost host: String) -> Double? {
        requests.rate(forHost: host.lowercased()).flatMap { $0 > 0 && $0.isFinite ? $0 : nil }
    }

    // MARK: - Taking a token

    /// Waits for `host`'s token (and for a pause of the host to end), and takes it. Throws
    /// `CancellationError` when the caller is cancelled first; then no token is taken.
    /// Returns how long the caller waited (zero when the token was there); `onWait` is called
    /// when it joins the line.
    @discardableResult
    package func acquire(host: String, onWait: () -> Void = {}) async throws -> Duration {
        guard engaged.load(ordering: .acquiring) else { return .zero }
        let name = host.lowercased()
        let began = timeline.now
        // Joins the line, or takes the token at once when nobody waits and it is there.
        let id = state.withLock { state -> UInt64? in
            if state.hosts[name] == nil, state.hosts.count >= Self.keptHosts { forgetIdle(&state, now: began) }
            var entry = state.hosts[name] ?? makeHost(name)
            defer { state.hosts[name] = entry }
            // A paced host of a fleet always goes through the line: its head asks the fleet.
            if entry.line.isEmpty, entry.ready <= began, shared == nil || entry.interval == nil {
                take(&entry, at: began)
                return nil
            }
            state.nextID += 1
            entry.line.append(Waiter(id: state.nextID, continuation: nil, promoted: entry.line.isEmpty))
            return state.nextID
        }
        guard let id else { return .zero }
        onWait()
        do {
            try await waitInLine(id: id, host: name)
        } catch {
            leave(id: id, host: name)
            throw error
        }
        let waited = timeline.now - began
        state.withLock { $0.hosts[name]?.waited += waited }
        return waited
    }

    /// Forgets the hosts nobody waits for, whose token is there and whose pause is over, down
    /// to three quarters of `keptHosts`; what they waited still counts.
    private func forgetIdle(_ state: inout State, now: Duration) {
        var excess = state.hosts.count - Self.keptHosts * 3 / 4
        for (name, host) in state.hosts where excess > 0 && host.line.isEmpty && host.ready <= now {
            state.forgottenWaited += host.waited
            if host.waited > state.forgottenBusiest?.waited ?? .zero { state.forgottenBusiest = (name, host.waited, host.interval) }
            state.hosts[name] = nil
            excess -= 1
        }
    }

    private func makeHost(_ name: String) -> Host {
        Host(interval: rate(forHost: name).map { Duration.seconds(1 / $0) })
    }

    private func take(_ host: inout Host, at now: Duration) {
        if let interval = host.interval { host.tokenAt = max(now, host.tokenAt) + interval }
    }

    /// Parks until the waiter is the head of the line, then sleeps until the token is there
    /// (again when a pause moved it meanwhile) and takes it, handing the head to the next.
    private func waitInLine(id: UInt64, host: String) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume = state.withLock { state -> Bool? in
                    guard let index = state.hosts[host]?.line.firstIndex(where: { $0.id == id }) else { return false }
                    if Task.isCancelled { return false }
                    if state.hosts[host]!.line[index].promoted { return true }
                    state.hosts[host]!.line[index].continuation = continuation
                    return nil
                }
                switch resume {
                case nil: break
                case true?: continuation.resume()
                case false?: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let parked = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.hosts[host]?.line.firstIndex(where: { $0.id == id }) else { return nil }
                defer { state.hosts[host]!.line[index].continuation = nil }
                return state.hosts[host]!.line[index].continuation
            }
            parked?.resume(throwing: CancellationError())
        }
        // The head of the line: the only waiter of this host sleeping on the clock.
        while true {
            let now = timeline.now
            let ready = state.withLock { state -> Duration? in
                guard var entry = state.hosts[host] else { return nil }
                if entry.ready > now { return entry.ready }
                take(&entry, at: now)
                entry.line.removeFirst()
                state.hosts[host] = entry
                return nil
            }
            guard let ready else { break }
            try await timeline.sleep(until: ready)
        }
        // The token is taken; the next waiter becomes the head once this one has the fleet's slot.
        defer { promoteHead(of: host) }
        if let shared, let interval = state.withLock({ $0.hosts[host]?.interval }) {
            let wait = await shared.reserve(host: host, interval: interval)
            if wait > .zero { try await timeline.sleep(until: timeline.now + wait) }
        }
    }

    /// Leaves the line (cancelled); when it was the head, the next waiter becomes the head.
    private func leave(id: UInt64, host: String) {
        let wasHead = state.withLock { state -> Bool in
            guard let index = state.hosts[host]?.line.firstIndex(where: { $0.id == id }) else { return false }
            state.hosts[host]!.line.remove(at: index)
            return index == 0
        }
        if wasHead { promoteHead(of: host) }
    }

    /// Wakes the waiter now at the head of `host`'s line (or marks it, if it has not parked yet).
    private func promoteHead(of host: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            guard var entry = state.hosts[host], !entry.line.isEmpty, !entry.line[0].promoted else { return nil }
            entry.line[0].promoted = true
            let continuation = entry.line[0].continuation
            entry.line[0].continuation = nil
            state.hosts[host] = entry
            return continuation
        }
        next?.resume()
    }

    // MARK: - Pausing

    /// Holds every request to `host` back for `duration` (at most `pauseCap`) from now, for
    /// every job of the process: waiting ones included. A pause never shortens an earlier one.
    /// A pause that came from the fleet (`fromFleet`) is not told to it again; to tell the fleet
    /// of one this process was asked for, use `pauseForTheFleet`.
    package func pause(host: String, for duration: Duration, fromFleet: Bool = false) {
        guard duration > .zero else { return }
        if !fromFleet, let shared {
            let (host, duration) = (host.lowercased(), min(duration, pauseCap))
            Task { await shared.pause(host: host, for: duration) }
        }
        pauseHere(host: host, for: duration)
    }

    /// `pause`, and with shared pacing returns only once the fleet was told: the job that was
    /// asked to wait ends (and its record is stored) after every runner can see the pause.
    package func pauseForTheFleet(host: String, for duration: Duration) async {
        guard duration > .zero else { return }
        pauseHere(host: host, for: duration)
        await shared?.pause(host: host.lowercased(), for: min(duration, pauseCap))
    }

    private func pauseHere(host: String, for duration: Duration) {
        let name = host.lowercased()
        let until = timeline.now + min(duration, pauseCap)
        state.withLock { state in
            var entry = state.hosts[name] ?? makeHost(name)
            entry.pausedUntil = max(entry.pausedUntil, until)
            state.hosts[name] = entry
            state.pauses += 1
        }
        engaged.store(true, ordering: .releasing)
    }

    /// Until when `host` is paused, as time left from now (zero when it is not).
    package func pauseLeft(host: String) -> Duration {
        let now = timeline.now
        let until = state.withLock { $0.hosts[host.lowercased()]?.pausedUntil ?? .zero }
        return max(.zero, until - now)
    }

    // MARK: - Measuring

    /// How much pacing held jobs back so far.
    package var waits: Waits {
        state.withLock { state in
            let forgotten = state.forgottenBusiest
            var waits = Waits(
                waited: state.forgottenWaited, busiestHost: forgotten?.host, busiestHostWaited: forgotten?.waited ?? .zero,
                busiestHostRate: forgotten?.interval.map { 1 / ($0 / .seconds(1)) }, pauses: state.pauses)
            for (name, host) in state.hosts {
                waits.waited += host.waited
                if host.waited > waits.busiestHostWaited {
                    waits.busiestHost = name
                    waits.busiestHostWaited = host.waited
                    waits.busiestHostRate = host.interval.map { 1 / ($0 / .seconds(1)) }
                }
            }
            return waits
        }
    }

    /// Hosts in the table now.
    package var hostCount: Int { state.withLock { $0.hosts.count } }

    /// Callers waiting for `host` right now (for tests that must know a caller joined the line).
    package func waiting(host: String) -> Int { state.withLock { $0.hosts[host.lowercased()]?.line.count ?? 0 } }
}
