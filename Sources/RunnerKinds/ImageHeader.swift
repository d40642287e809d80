// The image sniffer. A payload's own first bytes decide its format and size, never the
// Content-Type it was served with: a captive portal answers 200 with `image/png` and an HTML page.
//
// Every read goes through `ByteReader`, which answers nil past the end instead of trapping, so no
// input (truncated, hostile or random) can crash the parser.

/// An image format the runner accepts.
public enum ImageFormat: String, Sendable, CaseIterable {
    case png, jpeg, gif, webp, bmp

    /// The file extension a payload of this format is written with.
    public var fileExtension: String {
        switch self {
        case .png: "png"
        case .jpeg: "jpg"
        case .gif: "gif"
        case .webp: "webp"
        case .bmp: "bmp"
        }
    }

    /// The name people write: "PNG", "JPEG", "GIF", "WebP", "BMP".
    public var displayName: String {
        switch self {
        case .png: "PNG"
        case .jpeg: "JPEG"
        case .gif: "GIF"
        case .webp: "WebP"
        case .bmp: "BMP"
        }
    }
}

/// The format and pixel size of an image, read from the first bytes of its payload.
public struct ImageHeader: Equatable, Sendable {
    public var format: ImageFormat
    public var width: Int
    public var height: Int

    public init(format: ImageFormat, width: Int, height: Int) {
        self.format = format
        self.width = width
        self.height = height
    }

    /// The largest width or height accepted; anything above is taken for a corrupt header.
    public static let maximumDimension = 1 << 20

    // MARK: - Errors

    /// Why a payload is not a usable image.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The bytes are not an image of a supported format; the string names what arrived
        /// (see ``ImageHeader/describe(_:)``).
        case notAnImage(String)
        /// The bytes start like this format but end before its size is known.
        case truncated(ImageFormat)
        /// The bytes start like this format but its header is inconsistent; the string says how.
        case malformed(ImageFormat, String)

        public var description: String {
            switch self {
            case .notAnImage(let what):
                "expected an image, but \(what) arrived"
            case .truncated(let format):
                "the \(format.displayName) header is truncated"
            case .malformed(let format, let detail):
                "the \(format.displayName) header is malformed: \(detail)"
            }
        }
    }

    // MARK: - Parsing

    /// Parses format and size from the first bytes of a payload (callers pass up to the first 512 KiB).
    public static func parse(_ prefix: [UInt8]) throws(ImageHeader.Error) -> ImageHeader {
        let bytes = ByteReader(prefix)
        if prefix.isEmpty {
            throw .notAnImage(describe(prefix))
        }
        if bytes.starts(with: Signature.png) {
            return try parsePNG(bytes)
        }
        if bytes.starts(with: Signature.jpeg) {
            return try parseJPEG(bytes)
        }
        if bytes.starts(with: Signature.gif) {
            return try parseGIF(bytes)
        }
        if bytes.starts(with: Signature.riff) {
            if prefix.count < 12 {
                throw .truncated(.webp)
            }
            if bytes.matches(Signature.webp, at: 8) {
                return try parseWebP(bytes)
            }
            throw .notAnImage(describe(prefix))
        }
        if bytes.starts(with: Signature.bmp) {
            return try parseBMP(bytes)
        }
        // A body shorter than a signature that it begins: the start of an image, cut off.
        for (signature, format) in Signature.all where prefix.count < signature.count {
            if signature.starts(with: prefix) {
                throw .truncated(format)
            }
        }
        throw .notAnImage(describe(prefix))
    }

    private static func parsePNG(_ bytes: ByteReader) throws(Error) -> ImageHeader {
        // Signature (8), then the IHDR chunk: length (4), "IHDR", width (4), height (4), all big-endian.
        guard let type = bytes.slice(12, 4), let width = bytes.uint32BE(16), let height = bytes.uint32BE(20)
        else {
            throw .truncated(.png)
        }
        guard type == Array("IHDR".utf8) else {
            throw .malformed(.png, "the first chunk is not IHDR")
        }
        return try checked(.png, width: Int(width), height: Int(height))
    }

    private static func parseJPEG(_ bytes: ByteReader) throws(Error) -> ImageHeader {
        // Walk the marker segments after SOI until a frame header (SOFn) gives the size.
        var offset = 2
        while true {
            guard let lead = bytes[offset] else { throw .truncated(.jpeg) }
            guard lead == 0xFF else {
                throw .malformed(.jpeg, "expected a marker at offset \(offset), found \(hex(lead))")
            }
            // Any number of 0xFF fill bytes may precede a marker.
            offset += 1
            while bytes[offset] == 0xFF {
                offset += 1
            }
            guard let marker = bytes[offset] else { throw .truncated(.jpeg) }
            offset += 1
            switch marker {
            case 0x01, 0xD0...0xD8:
                continue  // TEM, RSTn, SOI: standalone markers without a length
            case 0x00:
                throw .malformed(.jpeg, "a stuffed zero byte outside entropy-coded data")
            case 0xD9:
                throw .malformed(.jpeg, "the image ends before its frame header")
            case 0xDA:
                throw .malformed(.jpeg, "a scan starts before the frame header")
            default:
                break
            }
            guard let length = bytes.uint16BE(offset) else { throw .truncated(.jpeg) }
            guard length >= 2 else {
                throw .malformed(.jpeg, "segment \(hex(marker)) has length \(length)")
            }
            if isStartOfFrame(marker) {
                // Length (2), precision (1), height (2), width (2).
                guard length >= 7 else {
                    throw .malformed(.jpeg, "frame header of length \(length)")
                }
                guard let height = bytes.uint16BE(offset + 3), let width = bytes.uint16BE(offset + 5) else {
                    throw .truncated(.jpeg)
                }
                return try checked(.jpeg, width: Int(width), height: Int(height))
            }
            offset += Int(length)
        }
    }

    /// SOF0-3, 5-7, 9-11, 13-15; not DHT (C4), JPG (C8) or DAC (CC), which share the range.
    private static func isStartOfFrame(_ marker: UInt8) -> Bool {
        switch marker {
        case 0xC0...0xCF: marker != 0xC4 && marker != 0xC8 && marker != 0xCC
        default: false
        }
    }

    private static func parseGIF(_ bytes: ByteReader) throws(Error) -> ImageHeader {
        // "GIF87a" or "GIF89a", then the logical screen width and height, little-endian.
        guard let version = bytes.slice(3, 3) else { throw .truncated(.gif) }
        guard version == Array("87a".utf8) || version == Array("89a".utf8) else {
            throw .malformed(.gif, "unknown version \"\(printable(version))\"")
        }
        guard let width = bytes.uint16LE(6), let height = bytes.uint16LE(8) else {
            throw .truncated(.gif)
        }
        return try checked(.gif, width: Int(width), height: Int(height))
    }

    private static func parseWebP(_ bytes: ByteReader) throws(Error) -> ImageHeader {
        // "RIFF", size, "WEBP", then the first chunk: fourcc (4), size (4), data from offset 20.
        guard let fourcc = bytes.slice(12, 4) else { throw .truncated(.webp) }
        switch fourcc {
        case Array("VP8 ".utf8):
            // Lossy: a 3-byte frame tag, the start code 9D 01 2A, then 14-bit width and height.
            guard let tag = bytes[20], let code = bytes.slice(23, 3),
                let width = bytes.uint16LE(26), let height = bytes.uint16LE(28)
            else {
                throw .truncated(.webp)
            }
            guard tag & 1 == 0 else {
                throw .malformed(.webp, "the VP8 frame is not a key frame")
            }
            guard code == [0x9D, 0x01, 0x2A] else {
                throw .malformed(.webp, "the VP8 start code is missing")
            }
            return try checked(.webp, width: Int(width & 0x3FFF), height: Int(height & 0x3FFF))
        case Array("VP8L".utf8):
            // Lossless: the signature byte 0x2F, then width - 1 and height - 1 in 14 bits each.
            guard let signature = bytes[20], let bits = bytes.uint32LE(21) else {
                throw .truncated(.webp)
            }
            guard signature == 0x2F else {
                throw .malformed(.webp, "the VP8L signature byte is \(hex(signature))")
            }
            let width = Int(bits & 0x3FFF) + 1
            let height = Int((bits >> 14) & 0x3FFF) + 1
            return try checked(.webp, width: width, height: height)
        case Array("VP8X".utf8):
            // Extended: flags (1), reserved (3), canvas width - 1 and height - 1 in 24 bits each.
            guard let width = bytes.uint24LE(24), let height = bytes.uint24LE(27) else {
                throw .truncated(.webp)
            }
            return try checked(.webp, width: Int(width) + 1, height: Int(height) + 1)
        default:
            throw .malformed(.webp, "unknown first chunk \"\(printable(fourcc))\"")
        }
    }

    private static func parseBMP(_ bytes: ByteReader) throws(Error) -> ImageHeader {
        // "BM", file size (4), reserved (4), pixel offset (4), then the DIB header, whose own size
        // (4) says which: BITMAPCOREHEADER (12) has 16-bit sizes, the later ones signed 32-bit.
        guard let headerSize = bytes.uint32LE(14) else { throw .truncated(.bmp) }
        switch headerSize {
        case 12:
            guard let width = bytes.uint16LE(18), let height = bytes.uint16LE(20) else {
                throw .truncated(.bmp)
            }
            return try checked(.bmp, width: Int(width), height: Int(height))
        case 16...1024:
            guard let rawWidth = bytes.uint32LE(18), let rawHeight = bytes.uint32LE(22) else {
                throw .truncated(.bmp)
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

    private static func checked(_ format: ImageFormat, width: Int, height: Int) throws(Error) -> ImageHeader {
        guard width > 0, height > 0 else {
            throw .malformed(format, "size \(width)x\(height) is empty")
        }
        guard width <= maximumDimension, height <= maximumDimension else {
            throw .malformed(format, "size \(width)x\(height) is implausible")
        }
        return ImageHeader(format: format, width: width, height: height)
    }

    // MARK: - Completeness

    /// Whether a payload of `totalLength` bytes ending in `suffix` (its last <= 64 bytes) looks complete
    /// for that format: PNG ends with the IEND chunk, JPEG with FFD9 (zero padding after it allowed),
    /// GIF with 0x3B, WebP's RIFF size + 8 == totalLength, BMP's bfSize == totalLength when nonzero.
    ///
    /// WebP and BMP record their length at the start of the file, so pass the payload's first bytes
    /// as `prefix` (16 are enough). Without them, and unless `suffix` is the whole payload, the length
    /// cannot be checked and those two formats count as complete.
    public static func isComplete(
        _ format: ImageFormat,
        prefix: [UInt8] = [],
        suffix: [UInt8],
        totalLength: Int
    ) -> Bool {
        // The start of the file, from `prefix` or from a suffix that holds all of it.
        let header: ByteReader? =
            if !prefix.isEmpty { ByteReader(prefix) } else if suffix.count == totalLength { ByteReader(suffix) } else { nil }
        switch format {
        case .png:
            let iend: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
            return suffix.count >= iend.count && Array(suffix.suffix(iend.count)) == iend
        case .jpeg:
            guard let last = suffix.lastIndex(where: { $0 != 0 }), last >= 1 else { return false }
            return suffix[last - 1] == 0xFF && suffix[last] == 0xD9
        case .gif:
            return suffix.last == 0x3B
        case .webp:
            guard let header else { return true }
            guard header.starts(with: Signature.riff), let size = header.uint32LE(4) else { return false }
            return Int(size) + 8 == totalLength
        case .bmp:
            guard let header else { return true }
            guard header.starts(with: Signature.bmp), let size = header.uint32LE(2) else { return false }
            return size == 0 || Int(size) == totalLength
        }
    }

    // MARK: - Describing what arrived

    /// A short phrase naming what arrived, for error messages: "an HTML page", "a JSON document",
    /// "plain text", "an empty body", "23 bytes of unknown data starting 3c 21 44 4f".
    public static func describe(_ prefix: [UInt8]) -> String {
        if prefix.isEmpty {
            return "an empty body"
        }
        let bytes = ByteReader(prefix)
        for (signature, phrase) in Signature.known where bytes.starts(with: signature) {
            return phrase
        }
        if bytes.starts(with: Signature.riff), let kind = bytes.slice(8, 4) {
            return "a RIFF file of type \"\(printable(kind))\""
        }
        if bytes.matches(Array("ftyp".utf8), at: 4) {
            return "an ISO media file (such as HEIF, AVIF or MP4)"
        }
        if let text = leadingText(prefix) {
            let lowered = text.lowercased()
            let start = lowered.drop(while: { $0.isWhitespace })
            if start.hasPrefix("<!doctype html") || start.hasPrefix("<html")
                || lowered.contains("<html") || lowered.contains("<body") || lowered.contains("<head")
            {
                return "an HTML page"
            }
            if lowered.contains("<svg") {
                return "an SVG image"
            }
            if start.hasPrefix("<?xml") {
                return "an XML document"
            }
            if start.hasPrefix("{") || start.hasPrefix("[") {
                return "a JSON document"
            }
            if isText(text) {
                return "plain text"
            }
        }
        let first = prefix.prefix(4).map(hex).joined(separator: " ")
        let count = prefix.count == 1 ? "1 byte" : "\(prefix.count) bytes"
        return "\(count) of unknown data starting \(first)"
    }

    /// The first KiB as text, when it decodes as UTF-8 (a multi-byte character cut at the end is allowed).
    private static func leadingText(_ prefix: [UInt8]) -> String? {
        var head = Array(prefix.prefix(1024))
        if head.starts(with: [0xEF, 0xBB, 0xBF]) {
            head.removeFirst(3)
        }
        guard !head.isEmpty else {
            return ""
        }
        // Never cut the whole: a lone byte that is no character is not text.
        for cut in 0...min(3, head.count - 1) {
            let candidate = head.dropLast(cut)
            if let text = String(validating: candidate, as: UTF8.self) {
                return text
            }
        }
        return nil
    }

    /// Whether the text has no control characters other than tab, line feed, form feed and carriage return.
    private static func isText(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy {
            $0.properties.generalCategory != .control || ["\t", "\n", "\u{0C}", "\r"].contains($0)
        }
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    private static func printable(_ bytes: [UInt8]) -> String {
        String(bytes.map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "?" })
    }
}

// MARK: - Signatures

private enum Signature {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF]
    static let gif: [UInt8] = Array("GIF8".utf8)
    static let riff: [UInt8] = Array("RIFF".utf8)
    static let webp: [UInt8] = Array("WEBP".utf8)
    static let bmp: [UInt8] = Array("BM".utf8)

    /// The signatures of supported formats, for spotting one cut short.
    static let all: [([UInt8], ImageFormat)] = [
        (png, .png), (jpeg, .jpeg), (gif, .gif), (riff + [0, 0, 0, 0] + webp, .webp), (bmp, .bmp),
    ]

    /// Other formats worth naming when they arrive instead of an image.
    static let known: [([UInt8], String)] = [
        (Array("%PDF".utf8), "a PDF document"),
        ([0x1F, 0x8B], "gzip-compressed data"),
        ([0x50, 0x4B, 0x03, 0x04], "a ZIP archive"),
        ([0x49, 0x49, 0x2A, 0x00], "a TIFF image"),
        ([0x4D, 0x4D, 0x00, 0x2A], "a TIFF image"),
        ([0x00, 0x00, 0x01, 0x00], "an ICO icon"),
    ]
}

// MARK: - Bounds-checked reading

/// Reads integers from a byte array; every accessor answers nil past the end instead of trapping.
private struct ByteReader {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    subscript(offset: Int) -> UInt8? {
        offset >= 0 && offset < bytes.count ? bytes[offset] : nil
    }

    func slice(_ offset: Int, _ count: Int) -> [UInt8]? {
        guard offset >= 0, count >= 0, offset <= bytes.count, count <= bytes.count - offset else {
            return nil
        }
        return Array(bytes[offset..<(offset + count)])
    }

    func starts(with signature: [UInt8]) -> Bool {
        bytes.starts(with: signature)
    }

    func matches(_ expected: [UInt8], at offset: Int) -> Bool {
        slice(offset, expected.count) == expected
    }

    func uint16BE(_ offset: Int) -> UInt16? {
        slice(offset, 2).map { UInt16($0[0]) << 8 | UInt16($0[1]) }
    }

    func uint16LE(_ offset: Int) -> UInt16? {
        slice(offset, 2).map { UInt16($0[1]) << 8 | UInt16($0[0]) }
    }

    func uint24LE(_ offset: Int) -> UInt32? {
        slice(offset, 3).map { UInt32($0[2]) << 16 | UInt32($0[1]) << 8 | UInt32($0[0]) }
    }

    func uint32BE(_ offset: Int) -> UInt32? {
        slice(offset, 4).map { $0.reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
    }

    func uint32LE(_ offset: Int) -> UInt32? {
        slice(offset, 4).map { $0.reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) } }
    }
}
