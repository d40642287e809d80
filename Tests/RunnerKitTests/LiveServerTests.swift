import Foundation
import Glibc
@testable import RunnerKit
import RunnerTestSupport
import Testing

/// The live page's server on real loopback sockets: who may ask what, and what a slow or hostile
/// client can and cannot make it do.
@Suite(.measuresRealTime, .serialized) struct LiveServerTests {
    /// A server whose handler echoes the method, path and body, and opens an event stream at /events.
    static func server(token: String? = nil, limits: LiveServer.Limits = LiveServer.Limits()) throws -> LiveServer {
        let server = LiveServer(host: "127.0.0.1", port: 0, token: token, limits: limits) { request in
            if request.path == "/events" { return .events(first: "retry: 1000\n\n") }
            return .response(.text(200, "\(request.method) \(request.path) \(String(decoding: request.body, as: UTF8.self))"))
        }
        try server.start()
        return server
    }

    @Test func withoutATokenOnlyReadingFromALoopbackHostIsServed() async throws {
        let server = try Self.server()
        defer { server.stop() }
        let get = try await RawHTTP.exchange(port: server.port, "GET /a%20b?x=1 HTTP/1.1")
        #expect(get.status == 200)
        #expect(get.body == "GET /a b \n")
        #expect(get.headers["connection"] == "close")
        let head = try await RawHTTP.exchange(port: server.port, "HEAD /a%20b?x=1 HTTP/1.1")
        #expect(head.status == 200 && head.body.isEmpty)
        #expect(head.headers["content-length"] == "\(Array("HEAD /a b \n".utf8).count)", "the length the answer would have")
        let post = try await RawHTTP.exchange(port: server.port, "POST /jobs HTTP/1.1", body: Array("{}".utf8))
        #expect(post.status == 401)
        #expect(post.body.contains("--listen-token"))
        let delete = try await RawHTTP.exchange(port: server.port, "DELETE /jobs/k HTTP/1.1")
        #expect(delete.status == 401)
        // A page elsewhere that made the browser resolve its name to 127.0.0.1 sends its own Host.
        let fd = try RawHTTP.connect(port: server.port)
        defer { close(fd) }
        RawHTTP.send(fd, "GET / HTTP/1.1\r\nHost: evil.example:\(server.port)\r\n\r\n")
        #expect(try RawHTTP.parse(await RawHTTP.readAll(fd)).status == 403)
        for host in ["localhost", "localhost:80", "127.0.0.2:1", "[::1]:8080"] {
            #expect(LiveServer.isLoopbackHost(host), "\(host)")
        }
        for host in ["example.com", "127.0.0.1.example.com", "[::2]", "10.0.0.1:80", ""] {
            #expect(!LiveServer.isLoopbackHost(host), "\(host)")
        }
    }

    @Test func withATokenEveryRequestNeedsIt() async throws {
        let server = try Self.server(token: "s3cret")
        defer { server.stop() }
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1").status == 401)
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Authorization: Bearer s3cre"]).status == 401)
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Authorization: Bearer s3cret2"]).status == 401)
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Authorization: Basic s3cret"]).status == 401)
        let post = try await RawHTTP.exchange(
            port: server.port, "POST /jobs HTTP/1.1", body: Array("body".utf8), headers: ["Authorization: Bearer s3cret"])
        #expect(post.status == 200)
        #expect(post.body == "POST /jobs body\n")
    }

    @Test func oversizedHeadsAndBodiesAreRefusedWithoutBeingRead() async throws {
        let server = try Self.server(token: "t")
        defer { server.stop() }
        // 1 GiB announced: refused at once, before a byte of it is sent.
        let fd = try RawHTTP.connect(port: server.port)
        defer { close(fd) }
        RawHTTP.send(fd, "POST /jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Length: 1073741824\r\n\r\n")
        var bytes: [UInt8] = []
        #expect(await RawHTTP.read(fd, until: "\r\n\r\n", into: &bytes))
        let rest = await RawHTTP.readAll(fd)
        #expect(try RawHTTP.parse(bytes + rest).status == 413)

        let chunked = try await RawHTTP.exchange(port: server.port, "POST /jobs HTTP/1.1", headers: ["Authorization: Bearer t", "Transfer-Encoding: chunked"])
        #expect(chunked.status == 411)
        let long = try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["X-Pad: " + String(repeating: "a", count: 20_000)])
        #expect(long.status == 431)
        let many = try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: (0..<70).map { "X-\($0): 1" })
        #expect(many.status == 431)
        // A head that never ends: refused once it passes the limit.
        let endless = try RawHTTP.connect(port: server.port)
        defer { close(endless) }
        RawHTTP.send(endless, "GET / HTTP/1.1\r\nX: " + String(repeating: "b", count: 40_000))
        #expect(try RawHTTP.parse(await RawHTTP.readAll(endless)).status == 431)
        #expect(try await RawHTTP.exchange(port: server.port, "BROKEN").status == 400)
    }

    @Test func aClientSendingItsRequestTooSlowlyIsClosed() async throws {
        var limits = LiveServer.Limits()
        limits.requestTime = .milliseconds(600)
        let server = try Self.server(limits: limits)
        defer { server.stop() }
        let fd = try RawHTTP.connect(port: server.port)
        defer { close(fd) }
        let start = ContinuousClock.now
        // One byte every 100 ms: always something, never the end of the head.
        let trickle = Task.detached {
            for byte in "GET / HTTP/1.1\r\nX-Slow: ".utf8 + Array(repeating: UInt8(ascii: "z"), count: 100) {
                guard RawHTTP.send(fd, [byte]) else { return }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { trickle.cancel() }
        #expect(await RawHTTP.closedByPeer(fd))
        let took = start.duration(to: .now)
        #expect(took >= .milliseconds(500) && took < .seconds(5), "\(took)")
        // Others are served all along.
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1").status == 200)
    }

    @Test func pastTheConnectionLimitTheOldestIdleConnectionMakesRoom() async throws {
        var limits = LiveServer.Limits()
        limits.connections = 8
        let server = try Self.server(limits: limits)
        defer { server.stop() }
        let idle = try (0..<8).map { _ in try RawHTTP.connect(port: server.port, timeout: .seconds(5)) }
        defer { idle.forEach { close($0) } }
        try await Task.sleep(for: .milliseconds(200))  // all eight accepted
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1").status == 200)
        #expect(await RawHTTP.closedByPeer(idle[0]), "the oldest idle connection was closed for the newcomer")
    }

    /// A thousand hostile connections: most announce 1 MiB bodies without a token and send a few
    /// bytes of them, the others never finish their head. The unauthenticated are answered 401 on
    /// their head and reserve nothing; the oldest make room for newcomers; an authenticated
    /// client is served, its POST too.
    @Test func aThousandHostileConnectionsLeaveRoomForAnAuthenticatedClient() async throws {
        let token = "a-token-of-the-test"
        let server = try Self.server(token: token)
        defer { server.stop() }
        var hostile: [Int32] = []
        defer { hostile.forEach { close($0) } }
        for index in 0..<1000 {
            let fd = try RawHTTP.connect(port: server.port, timeout: .seconds(5))
            if index.isMultiple(of: 10) {
                RawHTTP.send(fd, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            } else {
                RawHTTP.send(fd, "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048576\r\n\r\nonly a little")
            }
            hostile.append(fd)
        }
        // An unauthenticated one was answered at once, its body never awaited.
        var answer: [UInt8] = []
        #expect(await RawHTTP.read(hostile[999], until: "\r\n\r\n", into: &answer))
        #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 401"), "\(String(decoding: answer, as: UTF8.self))")
        for _ in 0..<3 {
            #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Authorization: Bearer \(token)"]).status == 200)
            let post = try await RawHTTP.exchange(port: server.port, "POST /jobs HTTP/1.1", body: Array("{}".utf8), headers: ["Authorization: Bearer \(token)"])
            #expect(post.status == 200, "\(post.body)")
        }
    }

    /// A connection still sending its body makes room for a newcomer too.
    @Test func pastTheConnectionLimitAConnectionStillSendingItsBodyMakesRoom() async throws {
        var limits = LiveServer.Limits()
        limits.connections = 8
        let server = try Self.server(token: "t", limits: limits)
        defer { server.stop() }
        let slow = try (0..<8).map { _ in
            let fd = try RawHTTP.connect(port: server.port, timeout: .seconds(5))
            RawHTTP.send(fd, "POST /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer t\r\nContent-Length: 100\r\n\r\nab")
            return fd
        }
        defer { slow.forEach { close($0) } }
        try await Task.sleep(for: .seconds(1))  // all eight are reading their bodies
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Authorization: Bearer t"]).status == 200)
        #expect(await RawHTTP.closedByPeer(slow[0]), "the oldest connection still sending its body was closed for the newcomer")
    }

    /// A server like `server(token:limits:)` that also counts the requests its handler was given.
    static func countingServer(token: String, limits: LiveServer.Limits = LiveServer.Limits()) throws -> (LiveServer, Locked<Int>) {
        let handled = Locked(0)
        let server = LiveServer(host: "127.0.0.1", port: 0, token: token, limits: limits, pages: ["/", "/api/status"]) { request in
            handled.withLock { $0 += 1 }
            return .response(.text(200, "\(request.method) \(request.path)"))
        }
        try server.start()
        return (server, handled)
    }

    /// A browser gets in with `/?token=T` once: an HttpOnly, SameSite=Strict cookie named for the
    /// port that holds a session value, not the token, and a redirect to the page without it.
    @Test func aBrowserGetsInWithTheTokenInTheAddressOnceAndASessionCookieAfter() async throws {
        let (server, _) = try Self.countingServer(token: "right token/1")
        defer { server.stop() }
        let entry = try await RawHTTP.exchange(port: server.port, "GET /?part=main&token=right%20token%2F1 HTTP/1.1")
        #expect(entry.status == 303, "\(entry)")
        #expect(entry.headers["location"] == "/?part=main")
        let setCookie = try #require(entry.headers["set-cookie"])
        let session = LiveServer.session(token: Array("right token/1".utf8), port: server.port)
        #expect(setCookie == "runner_session_\(server.port)=\(session); Path=/; HttpOnly; SameSite=Strict", "\(setCookie)")
        #expect(session.count == 64 && !setCookie.contains("right"), "the cookie holds no part of the token")
        let cookie = "Cookie: theme=dark; runner_session_\(server.port)=\(session)"
        #expect(try await RawHTTP.exchange(port: server.port, "GET /?part=main HTTP/1.1", headers: [cookie]).status == 200)
        #expect(try await RawHTTP.exchange(port: server.port, "HEAD / HTTP/1.1", headers: [cookie]).status == 200)
        // The token itself as a cookie, or another port's session, is no way in.
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Cookie: runner_token=right%20token%2F1"]).status == 401)
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Cookie: runner_session_\(server.port)=right%20token%2F1"]).status == 401)
        let otherPort = LiveServer.session(token: Array("right token/1".utf8), port: server.port &+ 1)
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: ["Cookie: runner_session_\(server.port)=\(otherPort)"]).status == 401)
        #expect(try await RawHTTP.exchange(port: server.port, "GET /?token=wrong HTTP/1.1").status == 401)
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1").body.contains("/?token="), "the 401 says how a browser gets in")
        // A new token: the session of the old one lets nothing in.
        server.setToken("another token, 2")
        #expect(try await RawHTTP.exchange(port: server.port, "GET / HTTP/1.1", headers: [cookie]).status == 401)
    }

    /// The cookie lets a browser read; a write with it needs the page's own origin (scheme, host
    /// and port) or `Sec-Fetch-Site: same-origin`; else 403 and the handler never sees it.
    @Test func theCookieWritesOnlyFromThePageItsOwnOrigin() async throws {
        let (server, handled) = try Self.countingServer(token: "right-token-of-16")
        defer { server.stop() }
        let port = server.port
        let cookie = "Cookie: runner_session_\(port)=\(LiveServer.session(token: Array("right-token-of-16".utf8), port: port))"
        let refused: [[String]] = [
            [cookie],
            [cookie, "Origin: http://127.0.0.1:\(port &+ 1)"],
            [cookie, "Origin: http://localhost:\(port)"],
            [cookie, "Origin: https://127.0.0.1:\(port)"],
            [cookie, "Origin: null"],
            [cookie, "Origin: http://127.0.0.1:\(port)/"],
            [cookie, "Sec-Fetch-Site: same-site"],
            [cookie, "Sec-Fetch-Site: cross-site", "Origin: http://evil.example"],
        ]
        for headers in refused {
            for head in ["POST /api/jobs HTTP/1.1", "DELETE /api/jobs/k HTTP/1.1"] {
                let answer = try await RawHTTP.exchange(port: port, head, body: Array("{}".utf8), headers: headers)
                #expect(answer.status == 403, "\(head) \(headers): \(answer)")
            }
        }
        #expect(handled.withLock { $0 } == 0, "nothing refused reached the handler")
        #expect(try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array("{}".utf8), headers: [cookie, "Origin: http://127.0.0.1:\(port)"]).status == 200)
        #expect(try await RawHTTP.exchange(port: port, "DELETE /api/jobs/k HTTP/1.1", headers: [cookie, "Sec-Fetch-Site: same-origin"]).status == 200)
        #expect(try await RawHTTP.exchange(port: port, "POST /api/jobs HTTP/1.1", body: Array("{}".utf8), headers: ["Authorization: Bearer right-token-of-16"]).status == 200)
        #expect(handled.withLock { $0 } == 3)
    }

    /// `/?token=T` sends the browser on only to a path the page serves: never to another site
    /// (`//host`), never with a header of its own (`%0d%0a`).
    @Test func theRedirectStaysOnThePage() async throws {
        let (server, _) = try Self.countingServer(token: "right-token-of-16")
        defer { server.stop() }
        let cases: [(String, String)] = [
            ("GET //evil.example/?token=right-token-of-16 HTTP/1.1", "/"),
            ("GET /%2F%2Fevil.example?token=right-token-of-16 HTTP/1.1", "/"),
            ("GET /%0d%0aSet-Cookie:%20evil=1?token=right-token-of-16 HTTP/1.1", "/"),
            ("GET /\\evil.example?token=right-token-of-16 HTTP/1.1", "/"),
            ("GET /nowhere?token=right-token-of-16 HTTP/1.1", "/"),
            ("GET /api/status?token=right-token-of-16 HTTP/1.1", "/api/status"),
            ("GET /?token=right-token-of-16&part=main HTTP/1.1", "/?part=main"),
            ("GET /?part=<script>&token=right-token-of-16 HTTP/1.1", "/"),
        ]
        for (head, location) in cases {
            let answer = try await RawHTTP.exchange(port: server.port, head)
            #expect(answer.status == 303 && answer.headers["location"] == location, "\(head): \(answer)")
            #expect(answer.headers["evil"] == nil && !answer.headers.keys.contains { $0.contains("set-cookie") && $0 != "set-cookie" })
            #expect(answer.headers["set-cookie"]?.hasPrefix("runner_session_") == true, "\(head): \(answer)")
        }
    }

    /// Past `failuresPerAddress` failures in `failureWindow` (wrong bearer tokens, wrong cookies,
    /// wrong `/?token=`), an address's failures are answered 429 until the window has passed;
    /// its right token never is.
    @Test func failedAuthenticationsAreSlowedAndTheRightTokenNeverIs() async throws {
        var limits = LiveServer.Limits()
        limits.failuresPerAddress = 3
        limits.failureWindow = .seconds(3)
        let (server, _) = try Self.countingServer(token: "right-token", limits: limits)
        defer { server.stop() }
        let port = server.port
        let session = LiveServer.session(token: Array("right-token".utf8), port: port)
        // Wrong cookies count as much as wrong bearer tokens.
        for _ in 0..<3 {
            #expect(try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: ["Cookie: runner_session_\(port)=\(String(repeating: "0", count: 64))"]).status == 401)
        }
        let slowed = try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: ["Authorization: Bearer wrong"])
        #expect(slowed.status == 429, "\(slowed.body)")
        #expect(slowed.headers["retry-after"].flatMap { Int($0) }.map { (1...3).contains($0) } == true, "\(slowed.headers)")
        #expect(try await RawHTTP.exchange(port: port, "GET /?token=wrong HTTP/1.1").status == 429)
        #expect(try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: ["Cookie: runner_session_\(port)=bad"]).status == 429)
        // Meanwhile the right token, in each of its forms, is served.
        #expect(try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: ["Authorization: Bearer right-token"]).status == 200)
        #expect(try await RawHTTP.exchange(port: port, "GET /?token=right-token HTTP/1.1").status == 303)
        #expect(try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: ["Cookie: runner_session_\(port)=\(session)"]).status == 200)
        try await Task.sleep(for: .milliseconds(3100))
        #expect(try await RawHTTP.exchange(port: port, "GET / HTTP/1.1", headers: ["Authorization: Bearer wrong"]).status == 401)
    }

    /// When the table of failing addresses is full, an address it does not hold is answered 429
    /// for a failure (not left uncounted), and served with the right token.
    @Test func aFullTableOfFailingAddressesRefusesTheFailuresOfOthers() async throws {
        var limits = LiveServer.Limits()
        limits.failureAddresses = 1
        limits.failureWindow = .seconds(30)
        let (server, _) = try Self.countingServer(token: "right-token", limits: limits)
        defer { server.stop() }
        let port = server.port
        #expect(try Self.exchange(from: "127.0.0.1", port: port, "Authorization: Bearer wrong") == 401)
        #expect(try Self.exchange(from: "127.0.0.2", port: port, "Authorization: Bearer wrong") == 429)
        #expect(try Self.exchange(from: "127.0.0.2", port: port, "Authorization: Bearer right-token") == 200)
        #expect(try Self.exchange(from: "127.0.0.1", port: port, "Authorization: Bearer wrong") == 401, "the address the table holds is counted")
    }

    /// One GET / from the loopback address `source`; its status.
    static func exchange(from source: String, port: UInt16, _ header: String) throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func address(_ text: String, _ port: UInt16) -> sockaddr_in {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, text, &address.sin_addr)
            return address
        }
        var local = address(source, 0)
        var remote = address("127.0.0.1", port)
        let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(bound == 0, "binding to \(source)")
        let connected = withUnsafePointer(to: &remote) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        #expect(connected == 0)
        _ = RawHTTP.send(fd, "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(header)\r\n\r\n")
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &chunk, chunk.count, 0)
            if count <= 0 { break }
            bytes += chunk[..<count]
        }
        return try RawHTTP.parse(bytes).status
    }

    @Test func eventReadersGetEveryLineAndOneThatFallsBehindIsDropped() async throws {
        var limits = LiveServer.Limits()
        limits.readerBuffer = 64 * 1024
        limits.keepAlive = .seconds(60)
        let server = try Self.server(limits: limits)
        defer { server.stop() }
        #expect(!server.wantsLines)
        let reader = try RawHTTP.connect(port: server.port)
        defer { close(reader) }
        RawHTTP.send(reader, "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        var bytes: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 1000\n\n", into: &bytes))
        #expect(String(decoding: bytes, as: UTF8.self).contains("Content-Type: text/event-stream"))
        await eventually("the reader is counted") { server.wantsLines }
        server.take(Array("{\"event\":\"one\"}\n".utf8))
        server.take(Array("{\"event\":\"two\"}\n".utf8))
        #expect(await RawHTTP.read(reader, until: "data: {\"event\":\"two\"}\n\n", into: &bytes))
        #expect(String(decoding: bytes, as: UTF8.self).contains("data: {\"event\":\"one\"}\n\ndata: {\"event\":\"two\"}\n\n"))

        // A reader that reads nothing: once the kernel's buffers and its 64 KiB are full, it is dropped.
        let stuck = try RawHTTP.connect(port: server.port)
        defer { close(stuck) }
        RawHTTP.send(stuck, "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        await eventually("two readers") { server.eventReaders == 2 }
        let line = Array(("{\"event\":\"" + String(repeating: "x", count: 1000) + "\"}\n").utf8)
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        let dropped = await eventually("the stuck reader is dropped", limit: .seconds(20)) {
            for _ in 0..<20 {
                server.take(line)
                // The first reader drains its socket as it goes (all there is, every line).
                while chunk.withUnsafeMutableBytes({ recv(reader, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
            }
            return server.eventReaders <= 1
        }
        #expect(dropped)
        #expect(await RawHTTP.closedByPeer(stuck), "the stuck reader's connection is closed")
        #expect(server.eventReaders == 1, "the reader that keeps up stays")
    }

    /// A burst of lines larger than a reader's buffer, which its socket takes at once, drops no
    /// reader: only what the kernel would not take counts (a page's thread that ran late hands
    /// many lines over in one go).
    @Test func aBurstLargerThanTheBufferDropsNoReaderThatKeepsUp() async throws {
        var limits = LiveServer.Limits()
        limits.readerBuffer = 4 * 1024
        let server = try Self.server(limits: limits)
        defer { server.stop() }
        let reader = try RawHTTP.connect(port: server.port)
        defer { close(reader) }
        RawHTTP.send(reader, "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        var bytes: [UInt8] = []
        #expect(await RawHTTP.read(reader, until: "retry: 1000\n\n", into: &bytes))
        await eventually("the reader is counted") { server.wantsLines }
        server.take(Array(("{\"event\":\"" + String(repeating: "x", count: 16 * 1024) + "\"}\n").utf8))
        server.take(Array("{\"event\":\"after\"}\n".utf8))
        #expect(await RawHTTP.read(reader, until: "data: {\"event\":\"after\"}\n\n", into: &bytes), "both lines came")
        #expect(server.eventReaders == 1)
    }

    @Test func anAnswerGivenLaterLeavesTheServerServingTheOthersMeanwhile() async throws {
        let answers = Watched<[@Sendable (LiveServer.Response) -> Void]>([])
        let server = LiveServer(host: "127.0.0.1", port: 0, token: nil) { request in
            if request.path == "/slow" { return .later { answer in answers.update { $0.append(answer) } } }
            return .response(.text(200, "fast"))
        }
        try server.start()
        defer { server.stop() }
        let slow = Task { try await RawHTTP.exchange(port: server.port, "GET /slow HTTP/1.1") }
        await answers.wait(until: { $0.count == 1 }, "the slow request's work begun")
        let fast = try await RawHTTP.exchange(port: server.port, "GET /fast HTTP/1.1")
        #expect(fast.status == 200 && fast.body == "fast\n", "served while the slow answer is pending")
        answers.value[0](.text(202, "later"))
        let answered = try await slow.value
        #expect(answered.status == 202 && answered.body == "later\n")
        // A client gone before its answer: the answer is dropped, the server goes on.
        let gone = try RawHTTP.connect(port: server.port)
        RawHTTP.send(gone, "GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await answers.wait(until: { $0.count == 2 }, "the second slow request's work begun")
        close(gone)
        try await Task.sleep(for: .milliseconds(100))
        answers.value[1](.text(202, "nobody"))
        #expect(try await RawHTTP.exchange(port: server.port, "GET /fast HTTP/1.1").status == 200)
    }

    @Test func stopClosesEveryConnection() async throws {
        let server = try Self.server()
        let fd = try RawHTTP.connect(port: server.port)
        defer { close(fd) }
        RawHTTP.send(fd, "GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n")
        var bytes: [UInt8] = []
        #expect(await RawHTTP.read(fd, until: "retry", into: &bytes))
        server.stop()
        #expect(await RawHTTP.closedByPeer(fd))
    }
}

/// The board the live page is drawn from, fed as the engine feeds it.
@Suite struct LiveBoardTests {
    private struct Kind: JobKind {
        static let name = "entry"
        static let summary = "A kind for the board."
        static let parameters: [KindParameter] = []
        init() {}
        init(fields: inout JobFields) throws(JobSpecError) {}
        func run(in context: JobContext) async throws -> KindOutcome { throw JobFailure.failed("not run") }
    }

    @Test func runningJobsCarryTheirPhaseUntilTheyEnd() throws {
        let clock = Locked(Date(timeIntervalSince1970: 1_000_000))
        let board = LiveBoard(now: { clock.value })
        let job = JobDescriptor(Kind(), key: "k", url: URL(string: "http://h.example/x")!)
        board.jobStarted(job)
        #expect(board.snapshot.running.map(\.phase) == ["starting"])
        board.jobWaiting(job, for: .host)
        #expect(board.snapshot.running.first?.phase == "waiting for a slot at its host")
        board.jobAttempting(job, attempt: 1)
        #expect(board.snapshot.running.first?.phase == "running")
        board.jobRetrying(job, attempt: 2, after: .milliseconds(1500), reason: "HTTP 503")
        #expect(board.snapshot.running.first?.phase == "retrying in 1.5 s: HTTP 503")
        board.jobAttempting(job, attempt: 2)
        #expect(board.snapshot.running.first?.phase == "running (attempt 2)")
        #expect(board.snapshot.running.first?.attempt == 2)
        board.jobProgress(job, bytes: 1_000_000, total: 5_000_000)
        #expect(board.snapshot.running.first?.bytes == 1_000_000 && board.snapshot.running.first?.bytesPerSecond == nil)
        clock.withLock { $0 += 2 }
        board.jobProgress(job, bytes: 3_000_000, total: 5_000_000)
        #expect(board.snapshot.running.first?.bytesPerSecond == 1_000_000, "2 000 000 bytes in 2 s")
        #expect(board.snapshot.running.first?.total == 5_000_000)

        // A duplicate of the key ends without touching the running job.
        board.jobFinished(JobResult(key: "k", kind: "entry", status: .duplicate, startedAt: clock.value, finishedAt: clock.value))
        #expect(board.snapshot.running.count == 1)
        clock.withLock { $0 += 25 }
        board.jobFinished(JobResult(key: "k", kind: "entry", status: .failed, error: "HTTP 503", startedAt: clock.value, finishedAt: clock.value))
        let snapshot = board.snapshot
        #expect(snapshot.running.isEmpty)
        #expect(snapshot.counts[.failed] == 1 && snapshot.counts[.duplicate] == 1)
        #expect(snapshot.finished.map(\.status) == [.failed, .duplicate], "newest first")
        #expect(snapshot.finished.first?.message == "HTTP 503")
        #expect(snapshot.throughput.count == LiveBoard.spans)
        #expect(snapshot.throughput.last == 1, "the current span")
        #expect(snapshot.throughput[LiveBoard.spans - 3] == 1, "the duplicate, 25 s (two spans) earlier")
    }

    @Test func theChartForgetsSpansOlderThanItsWindowAndTheListKeepsTheNewest() throws {
        let clock = Locked(Date(timeIntervalSince1970: 2_000_000))
        let board = LiveBoard(now: { clock.value })
        for index in 0..<100 {
            board.jobFinished(JobResult(key: "k\(index)", kind: "entry", status: .succeeded, startedAt: clock.value, finishedAt: clock.value))
            clock.withLock { $0 += 10 }
        }
        let snapshot = board.snapshot
        #expect(snapshot.finished.count == LiveBoard.finishedKept)
        #expect(snapshot.finished.first?.key == "k99")
        #expect(snapshot.throughput.reduce(0, +) == LiveBoard.spans - 1, "one a span, the last 59 spans (the current one is empty)")
        #expect(snapshot.counts[.succeeded] == 100)
    }
}
