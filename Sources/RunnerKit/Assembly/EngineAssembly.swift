/// Builds an engine's parts from `EngineOptions`: the one place where `runner run` and
/// `runner watch` (and a host program) get their output store, HTTP client, connectivity
/// monitor and deadline timer, so every engine option works the same in both.
public struct EngineAssembly: Sendable {
    public let options: EngineOptions
    public let registry: KindRegistry
    public let store: OutputStore
    public let http: any HTTPFetching
    public let monitor: any ConnectivityMonitoring

    /// Opens (making if needed) the output directory and makes the HTTP client and monitor.
    /// Throws a one-line error when the directory cannot be used or the client cannot be made.
    public init(options: EngineOptions, registry: KindRegistry, monitor: (any ConnectivityMonitoring)? = nil) throws {
        self.options = options
        self.registry = registry
        // The client first: one that refuses an option must leave no output directory behind.
        let perHost = Self.connectionsPerHost(options)
        http = try options.http.make(
            maxConnectionsPerHost: perHost, maxConnections: max(options.concurrency, perHost),
            policy: options.policy, requests: options.requests)
        do {
            store = try OutputStore(root: options.out)
        } catch {
            throw AssemblyError("cannot use the output directory '\(options.out)': \(error)")
        }
        self.monitor = monitor ?? Self.standardMonitor()
    }

    /// Connections the HTTP client may open to one host: `--per-host`, or the largest `perHost`
    /// of the config's hosts when that is larger (the client's cap must let every slot through).
    public static func connectionsPerHost(_ options: EngineOptions) -> Int {
        options.requests.hosts.compactMap(\.settings.perHost).reduce(options.perHost, max)
    }

    /// The engine's configuration; `runLog` and `keyLock` are the caller's (a run's log, the
    /// spool's lock).
    public func configuration(runLog: RunLog?, keyLock: (any KeyLocking)? = nil) -> JobEngine.Configuration {
        JobEngine.Configuration(
            store: store, http: http, monitor: monitor, clock: ContinuousClock(), deadlines: DeadlineTimer.shared,
            registry: registry, limits: options.limits, concurrency: options.concurrency, runLog: runLog, perHost: options.perHost,
            keyLock: keyLock, requests: options.requests)
    }

    /// The connectivity monitor of a process: on Linux, the kernel's routing netlink.
    public static func standardMonitor() -> any ConnectivityMonitoring {
        #if os(Linux)
        return RouteMonitor()
        #else
        return AlwaysReachable()
        #endif
    }

    /// Why an engine could not be assembled, in one line.
    public struct AssemblyError: Error, Sendable, CustomStringConvertible {
        public var description: String
        init(_ description: String) { self.description = description }
    }
}
