import Testing

/// Waits until `condition` holds, looking every millisecond, for state that tells no one when it
/// changes (a fixture server's counters, a file on disk). Returns false, and records an issue
/// saying `what` was awaited, if it does not hold within `limit`. Prefer `Watched` where the
/// state is the test's own.
@discardableResult
public func eventually(
    _ what: @autoclosure () -> String, limit: Duration = .seconds(5), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let end = ContinuousClock.now.advanced(by: limit)
    while try await !condition() {
        if ContinuousClock.now > end {
            Issue.record("waited \(limit) for \(what()), in vain", sourceLocation: sourceLocation)
            return false
        }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}
