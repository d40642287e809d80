import Testing

/// Holds operations until the test opens it, and counts how many arrived: a test waits until N
/// operations are held, asserts what it must while they are, then opens the gate (Nuke's
/// `MockDataLoader` queue). A held operation ignores cancellation, as a slow server would.
public final class Gate: Sendable {
    private struct State: Sendable {
        var open = false
        var started = 0
        var held: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Watched(State())

    public init() {}

    /// Arrives at the gate: returns at once if it is open, else when it opens.
    public func pass() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let through = state.update { state -> Bool in
                state.started += 1
                if state.open { return true }
                state.held.append(continuation)
                return false
            }
            if through { continuation.resume() }
        }
    }

    /// Lets every held operation through, and every later one at once.
    public func open() {
        let held = state.update { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    /// Operations that arrived at the gate so far (held or let through).
    public var started: Int { state.read { $0.started } }

    /// Operations held at the gate now.
    public var holding: Int { state.read { $0.held.count } }

    /// Waits until at least `count` operations arrived; false (and an issue) if they never do.
    @discardableResult
    public func waitForStarted(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await state.wait(until: { $0.started >= count }, "\(count) operations at the gate (have \(started))", sourceLocation: sourceLocation)
    }
}
