import Foundation

/// A thread of its own for calls that block (libpq's, `syncfs`): work handed to it runs there,
/// in order, and an async caller awaits it without holding a thread of Swift's concurrency pool,
/// whose few threads must never wait on a socket or a disk.
final class BlockingThread: @unchecked Sendable {  // `work` and `stopped` behind `condition`
    private let condition = NSCondition()
    private var work: [@Sendable () -> Void] = []
    private var stopped = false

    init(name: String) {
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    /// Runs `body` on the thread and returns what it returned, or throws what it threw.
    func run<Value: Sendable, Failure: Error>(_ body: @escaping @Sendable () throws(Failure) -> Value) async throws(Failure) -> Value {
        let result: Result<Value, Failure> = await withCheckedContinuation { continuation in
            enqueue { continuation.resume(returning: Result { () throws(Failure) -> Value in try body() }) }
        }
        return try result.get()
    }

    /// Runs `body` on the thread, without waiting for it.
    func enqueue(_ body: @escaping @Sendable () -> Void) {
        condition.lock()
        let accepted = !stopped
        if accepted {
            work.append(body)
            condition.signal()
        }
        condition.unlock()
        // Once stopped, work still runs (a caller awaits it), on the caller's thread.
        if !accepted { body() }
    }

    /// Ends the thread once the work handed to it ran.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        while true {
            condition.lock()
            while work.isEmpty && !stopped { condition.wait() }
            if work.isEmpty {
                condition.unlock()
                return
            }
            let next = work.removeFirst()
            condition.unlock()
            next()
        }
    }
}
