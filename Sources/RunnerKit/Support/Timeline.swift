import Foundation

/// A clock read as time since a fixed origin, so any `Clock<Duration>` serves (the pacer's,
/// the spool feed's timers).
protocol Timeline: Sendable {
    var now: Duration { get }
    func sleep(until offset: Duration) async throws
}

struct ClockTimeline<C: Clock>: Timeline where C.Duration == Duration {
    let clock: C
    let origin: C.Instant

    var now: Duration { origin.duration(to: clock.now) }

    func sleep(until offset: Duration) async throws {
        try await clock.sleep(until: origin.advanced(by: offset), tolerance: nil)
    }
}

/// The timeline of any clock, from now.
func makeTimeline(_ clock: some Clock<Duration>) -> any Timeline { ClockTimeline(clock: clock, origin: clock.now) }
