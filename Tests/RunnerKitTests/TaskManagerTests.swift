@testable import RunnerKit
import RunnerTestSupport
import Testing

/// One task per key, cancellation, and forgetting keys; deduplication tested without sleeping.
@Suite(.timeLimit(.minutes(1)))
struct TaskManagerTests {
    @Test func aSecondTaskWithARunningKeyIsRefusedAndOnlyOneOperationRuns() async {
        let manager = TaskManager()
        let gate = Gate()
        async let first = manager.run(key: "k") {
            await gate.pass()
            return "first"
        }
        await gate.waitForStarted(1)
        #expect(manager.isRunning(key: "k"))
        for _ in 0..<10 {
            let refused = await manager.run(key: "k") {
                await gate.pass()
                return "second"
            }
            #expect(refused == nil)
        }
        gate.open()
        #expect(await first == "first")
        #expect(gate.started == 1, "exactly one operation ran")
        #expect(manager.count == 0)
        let again = await manager.run(key: "k") { "again" }
        #expect(again == "again", "a key runs normally once its first task has ended")
    }

    @Test func cancelKeyCancelsOnlyThatTask() async {
        let manager = TaskManager()
        let gate = Gate()
        async let a = manager.run(key: "a") { () -> Bool in
            await gate.pass()
            return Task.isCancelled
        }
        async let b = manager.run(key: "b") { () -> Bool in
            await gate.pass()
            return Task.isCancelled
        }
        await gate.waitForStarted(2)
        #expect(manager.cancel(key: "a"))
        #expect(!manager.cancel(key: "nope"))
        gate.open()
        #expect(await a == true)
        #expect(await b == false)
    }

    @Test func cancelAllCancelsEveryTaskPromptly() async {
        let manager = TaskManager()
        let started = Counter()
        let clock = ContinuousClock()
        await withTaskGroup(of: Bool?.self) { group in
            for i in 0..<50 {
                group.addTask {
                    await manager.run(key: "k\(i)") { () -> Bool in
                        started.bump()
                        do {
                            try await Task.sleep(for: .seconds(60))
                            return false
                        } catch {
                            return true
                        }
                    }
                }
            }
            await started.waitFor(50)
            let before = clock.now
            manager.cancelAll()
            var cancelled = 0
            for await result in group where result == true { cancelled += 1 }
            #expect(cancelled == 50)
            let took = before.duration(to: clock.now)
            #expect(took < .seconds(5), "all ended \(took) after cancelAll; uncancelled they sleep 60 s")
        }
        #expect(manager.count == 0)
    }

    @Test func keysAreForgottenWhenTheirTasksEnd() async {
        let manager = TaskManager()
        for i in 0..<10_000 {
            _ = await manager.run(key: "key-\(i)") { i }
        }
        #expect(manager.count == 0)
        #expect(manager.running.isEmpty)
    }
}

@Suite struct SlotLimiterTests {
    /// Forty callers for three slots: three hold a slot (and stay, held at a gate), the other
    /// thirty-seven wait in line; once the gate opens, all pass and every slot comes back.
    @Test func neverMoreHoldersThanTheLimit() async throws {
        let limiter = SlotLimiter(limit: 3)
        let gate = Gate()
        let holders = Counter()
        let peak = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    do {
                        try await limiter.acquire()
                    } catch {
                        Issue.record("acquire threw \(error)")
                        return
                    }
                    peak.raise(to: holders.bump())
                    await gate.pass()
                    holders.drop()
                    limiter.release()
                }
            }
            await gate.waitForStarted(3)
            await eventually("37 callers in line (have \(limiter.waiting))") { limiter.waiting == 37 }
            #expect(gate.started == 3, "no fourth caller got a slot")
            #expect(holders.value == 3)
            #expect(limiter.available == 0)
            gate.open()
        }
        #expect(peak.value == 3)
        #expect(gate.started == 40)
        #expect(limiter.available == 3)
        #expect(limiter.waiting == 0)
    }

    /// A release that lands between a caller's finding no slot free and its joining the line
    /// must not be lost: the caller would wait forever next to a free slot (a batch hung so,
    /// once in a few runs). Each trial releases the only slot while a second task is taking
    /// it, at a moment that shifts from trial to trial; that task must get the slot.
    @Test func aReleaseWhileACallerJoinsTheLineIsNotLost() async throws {
        for trial in 0..<10_000 {
            let limiter = SlotLimiter(limit: 1)
            try await limiter.acquire()
            let got = Counter()
            let contender = Task {
                try await limiter.acquire()
                got.bump()
            }
            for _ in 0..<(trial % 64) { _ = ContinuousClock.now }
            limiter.release()
            let limit = ContinuousClock.now.advanced(by: .seconds(2))
            while got.value == 0, ContinuousClock.now < limit { await Task.yield() }
            if got.value == 0 {
                contender.cancel()
                Issue.record("trial \(trial): the task waited 2 s for a slot that was free")
                break
            }
            _ = try? await contender.value
        }
    }

    @Test func aCancelledWaiterLeavesTheLine() async throws {
        let limiter = SlotLimiter(limit: 1)
        try await limiter.acquire()
        let waiter = Task { try await limiter.acquire() }
        await eventually("the caller in line") { limiter.waiting == 1 }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(limiter.waiting == 0, "the cancelled caller left the line")
        limiter.release()
        #expect(limiter.available == 1, "the slot went to no one: the cancelled caller was not served")
    }
}
