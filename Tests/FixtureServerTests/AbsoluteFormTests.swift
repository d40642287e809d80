import FixtureServer
import Testing

/// Requests as a client sends them to a proxy (absolute-form targets, RFC 9112 section 3.2.2):
/// served by their path, and counted apart, so a test can show that a client used the server as
/// its proxy.
@Suite(.timeLimit(.minutes(1)))
struct AbsoluteFormTests {
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
        "CONNECT 127.0.0.1:443 HTTP/1.1",
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
}
