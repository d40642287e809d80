import FixtureServer
import RunnerKinds
import RunnerKit
import Testing

@Suite(.timeLimit(.minutes(1)))
struct ImageHeaderTests {
    static let images = FixtureCatalog.images

    private func expected(_ image: FixtureImage) throws -> ImageHeader {
        ImageHeader(
            format: try #require(ImageFormat(rawValue: image.format)), width: image.width, height: image.height,
            frames: image.frames, orientation: image.orientation)
    }

    // MARK: - Real images

    @Test(arguments: images.map(\.name))
    func fixtureImageParsesToItsFormatAndSize(name: String) throws {
        let image = try #require(Self.images.first { $0.name == name })
        #expect(try ImageHeader.parse(image.bytes) == expected(image))
        #expect(try ImageHeader.parse(image.bytes, totalLength: image.bytes.count) == expected(image))
    }

    @Test(arguments: images.map(\.name))
    func fixtureImageIsComplete(name: String) throws {
        let image = try #require(Self.images.first { $0.name == name })
        let format = try #require(ImageFormat(rawValue: image.format))
        let suffix = Array(image.bytes.suffix(64))
        let prefix = Array(image.bytes.prefix(64))
        #expect(ImageHeader.isComplete(format, prefix: prefix, suffix: suffix, totalLength: image.bytes.count))
        #expect(ImageHeader.isComplete(format, suffix: suffix, totalLength: image.bytes.count))
        let cut = Array(image.bytes.dropLast(3))
        switch format {
        case .png, .jpeg, .webp, .bmp:
            #expect(
                !ImageHeader.isComplete(format, prefix: prefix, suffix: Array(cut.suffix(64)), totalLength: cut.count))
        case .jxl where image.name == "jxl-codestream.jxl":
            break  // a bare codestream records no length: the one cut the runner cannot see
        case .gif, .tiff, .ico, .cur, .heic, .avif, .jxl:
            // No end marker the suffix could show: the parse sees what the header points past.
            #expect(throws: ImageHeader.Error.cutShort(format)) { try ImageHeader.parse(cut) }
        }
    }

    @Test(arguments: images.map(\.name))
    func shortPrefixIsTruncated(name: String) throws {
        let image = try #require(Self.images.first { $0.name == name })
        let format = try #require(ImageFormat(rawValue: image.format))
        // ICO, CUR, HEIC, AVIF and JPEG XL's container have no signature in their first bytes that
        // only they start with; a JPEG XL
        // codestream starts FF like a JPEG, and 8 bytes hold its whole size header.
        guard ![.ico, .cur, .heic, .avif].contains(format), image.name != "jxl-container.jxl" else { return }
        for length in image.name == "jxl-codestream.jxl" ? [2] : [1, 2, 8] {
            #expect(throws: ImageHeader.Error.truncated(format)) {
                try ImageHeader.parse(Array(image.bytes.prefix(length)))
            }
        }
    }

    /// Every prefix of every image, taken as the whole body, either fails as truncated, cut short or
    /// malformed in the right format, or parses to the right header; a parsed prefix that also
    /// counts as complete is the whole image (except at a GIF frame's end, where browsers stop
    /// too, and a bare JPEG XL codestream, which has no length to check). Taken as the first bytes
    /// of the whole body, a prefix parses to the right header or asks for more bytes.
    @Test func everyPrefixOfEveryImageIsHandled() throws {
        for image in Self.images {
            let format = try #require(ImageFormat(rawValue: image.format))
            let header = try expected(image)
            for length in 0...image.bytes.count {
                let prefix = Array(image.bytes.prefix(length))
                do {
                    let result = try ImageHeader.parse(prefix)
                    let complete = ImageHeader.isComplete(
                        format, prefix: Array(prefix.prefix(64)), suffix: Array(prefix.suffix(64)), totalLength: length)
                    if format == .gif {
                        #expect(result.width == header.width && result.height == header.height, "\(image.name) prefix \(length)")
                    } else {
                        #expect(result == header, "\(image.name) prefix \(length)")
                    }
                    if complete && length < image.bytes.count {
                        #expect(format == .gif || image.name == "jxl-codestream.jxl", "\(image.name) prefix \(length) counts as complete")
                    }
                } catch {
                    switch error {
                    case .truncated(.jpeg) where format == .jxl && length == 1:
                        break  // FF: a JPEG or a JPEG XL codestream
                    case .truncated(let found), .cutShort(let found), .malformed(let found, _):
                        #expect(found == format, "\(image.name) prefix \(length): \(error)")
                    case .notAnImage:
                        #expect(length < 12, "\(image.name) prefix \(length): \(error)")
                    }
                    #expect(length < image.bytes.count, "\(image.name): \(error)")
                }
                do {
                    #expect(try ImageHeader.parse(prefix, totalLength: image.bytes.count) == header, "\(image.name) first \(length)")
                } catch {
                    #expect(error.wantsMoreBytes || (length < 12 && error == .notAnImage(ImageHeader.describe(prefix))),
                            "\(image.name) first \(length): \(error)")
                }
            }
        }
    }

    @Test func exifJPEGIsReadPastItsDecoyFrameHeader() throws {
        // The EXIF segment of this image ends with bytes that look like an SOF0 of 999x999.
        let image = try #require(Self.images.first { $0.name == "jpeg-exif.jpg" })
        let decoy: [UInt8] = [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x03, 0xE7, 0x03, 0xE7]
        #expect(image.bytes.indices.contains { Array(image.bytes[$0...].prefix(decoy.count)) == decoy })
        #expect(try ImageHeader.parse(image.bytes) == ImageHeader(format: .jpeg, width: 19, height: 15))
    }

    // MARK: - What else arrives

    @Test func htmlJSONTextAndEmptyBodiesAreNamed() {
        let cases: [(String, String)] = [
            ("<!DOCTYPE html>\n<html><body>Sign in</body></html>", "an HTML page"),
            ("  <html lang=\"en\"><head></head></html>", "an HTML page"),
            ("<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>", "an SVG image (vector graphics, which UIImage does not decode)"),
            ("<?xml version=\"1.0\"?><feed/>", "an XML document"),
            ("{\"error\": \"not found\"}", "a JSON document"),
            ("\u{FEFF}[1, 2]", "a JSON document"),
            ("Bad Gateway\n", "plain text"),
            ("", "an empty body"),
        ]
        for (text, phrase) in cases {
            let bytes = Array(text.utf8)
            #expect(ImageHeader.describe(bytes) == phrase, "\(text)")
            #expect(throws: ImageHeader.Error.notAnImage(phrase)) { try ImageHeader.parse(bytes) }
        }
    }

    @Test func otherBytesAreNamedByCountAndFirstBytes() {
        #expect(ImageHeader.describe([0, 1, 2, 3, 4]) == "5 bytes of unknown data starting 00 01 02 03")
        #expect(ImageHeader.describe([0xC3]) == "1 byte of unknown data starting c3")
        #expect(ImageHeader.describe(Array("%PDF-1.7".utf8)) == "a PDF document")
        #expect(ImageHeader.describe(Array("RIFF\u{24}\0\0\0WAVEfmt ".utf8)) == "a RIFF file of type \"WAVE\"")
        #expect(throws: ImageHeader.Error.notAnImage("a RIFF file of type \"WAVE\"")) {
            try ImageHeader.parse(Array("RIFF\u{24}\0\0\0WAVEfmt ".utf8))
        }
    }

    @Test func errorsReadAsSentences() {
        #expect(ImageHeader.Error.notAnImage("an HTML page").description == "expected an image, but an HTML page arrived")
        #expect(ImageHeader.Error.truncated(.png).description == "the PNG header is truncated")
        #expect(
            ImageHeader.Error.malformed(.webp, "unknown first chunk \"ABCD\"").description
                == "the WebP header is malformed: unknown first chunk \"ABCD\"")
    }

    @Test func fileExtensions() {
        #expect(
            ImageFormat.allCases.map(\.fileExtension)
                == ["png", "jpg", "gif", "webp", "bmp", "tiff", "ico", "cur", "heic", "avif", "jxl"])
    }

    // MARK: - Hand-made headers

    private func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
    private func le32(_ value: Int32) -> [UInt8] {
        let bits = UInt32(bitPattern: value)
        return (0..<4).map { UInt8(bits >> (8 * $0) & 0xFF) }
    }
    private func be32(_ value: Int) -> [UInt8] { (0..<4).reversed().map { UInt8(value >> (8 * $0) & 0xFF) } }

    private func png(width: Int, height: Int, chunk: String = "IHDR") -> [UInt8] {
        [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + Array(chunk.utf8) + be32(width) + be32(height)
            + [8, 2, 0, 0, 0] + be32(0) + be32(0) + Array("IDAT".utf8)
    }

    private func bmp(headerSize: Int32, width: Int32, height: Int32) -> [UInt8] {
        var bytes: [UInt8] = Array("BM".utf8) + le32(0) + [0, 0, 0, 0] + le32(14 + headerSize) + le32(headerSize)
        if headerSize == 12 {
            bytes += le16(Int(width)) + le16(Int(height)) + le16(1) + le16(24)
        } else {
            bytes += le32(width) + le32(height) + le16(1) + le16(24) + [UInt8](repeating: 0, count: 24)
        }
        return bytes
    }

    @Test func pngSizesAndChunks() throws {
        #expect(try ImageHeader.parse(png(width: 640, height: 480)) == ImageHeader(format: .png, width: 640, height: 480))
        #expect(throws: ImageHeader.Error.malformed(.png, "size 0x5 is empty")) {
            try ImageHeader.parse(png(width: 0, height: 5))
        }
        #expect(throws: ImageHeader.Error.malformed(.png, "size 3000000x5 is implausible")) {
            try ImageHeader.parse(png(width: 3_000_000, height: 5))
        }
        #expect(throws: ImageHeader.Error.malformed(.png, "the first chunk is not IHDR")) {
            try ImageHeader.parse(png(width: 1, height: 1, chunk: "IDAT"))
        }
    }

    @Test func jpegMarkerWalk() throws {
        let soi: [UInt8] = [0xFF, 0xD8]
        // Fill bytes, a standalone RST marker, a DHT (C4) that must not be taken for a frame, then SOF9.
        let dht: [UInt8] = [0xFF, 0xC4, 0x00, 0x07, 0x01, 0x02, 0x03, 0x04, 0x05]
        let sof9: [UInt8] = [0xFF, 0xC9, 0x00, 0x0B, 0x08, 0x01, 0x2C, 0x02, 0x58, 0x01, 0x01, 0x11, 0x00]
        let walked = soi + [0xFF, 0xFF, 0xFF, 0xD0] + dht + [0xFF, 0xFF] + sof9
        #expect(try ImageHeader.parse(walked) == ImageHeader(format: .jpeg, width: 600, height: 300))
        for marker: UInt8 in [0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF] {
            var frame = sof9
            frame[1] = marker
            #expect(try ImageHeader.parse(soi + frame) == ImageHeader(format: .jpeg, width: 600, height: 300))
        }
        for marker: UInt8 in [0xC8, 0xCC] {
            var notFrame = sof9
            notFrame[1] = marker
            #expect(throws: ImageHeader.Error.truncated(.jpeg)) { try ImageHeader.parse(soi + notFrame) }
        }
        #expect(throws: ImageHeader.Error.malformed(.jpeg, "a scan starts before the frame header")) {
            try ImageHeader.parse(soi + [0xFF, 0xDA, 0x00, 0x08])
        }
        #expect(throws: ImageHeader.Error.malformed(.jpeg, "the image ends before its frame header")) {
            try ImageHeader.parse(soi + [0xFF, 0xD9])
        }
        #expect(throws: ImageHeader.Error.malformed(.jpeg, "segment e0 has length 1")) {
            try ImageHeader.parse(soi + [0xFF, 0xE0, 0x00, 0x01])
        }
        // Stray bytes (and a stuffed FF 00) before a marker are passed over, as libjpeg does.
        #expect(try ImageHeader.parse(soi + [0xFF, 0xE0, 0x00, 0x02, 0x12, 0x00, 0xFF, 0x00, 0x34] + sof9).width > 0)
        #expect(throws: ImageHeader.Error.truncated(.jpeg)) { try ImageHeader.parse(soi + [0xFF, 0xE0, 0x00, 0x02, 0x12]) }
    }

    @Test func gifVersions() throws {
        let screen: [UInt8] = [0x40, 0x01, 0xF0, 0x00]
        // No colour table; one 1x1 image: descriptor, LZW code size 2, one sub-block, terminator; trailer.
        let frame: [UInt8] = [0, 0, 0, 0x2C, 0, 0, 0, 0, 1, 0, 1, 0, 0, 2, 2, 0x4C, 0x01, 0, 0x3B]
        #expect(
            try ImageHeader.parse(Array("GIF89a".utf8) + screen + frame) == ImageHeader(format: .gif, width: 320, height: 240))
        #expect(throws: ImageHeader.Error.truncated(.gif)) { try ImageHeader.parse(Array("GIF89a".utf8) + screen) }
        // A second header written into the stream after a frame is passed over, as ImageMagick
        // passes it: the frame after it counts.
        let one = Array("GIF89a".utf8) + screen + frame
        let twice = Array(one.dropLast()) + one
        #expect(try ImageHeader.parse(twice) == ImageHeader(format: .gif, width: 320, height: 240, frames: 2))
        #expect(throws: ImageHeader.Error.malformed(.gif, "unexpected block 47 at offset 13")) {
            try ImageHeader.parse(Array("GIF89a".utf8) + screen + [0, 0, 0] + Array("GIF89a".utf8))
        }
        #expect(throws: ImageHeader.Error.cutShort(.gif)) { try ImageHeader.parse(Array("GIF89a".utf8) + screen + [0, 0, 0]) }
        #expect(throws: ImageHeader.Error.malformed(.gif, "unknown version \"8xa\"")) {
            try ImageHeader.parse(Array("GIF8xa".utf8) + screen)
        }
    }

    @Test func webpChunks() throws {
        func riff(_ chunk: String, _ data: [UInt8]) -> [UInt8] {
            Array("RIFF".utf8) + le32(Int32(12 + data.count)) + Array("WEBPVP8".utf8) + Array(chunk.utf8)
                + le32(Int32(data.count)) + data
        }
        let extended = riff("X", [0x10, 0, 0, 0, 0xFF, 0xFF, 0x00, 0x0F, 0x00, 0x00])
        #expect(try ImageHeader.parse(extended) == ImageHeader(format: .webp, width: 65536, height: 16))
        let huge = riff("X", [0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00])
        #expect(throws: ImageHeader.Error.malformed(.webp, "size 16777216x1 is implausible")) {
            try ImageHeader.parse(huge)
        }
        let interFrame = riff(" ", [0x01, 0, 0, 0x9D, 0x01, 0x2A, 0x10, 0x00, 0x10, 0x00])
        #expect(throws: ImageHeader.Error.malformed(.webp, "the VP8 frame is not a key frame")) {
            try ImageHeader.parse(interFrame)
        }
        let noStartCode = riff(" ", [0x00, 0, 0, 0x9D, 0x01, 0x2B, 0x10, 0x00, 0x10, 0x00])
        #expect(throws: ImageHeader.Error.malformed(.webp, "the VP8 start code is missing")) {
            try ImageHeader.parse(noStartCode)
        }
        let lossless = riff("L", [0x2E, 0, 0, 0, 0])
        #expect(throws: ImageHeader.Error.malformed(.webp, "the VP8L signature byte is 2e")) {
            try ImageHeader.parse(lossless)
        }
        let unknown = Array("RIFF".utf8) + le32(20) + Array("WEBPABCD".utf8) + le32(8) + [UInt8](repeating: 0, count: 8)
        #expect(throws: ImageHeader.Error.malformed(.webp, "unknown first chunk \"ABCD\"")) {
            try ImageHeader.parse(unknown)
        }
    }

    @Test func bmpHeaders() throws {
        #expect(
            try ImageHeader.parse(bmp(headerSize: 12, width: 300, height: 200))
                == ImageHeader(format: .bmp, width: 300, height: 200))
        #expect(
            try ImageHeader.parse(bmp(headerSize: 40, width: 300, height: -200))
                == ImageHeader(format: .bmp, width: 300, height: 200))
        #expect(
            try ImageHeader.parse(bmp(headerSize: 124, width: 5, height: 7))
                == ImageHeader(format: .bmp, width: 5, height: 7))
        #expect(throws: ImageHeader.Error.malformed(.bmp, "width -3")) {
            try ImageHeader.parse(bmp(headerSize: 40, width: -3, height: 7))
        }
        #expect(throws: ImageHeader.Error.malformed(.bmp, "size 5x2147483648 is implausible")) {
            try ImageHeader.parse(bmp(headerSize: 40, width: 5, height: .min))
        }
        #expect(throws: ImageHeader.Error.malformed(.bmp, "unknown DIB header size 7")) {
            try ImageHeader.parse(bmp(headerSize: 7, width: 5, height: 7))
        }
    }

    @Test func completenessByFormat() {
        let iend: [UInt8] = [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82]
        #expect(ImageHeader.isComplete(.png, suffix: [1, 2] + iend, totalLength: 1000))
        #expect(!ImageHeader.isComplete(.png, suffix: Array(iend.dropLast()), totalLength: 1000))
        #expect(ImageHeader.isComplete(.jpeg, suffix: [0x12, 0xFF, 0xD9], totalLength: 1000))
        #expect(ImageHeader.isComplete(.jpeg, suffix: [0x12, 0xFF, 0xD9, 0, 0], totalLength: 1000))
        #expect(!ImageHeader.isComplete(.jpeg, suffix: [0xD9], totalLength: 1000))
        #expect(!ImageHeader.isComplete(.jpeg, suffix: [], totalLength: 0))
        #expect(ImageHeader.isComplete(.gif, suffix: [0, 0x3B], totalLength: 1000))
        #expect(ImageHeader.isComplete(.gif, suffix: [0x3B, 0], totalLength: 1000))
        #expect(!ImageHeader.isComplete(.gif, suffix: [0x3B, 7], totalLength: 1000))
        // BMP's bfSize of zero does not say; WebP and BMP need the first bytes, or count as complete.
        let zeroSize = bmp(headerSize: 40, width: 1, height: 1)
        #expect(ImageHeader.isComplete(.bmp, prefix: zeroSize, suffix: [0], totalLength: 12345))
        #expect(ImageHeader.isComplete(.webp, suffix: [1, 2, 3], totalLength: 12345))
        #expect(!ImageHeader.isComplete(.webp, prefix: [1, 2, 3], suffix: [1, 2, 3], totalLength: 12345))
    }

    // MARK: - Hostile input

    @Test func randomBytesNeverTrap() {
        var random = SplitMix64(seed: 42)
        let starts: [[UInt8]] = [
            [], [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], [0xFF, 0xD8, 0xFF], Array("GIF89a".utf8),
            Array("RIFF".utf8) + [0, 0, 0, 0] + Array("WEBPVP8".utf8), Array("BM".utf8),
            Array("II*\0".utf8), Array("MM\0*".utf8), [0, 0, 1, 0, 1, 0], [0, 0, 2, 0],
            [0, 0, 0, 0x18] + Array("ftypavif".utf8), [0, 0, 0, 0x18] + Array("ftypheic".utf8), [0xFF, 0x0A],
            [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A],
            [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8) + [0, 0, 0, 1, 0, 0, 0, 1],
        ]
        for round in 0..<20_000 {
            let count = Int(random.next() % 64)
            let tail = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let bytes = starts[round % starts.count] + tail
            _ = try? ImageHeader.parse(bytes)
            _ = try? ImageHeader.parse(bytes, totalLength: bytes.count + count)
            _ = ImageHeader.describe(bytes)
            for format in ImageFormat.allCases {
                _ = ImageHeader.isComplete(format, prefix: bytes, suffix: tail, totalLength: count)
            }
        }
    }
}

/// A small seeded generator, so a failing random case repeats.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Files as real writers make them, judged as decoders (and ImageMagick's identify) judge them.
@Suite struct LenientImageTests {
    private func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
    private func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(value >> (8 * $0) & 0xFF) } }

    /// A BMP file header and BITMAPINFOHEADER with the given planes, bit count, compression and
    /// palette size.
    private func bmp(planes: Int = 1, bits: Int = 24, compression: Int = 0, colours: Int = 0) -> [UInt8] {
        Array("BM".utf8) + le32(0) + le32(0) + le32(54) + le32(40) + le32(4) + le32(3) + le16(planes) + le16(bits)
            + le32(compression) + le32(0) + le32(0) + le32(0) + le32(colours) + le32(0)
    }

    @Test func aPNGWithBytesAfterItsEndIsComplete() throws {
        let png = try #require(FixtureCatalog.images.first { $0.format == "png" }).bytes
        for trailing in [[0x0A], [0x0D, 0x0A], Array("<!-- served by x -->\n".utf8)] as [[UInt8]] {
            let body = png + trailing
            #expect(ImageHeader.isComplete(.png, prefix: Array(body.prefix(64)), suffix: Array(body.suffix(64)), totalLength: body.count))
            let header = try ImageCheck().check(prefix: Array(body.prefix(4096)), suffix: Array(body.suffix(64)), count: body.count) { body }
            #expect(header == (try ImageHeader.parse(png)))
        }
        // Cut before its end, it is still truncated, and says so.
        let cut = Array(png.dropLast(20))
        #expect(throws: ImageCheck.Failure.self) {
            try ImageCheck().check(prefix: Array(cut.prefix(4096)), suffix: Array(cut.suffix(64)), count: cut.count) { cut }
        }
        do {
            _ = try ImageCheck().check(prefix: Array(cut.prefix(4096)), suffix: Array(cut.suffix(64)), count: cut.count) { cut }
        } catch {
            #expect(error.description.contains("truncated"), "\(error)")
        }
    }

    @Test func aBMPWithAnImpossibleHeaderIsRefusedSayingWhy() throws {
        #expect(try ImageHeader.parse(bmp()) == ImageHeader(format: .bmp, width: 4, height: 3))
        #expect(try ImageHeader.parse(bmp(bits: 8, colours: 256)).width == 4)
        #expect(try ImageHeader.parse(bmp(bits: 0, compression: 5)).width == 4, "a PNG inside has no bit count of its own")
        #expect(throws: ImageHeader.Error.malformed(.bmp, "2 colour planes (a BMP has 1)")) { try ImageHeader.parse(bmp(planes: 2)) }
        #expect(throws: ImageHeader.Error.malformed(.bmp, "7 bits per pixel (a BMP has 1, 2, 4, 8, 16, 24, 32, 64)")) {
            try ImageHeader.parse(bmp(bits: 7))
        }
        #expect(throws: ImageHeader.Error.malformed(.bmp, "a palette of 300 colours, more than 8 bits per pixel can index (256)")) {
            try ImageHeader.parse(bmp(bits: 8, colours: 300))
        }
    }

    /// An icon of one 32x32 BMP whose directory entry says `side`.
    private func icon(directorySide side: Int) -> [UInt8] {
        let dib = le32(40) + le32(32) + le32(64) + le16(1) + le16(32) + [UInt8](repeating: 0, count: 24)
        let image = dib + [UInt8](repeating: 0, count: 32 * 32 * 4 + 32 * 4)
        return le16(0) + le16(1) + le16(1) + [UInt8(side & 0xFF), UInt8(side & 0xFF), 0, 0] + le16(1) + le16(32)
            + le32(image.count) + le32(22) + image
    }

    @Test func anIconEntryThatDisagreesWithItsImageIsMeasuredAsIdentifyDoes() throws {
        #expect(try ImageHeader.parse(icon(directorySide: 32)) == ImageHeader(format: .ico, width: 32, height: 32))
        // Larger than the image: the image's size (the directory's was reported before).
        #expect(try ImageHeader.parse(icon(directorySide: 64)) == ImageHeader(format: .ico, width: 32, height: 32))
        // Smaller: the directory's, as identify reports it.
        #expect(try ImageHeader.parse(icon(directorySide: 16)) == ImageHeader(format: .ico, width: 16, height: 16))
    }
}

/// HEIF and AVIF shown turned or mirrored (`irot`, `imir`): the orientation and the displayed
/// size, as libheif (and so identify) shows them.
@Suite struct HEIFTransformTests {
    private func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private func be32(_ value: Int) -> [UInt8] { (0..<4).reversed().map { UInt8(value >> (8 * $0) & 0xFF) } }
    private func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(8 + payload.count) + Array(type.utf8) + payload }

    /// An AVIF whose primary item is 427x640 as stored, with these transforms in this order.
    private func avif(_ transforms: [(String, UInt8)]) -> [UInt8] {
        let properties = [box("ispe", [0, 0, 0, 0] + be32(427) + be32(640))] + transforms.map { box($0.0, [$0.1]) }
        let associations = (1...properties.count).map { UInt8($0) }
        let ipma = box("ipma", [0, 0, 0, 0] + be32(1) + be16(1) + [UInt8(associations.count)] + associations)
        let meta = box("meta", [0, 0, 0, 0] + box("pitm", [0, 0, 0, 0] + be16(1)) + box("iprp", box("ipco", properties.flatMap { $0 }) + ipma))
        return box("ftyp", Array("avif".utf8) + be32(0) + Array("avifmif1".utf8)) + meta + box("mdat", [0, 0, 0, 0])
    }

    @Test func turnsAndMirrorsGiveTheOrientationAndTheDisplayedSize() throws {
        let cases: [([(String, UInt8)], Int)] = [
            ([], 1), ([("irot", 1)], 8), ([("irot", 2)], 3), ([("irot", 3)], 6),
            ([("imir", 1)], 2), ([("imir", 0)], 4), ([("irot", 1), ("imir", 1)], 7), ([("irot", 3), ("imir", 1)], 5),
            ([("irot", 1), ("irot", 1)], 3),
        ]
        for (transforms, orientation) in cases {
            let header = try ImageHeader.parse(avif(transforms))
            #expect(header.width == 427 && header.height == 640, "stored size: \(transforms)")
            #expect(header.orientation == orientation, "\(transforms)")
        }
        let turned = try ImageHeader.parse(avif([("irot", 1)]))
        #expect((turned.displayWidth, turned.displayHeight) == (640, 427))
        let details = ImageCheck.details(turned)
        #expect(details.contains { $0.key == "displayWidth" && $0.value == JSONValue(640) })
    }
}

/// BigTIFF (`II+\0`, `MM\0+`): 8-byte offsets and counts, 20-byte entries, LONG8 values.
@Suite struct BigTIFFTests {
    private func uint(_ value: Int, _ size: Int, bigEndian: Bool) -> [UInt8] {
        let little = (0..<size).map { UInt8(value >> (8 * $0) & 0xFF) }
        return bigEndian ? little.reversed() : little
    }

    /// A 300x200 BigTIFF with one strip of `strip` bytes (the body may be cut with `dropLast`).
    private func bigTIFF(bigEndian: Bool, orientation: Int? = nil) -> [UInt8] {
        func u(_ value: Int, _ size: Int) -> [UInt8] { uint(value, size, bigEndian: bigEndian) }
        var entries: [(tag: Int, type: Int, value: Int)] = [(256, 3, 300), (257, 4, 200)]
        if let orientation { entries.append((274, 3, orientation)) }
        let dataOffset = 16 + 8 + 20 * (entries.count + 2) + 8
        entries += [(273, 16, dataOffset), (279, 16, 10)]
        var bytes: [UInt8] = (bigEndian ? Array("MM".utf8) : Array("II".utf8)) + u(43, 2) + u(8, 2) + u(0, 2) + u(16, 8)
        bytes += u(entries.count, 8)
        for entry in entries {
            // A value kept in the entry sits at its start, in the entry's own size.
            let size = entry.type == 3 ? 2 : entry.type == 4 ? 4 : 8
            bytes += u(entry.tag, 2) + u(entry.type, 2) + u(1, 8) + u(entry.value, size) + [UInt8](repeating: 0, count: 8 - size)
        }
        bytes += u(0, 8) + [UInt8](repeating: 7, count: 10)
        return bytes
    }

    @Test func bigTIFFIsReadInEitherByteOrder() throws {
        for bigEndian in [false, true] {
            #expect(try ImageHeader.parse(bigTIFF(bigEndian: bigEndian)) == ImageHeader(format: .tiff, width: 300, height: 200))
            #expect(try ImageHeader.parse(bigTIFF(bigEndian: bigEndian, orientation: 6)).orientation == 6)
            // Its strip cut short: said, as for a classic TIFF.
            #expect(throws: ImageHeader.Error.cutShort(.tiff)) { try ImageHeader.parse(Array(bigTIFF(bigEndian: bigEndian).dropLast(3))) }
        }
    }
}
