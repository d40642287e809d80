import Testing

/// A counter shared between tasks, which a test can wait on.
public final class Counter: Sendable {
    private let count = Watched(0)

    public init() {}

    /// Adds one; returns the new value.
    @discardableResult
    public func bump() -> Int { count.update { $0 += 1; return $0 } }

    /// Takes one away.
    public func drop() { count.update { $0 -= 1 } }

    /// Raises the value to `value` if it is lower (for a peak).
    public func raise(to value: Int) { count.update { $0 = max($0, value) } }

    public var value: Int { count.value }

    /// Waits until the value is at least `target`; false (and an issue) if it never is.
    @discardableResult
    public func waitFor(_ target: Int, sourceLocation: SourceLocation = #_sourceLocation) async -> Bool {
        await count.wait(until: { $0 >= target }, "a count of \(target) (have \(value))", sourceLocation: sourceLocation)
    }
}
