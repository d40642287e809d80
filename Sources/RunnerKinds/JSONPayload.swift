import Foundation
import RunnerKit

/// Parsing a fetched payload that must be JSON, with a message that says what arrived instead.
enum JSONPayload {
    /// Parses the payload inside the attempt, off the concurrency pool when it is large.
    static func parse(_ payload: Payload, expected: String) async throws -> JSONValue {
        try await PayloadCheck.run(bytes: payload.count) { stop in try parseNow(payload, expected: expected, stop: stop) }
    }

    private static func parseNow(_ payload: Payload, expected: String, stop: PayloadCheck.Stop) throws -> JSONValue {
        let bytes = try payload.bytes()
        do {
            return try JSONParser.parse(bytes, shouldStop: { stop.isRaised })
        } catch where error.isStopped {
            throw CancellationError()  // nobody waits for it any more: the attempt has ended
        } catch {
            let arrived = ImageHeader.describe(payload.prefix)
            if arrived == "a JSON document" || arrived.hasPrefix("plain text") {
                throw JobFailure.failed("expected \(expected), but the payload is not valid JSON: \(error)")
            }
            throw JobFailure.failed("expected \(expected), but \(arrived) arrived")
        }
    }

    /// Fetches the job's JSON document; after a 304, re-reads the earlier payload instead, so
    /// a fan-out kind still starts its children.
    static func fetchDocument(_ context: JobContext, folder: String, expected: String) async throws -> (document: JSONValue, fetch: JobContext.Fetch) {
        let fetch = try await context.fetch(folder: folder)
        switch fetch {
        case .fetched(let response):
            return (try await parse(response.payload, expected: expected), fetch)
        case .notModified(let previous):
            do {
                let document = try await PayloadCheck.run(bytes: previous.bytes ?? 0) { stop in
                    try JSONParser.parse(context.previousPayload(), shouldStop: { stop.isRaised })
                }
                return (document, fetch)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                throw JobFailure.failed("the server said not modified, but the earlier payload cannot be read: \(error)")
            }
        }
    }

    /// The size of what a fetch gave (after a 304, the earlier payload's).
    static func size(_ fetch: JobContext.Fetch) -> Int {
        switch fetch {
        case .fetched(let response): return response.payload.count
        case .notModified(let previous): return previous.bytes ?? 0
        }
    }

    /// The HTTP status a fetch ended with, for messages.
    static func status(_ fetch: JobContext.Fetch) -> Int {
        if case .fetched(let response) = fetch { return response.head.status }
        return 304
    }

    /// Replaces `{id}` in a URL template with the percent-encoded id.
    ///
    /// Every byte of the id but the unreserved ones (RFC 3986) and `@` becomes `%XX`. An ASCII
    /// template (nearly every URL template) is filled byte by byte; any other template goes
    /// through Foundation, whose match rules around combining marks it has always followed.
    static func fill(_ template: String, id: String) -> String {
        var text = template
        let filled = text.withUTF8 { (bytes) -> String? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else {
                return String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "{id}", with: percentEncode(id))
            }
            var matches = 0
            var i = 0
            while i < bytes.count {
                if isPlaceholder(bytes, at: i) {
                    matches += 1
                    i += 4
                } else {
                    i += 1
                }
            }
            guard matches > 0 else { return nil }
            var encodedCount = 0
            for byte in id.utf8 { encodedCount += keeps[Int(byte)] ? 1 : 3 }
            return String(unsafeUninitializedCapacity: bytes.count + matches * (encodedCount - 4)) { out in
                var written = 0
                i = 0
                while i < bytes.count {
                    if isPlaceholder(bytes, at: i) {
                        written = writeEncoded(id, into: out, at: written)
                        i += 4
                    } else {
                        out[written] = bytes[i]
                        written += 1
                        i += 1
                    }
                }
                return written
            }
        }
        return filled ?? template
    }

    /// Whether `{id}` starts at `index`.
    private static func isPlaceholder(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Bool {
        index + 4 <= bytes.count && bytes[index] == UInt8(ascii: "{") && bytes[index + 1] == UInt8(ascii: "i")
            && bytes[index + 2] == UInt8(ascii: "d") && bytes[index + 3] == UInt8(ascii: "}")
    }

    /// Which bytes an id keeps as they are: ALPHA, DIGIT, `-._~` and `@`.
    private static let keeps: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~@".utf8 { table[Int(byte)] = true }
        return table
    }()

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// Writes the id's UTF-8 bytes percent-encoded at `index`; returns the index after them.
    private static func writeEncoded(_ id: String, into out: UnsafeMutableBufferPointer<UInt8>, at index: Int) -> Int {
        var index = index
        for byte in id.utf8 {
            if keeps[Int(byte)] {
                out[index] = byte
                index += 1
            } else {
                out[index] = UInt8(ascii: "%")
                out[index + 1] = hexDigits[Int(byte >> 4)]
                out[index + 2] = hexDigits[Int(byte & 0x0F)]
                index += 3
            }
        }
        return index
    }

    /// The id percent-encoded, for templates beyond ASCII and for kind-file templates.
    static func percentEncode(_ id: String) -> String {
        var encodedCount = 0
        for byte in id.utf8 { encodedCount += keeps[Int(byte)] ? 1 : 3 }
        return String(unsafeUninitializedCapacity: encodedCount) { writeEncoded(id, into: $0, at: 0) }
    }
}
