import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// What a server, or a job's URL, may make the HTTP clients do, on loopback: the address policy
/// where loopback is what it refuses, and response header bounds. (Link-local, private and
/// public addresses are tested inside network namespaces: Tests/Netns/address-policy.sh.)
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct HostileServerTests {
    static let clients = HTTPClientKind.allCases

    static func fetch(_ client: any HTTPClient, _ url: URL) async -> Result<FetchResponseHead, any Error> {
        do {
            return .success(try await client.fetch(FetchRequest(url: url, maxBytes: 1_000_000), into: HTTPClientTests.Collector()))
        } catch {
            return .failure(error)
        }
    }

    static func refusal(_ result: Result<FetchResponseHead, any Error>) -> String? {
        guard case .failure(let error) = result, case .refused(let why)? = error as? FetchError else { return nil }
        return why
    }

    static let okResponse = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".utf8)

    @Test(arguments: clients)
    func denyPrivateRefusesLoopbackAndSendsNothing(kind: HTTPClientKind) async throws {
        let server = try CannedServer(response: Self.okResponse)
        let client = try kind.make(maxConnectionsPerHost: 2, policy: AddressPolicy(denyPrivate: true))
        let result = await Self.fetch(client, URL(string: "http://127.0.0.1:\(server.port)/x")!)
        let why = try #require(Self.refusal(result), "\(result)")
        #expect(why == "refused to connect to 127.0.0.1: a loopback address, refused by --deny-private")
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.request.isEmpty)
    }

    @Test(arguments: clients)
    func anAllowedHostGoesThroughDenyPrivate(kind: HTTPClientKind) async throws {
        let server = try CannedServer(response: Self.okResponse)
        let policy = AddressPolicy(denyPrivate: true, allowedHosts: [try HostPattern(parsing: "127.0.0.0/8")])
        let client = try kind.make(maxConnectionsPerHost: 2, policy: policy)
        let result = await Self.fetch(client, URL(string: "http://127.0.0.1:\(server.port)/x")!)
        #expect((try? result.get().status) == 200, "\(result)")
    }

    @Test(arguments: clients)
    func anAllowListRefusesWhatItDoesNotName(kind: HTTPClientKind) async throws {
        let server = try CannedServer(response: Self.okResponse)
        let client = try kind.make(maxConnectionsPerHost: 2, policy: AddressPolicy(allowedHosts: [try HostPattern(parsing: "*.example.org")]))
        let result = await Self.fetch(client, URL(string: "http://localhost:\(server.port)/x")!)
        let why = try #require(Self.refusal(result), "\(result)")
        #expect(why.hasPrefix("refused to connect to localhost ("))
        #expect(why.hasSuffix("): not matched by any --allow-host"))
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.request.isEmpty)
    }

    @Test(arguments: clients)
    func moreThanFiveHundredHeaderLinesAreRefused(kind: HTTPClientKind) async throws {
        var text = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n"
        for i in 0..<600 { text += "X-Filler-\(i): v\r\n" }
        let server = try CannedServer(response: Array((text + "\r\nok").utf8))
        let client = try kind.make(maxConnectionsPerHost: 2)
        let result = await Self.fetch(client, URL(string: "http://127.0.0.1:\(server.port)/x")!)
        #expect(Self.refusal(result) == "refused the response: it has more than 500 header lines", "\(result)")
    }

    @Test(arguments: clients)
    func moreThanOneHundredKiBOfHeadersAreRefused(kind: HTTPClientKind) async throws {
        var text = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n"
        let value = String(repeating: "v", count: 400)
        for i in 0..<300 { text += "X-Filler-\(i): \(value)\r\n" }  // about 120 KiB
        let server = try CannedServer(response: Array((text + "\r\nok").utf8))
        let client = try kind.make(maxConnectionsPerHost: 2)
        let result = await Self.fetch(client, URL(string: "http://127.0.0.1:\(server.port)/x")!)
        #expect(Self.refusal(result) == "refused the response: its headers exceed 100 KiB", "\(result)")
    }

    @Test(arguments: clients)
    func headersWithinTheBoundsAreFine(kind: HTTPClientKind) async throws {
        var text = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n"
        for i in 0..<400 { text += "X-Filler-\(i): \(String(repeating: "v", count: 100))\r\n" }  // about 47 KiB
        let server = try CannedServer(response: Array((text + "\r\nok").utf8))
        let client = try kind.make(maxConnectionsPerHost: 2)
        let result = await Self.fetch(client, URL(string: "http://127.0.0.1:\(server.port)/x")!)
        #expect((try? result.get().status) == 200, "\(result)")
    }
}
