import FixtureServer
import Foundation
import Glibc
import RunnerKit
import Synchronization
import RunnerTestSupport
import Testing

/// The `HTTPFetching` contract, held by both clients against the fixture server.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)))
struct HTTPClientTests {
    /// Keeps what it is given.
    final class Collector: BodySink {
        let bytes = Mutex<[UInt8]>([])
        func write(_ piece: UnsafeRawBufferPointer) throws { bytes.withLock { $0.append(contentsOf: piece) } }
        var all: [UInt8] { bytes.withLock { $0 } }
    }

    /// Refuses the first piece.
    final class Refuser: BodySink {
        struct Refused: Error, Equatable {}
        func write(_ piece: UnsafeRawBufferPointer) throws { throw Refused() }
    }

    final class Server: Sendable {
        let fixture = FixtureServer()
        init() throws { try fixture.start() }
        deinit { fixture.stop() }
        func url(_ path: String) -> URL { URL(string: fixture.baseURL + path)! }
    }

    static let clients = HTTPClientKind.allCases

    func fetch(_ client: any HTTPClient, _ url: URL, headers: [(name: String, value: String)] = [], maxBytes: Int = 10_000_000) async throws -> (FetchResponseHead, [UInt8]) {
        let sink = Collector()
        let head = try await client.fetch(FetchRequest(url: url, headers: headers, maxBytes: maxBytes), into: sink)
        return (head, sink.all)
    }

    func error(of work: () async throws -> some Any) async -> (any Error)? {
        do {
            _ = try await work()
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: clients, ["", "?chunked=1"])
    func streamsTheBodyAndReturnsTheHead(kind: HTTPClientKind, query: String) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let url = server.url("/bytes/300000\(query)")
        let (head, body) = try await fetch(client, url)
        #expect(head.status == 200)
        #expect(head.url == url)
        #expect(body.count == 300_000)
        #expect(body.enumerated().allSatisfy { $0.element == UInt8($0.offset % 256) })
        #expect(head.headers.keys.allSatisfy { $0 == $0.lowercased() })
        #expect(head.headers["content-length"] == (query.isEmpty ? "300000" : nil))
        #expect(client.activeTaskCount == 0)
    }

    @Test(arguments: clients)
    func anErrorStatusIsAResponseNotAnError(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let (head, body) = try await fetch(client, server.url("/data.json?status=503&retryAfter=7"))
        #expect(head.status == 503)
        #expect(head.headers["retry-after"] == "7")
        #expect(!body.isEmpty)
    }

    @Test(arguments: clients)
    func validatorsAnswer304(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let (first, _) = try await fetch(client, server.url("/images/png.png"))
        let etag = try #require(first.headers["etag"])
        let (second, body) = try await fetch(client, server.url("/images/png.png"), headers: [("If-None-Match", etag)])
        #expect(second.status == 304)
        #expect(body.isEmpty)
    }

    @Test(arguments: clients)
    func redirectsAreFollowedToHTTPOnly(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let target = server.url("/bytes/10")
        let escaped = target.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let (head, body) = try await fetch(client, server.url("/redirect?to=\(escaped)"))
        #expect(head.status == 200)
        #expect(head.url == target)
        #expect(body.count == 10)
        let refused = await error { try await fetch(client, server.url("/redirect?to=ftp%3A%2F%2Fexample.org%2Fx.png")) }
        guard case .redirectRefused(let to)? = refused as? FetchError else {
            Issue.record("expected redirectRefused, got \(String(describing: refused))")
            return
        }
        #expect(to.hasPrefix("ftp://example.org"))
    }

    /// One request after another on one client: the curl client hands each the handle the one
    /// before used, so nothing of a request (its headers, a redirect, an abort) may carry over.
    @Test(arguments: clients)
    func nothingOfOneRequestCarriesOverToTheNext(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 1)
        let image = server.url("/images/png.png")
        let (first, full) = try await fetch(client, image)
        let etag = try #require(first.headers["etag"])
        let (conditional, _) = try await fetch(client, image, headers: [("If-None-Match", etag)])
        #expect(conditional.status == 304)
        let (plain, again) = try await fetch(client, image)
        #expect(plain.status == 200, "the If-None-Match of the request before was sent again")
        #expect(again == full)

        let refused = await error { try await client.fetch(FetchRequest(url: server.url("/bytes/100000"), maxBytes: 1_000_000), into: Refuser()) }
        #expect(refused is Refuser.Refused)
        let (afterAbort, bytes) = try await fetch(client, server.url("/bytes/1000"))
        #expect(afterAbort.status == 200)
        #expect(bytes.count == 1000)

        let target = server.url("/bytes/10")
        let escaped = target.absoluteString.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let (redirected, _) = try await fetch(client, server.url("/redirect?to=\(escaped)"))
        #expect(redirected.url == target)
        let direct = server.url("/bytes/20")
        let (afterRedirect, small) = try await fetch(client, direct)
        #expect(afterRedirect.url == direct)
        #expect(small.count == 20)
        #expect(client.activeTaskCount == 0)
    }

    @Test(arguments: clients, ["", "?chunked=1"])
    func aDeclaredLengthOverMaxBytesIsRefusedBeforeTheBody(kind: HTTPClientKind, query: String) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let sink = Collector()
        let failure = await error { try await client.fetch(FetchRequest(url: server.url("/bytes/5000000\(query)"), maxBytes: 1000), into: sink) }
        if query.isEmpty {
            #expect(failure as? FetchError == .tooLarge(limit: 1000))
            #expect(sink.all.isEmpty, "nothing of the body was read")
        } else if let failure {
            // No declared length: a client may count the body as it arrives and stop at the limit…
            #expect(failure as? FetchError == .tooLarge(limit: 1000))
            #expect(sink.all.count <= 1000)
        } else {
            // …or leave it to the sink, which is the one to refuse.
            #expect(sink.all.count == 5_000_000)
        }
    }

    @Test(arguments: clients)
    func aThrowingSinkAbortsTheTransferWithItsError(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let failure = await error { try await client.fetch(FetchRequest(url: server.url("/bytes/5000000"), maxBytes: 10_000_000), into: Refuser()) }
        #expect(failure is Refuser.Refused, "\(String(describing: failure))")
        let limit = ContinuousClock.now.advanced(by: .seconds(5))
        while client.activeTaskCount > 0 && ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(10)) }
        #expect(client.activeTaskCount == 0)
    }

    @Test(arguments: clients, [("?truncate=100", FetchError.connectionLost), ("?reset=1", .connectionLost)])
    func brokenConnectionsAreConnectionLost(kind: HTTPClientKind, fault: (query: String, expected: FetchError)) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let failure = await error { try await fetch(client, server.url("/bytes/1000\(fault.query)")) }
        if kind == .urlsession {
            // URLSession on Linux reports a truncated body as an unknown error (URLError -1).
            #expect(failure is FetchError, "\(String(describing: failure))")
        } else {
            #expect(failure as? FetchError == fault.expected, "\(String(describing: failure))")
        }
    }

    @Test(arguments: clients)
    func refusedAndUnresolvableAreTold(kind: HTTPClientKind) async throws {
        let client = try kind.make(maxConnectionsPerHost: 4)
        let port = try LoopbackPort.unused()
        let refused = await error { try await fetch(client, URL(string: "http://127.0.0.1:\(port)/x")!) }
        #expect(refused as? FetchError == .cannotConnect("127.0.0.1:\(port)"), "\(String(describing: refused))")
        let unresolved = await error { try await fetch(client, URL(string: "http://no-such-host.invalid/x")!) }
        #expect(unresolved as? FetchError == .cannotResolveHost("no-such-host.invalid"), "\(String(describing: unresolved))")
    }

    @Test(arguments: clients)
    func cancellingTheTaskAnswersAtOnceAndEndsTheTransfer(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        let task = Task { try await fetch(client, server.url("/bytes/10?hang=1")) }
        let limit = ContinuousClock.now.advanced(by: .seconds(5))
        while server.fixture.totalRequests == 0 && ContinuousClock.now < limit { try await Task.sleep(for: .milliseconds(5)) }
        #expect(client.activeTaskCount == 1)
        let start = ContinuousClock.now
        task.cancel()
        let result = await task.result
        let elapsed = start.duration(to: .now)
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(elapsed < .seconds(2), "answered \(elapsed) after the cancel; uncancelled it hangs until the test's limit")
        while (client.activeTaskCount > 0 || server.fixture.openConnections > 0) && ContinuousClock.now < limit {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(client.activeTaskCount == 0)
        #expect(server.fixture.openConnections == 0, "the hanging connection was closed")
    }

    @Test(arguments: clients)
    func connectionsAreReused(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 4)
        for i in 0..<20 { _ = try await fetch(client, server.url("/bytes/\(i)")) }
        #expect(server.fixture.totalRequests == 20)
        #expect(server.fixture.openConnections == 1, "twenty requests one after another share one connection")
    }

    @Test(arguments: clients)
    func connectionsToOneHostAreCapped(kind: HTTPClientKind) async throws {
        let server = try Server()
        let client = try kind.make(maxConnectionsPerHost: 2)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<6 { group.addTask { try await fetch(client, server.url("/bytes/\(i)?delay=300")).0.status } }
            for try await status in group { #expect(status == 200) }
        }
        let elapsed = start.duration(to: .now)
        #expect(elapsed >= .milliseconds(880), "six 300 ms fetches, two at a time, take three rounds: \(elapsed)")
    }

    @Test func curlCapsConnectionsInTotal() async throws {
        final class Peak: Sendable { let open = Mutex(0) }
        let server = try Server()
        let client = try CurlFetcher(maxConnectionsPerHost: 8, maxConnections: 2)
        // The server's count of open connections, at its highest: kept open for reuse, so a
        // sample every few milliseconds cannot miss it (the last one is taken at the end).
        let peak = Peak()
        let sampler = Task {
            while !Task.isCancelled {
                let open = server.fixture.openConnections
                peak.open.withLock { $0 = max($0, open) }
                try? await Task.sleep(for: .milliseconds(2))
            }
        }
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<4 { group.addTask { try await fetch(client, server.url("/bytes/\(i)?delay=300")).0.status } }
            for try await status in group { #expect(status == 200) }
        }
        let elapsed = start.duration(to: .now)
        sampler.cancel()
        await sampler.value
        let last = server.fixture.openConnections
        let highest = peak.open.withLock { $0 = max($0, last); return $0 }
        #expect(elapsed >= .milliseconds(580), "four 300 ms fetches, two at a time: \(elapsed)")
        // Counted, not timed: one at a time would be 1, no cap 4.
        #expect(highest == 2, "at most \(highest) connections open at once")
    }

    @Test func curlDecodesGzip() async throws {
        let gzipped: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0xd7, 0x51, 0x48, 0xaf,
            0xca, 0x2c, 0x50, 0x54, 0xc8, 0x18, 0xe5, 0x8c, 0x54, 0x0e, 0x00, 0xd7, 0xa1, 0x37, 0xfc, 0x08, 0x02, 0x00, 0x00,
        ]
        let server = try CannedServer(response: Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: \(gzipped.count)\r\nConnection: close\r\n\r\n".utf8) + gzipped)
        let client = try CurlFetcher()
        let (head, body) = try await fetch(client, URL(string: "http://127.0.0.1:\(server.port)/")!)
        #expect(head.headers["content-encoding"] == "gzip")
        #expect(String(decoding: body, as: UTF8.self) == String(repeating: "hello, gzip! ", count: 40))
        #expect(server.request.contains("Accept-Encoding:"), "the client offers the codings it decodes")
    }
}

/// Answers one connection with fixed bytes and keeps the request it read.
final class CannedServer: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private final class Received: Sendable { let text = Mutex("") }
    private let received = Received()

    init(response: [UInt8]) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = listener
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(listener, pointer, length) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound, listen(listener, 4) == 0 else { throw POSIXError(.EADDRINUSE) }
        port = UInt16(bigEndian: address.sin_port)
        let received = received
        Thread {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !request.ends(with: Array("\r\n\r\n".utf8)) {
                let count = read(connection, &buffer, buffer.count)
                if count <= 0 { break }
                request += buffer[..<count]
            }
            received.text.withLock { $0 = String(decoding: request, as: UTF8.self) }
            _ = response.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
        }.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    var request: String { received.text.withLock { $0 } }
}

extension Array where Element: Equatable {
    fileprivate func ends(with suffix: [Element]) -> Bool {
        count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix
    }
}
