import Foundation
import FixtureServer
import RunnerKinds
import RunnerKit
import Testing

/// The image kind's fields and checks: formats, the decompression-bomb limit, the least size,
/// the body read in full only when the format needs it, the Accept header and the details.
@Suite(.timeLimit(.minutes(1)))
struct ImageCheckTests {
    static func image(_ name: String) throws -> FixtureImage {
        try #require(FixtureCatalog.images.first { $0.name == name })
    }

    /// Checks a whole body given at once.
    private func check(_ check: ImageCheck, _ bytes: [UInt8]) throws(ImageCheck.Failure) -> ImageHeader {
        try check.check(prefix: bytes, suffix: Array(bytes.suffix(64)), count: bytes.count) { bytes }
    }

    private func decode(_ json: String) throws -> ImageCheck {
        guard case .object(let members) = try JSONParser.parse(Array(json.utf8)) else {
            Issue.record("not an object")
            return ImageCheck()
        }
        var fields = JobFields(members)
        let check = try ImageCheck(fields: &fields)
        #expect(fields.firstUnknownField() == nil)
        return check
    }

    // MARK: - Fields

    @Test func defaultsAcceptEveryFormatUpToPillowsLimit() throws {
        let check = try decode("{}")
        #expect(Set(check.formats) == Set(ImageFormat.allCases))
        #expect(check.maxPixels == 178_956_970)
        #expect(check.minWidth == 0 && check.minHeight == 0)
    }

    @Test func fieldsAreDecodedAndChecked() throws {
        let check = try decode(#"{"formats": ["jpg", "PNG", "heif", "tif"], "maxPixels": 1000, "minWidth": 3, "minHeight": 4}"#)
        #expect(check.formats == [.heic, .png, .jpeg, .tiff])
        #expect(check.maxPixels == 1000 && check.minWidth == 3 && check.minHeight == 4)
        let bad: [(String, String)] = [
            (#"{"formats": "png"}"#, "field 'formats' must be an array of format names, not a string"),
            (#"{"formats": []}"#, "field 'formats' must name at least one format"),
            (#"{"formats": [1]}"#, "field 'formats' must hold strings, not a number"),
            (#"{"formats": ["svg"]}"#, "field 'formats' names svg, which is no image here: UIImage does not decode SVG"),
            (#"{"formats": ["pcx"]}"#, "field 'formats' names an unknown format \"pcx\"; known: avif, jxl, heic, webp, png, jpeg, gif, bmp, tiff, ico, cur"),
            (#"{"maxPixels": 0}"#, "field 'maxPixels' must be at least 1"),
            (#"{"maxPixels": 1.5}"#, "field 'maxPixels' must be a whole number, not a number"),
            (#"{"minWidth": -1}"#, "field 'minWidth' must not be negative"),
            (#"{"minHeight": -1}"#, "field 'minHeight' must not be negative"),
        ]
        for (json, message) in bad {
            #expect(throws: JobSpecError.self) { try decode(json) }
            do {
                _ = try decode(json)
            } catch {
                #expect((error as? JobSpecError)?.description == message, "\(json)")
            }
        }
    }

    @Test func runnerKindsListsTheFields() {
        #expect(ImageKind.parameters.map(\.name) == ["formats", "maxPixels", "minWidth", "minHeight"])
        #expect(ImageKind.parameters[1].defaultText == "178956970")
    }

    // MARK: - Accept

    @Test func acceptNamesTheAcceptedFormatsModernFirst() {
        #expect(
            ImageCheck().acceptHeader
                == "image/avif,image/jxl,image/heic,image/heif,image/webp,image/apng,image/png,image/jpeg,image/gif,image/bmp,image/tiff,image/x-icon,image/vnd.microsoft.icon,*/*;q=0.8")
        #expect(ImageCheck(formats: [.jpeg, .webp]).acceptHeader == "image/webp,image/jpeg,*/*;q=0.8")
        #expect(ImageCheck(formats: [.ico, .cur]).acceptHeader == "image/x-icon,image/vnd.microsoft.icon,*/*;q=0.8")
    }

    // MARK: - Checks

    @Test func everyFixtureImagePassesWithItsDetails() throws {
        for image in FixtureCatalog.images {
            let header = try check(ImageCheck(), image.bytes)
            #expect(header.format.rawValue == image.format, "\(image.name)")
            #expect(header.width == image.width && header.height == image.height, "\(image.name)")
            #expect(header.frames == image.frames && header.orientation == image.orientation, "\(image.name)")
        }
    }

    @Test func aFormatNotListedFailsNamingBoth() throws {
        let gif = try Self.image("gif.gif")
        #expect(throws: ImageCheck.Failure.self) { try check(ImageCheck(formats: [.png, .jpeg, .webp]), gif.bytes) }
        do {
            _ = try check(ImageCheck(formats: [.png, .jpeg, .webp]), gif.bytes)
        } catch {
            #expect(error.description == "expected an image in WebP, PNG or JPEG, but a GIF image (23x3) arrived")
            #expect(!error.unreadable)
        }
    }

    @Test func aHeaderDeclaringMoreThanMaxPixelsIsABomb() throws {
        // 100 000 x 100 000: an IHDR, an empty IDAT and IEND, 57 bytes.
        func be32(_ value: Int) -> [UInt8] { (0..<4).reversed().map { UInt8(value >> (8 * $0) & 0xFF) } }
        let bomb: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + Array("IHDR".utf8)
            + be32(100_000) + be32(100_000) + [8, 2, 0, 0, 0] + be32(0) + be32(0) + Array("IDAT".utf8) + be32(0)
            + be32(0) + Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82]
        do {
            _ = try check(ImageCheck(), bomb)
            Issue.record("a bomb passed")
        } catch {
            #expect(
                error.description
                    == "the PNG header declares 100000x100000 = 10000000000 pixels, more than maxPixels (178956970): refused as a decompression bomb")
        }
        let png = try Self.image("png.png")  // 7x5 = 35 pixels
        #expect(throws: Never.self) { try check(ImageCheck(maxPixels: 35), png.bytes) }
        #expect(throws: ImageCheck.Failure.self) { try check(ImageCheck(maxPixels: 34), png.bytes) }
    }

    @Test func smallerThanMinWidthOrMinHeightFails() throws {
        let png = try Self.image("png.png")  // 7x5
        #expect(throws: Never.self) { try check(ImageCheck(minWidth: 7, minHeight: 5), png.bytes) }
        do {
            _ = try check(ImageCheck(minWidth: 8), png.bytes)
            Issue.record("too narrow passed")
        } catch {
            #expect(error.description == "the PNG image is 7x5, smaller than minWidth x minHeight (8x0)")
        }
        #expect(throws: ImageCheck.Failure.self) { try check(ImageCheck(minHeight: 6), png.bytes) }
    }

    @Test func aBodyCutShortFailsAsTruncated() throws {
        for name in ["png.png", "gif-animated.gif", "tiff-little.tif", "heic.heic", "avif.avif", "ico.ico", "jxl-container.jxl", "jxl-codestream.jxl"] {
            let image = try Self.image(name)
            let cut = Array(image.bytes.dropLast(5))
            do {
                _ = try check(ImageCheck(), cut)
                Issue.record("\(name) cut short passed")
            } catch {
                #expect(error.description.hasSuffix("image is truncated: only \(cut.count) bytes arrived"), "\(name): \(error)")
            }
        }
    }

    /// A bare JPEG XL codestream has no end marker: its frames' tables of contents say where it
    /// ends. Cut anywhere, even right after its size header, it fails as truncated.
    @Test func aJPEGXLCodestreamCutAnywhereFailsAsTruncated() throws {
        let image = try Self.image("jxl-codestream.jxl")
        #expect(try check(ImageCheck(), image.bytes).width == image.width)
        #expect(try check(ImageCheck(), image.bytes + [0, 0, 0]).width == image.width, "bytes after its end are passed over")
        for cut in 2..<image.bytes.count {
            let bytes = Array(image.bytes.prefix(cut))
            do {
                _ = try check(ImageCheck(), bytes)
                Issue.record("cut at \(cut) of \(image.bytes.count) passed")
            } catch {
                #expect(error.description.contains("truncated"), "cut at \(cut): \(error)")
            }
        }
        // An animation (cjxl from a GIF of two frames): each frame's TOC leads to the next.
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/corpus/imageheader/seed-jxl-animated").path
        let animation = [UInt8](try #require(FileManager.default.contents(atPath: corpus)))
        #expect(try check(ImageCheck(), animation).frames == 2)
        for cut in 2..<animation.count {
            #expect(throws: ImageCheck.Failure.self, "cut at \(cut)") { try check(ImageCheck(), Array(animation.prefix(cut))) }
        }
        // Judged from its first bytes (a prefix shorter than the body), it asks for the rest.
        let whole = image.bytes
        #expect(try ImageCheck().check(prefix: Array(whole.prefix(20)), suffix: Array(whole.suffix(64)), count: whole.count) { whole }.height == image.height)
    }

    @Test func aGIFWithoutTrailerPassesButOneCutInsideAFrameFails() throws {
        let animated = try Self.image("gif-animated.gif")
        let noTrailer = Array(animated.bytes.dropLast())
        #expect(try check(ImageCheck(), noTrailer).frames == 2)
        #expect(throws: ImageCheck.Failure.self) { try check(ImageCheck(), Array(animated.bytes.dropLast(2))) }
        let still = try Self.image("gif-no-trailer.gif")
        #expect(still.bytes.last == 0x00)
        #expect(try check(ImageCheck(), still.bytes) == ImageHeader(format: .gif, width: 89, height: 22))
    }

    /// The header of a GIF, TIFF or ISO file may lie past the first bytes: the check asks for the
    /// whole body then, and only then.
    @Test func theWholeBodyIsReadOnlyWhenTheFormatNeedsIt() throws {
        for image in FixtureCatalog.images {
            var reads = 0
            let bytes = image.bytes
            let header = try ImageCheck().check(prefix: Array(bytes.prefix(40)), suffix: Array(bytes.suffix(64)), count: bytes.count) {
                reads += 1
                return bytes
            }
            #expect(header.width == image.width, "\(image.name)")
            #expect(reads <= 1, "\(image.name)")
            if image.format == "gif" || image.format == "tiff" || image.format == "bmp" {
                #expect(reads == 1, "\(image.name): a GIF's frames, this TIFF's IFD and a BMP's palette size lie past 40 bytes")
            }
            if image.name == "webp-lossy.webp" {
                #expect(reads == 0, "\(image.name)")
            }
        }
    }

    @Test func notAnImageIsUnreadable() {
        do {
            _ = try check(ImageCheck(), Array("<html><body>Sign in</body></html>".utf8))
            Issue.record("HTML passed")
        } catch {
            #expect(error.description == "expected an image, but an HTML page arrived")
            #expect(error.unreadable)
        }
    }

    // MARK: - Details

    @Test func detailsAddFramesAndOrientationWhereTheyApply() {
        func keys(_ header: ImageHeader) -> [String] { ImageCheck.details(header).map(\.key) }
        #expect(keys(ImageHeader(format: .png, width: 3, height: 2)) == ["format", "width", "height"])
        #expect(keys(ImageHeader(format: .gif, width: 3, height: 2, frames: 4)) == ["format", "width", "height", "frames", "animated"])
        let turned = ImageCheck.details(ImageHeader(format: .jpeg, width: 3, height: 2, orientation: 6))
        #expect(turned.map(\.key) == ["format", "width", "height", "orientation", "displayWidth", "displayHeight"])
        #expect(turned[4].value == JSONValue(2) && turned[5].value == JSONValue(3))
        let mirrored = ImageCheck.details(ImageHeader(format: .tiff, width: 3, height: 2, orientation: 2))
        #expect(mirrored[4].value == JSONValue(3) && mirrored[5].value == JSONValue(2))
    }
}
