import RunnerKinds
import Testing

/// Hand-made headers of the formats beyond the first five: each field the parsers read, and how
/// they fail. (Real files from the encoders are in FixtureCatalog.images and in
/// Tests/Images/compare-identify.sh.)
@Suite(.timeLimit(.minutes(1)))
struct ImageFormatsTests {
    private func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
    private func le32(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(value >> (8 * $0) & 0xFF) } }
    private func be16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    private func be32(_ value: Int) -> [UInt8] { (0..<4).reversed().map { UInt8(value >> (8 * $0) & 0xFF) } }

    // MARK: - TIFF and EXIF

    /// A TIFF with one IFD at offset 8: width, height, orientation, one strip of `stripLength` bytes.
    private func tiff(bigEndian: Bool, width: Int, height: Int, orientation: Int = 1, stripLength: Int = 4) -> [UInt8] {
        let u16 = bigEndian ? be16 : le16
        let u32 = bigEndian ? be32 : le32
        let entries: [(tag: Int, type: Int, value: Int)] = [
            (256, 4, width), (257, 3, height), (273, 4, 8 + 2 + 5 * 12 + 4), (274, 3, orientation), (279, 4, stripLength),
        ]
        var bytes: [UInt8] = (bigEndian ? Array("MM".utf8) : Array("II".utf8)) + u16(42) + u32(8) + u16(entries.count)
        for entry in entries {
            bytes += u16(entry.tag) + u16(entry.type) + u32(1)
            bytes += entry.type == 3 ? u16(entry.value) + [0, 0] : u32(entry.value)
        }
        return bytes + u32(0) + [UInt8](repeating: 0x7F, count: stripLength)
    }

    @Test func tiffInBothByteOrders() throws {
        for bigEndian in [false, true] {
            let header = try ImageHeader.parse(tiff(bigEndian: bigEndian, width: 70_000, height: 3, orientation: 5))
            #expect(header == ImageHeader(format: .tiff, width: 70_000, height: 3, orientation: 5))
            #expect(header.displayWidth == 3 && header.displayHeight == 70_000)
            // A strip that ends past the body: cut short.
            let cut = Array(tiff(bigEndian: bigEndian, width: 5, height: 3).dropLast())
            #expect(throws: ImageHeader.Error.cutShort(.tiff)) { try ImageHeader.parse(cut) }
            // Given only the first bytes of a longer body, it asks for the rest.
            let whole = tiff(bigEndian: bigEndian, width: 5, height: 3)
            #expect(throws: ImageHeader.Error.truncated(.tiff)) { try ImageHeader.parse(Array(whole.prefix(20)), totalLength: whole.count) }
        }
        var noWidth = tiff(bigEndian: false, width: 5, height: 3)
        noWidth[10] = 0x99  // the width's tag becomes 0x199
        #expect(throws: ImageHeader.Error.malformed(.tiff, "the first IFD has no image width or length")) { try ImageHeader.parse(noWidth) }
        #expect(throws: ImageHeader.Error.malformed(.tiff, "the first IFD is at offset 4")) {
            try ImageHeader.parse(Array("II".utf8) + le16(42) + le32(4) + [0, 0, 0, 0])
        }
    }

    /// A TIFF structure holding only an orientation, as EXIF blocks do.
    private func exif(_ orientation: Int) -> [UInt8] {
        Array("MM".utf8) + be16(42) + be32(8) + be16(1) + be16(274) + be16(3) + be32(1) + be16(orientation) + [0, 0] + be32(0)
    }

    @Test func jpegOrientationFromItsEXIFSegment() throws {
        let app1 = Array("Exif\0\0".utf8) + exif(8)
        let sof0: [UInt8] = [0xFF, 0xC0, 0x00, 0x0B, 0x08, 0x00, 0x20, 0x00, 0x40, 0x01, 0x01, 0x11, 0x00]
        let jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE1] + be16(app1.count + 2) + app1 + sof0
        let header = try ImageHeader.parse(jpeg)
        #expect(header == ImageHeader(format: .jpeg, width: 64, height: 32, orientation: 8))
        #expect(header.displayWidth == 32 && header.displayHeight == 64)
        // An orientation out of range, or EXIF that is no TIFF structure, is ignored as decoders do.
        for broken in [Array("Exif\0\0".utf8) + exif(9), Array("Exif\0\0".utf8) + Array("XX".utf8) + [UInt8](repeating: 0, count: 20)] {
            let other: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE1] + be16(broken.count + 2) + broken + sof0
            #expect(try ImageHeader.parse(other).orientation == 1)
        }
    }

    private func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        be32(data.count) + Array(type.utf8) + data + [0, 0, 0, 0]
    }

    @Test func pngFramesFromACTLAndOrientationFromEXIf() throws {
        let ihdr = chunk("IHDR", be32(9) + be32(4) + [8, 6, 0, 0, 0])
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let png = signature + ihdr + chunk("acTL", be32(12) + be32(0)) + chunk("eXIf", exif(3)) + chunk("IDAT", [1, 2])
        #expect(try ImageHeader.parse(png) == ImageHeader(format: .png, width: 9, height: 4, frames: 12, orientation: 3))
        #expect(throws: ImageHeader.Error.malformed(.png, "the image ends before its image data")) {
            try ImageHeader.parse(signature + ihdr + chunk("IEND", []))
        }
        #expect(throws: ImageHeader.Error.truncated(.png)) { try ImageHeader.parse(signature + ihdr + Array(chunk("acTL", be32(2)).prefix(6))) }
    }

    @Test func webpAnimationFramesAndEXIFChunk() throws {
        func riffChunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
            Array(type.utf8) + le32(data.count) + data + (data.count % 2 == 1 ? [0] : [])
        }
        // VP8X: flags animation (0x02) and EXIF (0x08), canvas 300x200.
        let vp8x = riffChunk("VP8X", [0x0A, 0, 0, 0] + Array(le32(299).prefix(3)) + Array(le32(199).prefix(3)))
        let frame = riffChunk("ANMF", [UInt8](repeating: 0, count: 17))
        let body = Array("WEBP".utf8) + vp8x + riffChunk("ANIM", [0, 0, 0, 0, 0, 0]) + frame + frame + frame
            + riffChunk("EXIF", exif(6))
        let webp = Array("RIFF".utf8) + le32(body.count) + body
        #expect(try ImageHeader.parse(webp) == ImageHeader(format: .webp, width: 300, height: 200, frames: 3, orientation: 6))
        // The RIFF size says more than arrived: the walk runs off the end.
        #expect(throws: ImageHeader.Error.cutShort(.webp)) { try ImageHeader.parse(Array(webp.dropLast(30))) }
    }

    // MARK: - ICO and CUR

    @Test func iconsAreMeasuredByTheirLargestImage() throws {
        // Two entries: a 16x16 BMP (directory bytes) and a PNG whose IHDR says 300x260 (its entry says 0x0 = 256).
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", be32(300) + be32(260) + [8, 6, 0, 0, 0])
        let bmp = [UInt8](repeating: 0, count: 40)
        let first = 6 + 2 * 16
        let directory = le16(0) + le16(1) + le16(2)
            + [16, 16, 0, 0] + le16(1) + le16(32) + le32(bmp.count) + le32(first)
            + [0, 0, 0, 0] + le16(1) + le16(32) + le32(png.count) + le32(first + bmp.count)
        let ico = directory + bmp + png
        #expect(try ImageHeader.parse(ico) == ImageHeader(format: .ico, width: 300, height: 260))
        var cur = ico
        cur[2] = 2
        #expect(try ImageHeader.parse(cur).format == .cur)
        #expect(throws: ImageHeader.Error.cutShort(.ico)) { try ImageHeader.parse(Array(ico.dropLast())) }
        #expect(throws: ImageHeader.Error.malformed(.ico, "the directory lists no images")) {
            try ImageHeader.parse(le16(0) + le16(1) + le16(0))
        }
    }

    // MARK: - HEIF and AVIF

    private func box(_ type: String, _ payload: [UInt8]) -> [UInt8] { be32(8 + payload.count) + Array(type.utf8) + payload }
    private func fullBox(_ type: String, version: UInt8 = 0, _ payload: [UInt8]) -> [UInt8] { box(type, [version, 0, 0, 0] + payload) }

    /// ftyp, meta (pitm naming `primary`; ipco: an ispe per size; ipma: item i gets property i), mdat.
    private func heif(brand: String, primary: Int, sizes: [(Int, Int)], mdat: Bool = true) -> [UInt8] {
        let ipco = box("ipco", sizes.flatMap { fullBox("ispe", be32($0.0) + be32($0.1)) })
        var ipma = be32(sizes.count)
        for index in sizes.indices {
            ipma += be16(index + 1) + [1, UInt8(0x80 | (index + 1))]
        }
        let meta = fullBox(
            "meta", fullBox("hdlr", be32(0) + Array("pict".utf8) + [UInt8](repeating: 0, count: 13)) + fullBox("pitm", be16(primary))
                + box("iprp", ipco + fullBox("ipma", ipma)))
        return box("ftyp", Array(brand.utf8) + be32(0) + Array("mif1".utf8) + Array(brand.utf8)) + meta
            + (mdat ? box("mdat", [1, 2, 3]) : [])
    }

    @Test func heifAndAVIFSizeIsThePrimaryItemsISPE() throws {
        let sizes = [(64, 64), (4032, 3024)]
        #expect(try ImageHeader.parse(heif(brand: "heic", primary: 2, sizes: sizes)) == ImageHeader(format: .heic, width: 4032, height: 3024))
        #expect(try ImageHeader.parse(heif(brand: "avif", primary: 1, sizes: sizes)) == ImageHeader(format: .avif, width: 64, height: 64))
        #expect(throws: ImageHeader.Error.malformed(.heic, "the primary item has no size (ispe)")) {
            try ImageHeader.parse(heif(brand: "heic", primary: 3, sizes: sizes))
        }
        #expect(throws: ImageHeader.Error.cutShort(.avif)) { try ImageHeader.parse(heif(brand: "avif", primary: 1, sizes: sizes, mdat: false)) }
        #expect(throws: ImageHeader.Error.cutShort(.avif)) { try ImageHeader.parse(Array(heif(brand: "avif", primary: 1, sizes: sizes).dropLast())) }
        // An MP4 is an ISO file but no image.
        let mp4 = box("ftyp", Array("isom".utf8) + be32(0) + Array("isommp41".utf8)) + box("mdat", [])
        #expect(throws: ImageHeader.Error.notAnImage("an ISO media file that is no HEIF or AVIF image (such as MP4 video)")) {
            try ImageHeader.parse(mp4)
        }
    }

    // MARK: - JPEG XL

    /// Bits packed least significant first, as JPEG XL writes them.
    private func bits(_ fields: [(value: Int, count: Int)]) -> [UInt8] {
        var bytes: [UInt8] = []
        var position = 0
        for (value, count) in fields {
            for bit in 0..<count {
                if position % 8 == 0 { bytes.append(0) }
                bytes[bytes.count - 1] |= UInt8((value >> bit) & 1) << UInt8(position % 8)
                position += 1
            }
        }
        return bytes
    }

    @Test func jxlSizeHeaderForms() throws {
        // small: (7 + 1) * 8 = 64 high, ratio 1 (1:1); image metadata: not all default, extra fields, orientation 6.
        // (Headers alone: the size is read from them, and a body that ends there is cut short.)
        let small = [0xFF, 0x0A] + bits([(1, 1), (7, 5), (1, 3), (0, 1), (1, 1), (5, 3)])
        #expect(try ImageHeader.declaredSize(small) == ImageHeader(format: .jxl, width: 64, height: 64, orientation: 6))
        // 750 high in 13 bits (selector 1), ratio 3 (4:3): 1000 wide.
        let ratio = [0xFF, 0x0A] + bits([(0, 1), (1, 2), (749, 13), (3, 3), (1, 1)])
        #expect(try ImageHeader.declaredSize(ratio) == ImageHeader(format: .jxl, width: 1000, height: 750))
        // 30 high in 9 bits, no ratio, 100 000 wide in 18 bits (selector 2).
        let explicit = [0xFF, 0x0A] + bits([(0, 1), (0, 2), (29, 9), (0, 3), (2, 2), (99_999, 18), (1, 1)])
        #expect(try ImageHeader.declaredSize(explicit) == ImageHeader(format: .jxl, width: 100_000, height: 30))
        #expect(throws: ImageHeader.Error.truncated(.jxl)) { try ImageHeader.parse(Array(explicit.prefix(4))) }
        #expect(throws: ImageHeader.Error.cutShort(.jxl)) { try ImageHeader.parse(explicit) }
        // With a frame: metadata all default, then (from the next byte) a frame header all
        // default (one group, one pass) and its TOC, not permuted, of one entry: 3 bytes, from
        // the byte after it.
        let headers = bits([(1, 1), (7, 5), (1, 3), (1, 1), (1, 1), (0, 5)])
        let frame = bits([(1, 1), (0, 1), (0, 6), (0, 2), (3, 10)])
        let framed = [0xFF, 0x0A] + headers + frame + [1, 2, 3]
        #expect(try ImageHeader.parse(framed) == ImageHeader(format: .jxl, width: 64, height: 64))
        #expect(try ImageHeader.parse(framed + [0x0A]) == ImageHeader(format: .jxl, width: 64, height: 64), "bytes after the end are passed over")
        for cut in 2..<framed.count {
            #expect(throws: ImageHeader.Error.self, "cut at \(cut)") { try ImageHeader.parse(Array(framed.prefix(cut))) }
        }
        // The same codestream in a container, split into two jxlp parts.
        let signature: [UInt8] = [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
        let container = signature + box("ftyp", Array("jxl ".utf8) + be32(0) + Array("jxl ".utf8))
            + box("jxlp", be32(0) + Array(explicit.prefix(3))) + box("jxlp", be32(0x8000_0001) + Array(explicit.dropFirst(3)))
        #expect(try ImageHeader.parse(container) == ImageHeader(format: .jxl, width: 100_000, height: 30))
        #expect(throws: ImageHeader.Error.cutShort(.jxl)) { try ImageHeader.parse(Array(container.dropLast())) }
    }
}
