/// A strict JSON parser (RFC 8259) over UTF-8 bytes, with errors that give line and column.
///
/// Written here rather than taken from Foundation so that object members keep their order,
/// errors point at the exact place, and a million-line batch parses without bridging.
///
/// Parsing is linear in the size of the input: duplicate member names are found with a hash set
/// once an object has more than a few members, so a hostile payload of a million members costs
/// no more than a million values. A caller that must be able to give up (a deadline) passes
/// `shouldStop`, which is asked every `stopCheckInterval` bytes or so of progress.
package struct JSONParser {
    /// Where and why parsing stopped.
    package struct Error: Swift.Error, Equatable, CustomStringConvertible {
        package var message: String
        package var line: Int
        package var column: Int
        /// True when parsing was abandoned because `shouldStop` said so, not because of the input.
        package var isStopped: Bool
        package var description: String { "\(message) at line \(line), column \(column)" }

        package init(message: String, line: Int, column: Int, isStopped: Bool = false) {
            self.message = message
            self.line = line
            self.column = column
            self.isStopped = isStopped
        }
    }

    /// Bytes of progress between two calls of `shouldStop`.
    package static let stopCheckInterval = 64 * 1024

    /// Parses one complete JSON document; anything but whitespace after it is an error.
    /// - Parameter shouldStop: asked every `stopCheckInterval` bytes or so, on the parsing thread;
    ///   when it answers true, parsing ends with an error whose `isStopped` is true.
    package static func parse(_ bytes: [UInt8], shouldStop: (() -> Bool)? = nil) throws(JSONParser.Error) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParser.Error) -> JSONValue in
            var parser = JSONParser(buffer, shouldStop: shouldStop)
            return try parser.parseDocument()
        }
    }

    /// Parses a slice that holds one JSON document; lines and columns count from its start.
    package static func parse(_ bytes: ArraySlice<UInt8>, shouldStop: (() -> Bool)? = nil) throws(JSONParser.Error) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParser.Error) -> JSONValue in
            var parser = JSONParser(buffer, shouldStop: shouldStop)
            return try parser.parseDocument()
        }
    }

    /// Parses bytes in memory that hold one JSON document.
    package static func parse(_ buffer: UnsafeBufferPointer<UInt8>, shouldStop: (() -> Bool)? = nil) throws(JSONParser.Error) -> JSONValue {
        var parser = JSONParser(buffer, shouldStop: shouldStop)
        return try parser.parseDocument()
    }

    /// Parses a string that holds one JSON document.
    package static func parse(_ text: String) throws(JSONParser.Error) -> JSONValue {
        try parse(Array(text.utf8))
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    private static let maxDepth = 512
    /// Objects up to this many members look for a duplicate name by scanning; larger ones hash.
    private static let scanLimit = 16
    private let shouldStop: (() -> Bool)?
    /// The index at which `shouldStop` is asked next.
    private var nextStopCheck: Int

    private init(_ bytes: UnsafeBufferPointer<UInt8>, shouldStop: (() -> Bool)?) {
        self.bytes = bytes
        self.shouldStop = shouldStop
        nextStopCheck = shouldStop == nil ? Int.max : 0
    }

    private mutating func parseDocument() throws(JSONParser.Error) -> JSONValue {
        skipWhitespace()
        guard index < bytes.count else { throw error("the document is empty") }
        let value = try parseValue()
        skipWhitespace()
        if index < bytes.count { throw error("unexpected text after the JSON value") }
        return value
    }

    // MARK: - Values

    private mutating func parseValue() throws(JSONParser.Error) -> JSONValue {
        if index >= nextStopCheck { try checkStop() }
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error("unexpected character \(describeByte(bytes[index]))")
        }
    }

    private mutating func parseObject() throws(JSONParser.Error) -> JSONValue {
        try enter()
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        var names = NameTable()  // filled once `members` outgrows `scanLimit`
        skipWhitespace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(members)
        }
        members.reserveCapacity(8)  // a job's line or a small payload: one allocation, not one per doubling
        while true {
            skipWhitespace()
            guard peek() == UInt8(ascii: "\"") else { throw error("expected a member name in double quotes") }
            let key = try parseString()
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw error("expected ':' after the member name") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            if members.count < Self.scanLimit {
                if members.contains(where: { $0.key == key }) { throw error("duplicate member \"\(key)\"") }
            } else {
                if names.isEmpty {
                    for i in members.indices { _ = names.insert(members[i].key, at: i, in: members) }
                }
                if !names.insert(key, at: members.count, in: members) { throw error("duplicate member \"\(key)\"") }
            }
            members.append((key, value))
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return .object(members)
            default: throw error("expected ',' or '}' in an object")
            }
        }
    }

    private mutating func parseArray() throws(JSONParser.Error) -> JSONValue {
        try enter()
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            switch peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return .array(elements)
            default: throw error("expected ',' or ']' in an array")
            }
        }
    }

    private mutating func enter() throws(JSONParser.Error) {
        depth += 1
        if depth > Self.maxDepth { throw error("nesting deeper than \(Self.maxDepth) levels") }
    }

    private mutating func parseString() throws(JSONParser.Error) -> String {
        index += 1  // opening quote
        let start = index
        var high: UInt8 = 0  // every byte or-ed together: below 0x80 means ASCII
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
                guard let string = String(validating: slice, as: UTF8.self) else {
                    throw error("a string is not valid UTF-8")
                }
                return string
            }
            high |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("a control character inside a string") }
            index += 1
        }
        var scalars = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: scalars, as: UTF8.self) else {
                    throw error("a string is not valid UTF-8")
                }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unexpected end of input in a string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                            bytes[index + 1] == UInt8(ascii: "u")
                        else { throw error("an unpaired UTF-16 surrogate in a string") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else {
                            throw error("an unpaired UTF-16 surrogate in a string")
                        }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw error("an unpaired UTF-16 surrogate in a string")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("an invalid \\u escape") }
                    scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    index -= 1
                    throw error("an invalid escape \\\(describeByte(escape, quoted: false)) in a string")
                }
            default:
                if byte < 0x20 { throw error("a control character inside a string") }
                scalars.append(byte)
                index += 1
            }
        }
        throw error("unexpected end of input in a string")
    }

    private mutating func parseHex4() throws(JSONParser.Error) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("unexpected end of input in a \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("an invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(JSONParser.Error) -> Double {
        let start = index
        let negative = peek() == UInt8(ascii: "-")
        if negative { index += 1 }
        guard let first = peek(), isDigit(first) else { throw error("a malformed number") }
        var whole = 0  // the integer part, while it has at most 15 digits (exact in a Double)
        if first == UInt8(ascii: "0") {
            index += 1
            if let next = peek(), isDigit(next) { throw error("a number with a leading zero") }
        } else {
            while let b = peek(), isDigit(b) {
                whole = whole &* 10 &+ Int(b &- UInt8(ascii: "0"))
                index += 1
            }
        }
        let digits = index - start - (negative ? 1 : 0)
        // Fast path: a plain integer of up to 15 digits, the usual number of a payload.
        if digits <= 15, peek() != UInt8(ascii: "."), peek() != UInt8(ascii: "e"), peek() != UInt8(ascii: "E") {
            return negative ? -Double(whole) : Double(whole)
        }
        if peek() == UInt8(ascii: ".") {
            index += 1
            guard let b = peek(), isDigit(b) else { throw error("a malformed number") }
            while let b = peek(), isDigit(b) { index += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let b = peek(), isDigit(b) else { throw error("a malformed number") }
            while let b = peek(), isDigit(b) { index += 1 }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw error("a number out of range") }
        return value
    }

    // MARK: - Helpers

    private mutating func checkStop() throws(JSONParser.Error) {
        nextStopCheck = index + Self.stopCheckInterval
        if let shouldStop, shouldStop() {
            var stopped = error("parsing was stopped before the end")
            stopped.isStopped = true
            throw stopped
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONParser.Error) {
        let count = literal.utf8CodeUnitCount
        let matches = literal.withUTF8Buffer { (expected: UnsafeBufferPointer<UInt8>) -> Bool in
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != expected[offset] { return false }
            return true
        }
        guard matches else { throw error("unexpected character \(describeByte(bytes[index]))") }
        index += count
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func describeByte(_ byte: UInt8, quoted: Bool = true) -> String {
        if byte >= 0x21 && byte < 0x7F {
            let c = String(UnicodeScalar(byte))
            return quoted ? "'\(c)'" : c
        }
        return "0x" + String(byte, radix: 16, uppercase: true)
    }

    private func error(_ message: String) -> JSONParser.Error {
        var line = 1
        var column = 1
        var i = 0
        let end = min(index, bytes.count)
        while i < end {
            if bytes[i] == 0x0A {
                line += 1
                column = 1
            } else if bytes[i] & 0xC0 != 0x80 {
                column += 1
            }
            i += 1
        }
        return Error(message: message, line: line, column: column)
    }

    // MARK: - Member names of a large object

    /// The names of one object's members, for finding a duplicate in constant time: an
    /// open-addressing table of member indexes, each slot holding 32 bits of the name's hash
    /// beside the index, so neither probing nor growing touches the names. The hash is Swift's
    /// `Hasher`, seeded per process, so a payload cannot be made of names that collide.
    private struct NameTable {
        /// 0: empty; else the hash's upper 32 bits, then the member index plus one.
        private var slots: [UInt64] = []
        private var count = 0

        var isEmpty: Bool { count == 0 }

        /// Adds member `index` of `members` (or the one about to be appended), named `name`;
        /// false when a member of that name is in the table already.
        mutating func insert(_ name: String, at index: Int, in members: [(key: String, value: JSONValue)]) -> Bool {
            if (count + 1) * 2 > slots.count { grow() }
            let tag = Self.tag(name)
            let mask = slots.count - 1
            var position = Int(tag) & mask
            while slots[position] != 0 {
                let slot = slots[position]
                if UInt32(truncatingIfNeeded: slot >> 32) == tag, members[Int(slot & 0xFFFF_FFFF) - 1].key == name {
                    return false
                }
                position = (position + 1) & mask
            }
            slots[position] = UInt64(tag) << 32 | UInt64(index + 1)
            count += 1
            return true
        }

        private mutating func grow() {
            let old = slots
            slots = [UInt64](repeating: 0, count: max(64, old.count * 2))
            let mask = slots.count - 1
            for slot in old where slot != 0 {
                var position = Int(UInt32(truncatingIfNeeded: slot >> 32)) & mask
                while slots[position] != 0 { position = (position + 1) & mask }
                slots[position] = slot
            }
        }

        private static func tag(_ name: String) -> UInt32 {
            var hasher = Hasher()
            var name = name
            name.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
            return UInt32(truncatingIfNeeded: UInt(bitPattern: hasher.finalize()) >> 16)
        }
    }
}
