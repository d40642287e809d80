import FixtureServer
import Foundation
import FoundationNetworking
import Testing

/// A fresh server on a free loopback port; the test stops it.
func startedServer() throws -> FixtureServer {
    let server = FixtureServer()
    try server.start()
    return server
}

/// One session for the whole suite, without any cache, so each request reaches the server.
let session: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.timeoutIntervalForRequest = 10
    configuration.httpMaximumConnectionsPerHost = 300
    return URLSession(configuration: configuration)
}()

/// GET (or another method) through URLSession; answers the body and the response.
func fetch(
    _ server: FixtureServer, _ path: String, method: String = "GET", headers: [String: String] = [:]
) async throws -> (body: Data, response: HTTPURLResponse) {
    var request = URLRequest(url: try #require(URL(string: server.baseURL + path)))
    request.httpMethod = method
    for (name, value) in headers {
        request.setValue(value, forHTTPHeaderField: name)
    }
    let (data, response) = try await session.data(for: request)
    return (data, try #require(response as? HTTPURLResponse))
}

/// Parses JSON text or data into a Foundation object.
func json(_ data: Data) throws -> Any {
    try JSONSerialization.jsonObject(with: data)
}

/// Milliseconds since `start`.
func milliseconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; answers whether it held.
/// It bounds how long a test waits; it is not what the test measures.
func eventually(within timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() {
            return true
        }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Splits a raw response into its head (text) and body bytes.
func splitResponse(_ bytes: [UInt8]) -> (head: String, body: [UInt8])? {
    guard bytes.count >= 4,
        let end = (0...(bytes.count - 4)).first(where: { Array(bytes[$0..<($0 + 4)]) == [13, 10, 13, 10] })
    else {
        return nil
    }
    return (String(decoding: bytes[0..<end], as: UTF8.self), Array(bytes[(end + 4)...]))
}
