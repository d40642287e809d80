import Foundation
import RunnerKit

/// `{name}` placeholders in a job's `url`, filled with percent-encoded values: the one filler of
/// the built-in kinds' `{id}` (entry, tree entries) and a kind file's parameters. A placeholder
/// without a value is left as written.
///
/// Every byte of a value but the unreserved ones (RFC 3986) and `@` becomes `%XX`. An ASCII
/// template (nearly every URL template) is filled byte by byte; any other template goes through
/// Foundation, whose match rules around combining marks the runner has always followed.
enum URLTemplate {
    /// `template` with each `{name}` whose `value(name)` is not nil replaced by it, encoded.
    static func fill(_ template: String, _ value: (Substring) -> String?) -> String {
        guard template.utf8.contains(UInt8(ascii: "{")) else { return template }
        guard template.utf8.allSatisfy({ $0 < 0x80 }) else { return fillThroughFoundation(template, value) }
        var out: [UInt8] = []
        out.reserveCapacity(template.utf8.count + 32)
        TemplateScanner.scan(template, read: value) { piece in
            switch piece {
            case .text(let text), .unclosed(let text): out.append(contentsOf: text.utf8)
            case .placeholder(let filled): appendEncoded(filled, to: &out)
            case .strayClose: out.append(UInt8(ascii: "}"))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A template beyond ASCII: each name the scanner finds, replaced as Foundation matches it.
    private static func fillThroughFoundation(_ template: String, _ value: (Substring) -> String?) -> String {
        var names: [(name: Substring, value: String)] = []
        TemplateScanner.scan(template, read: { name in value(name).map { (name, $0) } }) { piece in
            if case .placeholder(let found) = piece, !names.contains(where: { $0.name == found.0 }) { names.append(found) }
        }
        var text = template
        for (name, filled) in names {
            text = text.replacingOccurrences(of: "{\(name)}", with: percentEncode(filled))
        }
        return text
    }

    /// Which bytes a value keeps as they are: ALPHA, DIGIT, `-._~` and `@`.
    private static let keeps: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~@".utf8 { table[Int(byte)] = true }
        return table
    }()

    private static let hexDigits = Array("0123456789ABCDEF".utf8)

    private static func appendEncoded(_ value: String, to out: inout [UInt8]) {
        for byte in value.utf8 {
            if keeps[Int(byte)] {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
            }
        }
    }

    /// A value percent-encoded, as it lands in a URL (a kind file's templates encode the same way).
    static func percentEncode(_ value: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(value.utf8.count)
        appendEncoded(value, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
