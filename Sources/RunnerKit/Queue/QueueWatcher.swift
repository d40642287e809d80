import Foundation

/// A watcher as the fleet lists it.
package struct QueueWatcher: Sendable {
    package var name: String
    package var host: String
    package var version: String
    /// The kinds it has loaded: the only ones it claims.
    package var kinds: [String]
    package var lease: Duration
    package var startedAt = Date()
    /// How long ago it last said it was alive (renewing its leases every third of one).
    package var silentFor: Duration = .zero
    /// Jobs it runs now.
    package var running = 0
    /// It serves a live page: the fleet tells it every job that ends.
    package var followsEvents = false
    /// How many jobs it runs at once (nil: not said), for the fair share of a claim.
    package var slots: Int?
    /// The process that holds the name: its id on `host`, and a value of its own.
    package var pid = getpid()
    package var instance = UUID().uuidString

    package init(name: String, host: String, version: String, kinds: [String], lease: Duration) {
        self.name = name
        self.host = host
        self.version = version
        self.kinds = kinds
        self.lease = lease
    }

    /// Alive as far as the fleet can tell: its leases still hold.
    package var isLive: Bool { silentFor < lease }
}
