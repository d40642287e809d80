@testable import RunnerKit
import Synchronization
import Testing

/// The race between waiting for connectivity and the deadline, on a test clock.
@Suite(.timeLimit(.minutes(1)))
struct AttemptPolicyTests {
    final class Counter: Sendable {
        let value = Atomic<Int>(0)
        func bump() { value.add(1, ordering: .relaxed) }
        var count: Int { value.load(ordering: .relaxed) }
    }

    let clock = TestClock()

    @Test func reachableTargetRunsAtOnceWithoutWaiting() async {
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let runs = Counter()
        let notices = Counter()
        let report = await policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500), onNotice: { notices.bump() }) {
            runs.bump()
            return 42
        }
        guard case .completed(.success(let value)) = report.outcome else {
            Issue.record("expected completion, got \(report.outcome)")
            return
        }
        #expect(value == 42)
        #expect(runs.count == 1)
        #expect(notices.count == 0)
        #expect(report.waitedForNetwork == .zero)
        #expect(clock.sleeperCount == 0, "the deadline sleeper must be cancelled when the operation wins")
    }

    @Test func unreachableUntilTheDeadlineIsOfflineAndNeverRuns() async {
        let monitor = ScriptedMonitor()
        let policy = AttemptPolicy(clock: clock, monitor: monitor)
        let runs = Counter()
        let notices = Counter()
        async let report = policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500), onNotice: { notices.bump() }) {
            runs.bump()
        }
        await clock.waitForSleepers(2)  // the deadline and the notice
        clock.advance(by: .milliseconds(499))
        #expect(notices.count == 0)
        clock.advance(by: .milliseconds(1))
        await eventually { notices.count == 1 }
        clock.advance(by: .milliseconds(1500))
        let result = await report
        guard case .offline = result.outcome else {
            Issue.record("expected offline, got \(result.outcome)")
            return
        }
        #expect(runs.count == 0)
        #expect(notices.count == 1)
        #expect(result.waitedForNetwork == .seconds(2))
        #expect(monitor.waiterCount == 0, "the waiting task must be cancelled when the deadline wins")
    }

    @Test func connectivityAfterOneSecondRunsWithWhatIsLeft() async {
        let monitor = ScriptedMonitor()
        let policy = AttemptPolicy(clock: clock, monitor: monitor)
        let runs = Counter()
        let notices = Counter()
        async let report = policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500), onNotice: { notices.bump() }) {
            runs.bump()
            return "done"
        }
        await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(500))
        await eventually { notices.count == 1 }
        clock.advance(by: .milliseconds(500))
        monitor.setReachable("h", true)
        let result = await report
        guard case .completed(.success("done")) = result.outcome else {
            Issue.record("expected completion, got \(result.outcome)")
            return
        }
        #expect(runs.count == 1)
        #expect(notices.count == 1)
        #expect(result.waitedForNetwork == .seconds(1))
    }

    @Test func reachableBeforeTheNoticeGivesNoNotice() async {
        let monitor = ScriptedMonitor()
        let policy = AttemptPolicy(clock: clock, monitor: monitor)
        let notices = Counter()
        async let report = policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500), onNotice: { notices.bump() }) { 1 }
        await clock.waitForSleepers(2)
        clock.advance(by: .milliseconds(300))
        monitor.setReachable("h", true)
        let result = await report
        guard case .completed = result.outcome else {
            Issue.record("expected completion, got \(result.outcome)")
            return
        }
        #expect(notices.count == 0)
        #expect(result.waitedForNetwork == .milliseconds(300))
        #expect(clock.sleeperCount == 0)
    }

    @Test func operationOverrunningTheDeadlineIsTimedOutAndCancelled() async {
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let cancelled = Counter()
        async let report = policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500)) {
            do {
                try await Task.sleep(for: .seconds(3600))
            } catch {
                cancelled.bump()
                throw error
            }
        }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(2))
        let result = await report
        guard case .timedOut = result.outcome else {
            Issue.record("expected timedOut, got \(result.outcome)")
            return
        }
        #expect(cancelled.count == 1, "the operation must have been cancelled before the attempt returned")
    }

    @Test func cancellingTheCallerEndsTheAttemptCancelled() async {
        let monitor = ScriptedMonitor()
        let policy = AttemptPolicy(clock: clock, monitor: monitor)
        let task = Task {
            await policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500)) { 1 }
        }
        await clock.waitForSleepers(2)
        task.cancel()
        let result = await task.value
        guard case .cancelled = result.outcome else {
            Issue.record("expected cancelled, got \(result.outcome)")
            return
        }
        #expect(monitor.waiterCount == 0)
        #expect(clock.sleeperCount == 0)
    }

    @Test func anOperationThatThrowsCompletesWithItsError() async {
        struct Boom: Error {}
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let report = await policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .zero) { () async throws -> Int in throw Boom() }
        guard case .completed(.failure(let error)) = report.outcome else {
            Issue.record("expected a failure, got \(report.outcome)")
            return
        }
        #expect(error is Boom)
    }

    @Test func cancellingTheCallerWhileAReachableOperationRunsCancelsIt() async {
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let started = Counter()
        let cancelled = Counter()
        let task = Task {
            await policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500)) {
                started.bump()
                do {
                    try await Task.sleep(for: .seconds(3600))
                } catch {
                    cancelled.bump()
                    throw error
                }
            }
        }
        await clock.waitForSleepers(1)  // the deadline is armed
        await eventually { started.count == 1 }
        task.cancel()
        let result = await task.value
        guard case .cancelled = result.outcome else {
            Issue.record("expected cancelled, got \(result.outcome)")
            return
        }
        #expect(cancelled.count == 1)
        await eventually { clock.sleeperCount == 0 }
    }

    @Test func anOperationThatReturnsAsTheDeadlineComesKeepsItsValue() async {
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let release = Counter()
        async let report = policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .zero) { () async -> Int in
            // Ignores cancellation: returns only when told to, after the deadline came.
            while release.count == 0 { await Task.yield() }
            return 7
        }
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(2))
        release.bump()
        guard case .completed(.success(7)) = await report.outcome else {
            Issue.record("a value returned is kept, deadline or not")
            return
        }
    }
}

/// The real-time deadlines behind the policy's fast path.
@Suite(.timeLimit(.minutes(1)))
struct DeadlineTimerTests {
    @Test func firesNearItsDeadlineAndNotBefore() async throws {
        let start = ContinuousClock.now
        let fired = Mutex<Duration?>(nil)
        _ = DeadlineTimer.shared.schedule(after: .milliseconds(200)) { fired.withLock { $0 = start.duration(to: .now) } }
        try await Task.sleep(for: .milliseconds(150))
        #expect(fired.withLock { $0 } == nil)
        let limit = ContinuousClock.now.advanced(by: .seconds(5))
        while fired.withLock({ $0 }) == nil && ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(5)) }
        let after = try #require(fired.withLock { $0 })
        #expect(after >= .milliseconds(200) && after < .milliseconds(1500), "fired after \(after)")
    }

    @Test func aCancelledDeadlineNeverFiresAndManyFireInOrder() async throws {
        let timer = DeadlineTimer.shared
        let order = Mutex<[Int]>([])
        let cancelled = timer.schedule(after: .milliseconds(50)) { order.withLock { $0.append(-1) } }
        #expect(cancelled.cancel())
        #expect(!cancelled.cancel(), "a second cancel finds nothing pending")
        for i in (0..<20).reversed() {
            _ = timer.schedule(after: .milliseconds(100 + 10 * i)) { order.withLock { $0.append(i) } }
        }
        let limit = ContinuousClock.now.advanced(by: .seconds(5))
        while order.withLock({ $0.count }) < 20 && ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        #expect(order.withLock { $0 } == Array(0..<20))
    }

    @Test func cancelledEntriesDoNotAccumulate() {
        let timer = DeadlineTimer.shared
        for _ in 0..<20_000 { timer.schedule(after: .seconds(3600)) {}.cancel() }
        #expect(timer.heapCount < 10_000, "compacted: \(timer.heapCount) entries held")
    }
}

