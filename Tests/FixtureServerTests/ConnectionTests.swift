import FixtureServer
import Foundation
import Glibc
import FoundationNetworking
import RunnerTestSupport
import Testing

@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct ConnectionTests {
    @Test func keepAliveServesTwoRequestsOnOneConnection() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/data.json")
        let first = try client.readResponse()
        client.request("/entries/imgly.A.2.json")
        let second = try client.readResponse()
        #expect(first.status == 200 && second.status == 200)
        #expect(first.headers["connection"] == "keep-alive")
        #expect(first.text == FixtureCatalog.treeJSON)
        #expect(second.text == FixtureCatalog.entryJSON(id: "imgly.A.2"))
        #expect(server.openConnections == 1)
        #expect(server.totalRequests == 2)
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\nGET /bytes/2 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().body == [0])
        #expect(try client.readResponse().body == [0, 1])
    }

    @Test func http10ClosesUnlessAskedToKeepAlive() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("GET /bytes/1 HTTP/1.0\r\n\r\n")
        #expect(try client.readResponse().headers["connection"] == "close")
        #expect(try client.readToEnd().isEmpty)
    }

    @Test func twoHundredConcurrentConnections() async throws {
        let server = try startedServer()
        defer { server.stop() }
        // Each read may wait long: what is shown is that 200 are served at once, not how soon
        // (a run's first minute, with every suite that starts processes beside it, once took
        // over 5 s to answer the first of them).
        let clients = try (0..<200).map { _ in try RawHTTPClient(port: server.port, timeout: 30) }
        #expect(await eventually { server.openConnections == 200 })
        for (index, client) in clients.enumerated() {
            #expect(client.request("/images/gif.gif"), "client \(index): send failed with errno \(client.sendError ?? 0)")
        }
        for (index, client) in clients.enumerated() {
            let response: RawHTTPClient.Response
            do {
                response = try client.readResponse()
            } catch {
                Issue.record("client \(index): \(error); \(server.requestCount(path: "/images/gif.gif")) requests, \(server.openConnections) open, \(server.connectionsServed) served")
                throw error
            }
            #expect(response.status == 200)
            #expect(response.body.count == FixtureCatalog.images[4].bytes.count)
        }
        #expect(server.requestCount(path: "/images/gif.gif") == 200)

        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<200 {
                group.addTask { try await fetch(server, "/entries/imgly.A.1.json?n=\(index)&delay=50").response.statusCode }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 200))
        #expect(server.requestCount(path: "/entries/imgly.A.1.json") == 200)
    }

    @Test func holdsAThousandHangingConnectionsAndStopReleasesThem() async throws {
        let server = try startedServer()
        let clients = try (0..<1000).map { _ in try RawHTTPClient(port: server.port) }
        // A path no other test asks for: tests in parallel bind ephemeral ports too, and a client
        // of a server that stopped may reach this one on a reused port.
        let path = "/hang-\(UUID().uuidString)"
        for (index, client) in clients.enumerated() {
            #expect(client.request("\(path)?hang=1"), "client \(index): send failed with errno \(client.sendError ?? 0)")
        }
        let arrived = await eventually(within: .seconds(20)) { server.requestCount(path: path) == 1000 }
        #expect(arrived, "\(server.requestCount(path: path)) of 1000 requests arrived, \(server.totalRequests) in all, \(server.connectionsServed) connections served")
        #expect(server.openConnections == 1000)
        #expect(!clients[0].hasData(within: 0.1))
        let start = ContinuousClock.now
        server.stop()
        let took = milliseconds(since: start)
        #expect(took < 5000, "stop waited \(took) ms; the hangs never end by themselves")
        #expect(server.openConnections == 0)
        #expect(clients.allSatisfy { $0.hasData(within: 1) })
    }

    @Test func requestCountIgnoresTheQuery() async throws {
        let server = try startedServer()
        defer { server.stop() }
        _ = try await fetch(server, "/data.json")
        _ = try await fetch(server, "/data.json?delay=1")
        _ = try await fetch(server, "/images.json")
        #expect(server.requestCount(path: "/data.json") == 2)
        #expect(server.requestCount(path: "/images.json") == 1)
        #expect(server.requestCount(path: "/never") == 0)
        #expect(server.totalRequests == 3)
    }

    @Test func arrivalsAreRecordedInOrderOnTheMonotonicClock() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let before = ContinuousClock.now
        _ = try await fetch(server, "/data.json")
        try await Task.sleep(for: .milliseconds(100))
        _ = try await fetch(server, "/images.json?n=1")
        _ = try await fetch(server, "/data.json?delay=1")
        let after = ContinuousClock.now
        let all = server.arrivals()
        #expect(all.count == 3)
        #expect(all == all.sorted() && all.allSatisfy { $0 >= before && $0 <= after })
        let data = server.arrivals(pathPrefix: "/data")
        #expect(data.count == 2)
        if data.count == 2 { #expect(data[0].duration(to: data[1]) >= .milliseconds(100)) }
        #expect(server.arrivals(pathPrefix: "/images").count == 1)
        #expect(server.arrivals(pathPrefix: "/never").isEmpty)
    }

    // MARK: - Lifecycle

    @Test func lifecycle() throws {
        let server = FixtureServer()
        #expect(server.port == 0)
        try server.start()
        #expect(server.port != 0)
        #expect(server.baseURL == "http://127.0.0.1:\(server.port)")
        #expect(throws: FixtureServer.Error.alreadyStarted) { try server.start() }
        server.stop()
        server.stop()
        #expect(throws: FixtureServer.Error.stopped) { try server.start() }
        #expect(throws: RawHTTPClient.Failure.connect(ECONNREFUSED)) { try RawHTTPClient(port: server.port) }
    }

    @Test func startFailsClearly() throws {
        #expect(throws: FixtureServer.Error.invalidHost("example.com")) {
            try FixtureServer(host: "example.com").start()
        }
        let first = try startedServer()
        defer { first.stop() }
        let second = FixtureServer(port: first.port)
        let error = try #require(throws: FixtureServer.Error.self) { try second.start() }
        #expect(error.description.contains("could not bind 127.0.0.1:\(first.port)"))
    }

    @Test func servesOnIPv6Loopback() async throws {
        let server = FixtureServer(host: "::1")
        do {
            try server.start()
        } catch {
            return  // no IPv6 on this machine
        }
        defer { server.stop() }
        #expect(server.baseURL == "http://[::1]:\(server.port)")
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = server.port.bigEndian
        address.sin6_addr = in6addr_loopback
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        }
        #expect(connected == 0)
        #expect(await eventually { server.openConnections == 1 })
    }

    @Test func deinitStopsTheServer() async throws {
        var port: UInt16 = 0
        do {
            let server = try startedServer()
            port = server.port
            let client = try RawHTTPClient(port: port)
            client.request("/bytes/1")
            #expect(try client.readResponse().body == [0])
        }
        #expect(throws: RawHTTPClient.Failure.connect(ECONNREFUSED)) { try RawHTTPClient(port: port) }
    }
}
