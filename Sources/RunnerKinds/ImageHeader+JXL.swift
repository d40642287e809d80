// JPEG XL: a bare codestream (FF 0A) or an ISO-style container (a signature box, then `ftyp`,
// and the codestream in one `jxlc` box or in `jxlp` parts). The codestream's SizeHeader gives the
// size, bit-packed least significant bit first; the image metadata after it may give the orientation.

extension ImageHeader {
    /// Reads bit fields, least significant bit of each byte first; nil past the end.
    private struct BitReader {
        let bytes: [UInt8]
        var position = 0

        mutating func read(_ count: Int) -> Int? {
            var value = 0
            for shift in 0..<count {
                let byte = position >> 3
                guard byte < bytes.count else { return nil }
                value |= Int((bytes[byte] >> UInt8(position & 7)) & 1) << shift
                position += 1
            }
            return value
        }
    }

    /// A bare codestream at `start` (its FF 0A). With `total` (the whole body's length), the
    /// codestream must also end within the body: its frames' tables of contents say where
    /// (`jxlCodestreamEnd`); a body that ends before is `cutShort`. Bytes after the end are
    /// passed over, as decoders pass them over. Without `total`, only the size is read.
    static func parseJXLCodestream(_ bytes: ImageByteReader, from start: Int, total: Int?) throws(Error) -> ImageHeader {
        guard let head = bytes.slice(start + 2, min(64, max(0, bytes.count - start - 2))) else { throw .truncated(.jxl) }
        let sized = try parseJXLSizeHeader(head)
        guard let total else { return sized }
        let end: Int
        var header = sized
        do {
            (end, header.frames) = try jxlCodestreamEnd(bytes.bytes, from: start)
        } catch {
            switch error {
            case .ended:
                // Past the bytes given: the body is cut, or (given only its first bytes) the
                // rest must be read.
                throw .cutShort(.jxl)
            case .unknown:
                // An ICC profile, a permuted TOC or a preview frame: the end is not followed.
                return header
            }
        }
        if end > total { throw .cutShort(.jxl) }
        return header
    }

    /// The SizeHeader and the orientation of a codestream whose first bytes (after FF 0A) are `head`.
    private static func parseJXLSizeHeader(_ head: [UInt8]) throws(Error) -> ImageHeader {
        var bits = BitReader(bytes: head)
        // U32(Bits(9), Bits(13), Bits(18), Bits(30)): a 2-bit selector, then that many bits.
        func u32(_ bits: inout BitReader) -> Int? {
            guard let selector = bits.read(2) else { return nil }
            return bits.read([9, 13, 18, 30][selector])
        }
        guard let small = bits.read(1) else { throw .truncated(.jxl) }
        let height: Int
        if small == 1 {
            guard let div8 = bits.read(5) else { throw .truncated(.jxl) }
            height = (div8 + 1) * 8
        } else {
            guard let minus1 = u32(&bits) else { throw .truncated(.jxl) }
            height = minus1 + 1
        }
        guard let ratio = bits.read(3) else { throw .truncated(.jxl) }
        let width: Int
        switch ratio {
        case 0:
            if small == 1 {
                guard let div8 = bits.read(5) else { throw .truncated(.jxl) }
                width = (div8 + 1) * 8
            } else {
                guard let minus1 = u32(&bits) else { throw .truncated(.jxl) }
                width = minus1 + 1
            }
        default:
            let (numerator, denominator) = [(1, 1), (12, 10), (4, 3), (3, 2), (16, 9), (5, 4), (2, 1)][ratio - 1]
            width = height * numerator / denominator
        }
        var header = try checked(.jxl, width: width, height: height)
        // ImageMetadata: all_default (1); unless set, extra_fields (1), and with it orientation - 1 (3).
        guard let allDefault = bits.read(1) else { throw .truncated(.jxl) }
        if allDefault == 0 {
            guard let extraFields = bits.read(1) else { throw .truncated(.jxl) }
            if extraFields == 1 {
                guard let orientation = bits.read(3) else { throw .truncated(.jxl) }
                header.orientation = orientation + 1
            }
        }
        return header
    }

    static func parseJXLContainer(_ bytes: ImageByteReader, total: Int) throws(Error) -> ImageHeader {
        var cut = false
        let top = try boxes(bytes, from: 12, to: total, format: .jxl, topLevel: true, cut: &cut)
        guard top.first?.is("ftyp") == true else {
            throw .malformed(.jxl, "the signature box is not followed by ftyp")
        }
        // The codestream's first bytes, from jxlc or from the jxlp parts (each after a 4-byte index).
        var head: [UInt8] = []
        for box in top where head.count < 64 {
            let start = box.is("jxlc") ? box.payload : box.is("jxlp") ? box.payload + 4 : nil
            // A part cut off at the end gives what arrived of it.
            guard let start else { continue }
            let wanted = min(64 - head.count, min(box.end, bytes.count) - start)
            guard wanted > 0, let part = bytes.slice(start, wanted) else { continue }
            head += part
        }
        guard head.count >= 2 else {
            // The codestream may lie past the bytes given (or past the end of a body cut short).
            throw cut ? .cutShort(.jxl) : bytes.count < total ? .truncated(.jxl) : .malformed(.jxl, "the container holds no codestream")
        }
        guard head.starts(with: Signature.jxlCodestream) else {
            throw .malformed(.jxl, "the codestream does not start with FF 0A")
        }
        let header: ImageHeader
        do {
            header = try parseJXLSizeHeader(Array(head.dropFirst(2)))
        } catch .truncated where cut {
            throw .cutShort(.jxl)
        }
        if cut {
            throw .cutShort(.jxl)
        }
        return header
    }
}
