import RunnerKit
import Testing

/// A connectivity monitor the test scripts: hosts are unreachable until `setReachable`.
public final class ScriptedMonitor: ConnectivityMonitoring {
    private struct Waiter: Sendable {
        let id: UInt64
        let host: String
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State: Sendable {
        var reachable: Set<String>
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }

    private let state: Watched<State>

    /// A monitor to which only the hosts in `reachable` are reachable until `setReachable` says
    /// otherwise.
    public init(reachable: Set<String> = []) {
        state = Watched(State(reachable: reachable))
    }

    /// Makes `host` reachable (waking the tasks waiting for it) or unreachable.
    public func setReachable(_ host: String, _ reachable: Bool) {
        let woken = state.update { state -> [Waiter] in
            if reachable { state.reachable.insert(host) } else { state.reachable.remove(host) }
            guard reachable else { return [] }
            let woken = state.waiters.filter { $0.host == host }
            state.waiters.removeAll { $0.host == host }
            return woken
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    /// Number of tasks waiting for a host now.
    public var waiterCount: Int { state.read { $0.waiters.count } }

    /// Waits until at least `count` tasks wait for a host; false (and an issue) if they never do.
    @discardableResult
    public func waitForWaiters(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await state.wait(until: { $0.waiters.count >= count }, "\(count) tasks waiting for connectivity (have \(waiterCount))", sourceLocation: sourceLocation)
    }

    public func isReachable(host: String) -> Bool { state.read { $0.reachable.contains(host) } }

    public func waitUntilReachable(host: String) async throws {
        let id = state.update { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let result = state.update { state -> Result<Void, CancellationError>? in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if state.reachable.contains(host) { return .success(()) }
                    state.waiters.append(Waiter(id: id, host: host, continuation: continuation))
                    return nil
                }
                if let result { continuation.resume(with: result.mapError { $0 as any Error }) }
            }
        } onCancel: {
            let waiter = state.update { state -> Waiter? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }
}
