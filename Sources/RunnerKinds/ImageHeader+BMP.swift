// BMP, and the icon formats built on it: ICO and CUR hold a directory of images, each a BMP
// without its file header or a whole PNG; the largest one is the image.

extension ImageHeader {
    static func parseBMP(_ bytes: ImageByteReader) throws(Error) -> ImageHeader {
        // "BM", file size (4), reserved (4), pixel offset (4), then the DIB header, whose own size
        // (4) says which: BITMAPCOREHEADER (12) has 16-bit sizes, the later ones signed 32-bit.
        guard let headerSize = bytes.uint32LE(14) else { throw .truncated(.bmp) }
        switch headerSize {
        case 12:
            guard let width = bytes.uint16LE(18), let height = bytes.uint16LE(20), let planes = bytes.uint16LE(22),
                let bits = bytes.uint16LE(24)
            else {
                throw .truncated(.bmp)
            }
            try checkPlanes(planes, bits: bits, allowed: [1, 4, 8, 24])
            return try checked(.bmp, width: Int(width), height: Int(height))
        case 16...1024:
            guard let rawWidth = bytes.uint32LE(18), let rawHeight = bytes.uint32LE(22), let planes = bytes.uint16LE(26),
                let bits = bytes.uint16LE(28)
            else {
                throw .truncated(.bmp)
            }
            // BITMAPINFOHEADER and later: the compression (a bit count of 0 is for a JPEG or PNG
            // inside, compression 4 or 5) and the palette's size.
            var (compression, colours): (UInt32, UInt32) = (0, 0)
            if headerSize >= 40 {
                guard let given = bytes.uint32LE(30), let used = bytes.uint32LE(46) else { throw .truncated(.bmp) }
                (compression, colours) = (given, used)
            }
            try checkPlanes(planes, bits: bits, allowed: [4, 5].contains(compression) ? [0] + Self.bmpBitCounts : Self.bmpBitCounts)
            if (1...8).contains(bits), colours > 1 << bits {
                throw .malformed(.bmp, "a palette of \(colours) colours, more than \(bits) bits per pixel can index (\(1 << bits))")
            }
            let width = Int(Int32(bitPattern: rawWidth))
            // A negative height means rows run top-down; the size is its magnitude.
            let height = Int(Int32(bitPattern: rawHeight)).magnitude
            guard width > 0 else {
                throw .malformed(.bmp, "width \(width)")
            }
            return try checked(.bmp, width: width, height: Int(height))
        default:
            throw .malformed(.bmp, "unknown DIB header size \(headerSize)")
        }
    }

    /// Bits per pixel a BMP decoder takes (Windows CE's 2 and 64-bit BMPs included).
    private static let bmpBitCounts: [UInt16] = [1, 2, 4, 8, 16, 24, 32, 64]

    /// Decoders refuse a BMP with other than one plane or an impossible bit count.
    private static func checkPlanes(_ planes: UInt16, bits: UInt16, allowed: [UInt16]) throws(Error) {
        guard planes == 1 else { throw .malformed(.bmp, "\(planes) colour planes (a BMP has 1)") }
        guard allowed.contains(bits) else {
            throw .malformed(.bmp, "\(bits) bits per pixel (a BMP has \(allowed.map(String.init).joined(separator: ", ")))")
        }
    }

    static func parseIcon(_ bytes: ImageByteReader, total: Int) throws(Error) -> ImageHeader {
        // Reserved (2) = 0, type (2): 1 icon, 2 cursor, count (2), then 16-byte entries: width (1),
        // height (1) (0 meaning 256), colours, reserved, planes or hotspot (4), size (4), offset (4).
        let format: ImageFormat = bytes[2] == 2 ? .cur : .ico
        guard let count = bytes.uint16LE(4) else { throw .truncated(format) }
        guard count > 0 else {
            throw .malformed(format, "the directory lists no images")
        }
        var best: ImageHeader?
        for index in 0..<Int(count) {
            let entry = 6 + 16 * index
            guard let width = bytes[entry], let height = bytes[entry + 1], let reserved = bytes[entry + 3],
                let size = bytes.uint32LE(entry + 8), let offset = bytes.uint32LE(entry + 12)
            else {
                throw .truncated(format)
            }
            guard reserved == 0 || reserved == 0xFF else {
                throw .malformed(format, "entry \(index + 1) has reserved byte \(hex(reserved))")
            }
            guard size > 0, Int(offset) >= 6 + 16 * Int(count) else {
                throw .malformed(format, "entry \(index + 1) points at \(size) bytes at offset \(offset)")
            }
            guard Int(offset) + Int(size) <= total else {
                throw .cutShort(format)
            }
            // A PNG inside is measured by its own header. A BMP inside by the directory (0 meaning
            // 256), but never larger than its DIB header says (whose height counts the colour and
            // the mask rows, twice the image's): what ImageMagick reports for an entry that
            // disagrees with its image.
            var image = ImageHeader(
                format: format, width: width == 0 ? 256 : Int(width), height: height == 0 ? 256 : Int(height))
            if bytes.matches(Signature.png, at: Int(offset)) {
                guard let pngWidth = bytes.uint32BE(Int(offset) + 16), let pngHeight = bytes.uint32BE(Int(offset) + 20) else {
                    throw .truncated(format)
                }
                image = try checked(format, width: Int(pngWidth), height: Int(pngHeight))
            } else {
                // The BMP's own header, past the bytes given: ask for more.
                guard let dibSize = bytes.uint32LE(Int(offset)), let rawWidth = bytes.uint32LE(Int(offset) + 4),
                    let rawHeight = bytes.uint32LE(Int(offset) + 8)
                else {
                    throw .truncated(format)
                }
                let dibWidth = Int(Int32(bitPattern: rawWidth))
                let dibHeight = Int(Int32(bitPattern: rawHeight).magnitude) / 2
                if (40...1024).contains(dibSize), dibWidth > 0, dibHeight > 0 {
                    image = try checked(format, width: min(image.width, dibWidth), height: min(image.height, dibHeight))
                }
            }
            if best.map({ image.width * image.height > $0.width * $0.height }) ?? true {
                best = image
            }
        }
        return best ?? ImageHeader(format: format, width: 1, height: 1)
    }
}
