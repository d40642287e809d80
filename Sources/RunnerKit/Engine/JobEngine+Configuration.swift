import Foundation
import Synchronization

extension JobEngine {
    /// Everything that shapes an engine, in one value: what it runs and how much at once, where
    /// it writes, and its dependencies (HTTP client, connectivity monitor, clock, deadline
    /// timer). `runner run` (the `run` preset), `runner watch` (inside `SpoolFeed.Configuration`'s
    /// `watch` preset) and a host program set the same fields; a test hands in doubles and a test
    /// clock.
    ///
    /// ```swift
    /// var configuration = JobEngine.Configuration.run(registry: BuiltInKinds.registry())
    /// configuration.out = "out"
    /// configuration.concurrency = 32
    /// let engine = try JobEngine(configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        // MARK: What runs

        /// Where jobs' and children's kinds are found, by name.
        public var registry: KindRegistry
        /// Jobs running at once (children included).
        public var concurrency = 8
        /// Attempts talking to one host at once (a host's `perHost` in `requests` overrides it).
        /// Polite to one server, while a batch over many hosts still uses all of `concurrency`.
        public var perHost = 8
        /// What a job or a child may ask (a job asking more is invalid).
        public var limits = JobLimits.none
        /// What a job that does not set its `timeout`, `retries`, `maxBytes` or `headers` gets
        /// (nor has them from its file's `defaults` or its parent): 2 s, no retries, 64 MiB, none.
        public var jobDefaults = JobDefaults()
        /// Per host: headers, pacing (`--rate`, a host's `rate` and `perHost`) and TLS files.
        package var requests = RequestConfig()
        /// The delay between attempts.
        public var backoff = Backoff()
        /// Bytes a second of every transfer together (`--limit-rate`); nil: unlimited.
        public var limitRate: Int?
        /// The bytes the kept partials of cut transfers may take in the output (`--keep-partials`);
        /// keeping one past it removes the oldest first.
        package var keepPartials = PartialDownload.defaultBudget

        // MARK: Where it writes

        /// The output directory, made if needed, unless `store` is given.
        public var out = "out"
        /// The output store; nil: the one of `out`.
        public var store: OutputStore?
        /// Where each finished job is appended (`runner run`'s log, a watch session's).
        package var runLog: RunLog?
        /// Whether the store is this engine's alone while it runs (`runner run` holds its lock):
        /// then which records exist is read once, and a key's first run looks for no record file.
        /// Watchers sharing an output directory leave it false: another may write any record.
        package var storeHeldAlone = false
        /// Asked before a record is written to `results/` over one of an attempt that started
        /// later: whether this engine may still have been the key's only runner (a queue's
        /// watcher: whether its leases held). Nil: always. A queue's watchers share the output,
        /// and one frozen past its lease, whose job another watcher took over and ended, must
        /// not write its older attempt's record over the newer one.
        package var claimHeld: (@Sendable () -> Bool)?

        // MARK: Dependencies

        /// The HTTP client to make unless `http` is given.
        package var client = HTTPClientKind.standard
        /// Which addresses the made client may connect to.
        public var policy = AddressPolicy.standard
        /// The HTTP client; nil: one of `client`, made for these settings.
        public var http: (any HTTPFetching)?
        /// Says whether a job's host is reachable; nil: the kernel's (`standardMonitor()`), made
        /// with the engine.
        public var monitor: (any ConnectivityMonitoring)? = AlwaysReachable()
        /// The clock of the engine's waits: backoff delays, host pacing, the connectivity wait and
        /// its notice, and attempt deadlines when `deadlines` is nil. A test hands in a
        /// `TestClock`. Default: the continuous clock.
        public var clock: any Clock<Duration> = ContinuousClock()
        /// Arms attempt deadlines; nil: a sleeping task on `clock`.
        public var deadlines: (any DeadlineScheduling)?
        /// A lock per key across processes besides the output's (the spool's, the queue's), taken
        /// once the TaskManager admitted the key; a key held elsewhere ends `duplicate`.
        package var keyLock: (any KeyLocking)?
        /// Whether each job also holds its key's lock in the output directory
        /// (`OutputStore.keyLock`, after `keyLock`), so that engines and processes writing to
        /// one output never run one key at once: true. A queue's watchers, whose keys the queue
        /// holds for the whole fleet, leave it off.
        package var locksKeysInOutput = true
        /// Pacing shared with other runners (a queue's): `--rate`, a host's `rate` and
        /// `Retry-After` pauses then hold for all of them together.
        package var sharedPacing: (any SharedPacing)?
        /// Where the calls that block run, off the concurrency pool (hashing, partial files,
        /// syncs, name lookups): the process's threads unless a test hands in its own.
        package var blocking = BlockingWork.shared

        /// An engine over `store` and `http` (or those made from `out` and `client`), every
        /// other field at its default: always reachable, the continuous clock.
        public init(registry: KindRegistry = KindRegistry(), store: OutputStore? = nil, http: (any HTTPFetching)? = nil) {
            self.registry = registry
            self.store = store
            self.http = http
        }

        /// The preset of `runner run` (and of the engine inside `SpoolFeed.Configuration.watch`):
        /// the kernel's connectivity monitor and the process's deadline timer; the monitor, the
        /// client and the output directory made when the engine is made.
        public static func run(registry: KindRegistry) -> Configuration {
            var configuration = Configuration(registry: registry)
            configuration.monitor = nil
            configuration.deadlines = DeadlineTimer.shared
            return configuration
        }

        /// The connectivity monitor of a process: on Linux, the kernel's routing netlink.
        package static func standardMonitor() -> any ConnectivityMonitoring {
            #if os(Linux)
            return RouteMonitor()
            #else
            return AlwaysReachable()
            #endif
        }

        /// Connections the made HTTP client may open to one host: `perHost`, or the largest
        /// `perHost` of the config's hosts when that is larger (the client's cap must let every
        /// slot through).
        package var connectionsPerHost: Int {
            requests.hosts.compactMap(\.settings.perHost).reduce(perHost, max)
        }

        /// This configuration with what it does not give made: the HTTP client first (one that
        /// refuses an option must leave no output directory behind), then the output store and
        /// the connectivity monitor.
        package func prepared() throws(Problem) -> Configuration {
            var configuration = self
            if configuration.http == nil {
                do {
                    configuration.http = try client.make(
                        maxConnectionsPerHost: connectionsPerHost, maxConnections: max(concurrency, connectionsPerHost),
                        policy: policy, requests: requests)
                } catch {
                    throw Problem("\(error)")
                }
            }
            if configuration.store == nil {
                do {
                    configuration.store = try OutputStore(root: out)
                } catch {
                    throw Problem("cannot use the output directory '\(out)': \(error)")
                }
            }
            configuration.store?.partialBudget.store(keepPartials, ordering: .relaxed)
            if configuration.monitor == nil { configuration.monitor = Self.standardMonitor() }
            return configuration
        }

        /// Why an engine could not be made, in one line.
        public struct Problem: Error, Sendable, CustomStringConvertible {
            public var description: String
            init(_ description: String) { self.description = description }
        }
    }
}

extension JobEngine.Configuration {
    /// This configuration with `change` made: `.init(store: store, http: http).with { $0.clock = clock }`.
    public func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }
}
