// The image sniffer. A payload's own bytes decide its format and size, never the Content-Type it
// was served with: a captive portal answers 200 with `image/png` and an HTML page.
//
// `parse` is given the payload's first bytes and the length of the whole body. Most headers sit in
// the first bytes; where a format keeps what is needed further on (a GIF's frames, a TIFF's IFD at
// the end, an ISO box after `mdat`, a WebP's EXIF chunk), the parser runs off the bytes it was given
// and throws `truncated` or `cutShort`, and the caller (`ImageCheck`) parses again with the whole
// body. Each format lives in its own `ImageHeader+Format.swift`.
//
// Every read goes through `ImageByteReader`, which answers nil past the end instead of trapping, so
// no input (truncated, hostile or random) can crash the parser; every loop moves forward through
// the bytes, so parsing is linear in the body's length.

/// The format and pixel size of an image, with its frame count and EXIF orientation, read from
/// the bytes of its payload.
package struct ImageHeader: Equatable, Sendable {
    package var format: ImageFormat
    /// Width as stored (before any orientation is applied), as ImageMagick's `identify` reports it.
    package var width: Int
    /// Height as stored.
    package var height: Int
    /// Frames of an animation (GIF images, APNG `acTL`, WebP `ANMF`, an AVIF sequence's samples); 1 for a still image.
    package var frames: Int
    /// EXIF orientation, 1 (as stored) to 8; 5-8 swap width and height for display.
    package var orientation: Int

    package init(format: ImageFormat, width: Int, height: Int, frames: Int = 1, orientation: Int = 1) {
        self.format = format
        self.width = width
        self.height = height
        self.frames = frames
        self.orientation = orientation
    }

    /// More than one frame.
    package var animated: Bool { frames > 1 }
    /// The width once the orientation is applied.
    package var displayWidth: Int { orientation >= 5 ? height : width }
    /// The height once the orientation is applied.
    package var displayHeight: Int { orientation >= 5 ? width : height }

    /// The largest width or height accepted; anything above is taken for a corrupt header.
    package static let maximumDimension = 1 << 20

    // MARK: - Errors

    /// Why a payload is not a usable image.
    package enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The bytes are not an image of a supported format; the string names what arrived
        /// (see ``ImageHeader/describe(_:)``).
        case notAnImage(String)
        /// The bytes start like this format but end before its size is known.
        case truncated(ImageFormat)
        /// The header was read, but the body ends before the data it describes (inside a GIF
        /// frame, before a TIFF strip, an ICO image or an ISO box ends).
        case cutShort(ImageFormat)
        /// The bytes start like this format but its header is inconsistent; the string says how.
        case malformed(ImageFormat, String)

        package var description: String {
            switch self {
            case .notAnImage(let what):
                "expected an image, but \(what) arrived"
            case .truncated(let format):
                "the \(format.displayName) header is truncated"
            case .cutShort(let format):
                "the \(format.displayName) image is cut short: its header describes more bytes than arrived"
            case .malformed(let format, let detail):
                "the \(format.displayName) header is malformed: \(detail)"
            }
        }

        /// The parser ran off the bytes it was given (`truncated` or `cutShort`): given more of the
        /// body it may succeed.
        package var wantsMoreBytes: Bool {
            switch self {
            case .truncated, .cutShort: true
            case .notAnImage, .malformed: false
            }
        }
    }

    // MARK: - Parsing

    /// Parses format, size, frames and orientation.
    ///
    /// `bytes` is the body or its first bytes; `totalLength` is the length of the whole body
    /// (default: `bytes` is all of it). Where the format needs bytes past those given, this throws
    /// `truncated` or `cutShort`: parse again with the whole body.
    package static func parse(_ bytes: [UInt8], totalLength: Int? = nil) throws(ImageHeader.Error) -> ImageHeader {
        let reader = ImageByteReader(bytes)
        let total = max(totalLength ?? bytes.count, bytes.count)
        if bytes.isEmpty {
            throw .notAnImage(describe(bytes))
        }
        if reader.starts(with: Signature.png) {
            return try parsePNG(reader, total: total)
        }
        if reader.starts(with: Signature.jpeg) {
            return try parseJPEG(reader)
        }
        if reader.starts(with: Signature.gif) {
            return try parseGIF(reader, total: total)
        }
        if reader.starts(with: Signature.riff) {
            if bytes.count < 12 {
                throw .truncated(.webp)
            }
            if reader.matches(Signature.webp, at: 8) {
                return try parseWebP(reader, total: total)
            }
            throw .notAnImage(describe(bytes))
        }
        if reader.starts(with: Signature.bmp) {
            return try parseBMP(reader)
        }
        if reader.starts(with: Signature.tiffLittle) || reader.starts(with: Signature.tiffBig)
            || reader.starts(with: Signature.bigTIFFLittle) || reader.starts(with: Signature.bigTIFFBig)
        {
            return try parseTIFF(reader, total: total)
        }
        if reader.starts(with: Signature.ico) || reader.starts(with: Signature.cur) {
            return try parseIcon(reader, total: total)
        }
        if reader.starts(with: Signature.jxlCodestream) {
            return try parseJXLCodestream(reader, from: 0, total: total)
        }
        if reader.starts(with: Signature.jxlContainer) {
            return try parseJXLContainer(reader, total: total)
        }
        if reader.matches("ftyp", at: 4) {
            // The brands decide; from an ftyp box cut off, the major brand does (an image brand
            // among the compatible ones may be missing, so this one is not known to be no image).
            if let size = reader.uint32BE(0), !reader.has(0, Int(min(size, 256))), bytes.count >= 12 {
                throw .truncated(isoImageFormat(reader) ?? .heic)
            }
            if let format = isoImageFormat(reader) {
                return try parseISOBMFF(reader, total: total, format: format)
            }
        }
        // A body shorter than a signature that it begins: the start of an image, cut off.
        for (signature, format) in Signature.all where bytes.count < signature.count {
            if signature.starts(with: bytes) {
                throw .truncated(format)
            }
        }
        throw .notAnImage(describe(bytes))
    }

    static func checked(_ format: ImageFormat, width: Int, height: Int) throws(Error) -> ImageHeader {
        guard width > 0, height > 0 else {
            throw .malformed(format, "size \(width)x\(height) is empty")
        }
        guard width <= maximumDimension, height <= maximumDimension else {
            throw .malformed(format, "size \(width)x\(height) is implausible")
        }
        return ImageHeader(format: format, width: width, height: height)
    }

    // MARK: - Completeness

    /// The size a header declares, from a body's first bytes, before the rest has arrived: the
    /// logical screen of a GIF (its frames come later), otherwise what `parse` reads from them.
    /// Throws `truncated` (or `cutShort`) while the bytes given do not reach that far.
    package static func declaredSize(_ prefix: [UInt8]) throws(Error) -> ImageHeader {
        let reader = ImageByteReader(prefix)
        if reader.starts(with: Signature.gif) {
            guard let width = reader.uint16LE(6), let height = reader.uint16LE(8) else { throw .truncated(.gif) }
            return try checked(.gif, width: Int(width), height: Int(height))
        }
        if reader.starts(with: Signature.jxlCodestream) {
            // Where the codestream ends is the whole body's question.
            return try parseJXLCodestream(reader, from: 0, total: nil)
        }
        return try parse(prefix, totalLength: .max)
    }

    /// Whether a payload of `totalLength` bytes ending in `suffix` (its last <= 64 bytes) looks complete
    /// for that format: PNG ends with the IEND chunk (bytes after it, within the suffix, are
    /// ignored as decoders ignore them), JPEG with FFD9 (zero padding after it allowed),
    /// GIF with its trailer 0x3B or, lenient as browsers are, with the block terminator 0x00 of its
    /// last frame (`parse` walks the frames and throws `cutShort` for a body cut inside one),
    /// WebP's RIFF size + 8 == totalLength, BMP's bfSize == totalLength when nonzero.
    ///
    /// WebP and BMP record their length at the start of the file, so pass the payload's first bytes
    /// as `prefix` (16 are enough). Without them, and unless `suffix` is the whole payload, the length
    /// cannot be checked and those two formats count as complete. TIFF, ICO, CUR, HEIC, AVIF and
    /// JPEG XL have no end marker: `parse` checks that the body holds what their headers point to
    /// (strips and tiles, icon images, ISO boxes), so they count as complete here.
    package static func isComplete(
        _ format: ImageFormat,
        prefix: [UInt8] = [],
        suffix: [UInt8],
        totalLength: Int
    ) -> Bool {
        // The start of the file, from `prefix` or from a suffix that holds all of it.
        let header: ImageByteReader? =
            if !prefix.isEmpty { ImageByteReader(prefix) } else if suffix.count == totalLength { ImageByteReader(suffix) } else { nil }
        switch format {
        case .png:
            // libpng, browsers and UIImage stop at IEND and ignore what follows (a web script's
            // trailing newline): IEND anywhere in the last bytes will do.
            let iend: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
            guard suffix.count >= iend.count else { return false }
            return (0...(suffix.count - iend.count)).contains { suffix[$0..<($0 + iend.count)].elementsEqual(iend) }
        case .jpeg:
            guard let last = suffix.lastIndex(where: { $0 != 0 }), last >= 1 else { return false }
            return suffix[last - 1] == 0xFF && suffix[last] == 0xD9
        case .gif:
            return suffix.last == 0x3B || suffix.last == 0x00
        case .webp:
            guard let header else { return true }
            guard header.starts(with: Signature.riff), let size = header.uint32LE(4) else { return false }
            return Int(size) + 8 == totalLength
        case .bmp:
            guard let header else { return true }
            guard header.starts(with: Signature.bmp), let size = header.uint32LE(2) else { return false }
            return size == 0 || Int(size) == totalLength
        case .tiff, .ico, .cur, .heic, .avif, .jxl:
            return true
        }
    }

    // MARK: - Describing what arrived

    /// A short phrase naming what arrived, for error messages: "an HTML page", "a JSON document",
    /// "plain text", "an empty body", "23 bytes of unknown data starting 3c 21 44 4f".
    package static func describe(_ prefix: [UInt8]) -> String {
        if prefix.isEmpty {
            return "an empty body"
        }
        let bytes = ImageByteReader(prefix)
        for (signature, phrase) in Signature.known where bytes.starts(with: signature) {
            return phrase
        }
        if bytes.starts(with: Signature.riff), let kind = bytes.slice(8, 4) {
            return "a RIFF file of type \"\(printable(kind))\""
        }
        if bytes.matches("ftyp", at: 4) {
            return "an ISO media file that is no HEIF or AVIF image (such as MP4 video)"
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
                return "an SVG image (vector graphics, which UIImage does not decode)"
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

    static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    static func printable(_ bytes: [UInt8]) -> String {
        String(bytes.map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "?" })
    }
}

// MARK: - Signatures

enum Signature {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    static let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF]
    static let gif: [UInt8] = Array("GIF8".utf8)
    static let riff: [UInt8] = Array("RIFF".utf8)
    static let webp: [UInt8] = Array("WEBP".utf8)
    static let bmp: [UInt8] = Array("BM".utf8)
    static let tiffLittle: [UInt8] = [0x49, 0x49, 0x2A, 0x00]
    static let tiffBig: [UInt8] = [0x4D, 0x4D, 0x00, 0x2A]
    static let bigTIFFLittle: [UInt8] = [0x49, 0x49, 0x2B, 0x00]
    static let bigTIFFBig: [UInt8] = [0x4D, 0x4D, 0x00, 0x2B]
    static let ico: [UInt8] = [0x00, 0x00, 0x01, 0x00]
    static let cur: [UInt8] = [0x00, 0x00, 0x02, 0x00]
    static let jxlCodestream: [UInt8] = [0xFF, 0x0A]
    static let jxlContainer: [UInt8] = [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]

    /// The signatures of supported formats, for spotting one cut short.
    static let all: [([UInt8], ImageFormat)] = [
        (png, .png), (jpeg, .jpeg), (gif, .gif), (riff + [0, 0, 0, 0] + webp, .webp), (bmp, .bmp),
        (tiffLittle, .tiff), (tiffBig, .tiff), (bigTIFFLittle, .tiff), (bigTIFFBig, .tiff),
    ]

    /// Other formats worth naming when they arrive instead of an image.
    static let known: [([UInt8], String)] = [
        (Array("%PDF".utf8), "a PDF document"),
        ([0x1F, 0x8B], "gzip-compressed data"),
        ([0x50, 0x4B, 0x03, 0x04], "a ZIP archive"),
        (Array("8BPS".utf8), "a Photoshop document"),
    ]
}
