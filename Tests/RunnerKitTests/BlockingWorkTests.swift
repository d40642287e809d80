import Foundation
import RunnerKit
import RunnerTestSupport
import Synchronization
import Testing

/// The home of blocking calls: a caller cancelled before its work started gets
/// `CancellationError` and the work never runs; work that must happen waits whatever the caller.
@Suite struct BlockingWorkTests {
    /// Holds a lane busy until opened.
    private func block(_ work: BlockingWork, _ lane: BlockingWork.Lane) -> DispatchSemaphore {
        let gate = DispatchSemaphore(value: 0)
        work.enqueue(on: lane) { gate.wait() }
        return gate
    }

    @Test func aCallerCancelledBeforeItsWorkStartedGetsCancellationErrorAndTheWorkNeverRuns() async throws {
        let work = BlockingWork()
        let gate = block(work, .syncs)
        let ran = Atomic<Bool>(false)
        let call = Task { try await work.run(on: .syncs) { ran.store(true, ordering: .relaxed) } }
        try await Task.sleep(for: .milliseconds(20))
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        gate.signal()
        await work.after(.syncs)
        let didRun = ran.load(ordering: .relaxed)
        #expect(!didRun, "skipped: its caller was gone before it started")
    }

    @Test func aCallAnswersWithWhatItsWorkReturned() async throws {
        let work = BlockingWork()
        #expect(try await work.run(on: .calls) { 6 * 7 } == 42)
        #expect(try await work.run(on: .hashing) { "hashed" } == "hashed")
    }

    @Test func workThatMustHappenRunsAndIsWaitedForEvenWhenTheCallerIsCancelled() async throws {
        let work = BlockingWork()
        let gate = block(work, .partials)
        let ran = Atomic<Bool>(false)
        let call = Task {
            await work.perform(on: .partials) {
                ran.store(true, ordering: .relaxed)
                return 1
            }
        }
        call.cancel()
        gate.signal()
        #expect(await call.value == 1)
        let didRun = ran.load(ordering: .relaxed)
        #expect(didRun)
    }

    @Test func aLaneRunsItsWorkInOrder() async {
        let work = BlockingWork()
        let order = Mutex<[Int]>([])
        for number in 0..<50 { work.enqueue(on: .syncs) { order.withLock { $0.append(number) } } }
        await work.after(.syncs)
        #expect(order.withLock { $0 } == Array(0..<50))
    }
}
