@testable import FixtureServer
import Foundation
import FoundationNetworking
import Testing

@Suite(.timeLimit(.minutes(1)))
struct GzipTests {
    @Test(arguments: [0, 1, 100, 258, 259, 517, 100_000])
    func crcOfZerosMatchesTheBitwiseCRC(count: Int) {
        #expect(GzipZeros.crc32OfZeros(count) == GzipZeros.crc32([UInt8](repeating: 0, count: count)))
    }

    @Test func knownCRC() {
        #expect(GzipZeros.crc32(Array("123456789".utf8)) == 0xCBF4_3926)
    }

    /// URLSession (libcurl underneath) inflates the body and checks the gzip trailer.
    @Test(arguments: [0, 1, 258, 259, 1000, 1 << 20])
    func inflatesToZeros(count: Int) async throws {
        let server = try startedServer()
        defer { server.stop() }
        let (body, response) = try await fetch(server, "/gzip/\(count)")
        #expect(response.statusCode == 200)
        #expect(body.count == count)
        #expect(body.allSatisfy { $0 == 0 })
    }

    @Test func threeHundredMebibytesAreAboutThreeHundredKibibytesOnTheWire() throws {
        let server = try startedServer()
        defer { server.stop() }
        let client = try RawHTTPClient(port: server.port)
        client.request("/gzip/\(300 << 20)")
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["content-encoding"] == "gzip")
        #expect((290 << 10)...(310 << 10) ~= response.body.count, "\(response.body.count) bytes")
        #expect(Array(response.body.suffix(4)) == [0x00, 0x00, 0xC0, 0x12])  // ISIZE: 300 MiB, little-endian
    }
}
