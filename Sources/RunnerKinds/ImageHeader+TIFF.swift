// TIFF, and the TIFF structure inside EXIF: a byte-order mark ("II" little-endian, "MM"
// big-endian), 42, the offset of the first IFD; an IFD is a count and 12-byte entries (tag, type,
// count, value or offset of the values). BigTIFF (43) is the same with 8-byte offsets and counts:
// after 43 come 8 (the offset size) and 0, the first IFD's offset takes 8 bytes, an IFD's count
// 8 and its entries 20 (tag, type, count of 8, value or offset of 8).

extension ImageHeader {
    private enum Tag {
        static let width: UInt16 = 256
        static let height: UInt16 = 257
        static let stripOffsets: UInt16 = 273
        static let orientation: UInt16 = 274
        static let stripByteCounts: UInt16 = 279
        static let tileOffsets: UInt16 = 324
        static let tileByteCounts: UInt16 = 325
    }

    /// Where classic TIFF and BigTIFF differ: the sizes of offsets, counts and entries.
    struct Layout {
        /// Bytes of an offset, of a value count and of the values kept in the entry itself.
        var offsetSize: Int
        /// Bytes of an IFD's entry count.
        var countSize: Int
        var entrySize: Int

        static let classic = Layout(offsetSize: 4, countSize: 2, entrySize: 12)
        static let big = Layout(offsetSize: 8, countSize: 8, entrySize: 20)

        /// An offset or count of `size` bytes at `at`; nil past the bytes or beyond what an Int holds.
        func read(_ tiff: ImageByteReader, _ at: Int, size: Int, bigEndian: Bool) -> Int? {
            switch size {
            case 2: return tiff.uint16(at, bigEndian: bigEndian).map(Int.init)
            case 4: return tiff.uint32(at, bigEndian: bigEndian).map(Int.init)
            default:
                guard let high = tiff.uint32(bigEndian ? at : at + 4, bigEndian: bigEndian),
                    let low = tiff.uint32(bigEndian ? at + 4 : at, bigEndian: bigEndian), high < 1 << 20
                else {
                    return nil
                }
                return Int(high) << 32 | Int(low)
            }
        }
    }

    /// One IFD entry: where its values are, relative to the start of the TIFF structure.
    private struct Entry {
        var tag: UInt16
        var type: UInt16
        var count: Int
        var valuesOffset: Int

        /// Bytes per value of the SHORT (3), LONG (4) and BigTIFF's LONG8 (16) types; nil for the others.
        var valueSize: Int? {
            switch type {
            case 3: 2
            case 4: 4
            case 16: 8
            default: nil
            }
        }

        /// Bytes per value of any TIFF type (1 for an unknown one).
        var anySize: Int {
            switch type {
            case 3, 8: 2
            case 4, 9, 11, 13: 4
            case 5, 10, 12, 16, 17, 18: 8
            default: 1
            }
        }
    }

    /// The entries of the first IFD of the TIFF structure that `tiff` starts with; nil when the
    /// entries run past the bytes given.
    private static func firstIFD(_ tiff: ImageByteReader, bigEndian: Bool, layout: Layout = .classic) -> [Entry]? {
        let start = layout.offsetSize == 8 ? 8 : 4
        guard let ifd = layout.read(tiff, start, size: layout.offsetSize, bigEndian: bigEndian),
            let count = layout.read(tiff, ifd, size: layout.countSize, bigEndian: bigEndian), count < 1 << 20,
            tiff.has(ifd + layout.countSize, layout.entrySize * count)
        else {
            return nil
        }
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for index in 0..<count {
            let at = ifd + layout.countSize + layout.entrySize * index
            let valueCountSize = layout.offsetSize == 8 ? 8 : 4
            guard let tag = tiff.uint16(at, bigEndian: bigEndian), let type = tiff.uint16(at + 2, bigEndian: bigEndian),
                let valueCount = layout.read(tiff, at + 4, size: valueCountSize, bigEndian: bigEndian)
            else {
                return nil
            }
            let inline = at + 4 + valueCountSize
            var entry = Entry(tag: tag, type: type, count: valueCount, valuesOffset: inline)
            // Values that do not fit in the entry itself are elsewhere, at the offset it holds.
            if entry.anySize * entry.count > layout.offsetSize {
                guard let elsewhere = layout.read(tiff, inline, size: layout.offsetSize, bigEndian: bigEndian) else { return nil }
                entry.valuesOffset = elsewhere
            }
            entries.append(entry)
        }
        return entries
    }

    /// Value `index` of a SHORT or LONG entry; nil past the bytes or for another type.
    private static func value(_ tiff: ImageByteReader, _ entry: Entry, _ index: Int, bigEndian: Bool) -> Int? {
        guard let size = entry.valueSize else { return nil }
        return Layout.big.read(tiff, entry.valuesOffset + size * index, size: size, bigEndian: bigEndian)
    }

    static func parseTIFF(_ bytes: ImageByteReader, total: Int) throws(Error) -> ImageHeader {
        let bigEndian = bytes[0] == 0x4D
        let layout: Layout = bytes.uint16(2, bigEndian: bigEndian) == 43 ? .big : .classic
        if layout.offsetSize == 8 {
            guard let offsetSize = bytes.uint16(4, bigEndian: bigEndian) else { throw .truncated(.tiff) }
            guard offsetSize == 8 else { throw .malformed(.tiff, "a BigTIFF with offsets of \(offsetSize) bytes") }
        }
        guard let ifd = layout.read(bytes, layout.offsetSize == 8 ? 8 : 4, size: layout.offsetSize, bigEndian: bigEndian) else {
            throw .truncated(.tiff)
        }
        guard ifd >= (layout.offsetSize == 8 ? 16 : 8) else {
            throw .malformed(.tiff, "the first IFD is at offset \(ifd)")
        }
        guard let entries = firstIFD(bytes, bigEndian: bigEndian, layout: layout) else { throw .truncated(.tiff) }
        // The body must hold the values of every entry.
        for entry in entries where entry.valuesOffset + entry.anySize * entry.count > total {
            throw .cutShort(.tiff)
        }
        // The first value of an entry; nil when there is no such entry. A value past the bytes
        // given is past the first bytes of a longer body (the check above saw it within the body).
        func single(_ tag: UInt16) throws(Error) -> Int? {
            guard let entry = entries.first(where: { $0.tag == tag && $0.count >= 1 }) else { return nil }
            guard let value = value(bytes, entry, 0, bigEndian: bigEndian) else {
                if entry.valueSize == nil { return nil }
                throw .truncated(.tiff)
            }
            return value
        }
        guard let width = try single(Tag.width), let height = try single(Tag.height) else {
            throw .malformed(.tiff, "the first IFD has no image width or length")
        }
        var header = try checked(.tiff, width: width, height: height)
        if let orientation = try single(Tag.orientation), (1...8).contains(orientation) {
            header.orientation = orientation
        }
        for (offsetsTag, countsTag) in [(Tag.stripOffsets, Tag.stripByteCounts), (Tag.tileOffsets, Tag.tileByteCounts)] {
            guard let offsets = entries.first(where: { $0.tag == offsetsTag }),
                let counts = entries.first(where: { $0.tag == countsTag })
            else {
                continue
            }
            let n = min(offsets.count, counts.count)
            guard let offsetSize = offsets.valueSize, let countSize = counts.valueSize else {
                throw .malformed(.tiff, "strip or tile offsets of type \(offsets.type)")
            }
            guard bytes.has(offsets.valuesOffset, offsetSize * n), bytes.has(counts.valuesOffset, countSize * n) else {
                throw bytes.count < total ? .truncated(.tiff) : .malformed(.tiff, "the strip or tile table lies past the end")
            }
            for index in 0..<n {
                guard let start = value(bytes, offsets, index, bigEndian: bigEndian),
                    let length = value(bytes, counts, index, bigEndian: bigEndian)
                else {
                    throw .truncated(.tiff)
                }
                if start + length > total {
                    throw .cutShort(.tiff)
                }
            }
        }
        return header
    }

    /// The orientation (1-8) an EXIF TIFF structure of `count` bytes at `start` records in its
    /// first IFD; nil when it records none or cannot be read (a broken EXIF block does not make
    /// the image unusable, as decoders ignore it).
    static func exifOrientation(_ bytes: ImageByteReader, from start: Int, count: Int) -> Int? {
        guard count >= 8, let slice = bytes.slice(start, count) else { return nil }
        let tiff = ImageByteReader(slice)
        let bigEndian: Bool
        if tiff.starts(with: Signature.tiffBig) {
            bigEndian = true
        } else if tiff.starts(with: Signature.tiffLittle) {
            bigEndian = false
        } else {
            return nil
        }
        guard let entries = firstIFD(tiff, bigEndian: bigEndian),
            let entry = entries.first(where: { $0.tag == Tag.orientation && $0.count >= 1 }),
            let orientation = value(tiff, entry, 0, bigEndian: bigEndian), (1...8).contains(orientation)
        else {
            return nil
        }
        return orientation
    }
}
