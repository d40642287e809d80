@testable import RunnerKit
import RunnerTestSupport
import Testing

/// The race between waiting for connectivity and the deadline, on a test clock.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(1)))
struct AttemptPolicyTests {
    let clock = TestClock()

    @Test func reachableTargetRunsAtOnceWithoutWaiting() async {
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let runs = Counter()
        let notices = Counter()
        let clock = self.clock
        let report = await policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .milliseconds(500), onNotice: { notices.bump() }) {
            await clock.waitForSleepers(1)  // the deadline is armed while the operation runs
            runs.bump()
            return 42
        }
        guard case .completed(.success(let value)) = report.outcome else {
            Issue.record("expected completion, got \(report.outcome)")
            return
        }
        #expect(value == 42)
        #expect(runs.value == 1)
        #expect(notices.value == 0)
        #expect(report.waitedForNetwork == .zero)
        #expect(clock.sleepsStarted == 1, "one deadline was armed")
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
        #expect(notices.value == 0)
        clock.advance(by: .milliseconds(1))
        await notices.waitFor(1)
        clock.advance(by: .milliseconds(1500))
        let result = await report
        guard case .offline = result.outcome else {
            Issue.record("expected offline, got \(result.outcome)")
            return
        }
        #expect(runs.value == 0)
        #expect(notices.value == 1)
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
        await notices.waitFor(1)
        clock.advance(by: .milliseconds(500))
        monitor.setReachable("h", true)
        let result = await report
        guard case .completed(.success("done")) = result.outcome else {
            Issue.record("expected completion, got \(result.outcome)")
            return
        }
        #expect(runs.value == 1)
        #expect(notices.value == 1)
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
        #expect(notices.value == 0)
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
        #expect(cancelled.value == 1, "the operation must have been cancelled before the attempt returned")
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
        await started.waitFor(1)
        task.cancel()
        let result = await task.value
        guard case .cancelled = result.outcome else {
            Issue.record("expected cancelled, got \(result.outcome)")
            return
        }
        #expect(cancelled.value == 1)
        await clock.waitUntilNoSleepers()
    }

    @Test func anOperationThatReturnsAsTheDeadlineComesKeepsItsValue() async {
        let policy = AttemptPolicy(clock: clock, monitor: ScriptedMonitor(reachable: ["h"]))
        let gate = Gate()
        let cancelled = Counter()
        async let report = policy.attempt(host: "h", timeout: .seconds(2), noticeAfter: .zero) { () async -> Int in
            // Ignores cancellation: returns only when the gate opens, after the deadline came.
            await withTaskCancellationHandler { await gate.pass() } onCancel: { cancelled.bump() }
            return 7
        }
        await gate.waitForStarted(1)
        await clock.waitForSleepers(1)
        clock.advance(by: .seconds(2))
        await cancelled.waitFor(1)  // the deadline came and cancelled the operation
        gate.open()
        guard case .completed(.success(7)) = await report.outcome else {
            Issue.record("a value returned is kept, deadline or not")
            return
        }
    }
}

/// The real-time deadlines behind the policy's fast path.
@Suite(.timeLimit(.minutes(1)))
struct DeadlineTimerTests {
    /// A timer of this suite's own, not the process's (other tests arm that one).
    let timer = DeadlineTimer()

    /// Each action runs at or after its deadline, earlier deadlines first; how much later is
    /// left to the machine's load.
    @Test func firesAfterItsDeadlineAndNotBefore() async throws {
        let start = ContinuousClock.now
        let fired = Watched<[(deadline: Int, after: Duration)]>([])
        for deadline in [200, 100] {
            _ = timer.schedule(after: .milliseconds(deadline)) {
                fired.update { $0.append((deadline, start.duration(to: .now))) }
            }
        }
        await fired.wait(until: { $0.count == 2 }, "both deadlines to fire")
        let got = fired.value
        #expect(got.map(\.deadline) == [100, 200], "the earlier deadline fires first")
        for (deadline, after) in got {
            #expect(after >= .milliseconds(deadline), "the \(deadline) ms deadline fired after \(after)")
        }
    }

    @Test func aCancelledDeadlineNeverFiresAndManyFireInOrder() async throws {
        let order = Watched<[Int]>([])
        let cancelled = timer.schedule(after: .milliseconds(50)) { order.update { $0.append(-1) } }
        #expect(cancelled.cancel())
        #expect(!cancelled.cancel(), "a second cancel finds nothing pending")
        // Against one base instant, far enough out for the loop to end first: a loop slowed
        // between two calls cannot put a deadline after a later one.
        let base = ContinuousClock.now + .milliseconds(500)
        for i in (0..<20).reversed() {
            let due = base + .milliseconds(10 * i)
            _ = timer.schedule(after: ContinuousClock.now.duration(to: due)) { order.update { $0.append(i) } }
        }
        await order.wait(until: { $0.count >= 20 }, "20 deadlines to fire")
        // The cancelled deadline, had it fired, would come first (50 ms, before every other).
        #expect(order.value == Array(0..<20))
    }

    @Test func cancelledEntriesDoNotAccumulate() {
        for _ in 0..<20_000 { timer.schedule(after: .seconds(3600)) {}.cancel() }
        #expect(timer.heapCount < 10_000, "compacted: \(timer.heapCount) entries held")
    }
}

