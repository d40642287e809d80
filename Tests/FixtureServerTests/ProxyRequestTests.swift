import FixtureServer
import RunnerTestSupport
import Testing

/// Requests as a client sends them to a proxy: absolute-form targets (RFC 9112 section 3.2.2),
/// served by their path and counted apart, and CONNECT tunnels to loopback ports, so a test can
/// show that a client used the server as its proxy.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct ProxyRequestTests {
    @Test func anAbsoluteFormRequestIsServedByItsPathAndCountedAsProxied() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("GET http://runner-proxy-test.invalid/entries/imgly.A.1.json HTTP/1.1\r\nHost: runner-proxy-test.invalid\r\n\r\n")
        let proxied = try client.readResponse()
        #expect(proxied.status == 200)
        #expect(proxied.text == FixtureCatalog.entryJSON(id: "imgly.A.1"))
        #expect(server.proxiedRequests == 1)
        #expect(server.requestCount(path: "/entries/imgly.A.1.json") == 1)

        client.request("/entries/imgly.A.1.json")
        #expect(try client.readResponse().status == 200)
        #expect(server.proxiedRequests == 1, "an origin-form request is not a proxied one")
        #expect(server.requestCount(path: "/entries/imgly.A.1.json") == 2)
    }

    @Test func theQueryPortAndSchemeOfAnAbsoluteTargetAreHonoured() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("GET HTTP://Example.TEST:8080/bytes/3?chunked=1 HTTP/1.1\r\nHost: example.test:8080\r\n\r\n")
        let bytes = try client.readResponse()
        #expect(bytes.status == 200)
        #expect(bytes.body == [0, 1, 2])
        #expect(bytes.headers["transfer-encoding"] == "chunked", "the query's fault option applied")
        client.send("GET https://example.test HTTP/1.1\r\nHost: example.test\r\n\r\n")
        let index = try client.readResponse()
        #expect(index.status == 200, "an empty path is /")
        #expect(index.text.contains("/entries/"))
        #expect(server.proxiedRequests == 2)
        #expect(server.requestCount(path: "/") == 1)
    }

    @Test(arguments: [
        "CONNECT /data.json HTTP/1.1",
        "CONNECT 127.0.0.1 HTTP/1.1",
        "OPTIONS * HTTP/1.1",
        "GET ftp://example.test/data.json HTTP/1.1",
        "GET http:///data.json HTTP/1.1",
        "GET http://user@example.test/data.json HTTP/1.1",
        "GET data.json HTTP/1.1",
    ])
    func otherTargetFormsAreRefused(requestLine: String) throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("\(requestLine)\r\nHost: example.test\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == 400)
        #expect(response.text.contains("malformed request line"))
        #expect(server.proxiedRequests == 0)
    }

    @Test func connectOpensATunnelToALoopbackPortAndRelaysBothWays() throws {
        let proxy = try startedServer()
        defer { proxy.stop() }
        let origin = try startedServer()
        defer { origin.stop() }
        let client = try RawHTTPClient(port: proxy.port)
        // The request through the tunnel follows the CONNECT at once, before the 200 arrives.
        client.send("CONNECT localhost:\(origin.port) HTTP/1.1\r\nHost: localhost:\(origin.port)\r\n\r\nGET /bytes/3 HTTP/1.1\r\nHost: x\r\n\r\n")
        let established = try client.readResponse(head: true)
        #expect(established.status == 200)
        #expect(try client.readResponse().body == [0, 1, 2])
        client.request("/entries/imgly.A.1.json")
        #expect(try client.readResponse().text == FixtureCatalog.entryJSON(id: "imgly.A.1"))
        #expect(proxy.tunnels == 1)
        #expect(origin.requestCount(path: "/bytes/3") == 1 && origin.totalRequests == 2, "the requests reached the origin")
        #expect(proxy.totalRequests == 1, "only the CONNECT was the proxy's own")
        #expect(proxy.proxiedRequests == 0)
    }

    @Test func theTunnelEndsWhenTheOriginClosesAndWhenTheServerStops() async throws {
        let proxy = try startedServer()
        let origin = try startedServer()
        defer { origin.stop() }
        let closing = try RawHTTPClient(port: proxy.port)
        closing.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\n\r\nGET /bytes/1 HTTP/1.0\r\n\r\n")
        #expect(try closing.readResponse(head: true).status == 200)
        #expect(try closing.readResponse().body == [0])
        #expect(try closing.readToEnd().isEmpty, "the origin closed after HTTP/1.0, and so did the tunnel")

        let open = try RawHTTPClient(port: proxy.port)
        open.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\n\r\n")
        #expect(try open.readResponse(head: true).status == 200)
        #expect(await eventually { proxy.tunnels == 2 })
        let start = ContinuousClock.now
        proxy.stop()
        let took = milliseconds(since: start)
        #expect(took < 5000, "stop waited \(took) ms; an open tunnel never ends by itself")
        #expect(try open.readToEnd().isEmpty)
    }

    @Test(arguments: [
        ("CONNECT example.test:443 HTTP/1.1", 403),
        ("CONNECT 10.0.0.1:443 HTTP/1.1", 403),
        ("CONNECT [::1]:1 HTTP/1.1", 502),
    ])
    func connectRefusesWhatIsNotALoopbackPortThatListens(requestLine: String, status: Int) throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("\(requestLine)\r\n\r\n")
        let response = try client.readResponse()
        #expect(response.status == status, "\(response.text)")
        #expect(server.tunnels == 0)
    }
}
