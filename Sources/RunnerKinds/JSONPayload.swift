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

extension String {
    /// The folder part of a relative path ("" for a bare name).
    var folderPart: String {
        guard let slash = lastIndex(of: "/") else { return "" }
        return String(self[..<slash])
    }
}
