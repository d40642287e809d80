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
    static func fill(_ template: String, id: String) -> String {
        var allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~".utf8)
        allowed.insert(UInt8(ascii: "@"))
        var encoded = ""
        for byte in id.utf8 {
            if allowed.contains(byte) {
                encoded.unicodeScalars.append(UnicodeScalar(byte))
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return template.replacingOccurrences(of: "{id}", with: encoded)
    }
}
