/// Reads integers from a byte array; every accessor answers nil past the end instead of trapping,
/// so no input (truncated, hostile or random) can crash an image parser.
struct ImageByteReader {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    var count: Int { bytes.count }

    subscript(offset: Int) -> UInt8? {
        offset >= 0 && offset < bytes.count ? bytes[offset] : nil
    }

    /// Whether `count` bytes from `offset` are all there.
    func has(_ offset: Int, _ count: Int) -> Bool {
        offset >= 0 && count >= 0 && offset <= bytes.count && count <= bytes.count - offset
    }

    func slice(_ offset: Int, _ count: Int) -> [UInt8]? {
        guard has(offset, count) else { return nil }
        return Array(bytes[offset..<(offset + count)])
    }

    func starts(with signature: [UInt8]) -> Bool {
        bytes.starts(with: signature)
    }

    func matches(_ expected: [UInt8], at offset: Int) -> Bool {
        guard has(offset, expected.count) else { return false }
        for i in 0..<expected.count where bytes[offset + i] != expected[i] { return false }
        return true
    }

    func matches(_ expected: String, at offset: Int) -> Bool {
        matches(Array(expected.utf8), at: offset)
    }

    func uint16BE(_ offset: Int) -> UInt16? {
        guard has(offset, 2) else { return nil }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    func uint16LE(_ offset: Int) -> UInt16? {
        guard has(offset, 2) else { return nil }
        return UInt16(bytes[offset + 1]) << 8 | UInt16(bytes[offset])
    }

    func uint24LE(_ offset: Int) -> UInt32? {
        guard has(offset, 3) else { return nil }
        return UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset])
    }

    func uint32BE(_ offset: Int) -> UInt32? {
        guard has(offset, 4) else { return nil }
        return (offset..<offset + 4).reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[$1]) }
    }

    func uint32LE(_ offset: Int) -> UInt32? {
        guard has(offset, 4) else { return nil }
        return (offset..<offset + 4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32(bytes[$1]) }
    }

    func uint64BE(_ offset: Int) -> UInt64? {
        guard has(offset, 8) else { return nil }
        return (offset..<offset + 8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[$1]) }
    }

    func uint16(_ offset: Int, bigEndian: Bool) -> UInt16? {
        bigEndian ? uint16BE(offset) : uint16LE(offset)
    }

    func uint32(_ offset: Int, bigEndian: Bool) -> UInt32? {
        bigEndian ? uint32BE(offset) : uint32LE(offset)
    }
}
