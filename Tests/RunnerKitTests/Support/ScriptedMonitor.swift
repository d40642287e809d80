import RunnerKit
import Synchronization

/// A connectivity monitor the test scripts: hosts are unreachable until `setReachable`.
final class ScriptedMonitor: ConnectivityMonitoring {
    private struct Waiter {
        let id: UInt64
        let host: String
        let continuation: CheckedContinuation<Void, any Error>
    }

    private let state = Mutex<(reachable: Set<String>, waiters: [Waiter], nextID: UInt64)>(([], [], 0))

    init(reachable: Set<String> = []) {
        state.withLock { $0.reachable = reachable }
    }

    func setReachable(_ host: String, _ reachable: Bool) {
        let woken = state.withLock { state -> [Waiter] in
            if reachable { state.reachable.insert(host) } else { state.reachable.remove(host) }
            guard reachable else { return [] }
            let woken = state.waiters.filter { $0.host == host }
            state.waiters.removeAll { $0.host == host }
            return woken
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    var waiterCount: Int { state.withLock { $0.waiters.count } }

    func isReachable(host: String) -> Bool { state.withLock { $0.reachable.contains(host) } }

    func waitUntilReachable(host: String) async throws {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let result: Result<Void, any Error>? = state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.reachable.contains(host) { return .success(()) }
                    state.waiters.append(Waiter(id: id, host: host, continuation: continuation))
                    return nil
                }
                if let result { continuation.resume(with: result) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }
}
