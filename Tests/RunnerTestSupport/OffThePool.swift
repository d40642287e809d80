import Foundation

/// Runs `body`, which blocks (a read on a socket, waiting for a process, a sleep), on a thread of
/// its own, and waits for it without holding one of the few threads that run every test's tasks:
/// the tests run in parallel on a pool as wide as the machine has cores, and the in-process
/// servers and engines they talk to need that pool to answer.
public func offThePool<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
    let result: Result<T, E> = await withCheckedContinuation { continuation in
        Thread.detachNewThread {
            do throws(E) {
                continuation.resume(returning: .success(try body()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}
