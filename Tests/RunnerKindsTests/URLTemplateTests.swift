import Foundation
import RunnerKinds
import Testing

/// `{id}` in an entry's URL template: every occurrence, the id percent-encoded, the same result
/// as Foundation's replacement on every template.
@Suite struct URLTemplateTests {
    /// What filling a template always meant: Foundation's replacement of a percent-encoded id.
    static func reference(_ template: String, id: String) -> String {
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

    static let templates = [
        "http://h/entries/{id}.json", "http://h/{id}/{id}", "http://h/{{id}}", "http://h/{i{id}d}", "http://h/{id",
        "http://h/id}", "{id}", "", "http://h/plain", "http://h/é/{id}", "http://h/{id}\u{301}x", "http://h/\u{301}{id}",
        "http://h/{id}\u{FE0F}", "http://h/{id}\u{200D}y", "http://h/{\u{301}id}", "http://h/\u{0}{id}", "{id}{id}{id}",
    ]
    static let ids = ["e1", "imgly.A.1", "a b/c?d#e%f", "~-._@", "é", "日本", "\u{0}\u{1F}\u{7F}", "+&=;:,!$'()*", ""]

    @Test func fillsLikeFoundation() {
        for template in Self.templates {
            for id in Self.ids {
                #expect(EntryKind(id: id).resolveURL(template) == Self.reference(template, id: id), "\(template) \(id)")
            }
        }
    }

    @Test func encodesEveryByteButTheUnreservedOnes() {
        #expect(EntryKind(id: "a b/é~").resolveURL("http://h/{id}.json") == "http://h/a%20b%2F%C3%A9~.json")
        #expect(EntryKind(id: "\u{1}").resolveURL("{id}{id}") == "%01%01")
    }
}
