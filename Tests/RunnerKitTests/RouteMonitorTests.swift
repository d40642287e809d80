#if os(Linux)

import Dispatch
import Foundation
import RunnerTestSupport
import Glibc
import Synchronization
import Testing

@testable import RunnerKit

// The real monitor on the real kernel. Tests that need an unreachable address, or a link to
// take down, build network namespaces of their own (with no default route) and create the
// monitor inside them; the root namespace is only read, never changed.

@Suite("RouteMonitor", .measuresRealTime, .serialized, .timeLimit(.minutes(1)))
struct RouteMonitorTests {
    /// Both ways the monitor learns about changes: kernel events and the polling fallback.
    static let modes = [true, false]

    static func makeMonitor(usesNetlinkEvents: Bool) -> RouteMonitor {
        RouteMonitor(configuration: RouteMonitor.Configuration(usesNetlinkEvents: usesNetlinkEvents))
    }

    // MARK: - Targets

    @Test func hostsAreClassified() throws {
        for host in ["127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost", "LocalHost.", "api.localhost", "0.0.0.0", "::", "::ffff:127.0.0.1"] {
            #expect(ReachabilityTarget(host: host) == .loopback, "\(host)")
        }
        #expect(ReachabilityTarget(host: "10.213.1.2") == .address(try #require(IPAddress("10.213.1.2"))))
        #expect(ReachabilityTarget(host: "::ffff:10.213.1.2") == .address(try #require(IPAddress("10.213.1.2"))))
        #expect(ReachabilityTarget(host: "[fd00::2]") == .address(try #require(IPAddress("fd00::2"))))
        #expect(ReachabilityTarget(host: "fe80::1%eth0") == .address(try #require(IPAddress("fe80::1"))))
        for host in ["example.com", "fixture", "1.2.3", "999.1.1.1", "localhost.example"] {
            #expect(ReachabilityTarget(host: host) == .name, "\(host)")
        }
    }

    // MARK: - Root namespace (read only)

    @Test(arguments: modes)
    func loopbackIsAlwaysReachable(usesNetlinkEvents: Bool) async throws {
        let monitor = Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents)
        defer { monitor.close() }
        #expect(monitor.mode == (usesNetlinkEvents ? .netlink : .polling))
        for host in ["127.0.0.1", "::1", "localhost"] {
            #expect(monitor.isReachable(host: host))
            let started = ContinuousClock.now
            try await monitor.waitUntilReachable(host: host)
            let took = ContinuousClock.now - started
            #expect(took < .seconds(2), "\(host): waited \(took); a wait for a route change would never end")
        }
    }

    @Test(.enabled(if: IPTool.path != nil, "needs iproute2"), arguments: modes)
    func literalsAgreeWithIPRouteGet(usesNetlinkEvents: Bool) throws {
        let monitor = Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents)
        defer { monitor.close() }
        for address in ["8.8.8.8", "198.51.100.3", "10.254.3.4", "2001:db8::5", "224.0.0.251", "255.255.255.255"] {
            #expect(monitor.isReachable(host: address) == IPTool.routeGetSaysReachable(address), "\(address)")
        }
    }

    @Test func closingEndsWaitsAndLaterWaitsThrow() async throws {
        let monitor = RouteMonitor()
        monitor.close()
        monitor.close()
        await #expect(throws: RouteMonitor.Error.closed) { try await monitor.waitUntilReachable(host: "8.8.8.8") }
        #expect(monitor.isReachable(host: "127.0.0.1"))
    }

    @Test(arguments: modes)
    func closingStopsTheThreadAndReleasesTheSockets(usesNetlinkEvents: Bool) throws {
        let threads = Diagnostics.monitorThreads()
        let sockets = Diagnostics.routeNetlinkSockets()

        do {
            let alive = Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents)
            #expect(Diagnostics.monitorThreads() == threads + 1)  // the counts can tell
            #expect(Diagnostics.routeNetlinkSockets() == sockets + (usesNetlinkEvents ? 2 : 1))
            alive.close()
            #expect(Diagnostics.monitorThreads(settlingAt: threads) == threads)
        }

        for _ in 0..<100 {
            let monitor = Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents)
            monitor.close()
        }
        for _ in 0..<100 {
            _ = Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents)  // released at once: deinit closes
        }
        #expect(Diagnostics.monitorThreads(settlingAt: threads) == threads)
        #expect(Diagnostics.routeNetlinkSockets() == sockets)
    }

    // MARK: - Namespaces of the tests' own

    @Test(.enabled(if: TestNamespace.isSupported, "needs root and iproute2"), arguments: modes)
    func cancellingAWaiterEndsPromptly(usesNetlinkEvents: Bool) async throws {
        let namespace = try TestNamespace()
        defer { namespace.delete() }
        let monitor = try namespace.make { Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents) }
        defer { monitor.close() }

        // Given an empty namespace: no route anywhere.
        #expect(!monitor.isReachable(host: "10.213.7.2"))
        #expect(!monitor.isReachable(host: "fd00:213:7::2"))
        #expect(!monitor.isReachable(host: "example.com"))  // no way out
        #expect(monitor.isReachable(host: "127.0.0.1"))

        for host in ["10.213.7.2", "example.com"] {
            // When a waiter is cancelled (before and after it got to suspend)
            let early = Task { try await monitor.waitUntilReachable(host: host) }
            early.cancel()
            await #expect(throws: CancellationError.self) { try await early.value }

            let waiter = Task { try await monitor.waitUntilReachable(host: host) }
            try await Task.sleep(for: .milliseconds(30))  // let it suspend; nothing is measured here
            let cancelled = ContinuousClock.now
            waiter.cancel()
            // Then it ends with CancellationError, promptly
            await #expect(throws: CancellationError.self) { try await waiter.value }
            let took = ContinuousClock.now - cancelled
            #expect(took < .seconds(1), "\(host): ended \(took) after cancel; ignoring it, the wait never ends")
        }

        // Closing the monitor ends the waits that remain.
        let orphan = Task { try await monitor.waitUntilReachable(host: "10.213.7.2") }
        try await Task.sleep(for: .milliseconds(30))  // let it suspend; nothing is measured here
        monitor.close()
        await #expect(throws: RouteMonitor.Error.closed) { try await orphan.value }
    }

    @Test(.enabled(if: TestNamespace.isSupported, "needs root and iproute2"), arguments: modes)
    func followsTheLinkDownAndUpBothWays(usesNetlinkEvents: Bool) async throws {
        let client = try TestNamespace()
        defer { client.delete() }
        let server = try TestNamespace()
        defer { server.delete() }
        let net = Int.random(in: 1...250)
        let target = "10.213.\(net).2"
        // Distinct interface indexes: see Tests/Netns/monitor-flip.sh on the kernel's linkwatch.
        try client.ip("link", "add", "veth-c", "index", "3", "type", "veth", "peer", "name", "veth-s", "index", "4", "netns", server.name)
        try client.ip("addr", "add", "10.213.\(net).1/24", "dev", "veth-c")
        try server.ip("addr", "add", "\(target)/24", "dev", "veth-s")
        try server.ip("link", "set", "veth-s", "up")

        let monitor = try client.make { Self.makeMonitor(usesNetlinkEvents: usesNetlinkEvents) }
        defer { monitor.close() }
        // Either way a missed change is never seen (netlink mode never polls; polling looks
        // every 100 ms), so a margin for a loaded machine still tells.
        let limit: Duration = .seconds(2)

        let log = UpdateLog()
        let reader = Task { for await update in monitor.updates(for: target) { log.append(update) } }
        defer { reader.cancel() }
        try await log.waitForCount(1)
        #expect(log.states == [false])

        // Waiters (sharing one target) resume when the client's link comes up.
        let waiters = (0..<50).map { _ in Task { try await monitor.waitUntilReachable(host: target); return Date() } }
        try await Task.sleep(for: .milliseconds(30))  // let them suspend; nothing is measured here
        try client.ip("link", "set", "veth-c", "up")
        let up = Date()
        for waiter in waiters {
            let resumed = try await waiter.value
            #expect(resumed.timeIntervalSince(up) < limit.seconds, "waiter resumed \(resumed.timeIntervalSince(up)) s after ip")
        }
        #expect(monitor.isReachable(host: target))

        // Each change is seen within the limit: link set down, carrier lost, and back.
        let changes: [(TestNamespace, String, Bool)] = [
            (client, "down", false), (client, "up", true), (server, "down", false), (server, "up", true),
        ]
        for (index, (namespace, state, expected)) in changes.enumerated() {
            let before = Date()
            try namespace.ip("link", "set", namespace === client ? "veth-c" : "veth-s", state)
            let after = Date()  // the change happened in between; spawning `ip` can be slow
            try await log.waitForCount(index + 3)
            let update = log.updates[index + 2]
            #expect(update.isReachable == expected)
            #expect(update.date >= before)
            #expect(update.date.timeIntervalSince(after) < limit.seconds, "\(state): seen \(update.date.timeIntervalSince(after)) s after ip")
            #expect(monitor.isReachable(host: target) == expected)
        }
        #expect(log.states == [false, true, false, true, false, true])
    }
}

// MARK: - Helpers

extension Duration {
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

/// Collects the updates of a stream, and waits (bounded) for a number of them.
private final class UpdateLog: Sendable {
    private let storage = Mutex<[RouteMonitor.Update]>([])

    var updates: [RouteMonitor.Update] { storage.withLock { $0 } }
    var states: [Bool] { updates.map(\.isReachable) }

    func append(_ update: RouteMonitor.Update) { storage.withLock { $0.append(update) } }

    /// Waits until `count` updates arrived, at most five seconds. This bounds the test; the
    /// updates' own timestamps are what is measured.
    func waitForCount(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while updates.count < count {
            guard ContinuousClock.now < deadline else {
                Issue.record("expected \(count) updates, got \(states)")
                throw CancellationError()
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }
}

/// Counts what a monitor leaves behind.
private enum Diagnostics {
    /// Threads of this process named like the monitor's event thread.
    /// The monitor threads, once they number `expected` or a second has passed: a joined thread
    /// can linger in /proc/self/task for a moment after it returned, on a loaded machine.
    static func monitorThreads(settlingAt expected: Int) -> Int {
        for _ in 0..<200 {
            let count = monitorThreads()
            if count == expected { return count }
            usleep(5_000)
        }
        return monitorThreads()
    }

    static func monitorThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
            return name?.trimmingCharacters(in: .whitespacesAndNewlines) == RouteMonitor.eventThreadName
        }.count
    }

    /// Descriptors of this process that are NETLINK_ROUTE sockets.
    static func routeNetlinkSockets() -> Int {
        guard let table = try? String(contentsOfFile: "/proc/self/net/netlink", encoding: .utf8) else { return 0 }
        var inodes = Set<String>()
        for line in table.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            if fields.count >= 10, fields[1] == "0" { inodes.insert(String(fields[9])) }
        }
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return descriptors.filter { descriptor in
            guard let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"),
                link.hasPrefix("socket:[")
            else { return false }
            return inodes.contains(String(link.dropFirst(8).dropLast()))
        }.count
    }
}

/// Runs iproute2.
enum IPTool {
    static let path = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `ip ARGUMENTS`: its exit status and output.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        guard let path else { throw Failure(description: "iproute2 is not installed") }
        return try ChildProcess.runBlocking(path, arguments)
    }

    /// What `ip route get` and `ip link show` say: a unicast or local route, through a link
    /// that is up and has carrier.
    static func routeGetSaysReachable(_ address: String) -> Bool {
        guard let (status, output) = try? run(["route", "get", address]), status == 0 else { return false }
        let words = output.split(whereSeparator: \.isWhitespace).map(String.init)
        guard let first = words.first else { return false }
        if first == "local" { return true }
        if ["multicast", "broadcast", "unreachable", "blackhole", "prohibit", "throw", "anycast"].contains(first) {
            return false
        }
        if words.contains("linkdown") { return false }
        guard let dev = words.firstIndex(of: "dev"), dev + 1 < words.count,
            let (linkStatus, link) = try? run(["-o", "link", "show", "dev", words[dev + 1]]), linkStatus == 0,
            let open = link.firstIndex(of: "<"), let close = link.firstIndex(of: ">")
        else { return false }
        let flags = link[link.index(after: open)..<close].split(separator: ",")
        return flags.contains("UP") && flags.contains("LOWER_UP")
    }
}

/// A network namespace made for one test, deleted by `delete()`.
final class TestNamespace: Sendable {
    static var isSupported: Bool { getuid() == 0 && IPTool.path != nil }

    let name: String

    init() throws {
        name = "rn-t-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let (status, output) = try IPTool.run(["netns", "add", name])
        guard status == 0 else { throw IPTool.Failure(description: "ip netns add \(name): \(output)") }
    }

    func delete() {
        _ = try? IPTool.run(["netns", "delete", name])
    }

    /// Runs `ip -n NAME ARGUMENTS`, throwing when it fails.
    func ip(_ arguments: String...) throws {
        let (status, output) = try IPTool.run(["-n", name] + arguments)
        guard status == 0 else { throw IPTool.Failure(description: "ip -n \(name) \(arguments.joined(separator: " ")): \(output)") }
    }

    /// Runs `body` on a thread that has entered this namespace, so that the sockets it opens
    /// belong to it. The thread ends afterwards; the rest of the process stays where it was.
    func make<T: Sendable>(_ body: @escaping @Sendable () -> T) throws -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let path = "/run/netns/\(name)"
        let thread = Thread {
            defer { done.signal() }
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else { return }
            defer { close(descriptor) }
            guard Self.enterNetworkNamespace(descriptor) == 0 else { return }
            let value = body()
            result.withLock { $0 = value }
        }
        thread.start()
        done.wait()
        guard let value = result.withLock({ $0 }) else { throw IPTool.Failure(description: "cannot enter the network namespace \(name)") }
        return value
    }

    /// `setns(fd, CLONE_NEWNET)`; Glibc does not import `setns`.
    private static func enterNetworkNamespace(_ descriptor: Int32) -> Int32 {
        typealias SetNS = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "setns") else { return -1 }
        let cloneNewNet: Int32 = 0x4000_0000
        return unsafeBitCast(symbol, to: SetNS.self)(descriptor, cloneNewNet)
    }
}

#endif
