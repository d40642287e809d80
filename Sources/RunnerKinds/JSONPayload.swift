import Foundation
import RunnerKit

/// Parsing a fetched payload that must be JSON, with a message that says what arrived instead.
enum JSONPayload {
    static func parse(_ payload: Payload, expected: String) throws -> JSONValue {
        let bytes = try payload.bytes()
        do {
            return try JSONParser.parse(bytes)
        } catch {
            let arrived = ImageHeader.describe(payload.prefix)
            if arrived == "a JSON document" || arrived.hasPrefix("plain text") {
                throw JobFailure.failed("expected \(expected), but the payload is not valid JSON: \(error)")
            }
            throw JobFailure.failed("expected \(expected), but \(arrived) arrived")
        }
    }

    /// Fetches the job's JSON document; after a 304, re-reads the earlier payload instead, so
    /// a fan-out kind still starts its children (`response` is nil then).
    static func fetchDocument(_ context: JobContext, into folder: String, expected: String) async throws -> (document: JSONValue, response: JobContext.Response?) {
        do {
            let response = try await context.fetch(into: folder)
            return (try parse(response.payload, expected: expected), response)
        } catch let failure as JobFailure where failure.status == .notModified {
            do {
                return (try JSONParser.parse(context.previousPayload()), nil)
            } catch {
                throw JobFailure.failed("the server said not modified, but the earlier payload cannot be read: \(error)")
            }
        }
    }

    /// Replaces `{id}` in a URL template with the percent-encoded id.
    ///
    /// Every byte of the id but the unreserved ones (RFC 3986) and `@` becomes `%XX`. An ASCII
    /// template (nearly every URL template) is filled byte by byte; any other template goes
    /// through Foundation, whose match rules around combining marks it has always followed.
    static func fill(_ template: String, id: String) -> String {
        var text = template
        let filled = text.withUTF8 { (bytes) -> String? in
            var ascii = true
            var firstMatch = -1
            var i = 0
            while i < bytes.count {
                let byte = bytes[i]
                if byte >= 0x80 {
                    ascii = false
                    break
                }
                if firstMatch < 0, byte == openBrace, isPlaceholder(bytes, at: i) { firstMatch = i }
                i += 1
            }
            guard ascii else {
                return String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "{id}", with: encode(id))
            }
            guard firstMatch >= 0 else { return nil }
            let encoded = encodeBytes(id)
            var result: [UInt8] = []
            result.reserveCapacity(bytes.count + encoded.count)
            result.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[..<firstMatch]))
            i = firstMatch
            while i < bytes.count {
                if bytes[i] == openBrace, isPlaceholder(bytes, at: i) {
                    result.append(contentsOf: encoded)
                    i += 4
                } else {
                    result.append(bytes[i])
                    i += 1
                }
            }
            return String(decoding: result, as: UTF8.self)
        }
        return filled ?? template
    }

    private static let openBrace = UInt8(ascii: "{")

    /// Whether `{id}` starts at `index`.
    private static func isPlaceholder(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Bool {
        index + 4 <= bytes.count && bytes[index] == openBrace && bytes[index + 1] == UInt8(ascii: "i")
            && bytes[index + 2] == UInt8(ascii: "d") && bytes[index + 3] == UInt8(ascii: "}")
    }

    /// Which bytes an id keeps as they are: ALPHA, DIGIT, `-._~` and `@`.
    private static let keeps: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~@".utf8 { table[Int(byte)] = true }
        return table
    }()

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    /// The id's UTF-8 bytes, percent-encoded.
    private static func encodeBytes(_ id: String) -> [UInt8] {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(id.utf8.count)
        for byte in id.utf8 {
            if keeps[Int(byte)] {
                encoded.append(byte)
            } else {
                encoded.append(UInt8(ascii: "%"))
                encoded.append(hexDigits[Int(byte >> 4)])
                encoded.append(hexDigits[Int(byte & 0x0F)])
            }
        }
        return encoded
    }

    private static func encode(_ id: String) -> String { String(decoding: encodeBytes(id), as: UTF8.self) }
}
