import FixtureServer
import Foundation
import FoundationNetworking
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ValidatorTests {
    static let resources = ["/data.json", "/entries/imgly.A.1.json", "/images.json", "/images/gif.gif"]

    @Test(arguments: resources)
    func resourcesCarryStrongValidators(path: String) async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (_, response) = try await fetch(server, path)
        let etag = try #require(response.value(forHTTPHeaderField: "ETag"))
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count > 2)
        #expect(response.value(forHTTPHeaderField: "Last-Modified") == "Wed, 01 Jan 2025 00:00:00 GMT")
        // The same bytes give the same tag; other bytes another.
        #expect(try await fetch(server, path).response.value(forHTTPHeaderField: "ETag") == etag)
        #expect(try await fetch(server, "/images/png.png").response.value(forHTTPHeaderField: "ETag") != etag)
    }

    @Test(arguments: resources)
    func matchingETagAnswers304(path: String) async throws {
        let server = try startedServer()
        defer { server.stop() }
        let etag = try #require(try await fetch(server, path).response.value(forHTTPHeaderField: "ETag"))
        let (body, response) = try await fetch(server, path, headers: ["If-None-Match": etag])
        #expect(response.statusCode == 304)
        #expect(body.isEmpty)
        #expect(response.value(forHTTPHeaderField: "ETag") == etag)
        let (_, star) = try await fetch(server, path, headers: ["If-None-Match": "*"])
        #expect(star.statusCode == 304)
        let (_, listed) = try await fetch(server, path, headers: ["If-None-Match": "\"other\", W/\(etag)"])
        #expect(listed.statusCode == 304)
        let (otherBody, other) = try await fetch(server, path, headers: ["If-None-Match": "\"other\""])
        #expect(other.statusCode == 200)
        #expect(!otherBody.isEmpty)
    }

    @Test func ifModifiedSinceComparesWithLastModified() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let cases: [(String, Int)] = [
            ("Wed, 01 Jan 2025 00:00:00 GMT", 304),
            ("Sat, 22 Nov 2025 10:00:00 GMT", 304),
            ("Tue, 31 Dec 2024 23:59:59 GMT", 200),
            ("not a date", 200),
        ]
        for (date, status) in cases {
            let (_, response) = try await fetch(server, "/data.json", headers: ["If-Modified-Since": date])
            #expect(response.statusCode == status, "\(date)")
        }
    }

    @Test func ifNoneMatchDecidesAloneWhenBothAreSent() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (_, response) = try await fetch(
            server, "/data.json",
            headers: ["If-None-Match": "\"stale\"", "If-Modified-Since": "Sat, 22 Nov 2025 10:00:00 GMT"])
        #expect(response.statusCode == 200)
    }

    @Test func notModifiedHasNoBodyOnTheWire() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/images/bmp.bmp")
        let first = try client.readResponse()
        let etag = try #require(first.headers["etag"])
        client.request("/images/bmp.bmp", headers: ["If-None-Match: \(etag)"])
        let second = try client.readResponse()
        #expect(second.status == 304)
        #expect(second.headers["content-length"] == nil)
        // The next response starts right after the 304 head.
        client.request("/bytes/3")
        #expect(try client.readResponse().body == [0, 1, 2])
    }

    @Test func bytesAndFaultsCarryNoValidators() async throws {
        let server = try startedServer()
        defer { server.stop() }
        #expect(try await fetch(server, "/bytes/10").response.value(forHTTPHeaderField: "ETag") == nil)
        let (_, html) = try await fetch(server, "/images/png.png?html=1", headers: ["If-None-Match": "*"])
        #expect(html.statusCode == 200)
        #expect(html.value(forHTTPHeaderField: "ETag") == nil)
    }
}
