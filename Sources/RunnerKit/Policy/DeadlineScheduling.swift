/// Arms deadlines: calls an action once a duration has passed, unless cancelled first.
/// Injected into the policy: the process's `DeadlineTimer` in production, `ClockDeadlines` on a
/// test clock.
public protocol DeadlineScheduling: Sendable {
    /// Runs `action` once `duration` has passed; the returned closure cancels it.
    func arm(after duration: Duration, _ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void
}

/// Deadlines as tasks sleeping on a clock: for any clock, a test clock included.
public struct ClockDeadlines: DeadlineScheduling {
    /// The clock the deadlines sleep on: with a `TestClock`, advancing it fires them.
    public let clock: any Clock<Duration>

    /// Deadlines sleeping on `clock`: what an engine uses when its configuration's `deadlines` is
    /// nil.
    public init(clock: any Clock<Duration>) { self.clock = clock }

    public func arm(after duration: Duration, _ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let clock = self.clock
        let sleeper = Task {
            do {
                try await clock.sleep(for: duration, tolerance: nil)
            } catch {
                return
            }
            action()
        }
        return { sleeper.cancel() }
    }
}

extension DeadlineTimer: DeadlineScheduling {
    public func arm(after duration: Duration, _ action: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
        let handle = schedule(after: duration, action)
        return { handle.cancel() }
    }
}
