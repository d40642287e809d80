import Foundation
import RunnerKit

/// A string of a kind file with placeholders: `{name}` is a job parameter, `{/pointer}` a JSON
/// Pointer into the current element (children) or the payload (details). `{{` and `}}` are a
/// literal brace.
package struct KindTemplate: Sendable, Equatable {
    /// The longest template accepted, in bytes.
    package static let maxLength = 4096
    /// The most placeholders in one template.
    package static let maxPlaceholders = 64

    package enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
        case pointer(JSONPointer)
    }

    package let segments: [Segment]
    package let text: String

    package struct Invalid: Error, Sendable, CustomStringConvertible {
        package var description: String
    }

    package init(_ text: String) throws(KindTemplate.Invalid) {
        guard text.utf8.count <= Self.maxLength else {
            throw Invalid(description: "is a template longer than \(Self.maxLength) bytes")
        }
        self.text = text
        var segments: [Segment] = []
        var literal = ""
        var placeholders = 0
        try TemplateScanner.scan(text, doubledBraces: true, read: { $0 }) { piece throws(Invalid) in
            switch piece {
            case .text(let part):
                literal += part
            case .strayClose:
                throw Invalid(description: "'\(Self.shown(text))' has a '}' that closes nothing (write '}}' for a brace)")
            case .unclosed:
                throw Invalid(description: "'\(Self.shown(text))' has a '{' that is never closed")
            case .placeholder(let inside):
                if !literal.isEmpty { segments.append(.literal(literal)) }
                literal = ""
                segments.append(try Self.segment(inside, of: text))
                placeholders += 1
                guard placeholders <= Self.maxPlaceholders else {
                    throw Invalid(description: "'\(Self.shown(text))' has more than \(Self.maxPlaceholders) placeholders")
                }
            }
        }
        if !literal.isEmpty { segments.append(.literal(literal)) }
        self.segments = segments
    }

    /// What is between a placeholder's braces: a JSON Pointer (`/…`, or nothing for the whole
    /// element) or a parameter's name.
    private static func segment(_ inside: Substring, of text: String) throws(KindTemplate.Invalid) -> Segment {
        if inside.hasPrefix("/") || inside.isEmpty {
            do {
                return .pointer(try JSONPointer(String(inside)))
            } catch {
                throw Invalid(description: "'\(shown(text))': \(error.description)")
            }
        }
        guard inside.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else {
            throw Invalid(description: "'\(shown(text))' has a placeholder '{\(inside)}' that is neither a parameter name nor a JSON Pointer")
        }
        return .parameter(String(inside))
    }

    /// Whether the template is one placeholder and nothing else (its value lands whole).
    package var isSinglePlaceholder: Bool {
        if segments.count == 1, case .literal = segments[0] { return false }
        return segments.count == 1
    }

    package var parameterNames: [String] {
        segments.compactMap { if case .parameter(let name) = $0 { name } else { nil } }
    }

    package var hasPointers: Bool {
        segments.contains { if case .pointer = $0 { true } else { false } }
    }

    /// Fills the placeholders. `encode`: values are percent-encoded (the template lands in a URL)
    /// unless the template is a single placeholder, whose value is the whole URL.
    /// Throws a sentence naming the placeholder that cannot be filled.
    package func fill(
        parameters: [String: String], element: JSONValue?, encode: Bool
    ) throws(KindTemplate.Invalid) -> String {
        let encodeValues = encode && !isSinglePlaceholder
        var out = ""
        for segment in segments {
            switch segment {
            case .literal(let s):
                out += s
            case .parameter(let name):
                guard let value = parameters[name] else {
                    throw Invalid(description: "the parameter {\(name)} has no value")
                }
                out += encodeValues ? Self.percentEncode(value) : value
            case .pointer(let pointer):
                guard let element else { throw Invalid(description: "{\(pointer)} has nothing to point into") }
                guard let found = pointer.resolve(in: element) else {
                    throw Invalid(description: "{\(pointer)} names nothing")
                }
                guard let value = Self.scalarText(found) else {
                    throw Invalid(description: "{\(pointer)} is \(found.typeDescription), not a string or a number")
                }
                out += encodeValues ? Self.percentEncode(value) : value
            }
        }
        return out
    }

    /// A string, a number or a boolean as text; nil for anything else.
    static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): return s
        case .bool(let b): return b ? "true" : "false"
        case .number(let d):
            if let i = value.intValue { return String(i) }
            return d.isFinite ? String(d) : nil
        default: return nil
        }
    }

    /// Every byte but the unreserved ones (RFC 3986) and `@` becomes `%XX`: the built-ins' `{id}`
    /// encoding, so a declarative kind's URLs are the built-in's.
    static func percentEncode(_ value: String) -> String { URLTemplate.percentEncode(value) }

    /// A text of the file as an error quotes it: at most 60 characters.
    static func shown(_ text: String) -> String {
        text.count > 60 ? String(text.prefix(60)) + "…" : text
    }
}
