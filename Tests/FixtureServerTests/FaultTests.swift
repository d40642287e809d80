import FixtureServer
import Foundation
import FoundationNetworking
import RunnerTestSupport
import Testing

@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(1)))
struct FaultTests {
    @Test func delayWaitsBeforeAnswering() async throws {
        let server = try startedServer()
        defer { server.stop() }
        // Only a lower bound: the server runs in this test process, whose threads the suites
        // in process share at the start of a run (a 300 ms delay was seen to take 8 s then).
        let start = ContinuousClock.now
        let (body, response) = try await fetch(server, "/data.json?delay=300")
        let elapsed = milliseconds(since: start)
        #expect(response.statusCode == 200)
        #expect(String(decoding: body, as: UTF8.self) == FixtureCatalog.treeJSON)
        #expect(elapsed >= 300, "took \(elapsed) ms")
    }

    @Test func statusAndRetryAfterReplaceTheResource() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (body, response) = try await fetch(server, "/images/png.png?status=503&retryAfter=7")
        #expect(response.statusCode == 503)
        #expect(response.value(forHTTPHeaderField: "Retry-After") == "7")
        #expect(response.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("text/plain") == true)
        #expect(String(decoding: body, as: UTF8.self).contains("503"))
        let (_, tooMany) = try await fetch(server, "/no/such/path?status=429&retryAfter=1")
        #expect(tooMany.statusCode == 429)
        #expect(tooMany.value(forHTTPHeaderField: "Retry-After") == "1")
        #expect(try await fetch(server, "/data.json?status=99").response.statusCode == 400)
        #expect(try await fetch(server, "/data.json?delay=soon").response.statusCode == 400)
        #expect(server.requestCount(path: "/images/png.png") == 1)
    }

    @Test func hangLeavesTheRequestUnansweredUntilStop() async throws {
        let server = try startedServer()
        let client = try RawHTTPClient(port: server.port)
        client.request("/data.json?hang=1")
        #expect(await eventually { server.requestCount(path: "/data.json") == 1 })
        #expect(!client.hasData(within: 0.3))
        let start = ContinuousClock.now
        server.stop()
        let took = milliseconds(since: start)
        #expect(took < 5000, "stop waited \(took) ms; a hang never ends by itself")
        #expect(client.hasData(within: 1))
        #expect((try? client.readToEnd()) ?? [] == [])
        #expect(server.openConnections == 0)
    }

    @Test func hangEndsWhenTheClientLeaves() async throws {
        let server = try startedServer()
        defer { server.stop() }
        do {
            let client = try RawHTTPClient(port: server.port)
            client.request("/data.json?hang=1")
            #expect(await eventually { server.openConnections == 1 && server.totalRequests == 1 })
        }
        #expect(await eventually { server.openConnections == 0 })
    }

    @Test func stopWakesDelayAndTrickle() async throws {
        let server = try startedServer()
        let delayed = try RawHTTPClient(port: server.port)
        delayed.request("/data.json?delay=20000")
        let trickled = try RawHTTPClient(port: server.port)
        trickled.request("/bytes/1000?trickle=10000")
        #expect(await eventually { server.totalRequests == 2 })
        let start = ContinuousClock.now
        server.stop()
        let took = milliseconds(since: start)
        #expect(took < 5000, "stop waited \(took) ms; unwoken, 20 s and more")
        #expect(server.openConnections == 0)
    }

    @Test func truncateSendsFewerBytesThanAnnounced() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let image = try #require(FixtureCatalog.images.first { $0.name == "jpeg-exif.jpg" })
        let client = try RawHTTPClient(port: server.port)
        client.request("/images/jpeg-exif.jpg?truncate=100")
        let (head, body) = try #require(splitResponse(try client.readToEnd()))
        #expect(head.contains("Content-Length: \(image.bytes.count)"))
        #expect(body == Array(image.bytes.prefix(100)))

        // URLSession sees an error or, at best, a short body.
        do {
            let (data, _) = try await fetch(server, "/images/jpeg-exif.jpg?truncate=100")
            #expect(data.count < image.bytes.count)
        } catch {
            #expect(error is URLError)
        }
    }

    @Test func resetClosesWithARST() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/data.json?reset=1")
        #expect(throws: RawHTTPClient.Failure.reset) { try client.readToEnd() }
        await #expect(throws: URLError.self) { try await fetch(server, "/data.json?reset=1") }
        #expect(server.requestCount(path: "/data.json") == 2)
    }

    @Test func htmlServesACaptivePortalUnderTheExpectedType() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (body, response) = try await fetch(server, "/images/png.png?html=1")
        #expect(response.statusCode == 200)
        #expect(response.value(forHTTPHeaderField: "Content-Type") == "image/png")
        #expect(String(decoding: body, as: UTF8.self).hasPrefix("<!DOCTYPE html>"))
        let (_, json) = try await fetch(server, "/data.json?html=1")
        #expect(json.value(forHTTPHeaderField: "Content-Type") == "application/json")
        let (_, unknown) = try await fetch(server, "/nowhere?html=1")
        #expect(unknown.statusCode == 200)
        #expect(unknown.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("text/html") == true)
    }

    @Test func trickleSendsOneByteAtATime() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        let start = ContinuousClock.now
        client.request("/bytes/5?trickle=50")
        let response = try client.readResponse()
        let elapsed = milliseconds(since: start)
        #expect(response.body == [0, 1, 2, 3, 4])
        #expect(elapsed >= 250 && elapsed < 2000, "took \(elapsed) ms")
    }

    @Test func trickleAfterSendsTheFirstBytesAtOnce() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        let start = ContinuousClock.now
        client.request("/bytes/70000?trickle=50&trickleAfter=69997")
        let response = try client.readResponse()
        let elapsed = milliseconds(since: start)
        #expect(response.body == (0..<70000).map { UInt8(truncatingIfNeeded: $0) })
        #expect(elapsed >= 150 && elapsed < 2000, "three trickled bytes took \(elapsed) ms")
    }

    @Test func closeAnswersThenCloses() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/entries/imgly.A.1.json?close=1")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["connection"] == "close")
        #expect(try client.readToEnd().isEmpty)
    }

    @Test func faultsCombine() async throws {
        let server = try startedServer()
        defer { server.stop() }
        let start = ContinuousClock.now
        let (_, response) = try await fetch(server, "/entries/imgly.A.1.json?delay=100&status=500&retryAfter=2")
        #expect(milliseconds(since: start) >= 100)
        #expect(response.statusCode == 500)
        #expect(response.value(forHTTPHeaderField: "Retry-After") == "2")
    }
}
