import RunnerKit

/// A JSON Pointer (RFC 6901): `""` is the whole document, `/a/0/b~1c` walks object members and
/// array indices (`~1` is `/`, `~0` is `~`). Bounded so a kind file cannot make one expensive.
public struct JSONPointer: Sendable, Equatable, CustomStringConvertible {
    /// The longest pointer accepted, in bytes.
    public static let maxLength = 1024
    /// The most reference tokens (steps) accepted.
    public static let maxDepth = 64

    /// The reference tokens, `~1` and `~0` already unescaped; empty for the whole document.
    public let tokens: [String]
    public let description: String

    /// Why a text is not an acceptable pointer.
    public struct Invalid: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Reads `text`.
    /// - Throws: `Invalid` when it neither is empty nor starts with `/`, is longer than `maxLength`
    ///   bytes or deeper than `maxDepth` steps, or has a `~` not followed by 0 or 1.
    public init(_ text: String) throws(JSONPointer.Invalid) {
        guard text.utf8.count <= Self.maxLength else {
            throw Invalid(description: "is a JSON Pointer longer than \(Self.maxLength) bytes")
        }
        description = text
        if text.isEmpty {
            tokens = []
            return
        }
        guard text.hasPrefix("/") else {
            throw Invalid(description: "'\(Self.shown(text))' is not a JSON Pointer: it must be empty or start with '/'")
        }
        let parts = text.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= Self.maxDepth else {
            throw Invalid(description: "is a JSON Pointer deeper than \(Self.maxDepth) steps")
        }
        var tokens: [String] = []
        tokens.reserveCapacity(parts.count)
        for part in parts {
            var token = ""
            var iterator = part.makeIterator()
            while let c = iterator.next() {
                if c == "~" {
                    switch iterator.next() {
                    case "0": token.append("~")
                    case "1": token.append("/")
                    default: throw Invalid(description: "'\(Self.shown(text))' is not a JSON Pointer: '~' must be followed by 0 or 1")
                    }
                } else {
                    token.append(c)
                }
            }
            tokens.append(token)
        }
        self.tokens = tokens
    }

    /// The value the pointer names in `document`, or nil when it names nothing.
    public func resolve(in document: JSONValue) -> JSONValue? {
        var current = document
        for token in tokens {
            switch current {
            case .object(let members):
                guard let member = members.first(where: { $0.key == token }) else { return nil }
                current = member.value
            case .array(let elements):
                guard let index = Self.index(token), index < elements.count else { return nil }
                current = elements[index]
            default:
                return nil
            }
        }
        return current
    }

    /// An array index as RFC 6901 writes it: digits, no leading zero.
    private static func index(_ token: String) -> Int? {
        guard !token.isEmpty, token.utf8.count <= 18, token.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        if token.utf8.count > 1 && token.utf8.first == 0x30 { return nil }
        return Int(token)
    }

    /// A text of the file as an error quotes it: at most 60 characters.
    static func shown(_ text: String) -> String {
        text.count > 60 ? String(text.prefix(60)) + "…" : text
    }
}
