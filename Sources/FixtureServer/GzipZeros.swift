/// A gzip stream of N zero bytes, compressed as far as deflate allows (about 1:1000): the body
/// of a "gzip bomb", made on the fly so no large file is kept in the repository.
///
/// One dynamic-Huffman deflate block (RFC 1951 section 3.2.7) whose codes are chosen so that the
/// bulk of the stream is zero bits: literal/length code 285 (a match of 258 bytes) and distance
/// code 0 (distance 1) both get the one-bit code `0`. The stream is one literal zero byte, then
/// matches of 258 bytes at distance 1, then literal zeros for the rest, then end-of-block; the
/// gzip trailer's CRC-32 of the zeros is computed without touching N bytes.
enum GzipZeros {
    /// The gzip member (RFC 1952) that inflates to `count` zero bytes.
    static func compress(count: Int) -> [UInt8] {
        var out = BitWriter()
        // Header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
        out.bytes += [0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xFF]
        writeBlockHeader(&out)
        let matches = count > 0 ? (count - 1) / 258 : 0
        let literals = count > 0 ? count - matches * 258 : 0
        // Literal 0 first, so that the matches at distance 1 copy zeros.
        if literals > 0 {
            out.write(code: 0b10, length: 2)
        }
        out.writeZeroBits(matches * 2)  // code 285 ("0") + distance code 0 ("0")
        for _ in 1..<max(literals, 1) {
            out.write(code: 0b10, length: 2)
        }
        out.write(code: 0b11, length: 2)  // end of block
        out.alignToByte()
        out.appendLittleEndian(crc32OfZeros(count))
        out.appendLittleEndian(UInt32(truncatingIfNeeded: count))
        return out.bytes
    }

    /// BFINAL, BTYPE=2 and the code tables: literal/length lengths 0→2, 256→2, 285→1;
    /// distance lengths 0→1, 1→1; code-length code lengths 18→1, 1→2, 2→2.
    private static func writeBlockHeader(_ out: inout BitWriter) {
        out.write(bits: 1, count: 1)  // BFINAL
        out.write(bits: 2, count: 2)  // BTYPE: dynamic Huffman
        out.write(bits: 286 - 257, count: 5)  // HLIT
        out.write(bits: 2 - 1, count: 5)  // HDIST
        let order = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1]
        out.write(bits: UInt32(order.count - 4), count: 4)  // HCLEN
        let codeLengthLengths: [Int: UInt32] = [18: 1, 1: 2, 2: 2]
        for symbol in order {
            out.write(bits: codeLengthLengths[symbol] ?? 0, count: 3)
        }
        // Canonical code-length codes: 18 → 0, 1 → 10, 2 → 11.
        func length(_ value: Int) {
            switch value {
            case 1: out.write(code: 0b10, length: 2)
            case 2: out.write(code: 0b11, length: 2)
            default: fatalError("unused code length \(value)")
            }
        }
        func zeros(_ count: Int) {
            var left = count
            while left > 0 {
                let run = min(left, 138)
                precondition(run >= 11, "runs of fewer than 11 zeros are not needed here")
                out.write(code: 0, length: 1)  // symbol 18
                out.write(bits: UInt32(run - 11), count: 7)
                left -= run
            }
        }
        length(2)  // literal 0
        zeros(255)  // literals 1...255
        length(2)  // 256, end of block
        zeros(28)  // 257...284
        length(1)  // 285, length 258
        length(1)  // distance code 0
        length(1)  // distance code 1 (unused; keeps the distance code complete)
    }

    // MARK: - CRC-32 of zeros

    private static let polynomial: UInt32 = 0xEDB8_8320

    /// CRC-32 (as gzip uses it) of `count` zero bytes: feeding a zero byte multiplies the register
    /// by x^8 modulo the polynomial, so the register is the initial one times x^(8·count).
    static func crc32OfZeros(_ count: Int) -> UInt32 {
        ~multiply(powerOfX(UInt64(count) * 8), 0xFFFF_FFFF)
    }

    /// a·b modulo the CRC polynomial, in the reflected bit order CRC-32 uses.
    private static func multiply(_ a: UInt32, _ b: UInt32) -> UInt32 {
        var b = b
        var product: UInt32 = 0
        var mask: UInt32 = 1 << 31
        while mask != 0 {
            if a & mask != 0 {
                product ^= b
            }
            mask >>= 1
            b = b & 1 != 0 ? (b >> 1) ^ polynomial : b >> 1
        }
        return product
    }

    /// x^n modulo the polynomial, by squaring.
    private static func powerOfX(_ n: UInt64) -> UInt32 {
        var result: UInt32 = 1 << 31  // x^0
        var square: UInt32 = 1 << 30  // x^1
        var n = n
        while n > 0 {
            if n & 1 != 0 {
                result = multiply(result, square)
            }
            square = multiply(square, square)
            n >>= 1
        }
        return result
    }

    /// The bitwise CRC-32 of arbitrary bytes, for checking `crc32OfZeros`.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 {
                crc = crc & 1 != 0 ? (crc >> 1) ^ polynomial : crc >> 1
            }
        }
        return ~crc
    }
}

/// Bits packed least significant first, as deflate wants them.
private struct BitWriter {
    var bytes: [UInt8] = []
    private var pending: UInt32 = 0
    private var pendingCount = 0

    /// Writes `count` bits of a number, least significant first (header fields, extra bits).
    mutating func write(bits: UInt32, count: Int) {
        for index in 0..<count {
            push((bits >> UInt32(index)) & 1)
        }
    }

    /// Writes a Huffman code of `length` bits, most significant first.
    mutating func write(code: UInt32, length: Int) {
        for index in stride(from: length - 1, through: 0, by: -1) {
            push((code >> UInt32(index)) & 1)
        }
    }

    /// Writes `count` zero bits without visiting each one.
    mutating func writeZeroBits(_ count: Int) {
        var left = count
        while left > 0 && pendingCount != 0 {
            push(0)
            left -= 1
        }
        bytes.append(contentsOf: repeatElement(0, count: left / 8))
        for _ in 0..<(left % 8) {
            push(0)
        }
    }

    mutating func alignToByte() {
        if pendingCount > 0 {
            bytes.append(UInt8(pending))
            pending = 0
            pendingCount = 0
        }
    }

    mutating func appendLittleEndian(_ value: UInt32) {
        for shift in stride(from: 0, to: 32, by: 8) {
            bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift)))
        }
    }

    private mutating func push(_ bit: UInt32) {
        pending |= bit << UInt32(pendingCount)
        pendingCount += 1
        if pendingCount == 8 {
            bytes.append(UInt8(pending))
            pending = 0
            pendingCount = 0
        }
    }
}
