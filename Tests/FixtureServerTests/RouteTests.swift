import FixtureServer
import Foundation
import FoundationNetworking
import Testing

@Suite(.timeLimit(.minutes(1)))
struct RouteTests {
    @Test func treeIsServedAsJSON() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (body, response) = try await fetch(server, "/data.json")
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(String(decoding: body, as: UTF8.self) == FixtureCatalog.treeJSON)
        #expect(try json(body) is [Any])
        #expect(server.requestCount(path: "/data.json") == 1)
    }

    @Test func entriesAnswer200Or404() async throws {
        let server = try startedServer()
        defer { server.stop() }
        for id in FixtureCatalog.treeLeafIDs {
            let (body, response) = try await fetch(server, "/entries/\(id).json")
            if FixtureCatalog.missingEntryIDs.contains(id) {
                #expect(response.statusCode == 404, "\(id)")
            } else {
                #expect(response.statusCode == 200, "\(id)")
                let entry = try #require(try json(body) as? [String: String])
                #expect(entry["id"] == id)
                #expect(String(decoding: body, as: UTF8.self) == FixtureCatalog.entryJSON(id: id))
            }
        }
        #expect(try await fetch(server, "/entries/no-such-id.json").response.statusCode == 404)
        #expect(try await fetch(server, "/entries/gone.json").response.statusCode == 410)
        #expect(try await fetch(server, "/entries/imgly.A.1").response.statusCode == 404)
        #expect(server.requestCount(path: "/entries/imgly.A.1.json") == 1)
    }

    @Test func imageListNamesEveryImageAndOneMissing() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (body, response) = try await fetch(server, "/images.json")
        #expect(response.statusCode == 200)
        let list = try #require(try json(body) as? [[String: Any]])
        #expect(list.count == FixtureCatalog.images.count + 1)
        #expect(list.compactMap { $0["id"] as? Int } == Array(1...list.count))
        let urls = list.compactMap { $0["imageUrl"] as? String }
        #expect(urls.count == list.count)
        for (url, image) in zip(urls, FixtureCatalog.images) {
            #expect(url == server.baseURL + "/images/" + image.name)
        }
        let missing = try #require(urls.last)
        let (_, missingResponse) = try await session.data(from: try #require(URL(string: missing)))
        #expect((missingResponse as? HTTPURLResponse)?.statusCode == 404)
    }

    @Test(arguments: FixtureCatalog.images.map(\.name))
    func imageIsServedWithItsBytesAndType(name: String) async throws {
        let server = try startedServer()
        defer { server.stop() }
        let image = try #require(FixtureCatalog.images.first { $0.name == name })
        let (body, response) = try await fetch(server, "/images/\(name)")
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "Content-Type") == image.contentType)
        #expect([UInt8](body) == image.bytes)
    }

    @Test func unknownImageAndPathAnswer404() async throws {
        let server = try startedServer()
        defer { server.stop() }
        #expect(try await fetch(server, "/images/nope.png").response.statusCode == 404)
        #expect(try await fetch(server, "/nothing/here").response.statusCode == 404)
        #expect(try await fetch(server, "/images/").response.statusCode == 404)
    }

    @Test func bytesAreStreamedWithALength() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        let count = 200_000
        client.request("/bytes/\(count)")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["content-length"] == "\(count)")
        #expect(response.headers["transfer-encoding"] == nil)
        #expect(response.body.count == count)
        #expect(response.body.enumerated().allSatisfy { $0.element == UInt8(truncatingIfNeeded: $0.offset) })
    }

    @Test func bytesAreChunkedOnRequest() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/bytes/70000?chunked=1")
        let response = try client.readResponse()
        #expect(response.headers["transfer-encoding"] == "chunked")
        #expect(response.headers["content-length"] == nil)
        #expect(response.body.count == 70000)
        #expect(response.body.enumerated().allSatisfy { $0.element == UInt8(truncatingIfNeeded: $0.offset) })
        // The connection stays usable after the last chunk.
        client.request("/bytes/3?chunked=1")
        #expect(try client.readResponse().body == [0, 1, 2])

        let (body, _) = try await fetch(server, "/bytes/5000?chunked=1")
        #expect(body.count == 5000)
        #expect(try await fetch(server, "/bytes/0").body.isEmpty)
        #expect(try await fetch(server, "/bytes/-1").response.statusCode == 400)
    }

    @Test func largeBodyStreamsWithoutBuffering() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let count = 64 << 20
        let (body, response) = try await fetch(server, "/bytes/\(count)")
        #expect(response.statusCode == 200)
        #expect(body.count == count)
        #expect(body.last == UInt8(truncatingIfNeeded: count - 1))
    }

    @Test func redirectPointsAtTheDecodedURL() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let target = server.baseURL + "/entries/imgly.A.1.json?x=1"
        let encoded = try #require(target.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let client = try RawHTTPClient(port: server.port)
        client.request("/redirect?to=\(encoded)")
        let response = try client.readResponse()
        #expect(response.status == 302)
        #expect(response.headers["location"] == target)

        let (body, followed) = try await fetch(server, "/redirect?to=\(encoded)")
        #expect(followed.statusCode == 200)
        #expect(followed.url?.absoluteString == target)
        #expect(try json(body) is [String: String])
        #expect(server.requestCount(path: "/redirect") == 2)
        #expect(try await fetch(server, "/redirect").response.statusCode == 400)
    }

    @Test func echoHeadersReturnsTheRequestFields() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (body, response) = try await fetch(
            server, "/echo-headers", headers: ["If-None-Match": "\"abc\"", "X-Custom": "yes"])
        #expect(response.statusCode == 200)
        let fields = try #require(try json(body) as? [String: String])
        #expect(fields["if-none-match"] == "\"abc\"")
        #expect(fields["x-custom"] == "yes")
        #expect(fields["host"] == "127.0.0.1:\(server.port)")
    }

    @Test func headAnswersFieldsWithoutBody() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/images/png.png", method: "HEAD")
        let head = try client.readResponse(head: true)
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "\(FixtureCatalog.images[0].bytes.count)")
        // Nothing but the next response follows on the connection.
        client.request("/bytes/2")
        let next = try client.readResponse()
        #expect(next.status == 200)
        #expect(next.body == [0, 1])
    }

    @Test func otherMethodsAnswer405AfterTheirBody() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("POST /data.json HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world")
        let response = try client.readResponse()
        #expect(response.status == 405)
        #expect(response.headers["allow"] == "GET, HEAD")
        client.request("/bytes/1")
        #expect(try client.readResponse().body == [0])
    }

    @Test func malformedRequestsAnswer400AndClose() throws {
        let server = try startedServer()
        defer { server.stop() }
        for bad in ["GARBAGE\r\n\r\n", "GET /x HTTP/1.1\r\nNo colon here\r\n\r\n", "GET x HTTP/1.1\r\n\r\n"] {
            let client = try RawHTTPClient(port: server.port)
            client.send(bad)
            #expect(try client.readResponse().status == 400, "\(bad)")
            #expect(try client.readToEnd().isEmpty)
        }
        let client = try RawHTTPClient(port: server.port)
        client.send("GET /x HTTP/2.0\r\n\r\n")
        #expect(try client.readResponse().status == 505)
        let long = try RawHTTPClient(port: server.port)
        long.send("GET /x HTTP/1.1\r\nX: " + String(repeating: "a", count: 70_000) + "\r\n\r\n")
        let tooLong = try long.readResponse()
        #expect(tooLong.status == 431, "\(tooLong.status) \(tooLong.text)")
    }

    @Test func bareLineFeedsAndLeadingEmptyLinesAreAccepted() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.send("\r\nGET /bytes/4 HTTP/1.1\nHost: x\n\n")
        #expect(try client.readResponse().body == [0, 1, 2, 3])
    }
}
