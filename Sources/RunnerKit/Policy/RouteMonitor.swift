#if os(Linux)

import Dispatch
import Foundation
import Glibc
import Synchronization

// How the monitor works
//
//   kernel ──RTMGRP_LINK / IPV4_IFADDR / IPV4_ROUTE / IPV6_IFADDR / IPV6_ROUTE──▶ event socket
//                                                                                   │
//   event thread: poll(event socket, wake pipe) ── any event (or ENOBUFS) ──▶ drain, then
//       re-evaluate every watched target once (one route look-up per target, shared by all
//       its waiters), resume the waiters whose target became reachable, and tell the
//       subscribers of `updates(for:)` about changes; one more look `settleDelay` later.
//
//   isReachable / waitUntilReachable: a route look-up on the request socket (RTM_GETROUTE,
//       then RTM_GETLINK for the output interface), cached until the next event.
//
// A generation counter, bumped before each re-evaluation, closes the gap between a waiter's
// own look-up and its registration: a waiter registers only if no re-evaluation started in
// between, and looks again otherwise.
//
// Polling fallback: when the event socket cannot be opened (or `usesNetlinkEvents` is false),
// the same thread re-evaluates the watched targets every `pollInterval` while anyone watches.
// When not even the request socket opens, every host is reported reachable.

/// The Linux connectivity monitor, driven by the kernel's routing netlink.
///
/// Create one per process and pass it to everything that waits for the network; `close()` it
/// (or release it) to stop its thread.
///
/// Reachability is judged per target:
/// - loopback (`127.0.0.0/8`, `::1`, `localhost`, `0.0.0.0`, `::`): always reachable;
/// - an IP literal: reachable when the kernel has a unicast route to it (as `ip route get`)
///   whose output interface is up and running (has carrier), and the route is not flagged
///   dead or link-down; or when the address is this host's own. This covers both ways a link
///   fails: set down (the kernel removes the routes) and carrier lost (the kernel keeps the
///   IPv4 routes, but the interface is no longer running);
/// - a host name: the monitor never resolves names. A name is reachable when there is a way
///   out, that is, when an address in `Configuration.nameProbeAddresses` (by default one
///   documentation address each for IPv4 and IPv6) is reachable as above. A look-up sends no
///   traffic. A DNS failure while a route exists is then a failed lookup in the fetch, not
///   "no network".
package final class RouteMonitor: ConnectivityMonitoring {
    /// How the monitor learns about changes.
    package enum Mode: Sendable, Equatable {
        /// Kernel events on a NETLINK_ROUTE socket.
        case netlink
        /// Route look-ups every `Configuration.pollInterval` while someone waits.
        case polling
        /// No route look-up is possible: every host is reported reachable.
        case unavailable
    }

    /// Settings of a monitor; the defaults suit production.
    package struct Configuration: Sendable {
        /// Follow kernel events; `false` selects the polling fallback.
        package var usesNetlinkEvents: Bool
        /// Interval of the polling fallback.
        package var pollInterval: Duration
        /// After a burst of events, one more look this much later, in case the kernel's state
        /// settled after its last event.
        package var settleDelay: Duration
        /// Addresses whose routes stand for "there is a way out" when the target is a name.
        package var nameProbeAddresses: [String]

        package init(
            usesNetlinkEvents: Bool = true,
            pollInterval: Duration = .milliseconds(100),
            settleDelay: Duration = .milliseconds(50),
            nameProbeAddresses: [String] = ["203.0.113.1", "2001:db8::1"]
        ) {
            self.usesNetlinkEvents = usesNetlinkEvents
            self.pollInterval = pollInterval
            self.settleDelay = settleDelay
            self.nameProbeAddresses = nameProbeAddresses
        }

        /// The polling fallback, as used where netlink events are unavailable.
        package static var polling: Configuration { Configuration(usesNetlinkEvents: false) }
    }

    /// A change of reachability seen by `updates(for:)`.
    package struct Update: Sendable, Equatable {
        package var isReachable: Bool
        /// When the monitor saw it.
        package var date: Date
    }

    /// Errors of the monitor.
    package enum Error: Swift.Error, CustomStringConvertible, Equatable {
        /// The monitor was closed while (or before) waiting.
        case closed
        /// `eventDriven()` could not open the netlink event socket.
        case netlinkUnavailable(reason: String)

        package var description: String {
            switch self {
            case .closed: "The connectivity monitor was closed."
            case .netlinkUnavailable(let reason): "Kernel routing events are unavailable: \(reason)."
            }
        }
    }

    /// The name of the event thread, as `/proc/<pid>/task/<tid>/comm` shows it.
    static let eventThreadName = "runner-monitor"

    private let core: Core
    private let targets = Mutex<[String: ReachabilityTarget]>([:])

    /// How this monitor learns about changes: `.netlink` unless it had to fall back.
    package var mode: Mode { core.mode }

    /// Why the monitor fell back to polling or to "always reachable"; `nil` in `.netlink` mode
    /// or when polling was asked for.
    package var fallbackReason: String? { core.fallbackReason }

    /// Opens the monitor. It never fails: without netlink events it polls, and without route
    /// look-ups it reports every host reachable; `mode` and `fallbackReason` tell which.
    package init(configuration: Configuration = Configuration()) {
        core = Core(configuration: configuration)
    }

    /// Opens an event-driven monitor, or throws `Error.netlinkUnavailable` instead of falling
    /// back.
    package static func eventDriven(configuration: Configuration = Configuration()) throws(Error) -> RouteMonitor {
        var configuration = configuration
        configuration.usesNetlinkEvents = true
        let monitor = RouteMonitor(configuration: configuration)
        guard monitor.mode == .netlink else {
            throw .netlinkUnavailable(reason: monitor.fallbackReason ?? "unknown reason")
        }
        return monitor
    }

    deinit {
        core.shutdown()
    }

    /// Stops the event thread and ends every wait with `Error.closed` and every `updates`
    /// stream. Later waits throw `Error.closed`; `isReachable` still answers. Idempotent.
    package func close() {
        core.shutdown()
    }

    package func isReachable(host: String) -> Bool {
        core.lookUp(target(host)).isReachable
    }

    package func waitUntilReachable(host: String) async throws {
        try await core.wait(for: target(host))
    }

    /// What a host string is judged as, parsed once per distinct host (a batch asks about the
    /// same few hosts for every job).
    private func target(_ host: String) -> ReachabilityTarget {
        if let known = targets.withLock({ $0[host] }) { return known }
        let target = ReachabilityTarget(host: host)
        targets.withLock { targets in
            if targets.count < 1024 { targets[host] = target }
        }
        return target
    }

    /// The reachability of `host` now, then each change, stamped with when it was seen.
    /// The stream ends when the monitor is closed.
    package func updates(for host: String) -> AsyncStream<Update> {
        core.updates(for: ReachabilityTarget(host: host))
    }
}

// MARK: - Core

extension RouteMonitor {
    /// The state shared by the monitor, its waiters and its event thread. The event thread
    /// retains the core, never the monitor, so releasing the monitor stops the thread.
    fileprivate final class Core: Sendable {
        enum WaitOutcome: Sendable {
            case reachable
            case lookAgain
        }

        struct Subscription {
            var target: ReachabilityTarget
            var last: Bool
            var continuation: AsyncStream<Update>.Continuation
        }

        struct State {
            var mode: Mode
            var closed = false
            var generation: UInt64 = 0
            var nextID: UInt64 = 0
            var waiters: [ReachabilityTarget: [UInt64: CheckedContinuation<WaitOutcome, any Swift.Error>]] = [:]
            var subscriptions: [UInt64: Subscription] = [:]
            var cache: [ReachabilityTarget: Bool] = [:]
            var thread: pthread_t?

            var isWatching: Bool { !waiters.isEmpty || !subscriptions.isEmpty }

            mutating func makeID() -> UInt64 {
                nextID &+= 1
                return nextID
            }
        }

        private static let cacheLimit = 1024

        let fallbackReason: String?
        private let configuration: Configuration
        private let query: NetlinkRouteQuery?
        private let events: NetlinkSocket?
        private let nameProbes: [IPAddress]
        private let wakeReader: Int32
        private let wakeWriter: Int32
        private let state: Mutex<State>
        /// Signalled by the event thread once it runs (and has its name).
        private let started = DispatchSemaphore(value: 0)

        var mode: Mode { state.withLock { $0.mode } }

        init(configuration: Configuration) {
            self.configuration = configuration
            nameProbes = configuration.nameProbeAddresses.compactMap(IPAddress.init)

            var mode = Mode.netlink
            var reason: String?
            do {
                query = try NetlinkRouteQuery()
            } catch {
                query = nil
                mode = .unavailable
                reason = "route look-ups are unavailable (\(error))"
            }
            if mode == .netlink && configuration.usesNetlinkEvents {
                do {
                    events = try NetlinkSocket(groups: Netlink.Group.connectivity, receiveBufferSize: 1 << 20)
                } catch {
                    events = nil
                    mode = .polling
                    reason = "kernel routing events are unavailable (\(error)); polling instead"
                }
            } else {
                events = nil
                if mode == .netlink { mode = .polling }
            }

            var pipeEnds: [Int32] = [-1, -1]
            if mode != .unavailable, pipe(&pipeEnds) == 0 {
                for end in pipeEnds {
                    _ = fcntl(end, F_SETFL, O_NONBLOCK)
                    _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                }
            } else {
                pipeEnds = [-1, -1]  // without a wake pipe the thread looks at `closed` now and then
            }
            wakeReader = pipeEnds[0]
            wakeWriter = pipeEnds[1]
            fallbackReason = reason
            state = Mutex(State(mode: mode))

            if mode != .unavailable { startThread() }
        }

        deinit {
            if wakeReader >= 0 { Glibc.close(wakeReader) }
            if wakeWriter >= 0 { Glibc.close(wakeWriter) }
        }

        private func startThread() {
            let context = Unmanaged.passRetained(self).toOpaque()
            var thread = pthread_t()
            let result = pthread_create(&thread, nil, { context in
                let core = Unmanaged<Core>.fromOpaque(context!).takeRetainedValue()
                core.run()
                return nil
            }, context)
            if result == 0 {
                state.withLock { $0.thread = thread }
                started.wait()
            } else {
                Unmanaged<Core>.fromOpaque(context).release()
                state.withLock { $0.mode = .unavailable }
            }
        }

        // MARK: Look-ups

        /// Evaluates `target` now, without the cache.
        private func evaluate(_ target: ReachabilityTarget) -> Bool {
            switch target {
            case .loopback:
                return true
            case .address(let address):
                return query?.isUsable(address) ?? true
            case .name:
                guard let query else { return true }
                var unknown = nameProbes.isEmpty
                for probe in nameProbes {
                    switch query.isUsable(probe) {
                    case true?: return true
                    case nil: unknown = true
                    case false?: break
                    }
                }
                return unknown
            }
        }

        /// Whether `target` is reachable, and the generation that answer belongs to. In
        /// netlink mode answers are cached until the next event.
        func lookUp(_ target: ReachabilityTarget) -> (isReachable: Bool, generation: UInt64) {
            let (generation, cached, caches) = state.withLock { state in
                let caches = state.mode == .netlink && !state.closed
                return (state.generation, caches ? state.cache[target] : nil, caches)
            }
            if let cached { return (cached, generation) }
            let reachable = evaluate(target)
            if caches {
                state.withLock { state in
                    guard state.generation == generation else { return }
                    if state.cache.count >= Self.cacheLimit { state.cache.removeAll(keepingCapacity: true) }
                    state.cache[target] = reachable
                }
            }
            return (reachable, generation)
        }

        // MARK: Waiting

        private enum Registration {
            case waiting
            case lookAgain
            case failed(any Swift.Error)
        }

        func wait(for target: ReachabilityTarget) async throws {
            while true {
                try Task.checkCancellation()
                if state.withLock({ $0.closed }) { throw RouteMonitor.Error.closed }
                let (reachable, generation) = lookUp(target)
                if reachable { return }

                let id = state.withLock { $0.makeID() }
                let outcome = try await withTaskCancellationHandler {
                    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<WaitOutcome, any Swift.Error>) in
                        let registration = state.withLock { state -> Registration in
                            if state.closed { return .failed(RouteMonitor.Error.closed) }
                            if Task.isCancelled { return .failed(CancellationError()) }
                            if state.generation != generation { return .lookAgain }
                            state.waiters[target, default: [:]][id] = continuation
                            return .waiting
                        }
                        switch registration {
                        case .waiting: if mode == .polling { wake() }
                        case .lookAgain: continuation.resume(returning: .lookAgain)
                        case .failed(let error): continuation.resume(throwing: error)
                        }
                    }
                } onCancel: {
                    let continuation = state.withLock { state in
                        let continuation = state.waiters[target]?.removeValue(forKey: id)
                        if state.waiters[target]?.isEmpty == true { state.waiters[target] = nil }
                        return continuation
                    }
                    continuation?.resume(throwing: CancellationError())
                }
                if case .reachable = outcome { return }
            }
        }

        func updates(for target: ReachabilityTarget) -> AsyncStream<Update> {
            let (stream, continuation) = AsyncStream.makeStream(of: Update.self)
            let id = state.withLock { $0.makeID() }
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { _ = $0.subscriptions.removeValue(forKey: id) }
            }
            while true {
                let (reachable, generation) = lookUp(target)
                let registered: Bool? = state.withLock { state in
                    if state.closed { return false }
                    if state.generation != generation { return nil }
                    state.subscriptions[id] = Subscription(target: target, last: reachable, continuation: continuation)
                    continuation.yield(Update(isReachable: reachable, date: Date()))
                    return true
                }
                switch registered {
                case true?:
                    if mode == .polling { wake() }
                    return stream
                case false?:
                    continuation.yield(Update(isReachable: reachable, date: Date()))
                    continuation.finish()
                    return stream
                case nil:
                    continue
                }
            }
        }

        // MARK: Event thread

        private func wake() {
            guard wakeWriter >= 0 else { return }
            var byte: UInt8 = 1
            _ = write(wakeWriter, &byte, 1)
        }

        private func run() {
            Self.nameCurrentThread()
            started.signal()
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 8)
            defer { buffer.deallocate() }
            let clock = ContinuousClock()
            let mode = self.mode
            var settleDeadline: ContinuousClock.Instant?
            var nextPoll = clock.now

            while true {
                guard let watching = state.withLock({ $0.closed ? nil : $0.isWatching }) else { return }
                var deadline: ContinuousClock.Instant? = mode == .polling ? (watching ? nextPoll : nil) : settleDeadline
                if wakeReader < 0 { deadline = min(deadline ?? .now + .milliseconds(100), .now + .milliseconds(100)) }

                var descriptors = [
                    pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: events?.descriptor ?? -1, events: Int16(POLLIN), revents: 0),
                ]
                _ = poll(&descriptors, 2, deadline.map { Self.milliseconds(until: $0, clock: clock) } ?? -1)
                if descriptors[0].revents != 0 { drainWakePipe() }
                let changed = descriptors[1].revents != 0 && drainEvents(into: buffer)

                let now = clock.now
                if changed {
                    settleDeadline = now + configuration.settleDelay
                    reevaluate()
                } else if let settle = settleDeadline, now >= settle {
                    settleDeadline = nil
                    reevaluate()
                }
                if mode == .polling, watching, now >= nextPoll {
                    nextPoll = now + configuration.pollInterval
                    reevaluate()
                }
            }
        }

        /// Names the thread for `top -H`, `ps -L` and leak checks (Glibc does not import
        /// `pthread_setname_np`).
        private static func nameCurrentThread() {
            let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            _ = RouteMonitor.eventThreadName.withCString { write(descriptor, $0, strlen($0)) }
            Glibc.close(descriptor)
        }

        private static func milliseconds(until deadline: ContinuousClock.Instant, clock: ContinuousClock) -> Int32 {
            let remaining = clock.now.duration(to: deadline)
            guard remaining > .zero else { return 0 }
            let (seconds, attoseconds) = remaining.components
            let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
            return Int32(clamping: milliseconds)
        }

        private func drainWakePipe() {
            var bytes = [UInt8](repeating: 0, count: 64)
            while read(wakeReader, &bytes, bytes.count) > 0 {}
        }

        /// Reads every pending event; true when there was any (an overflow, ENOBUFS, counts:
        /// events were lost, so everything is looked at again).
        private func drainEvents(into buffer: UnsafeMutableRawBufferPointer) -> Bool {
            guard let events else { return false }
            var changed = false
            for _ in 0..<1024 {
                let count = events.receive(into: buffer, flags: Int32(MSG_DONTWAIT))
                if count > 0 {
                    changed = true
                } else if count < 0 && errno == EINTR {
                    continue
                } else if count < 0 && errno == ENOBUFS {
                    changed = true
                } else {
                    break
                }
            }
            return changed
        }

        /// Looks at every watched target once; resumes the waiters of those now reachable and
        /// tells subscribers about changes.
        private func reevaluate() {
            let targets = state.withLock { state in
                state.generation &+= 1
                state.cache.removeAll(keepingCapacity: true)
                return Set(state.waiters.keys).union(state.subscriptions.values.map(\.target))
            }
            guard !targets.isEmpty else { return }
            var results: [ReachabilityTarget: Bool] = [:]
            for target in targets { results[target] = evaluate(target) }
            let date = Date()
            let ready = state.withLock { state in
                var ready: [CheckedContinuation<WaitOutcome, any Swift.Error>] = []
                for (target, reachable) in results where reachable {
                    if let waiters = state.waiters.removeValue(forKey: target) { ready.append(contentsOf: waiters.values) }
                }
                for (id, subscription) in state.subscriptions {
                    guard let reachable = results[subscription.target], reachable != subscription.last else { continue }
                    state.subscriptions[id]?.last = reachable
                    subscription.continuation.yield(Update(isReachable: reachable, date: date))
                }
                return ready
            }
            for continuation in ready { continuation.resume(returning: .reachable) }
        }

        // MARK: Shutdown

        func shutdown() {
            let taken = state.withLock { state -> (waiters: [CheckedContinuation<WaitOutcome, any Swift.Error>], streams: [AsyncStream<Update>.Continuation], thread: pthread_t?)? in
                guard !state.closed else { return nil }
                state.closed = true
                let taken = (
                    waiters: state.waiters.values.flatMap(\.values),
                    streams: state.subscriptions.values.map(\.continuation),
                    thread: state.thread
                )
                state.waiters = [:]
                state.subscriptions = [:]
                state.cache = [:]
                state.thread = nil
                return taken
            }
            guard let taken else { return }
            wake()
            if let thread = taken.thread {
                if pthread_equal(thread, pthread_self()) != 0 {
                    pthread_detach(thread)
                } else {
                    pthread_join(thread, nil)
                }
            }
            for waiter in taken.waiters { waiter.resume(throwing: RouteMonitor.Error.closed) }
            for stream in taken.streams { stream.finish() }
        }
    }
}

#endif
