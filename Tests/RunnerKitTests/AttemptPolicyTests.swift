import RunnerKit
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
}
