import Testing

/// A clock that moves only when the test says so, after pointfreeco/swift-clocks' `TestClock`:
/// `advance(by:)` wakes the sleepers whose deadline has come, `run()` advances until no sleep is
/// pending, and `expectNoPendingSleeps()` checks at the end that nothing was left asleep. Tests of
/// timeouts and backoff run in milliseconds, never sleeping through 0.5 s or 2 s.
///
/// Waiting for sleepers (`waitForSleepers`, `nextSleep`) suspends until a sleep registers; it never
/// sleeps on the real clock except as the bound that keeps a broken test from hanging.
public final class TestClock: Clock, Sendable {
    /// A point on a `TestClock`: the time since the clock was made.
    public struct Instant: InstantProtocol {
        /// Time since the clock was made.
        public var offset: Duration

        /// The instant `offset` after the clock was made.
        public init(offset: Duration) { self.offset = offset }
        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`; negative when `other` is earlier.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper: Sendable {
        let id: UInt64
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State: Sendable {
        var now = Instant(offset: .zero)
        var sleepers: [Sleeper] = []
        var nextID: UInt64 = 0
        /// Sleeps that ever registered (ended ones included).
        var started = 0
    }

    private let state = Watched(State())

    /// A clock at offset zero, with no one sleeping.
    public init() {}

    /// The current instant: moves only by `advance(by:)`, `advance(to:)` and `run()`.
    public var now: Instant { state.read { $0.now } }
    /// Zero: a sleep ends at its very deadline.
    public var minimumResolution: Duration { .zero }

    /// Suspends until the clock is advanced to `deadline`, returning at once when it has passed;
    /// `tolerance` is ignored.
    /// - Throws: `CancellationError` when the task is cancelled, at once.
    public func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.update { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let result = state.update { state -> Result<Void, CancellationError>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(()) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    state.started += 1
                    return nil
                }
                if let result { continuation.resume(with: result.mapError { $0 as any Error }) }
            }
        } onCancel: {
            let sleeper = state.update { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    // MARK: - Moving time

    /// Moves time forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration = .zero) {
        advance(to: now.advanced(by: duration))
    }

    /// Moves time to `instant` (never backwards) and wakes the sleepers whose deadline has come.
    public func advance(to instant: Instant) {
        let due = state.update { state -> [Sleeper] in
            if state.now < instant { state.now = instant }
            let now = state.now
            let due = state.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            state.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Advances to each pending deadline in turn, letting the woken tasks run between steps,
    /// until no sleep is pending. A sleep that a woken task starts only after those turns is not
    /// seen: to step through a known sequence, prefer `nextSleep(within:)` and `advance(by:)`.
    public func run() async {
        while let next = state.read({ $0.sleepers.map(\.deadline).min() }) {
            advance(to: next)
            for _ in 0..<100 { await Task.yield() }
        }
    }

    // MARK: - Looking at the sleepers

    /// Number of tasks sleeping on this clock now.
    public var sleeperCount: Int { state.read { $0.sleepers.count } }

    /// Number of sleeps that ever registered on this clock (ended and pending).
    public var sleepsStarted: Int { state.read { $0.started } }

    /// Time left of each pending sleep, soonest first.
    public var pendingSleeps: [Duration] {
        state.read { state in state.sleepers.map { state.now.duration(to: $0.deadline) }.sorted() }
    }

    /// Waits until at least `count` tasks sleep on this clock; false (and an issue) if they never do.
    @discardableResult
    public func waitForSleepers(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await state.wait(
            until: { $0.sleepers.count >= count }, "\(count) sleepers (have \(sleeperCount))", sourceLocation: sourceLocation)
    }

    /// Waits until no task sleeps on this clock.
    @discardableResult
    public func waitUntilNoSleepers(sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await state.wait(
            until: { $0.sleepers.isEmpty }, "no sleepers (pending: \(pendingSleeps))", sourceLocation: sourceLocation)
    }

    /// Waits until some task sleeps on this clock for at most `window` more, and returns the time
    /// left of the soonest such sleep (nil, and an issue, if none comes). Tells a backoff of a
    /// second from an attempt's deadline of a minute sleeping at the same time.
    public func nextSleep(within window: Duration, sourceLocation: SourceLocation = #_sourceLocation) async -> Duration? {
        let came = await state.wait(
            until: { state in state.sleepers.contains { state.now.duration(to: $0.deadline) <= window } },
            "a sleep of at most \(window) (pending: \(pendingSleeps))", sourceLocation: sourceLocation)
        guard came else { return nil }
        return pendingSleeps.first { $0 <= window }
    }

    /// Records an issue for every sleep still pending: a test ends with nothing left asleep.
    public func expectNoPendingSleeps(sourceLocation: SourceLocation = #_sourceLocation) {
        let pending = pendingSleeps
        if !pending.isEmpty {
            Issue.record("\(pending.count) sleeps still pending on the test clock, ending in \(pending)", sourceLocation: sourceLocation)
        }
    }
}
