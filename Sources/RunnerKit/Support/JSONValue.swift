/// A JSON value that keeps the order of object members, so records and normalized payloads
/// are written in a stable, readable order.
public enum JSONValue: Sendable, Equatable {
    /// `null`; also what `init(_:)` makes of a nil string.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number, held as a `Double`: a whole number is exact up to 2^53 (`intValue`).
    case number(Double)
    /// A string, its escapes decoded.
    case string(String)
    /// An array; its elements in order.
    case array([JSONValue])
    /// An object's members in the order written; a parsed document never holds a name twice.
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.number(a), .number(b)): return a == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// The member named `key` of an object, or nil.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first(where: { $0.key == key })?.value
    }

    /// The string, when this is one; else nil.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The elements, when this is an array; else nil.
    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// The members in order, when this is an object; else nil.
    public var objectValue: [(key: String, value: JSONValue)]? {
        if case .object(let o) = self { return o }
        return nil
    }

    /// The boolean, or nil for any other value.
    public var boolValue: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The number, whole or not, or nil for any other value.
    public var doubleValue: Double? {
        if case .number(let d) = self { return d }
        return nil
    }

    /// A number that is a whole number (within the range JSON integers can be exact in a Double).
    public var intValue: Int? {
        guard case .number(let d) = self, d.rounded() == d, abs(d) <= 9_007_199_254_740_992 else { return nil }
        return Int(d)
    }

    /// The JSON type name, for error messages: "a string", "a number", ….
    public var typeDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// The number `int` (exact up to 2^53).
    public init(_ int: Int) { self = .number(Double(int)) }
    /// The string, or `null` when it is nil.
    public init(_ string: String?) { self = string.map { .string($0) } ?? .null }
}

extension JSONValue {
    /// The value with bounds a reader can rely on: every string (and member name) cut to
    /// `stringBytes` of UTF-8 at a character's end, saying how much was cut; arrays and objects
    /// cut to their first `items`; what is nested deeper than `depth` replaced by null.
    package func capped(stringBytes: Int = 4096, items: Int = 1000, depth: Int = 32) -> JSONValue {
        switch self {
        case .null, .bool, .number: return self
        case .string(let text): return .string(Self.cut(text, toBytes: stringBytes))
        case .array(let elements):
            guard depth > 0 else { return .null }
            return .array(elements.prefix(items).map { $0.capped(stringBytes: stringBytes, items: items, depth: depth - 1) })
        case .object(let members):
            guard depth > 0 else { return .null }
            return .object(members.prefix(items).map {
                (Self.cut($0.key, toBytes: stringBytes), $0.value.capped(stringBytes: stringBytes, items: items, depth: depth - 1))
            })
        }
    }

    /// `text` cut to at most `bytes` of UTF-8 at a character's end, ending in how much was cut.
    package static func cut(_ text: String, toBytes bytes: Int) -> String {
        let total = text.utf8.count
        guard total > bytes else { return text }
        var kept = ""
        var count = 0
        let room = max(0, bytes - 40)
        for character in text {
            let size = character.utf8.count
            if count + size > room { break }
            kept.append(character)
            count += size
        }
        return kept + "… (\(total - count) more bytes)"
    }
}
