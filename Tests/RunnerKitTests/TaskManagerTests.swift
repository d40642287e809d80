import RunnerKit
import Synchronization
import Testing

/// One task per key, cancellation, and forgetting keys; deduplication tested without sleeping.
@Suite(.timeLimit(.minutes(1)))
struct TaskManagerTests {
    /// Holds operations until the test opens it; counts how many started.
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, started: Int, waiters: [CheckedContinuation<Void, Never>])>((false, 0, []))

        func pass() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resume = state.withLock { state -> Bool in
                    state.started += 1
                    if state.open { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if resume { continuation.resume() }
            }
        }

        func open() {
            let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                state.open = true
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter.resume() }
        }

        var started: Int { state.withLock { $0.started } }

        func waitForStarted(_ count: Int) async {
            let limit = ContinuousClock.now.advanced(by: .seconds(5))
            while started < count && ContinuousClock.now < limit { await Task.yield() }
        }
    }

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
            while started.value < 50 { await Task.yield() }
            let before = clock.now
            manager.cancelAll()
            var cancelled = 0
            for await result in group where result == true { cancelled += 1 }
            #expect(cancelled == 50)
            #expect(before.duration(to: clock.now) < .milliseconds(1000))
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
    @Test func neverMoreHoldersThanTheLimit() async throws {
        let limiter = SlotLimiter(limit: 3)
        let holders = Counter()
        let peak = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try? await limiter.acquire()
                    peak.raise(to: holders.bump())
                    await Task.yield()
                    holders.drop()
                    limiter.release()
                }
            }
        }
        #expect(peak.value <= 3)
        #expect(peak.value >= 1)
        #expect(limiter.available == 3)
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
        try await Task.sleep(for: .milliseconds(20))
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        limiter.release()
        #expect(limiter.available == 1)
    }
}

/// A counter shared between tasks.
final class Counter: Sendable {
    private let count = Mutex(0)

    @discardableResult
    func bump() -> Int { count.withLock { $0 += 1; return $0 } }
    func drop() { count.withLock { $0 -= 1 } }
    func raise(to value: Int) { count.withLock { $0 = max($0, value) } }
    var value: Int { count.withLock { $0 } }
}
