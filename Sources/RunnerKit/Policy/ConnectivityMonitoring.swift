/// Tells whether a target host can be reached now, and waits until it can.
///
/// One monitor serves every job of a runner process; it is passed in (never global state),
/// so tests hand in a scripted double and Linux uses the kernel's routing netlink.
public protocol ConnectivityMonitoring: Sendable {
    /// Whether the host (an IP literal or a name) is reachable at this moment.
    func isReachable(host: String) -> Bool

    /// Returns as soon as `host` is reachable, at once when it already is.
    /// Throws `CancellationError` when the calling task is cancelled while waiting.
    func waitUntilReachable(host: String) async throws
}

/// A monitor that says every host is always reachable: for embedding where connectivity
/// is known, and for tests of other pieces.
public struct AlwaysReachable: ConnectivityMonitoring {
    /// A monitor that never waits (its wait only checks for cancellation); the default of
    /// `JobEngine.Configuration(registry:store:http:)`.
    public init() {}
    public func isReachable(host: String) -> Bool { true }
    public func waitUntilReachable(host: String) async throws { try Task.checkCancellation() }
}
