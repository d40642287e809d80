// Real image files of every supported format, small and each with a distinct width and height.
// They were encoded once with an ordinary image library and are kept here as base64 text, so the
// package needs no resources and no tools at build time.

import Foundation

extension FixtureCatalog {
    /// One image of each kind the sniffer must handle (made with ImageMagick, heif-enc, avifenc, cjxl,
    /// apngasm and img2webp), in the order `/images.json` lists them.
    public static let images: [FixtureImage] = [
        FixtureImages.png,
        FixtureImages.jpegBaseline,
        FixtureImages.jpegProgressive,
        FixtureImages.jpegEXIF,
        FixtureImages.gif,
        FixtureImages.webpLossy,
        FixtureImages.webpLossless,
        FixtureImages.webpExtended,
        FixtureImages.bmp,
        FixtureImages.tiffLittle,
        FixtureImages.tiffBig,
        FixtureImages.ico,
        FixtureImages.cur,
        FixtureImages.heic,
        FixtureImages.avif,
        FixtureImages.avifSequence,
        FixtureImages.jxlCodestream,
        FixtureImages.jxlContainer,
        FixtureImages.apng,
        FixtureImages.gifAnimated,
        FixtureImages.gifNoTrailer,
        FixtureImages.webpAnimated,
        FixtureImages.jpegOrientation,
    ]
}

/// The encoded fixture images.
enum FixtureImages {
    /// The start of a PNG whose IHDR declares 100000x100000 pixels (a decompression bomb), up to
    /// its first IDAT chunk's type: what a decoder reads before any pixel (`/bomb/N` pads it).
    static let bombHeader: [UInt8] = {
        func be32(_ value: UInt32) -> [UInt8] { (0..<4).reversed().map { UInt8(value >> (8 * $0) & 0xFF) } }
        let ihdr = be32(100_000) + be32(100_000) + [8, 2, 0, 0, 0]
        return [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + be32(13) + Array("IHDR".utf8) + ihdr + be32(0)
            + be32(0x7FFF_FFFF) + Array("IDAT".utf8)
    }()

    /// 7x5 PNG, 8-bit RGB, 89 bytes.
    static let png = FixtureImage(
        name: "png.png", format: "png", width: 7, height: 5, contentType: "image/png",
        base64: """
            iVBORw0KGgoAAAANSUhEUgAAAAcAAAAFCAIAAAAG+GGPAAAAIElEQVR42mNkYGDQYlDVZlBFJlkY7FUZGNARC4MDhaIAnNEG
            +vreuPQAAAAASUVORK5CYII=
            """
    )

    /// 13x9 baseline JPEG (SOF0), 677 bytes.
    static let jpegBaseline = FixtureImage(
        name: "jpeg-baseline.jpg", format: "jpeg", width: 13, height: 9, contentType: "image/jpeg",
        base64: """
            /9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAA0JCgsKCA0LCgsODg0PEyAVExISEyccHhcgLikxMC4pLSwzOko+MzZGNywtQFdB
            RkxOUlNSMj5aYVpQYEpRUk//2wBDAQ4ODhMREyYVFSZPNS01T09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09P
            T09PT09PT09PT09PT0//wAARCAAJAA0DASIAAhEBAxEB/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAA
            AgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6
            Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXG
            x8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/8QAHwEAAwEBAQEBAQEBAQAAAAAAAAECAwQFBgcICQoL/8QAtREA
            AgECBAQDBAcFBAQAAQJ3AAECAxEEBSExBhJBUQdhcRMiMoEIFEKRobHBCSMzUvAVYnLRChYkNOEl8RcYGRomJygpKjU2Nzg5
            OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6goOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPE
            xcbHyMnK0tPU1dbX2Nna4uPk5ebn6Onq8vP09fb3+Pn6/9oADAMBAAIRAxEAPwDOsfDmQFVPl7mt238PMY/3aYA9uta1l/qD
            +H866Ky/1NcbxlWpNRva6vp+S/rUwyjNKyif/9k=
            """
    )

    /// 17x11 progressive JPEG (SOF2), 616 bytes.
    static let jpegProgressive = FixtureImage(
        name: "jpeg-progressive.jpg", format: "jpeg", width: 17, height: 11, contentType: "image/jpeg",
        base64: """
            /9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAA0JCgsKCA0LCgsODg0PEyAVExISEyccHhcgLikxMC4pLSwzOko+MzZGNywtQFdB
            RkxOUlNSMj5aYVpQYEpRUk//2wBDAQ4ODhMREyYVFSZPNS01T09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09P
            T09PT09PT09PT09PT0//wgARCAALABEDASIAAhEBAxEB/8QAFgABAQEAAAAAAAAAAAAAAAAABAUA/8QAFgEBAQEAAAAAAAAA
            AAAAAAAAAwIF/9oADAMBAAIQAxAAAAEDKLCGTr2nT//EABkQAQEAAwEAAAAAAAAAAAAAAAEAAgMSE//aAAgBAQABBQLHRY6b
            xICAuS//xAAYEQACAwAAAAAAAAAAAAAAAAAABAECFP/aAAgBAwEBPwFVqxrk/8QAGBEAAgMAAAAAAAAAAAAAAAAAAAMBAhP/
            2gAIAQIBAT8BY+TS5//EABYQAQEBAAAAAAAAAAAAAAAAABAxAP/aAAgBAQAGPwIjN//EABoQAAIDAQEAAAAAAAAAAAAAAAAB
            ESFBEGH/2gAIAQEAAT8hySonyj0FaiclHB//2gAMAwEAAgADAAAAEMTP/8QAFREBAQAAAAAAAAAAAAAAAAAAECH/2gAIAQMB
            AT8QmH//xAAbEQABBAMAAAAAAAAAAAAAAAABABFRkTFhcf/aAAgBAgEBPxANxDC8Dkytopf/xAAbEAEAAgIDAAAAAAAAAAAA
            AAABABExYSFx8f/aAAgBAQABPxCw7BggwOszyoQIaczibVXU0p//2Q==
            """
    )

    /// 19x15 baseline JPEG with a 5 KB EXIF APP1 segment and a COM segment before SOF0; the EXIF data
    /// ends with a decoy SOF0 marker claiming 999x999, so only a parser that skips segments by their
    /// length reads 19x15, 5376 bytes.
    static let jpegEXIF = FixtureImage(
        name: "jpeg-exif.jpg", format: "jpeg", width: 19, height: 15, contentType: "image/jpeg",
        base64: """
            /9j/4AAQSkZJRgABAQAAAQABAAD/4RILRXhpZgAATU0AKgAAAAgAAgEOAAIAAA/OAAAAJgEPAAIAAAAHAAAP9AAAAABGaXh0
            dXJlIGltYWdlIHdpdGggYSBsYXJnZSBFWElGIGRlc2NyaXB0aW9uLiB4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4eHh4
            eHh4eHh4eHh4AHJ1bm5lcgAA/8AAEQgD5wPnAwEiAAIRAQMRAWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295
            ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRl
            Y295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNv
            eWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lk
            ZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVj
            b3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295
            ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRl
            Y295ZGVjb3lkZWNveWRlY295ZGVjb3lkZWNveWRlY295//4AKWZpeHR1cmUgY29tbWVudCBiZWZvcmUgdGhlIGZyYW1lIGhl
            YWRlcv/bAEMADQkKCwoIDQsKCw4ODQ8TIBUTEhITJxweFyAuKTEwLiktLDM6Sj4zNkY3LC1AV0FGTE5SU1IyPlphWlBgSlFS
            T//bAEMBDg4OExETJhUVJk81LTVPT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT09PT//A
            ABEIAA8AEwMBIgACEQEDEQH/xAAfAAABBQEBAQEBAQAAAAAAAAAAAQIDBAUGBwgJCgv/xAC1EAACAQMDAgQDBQUEBAAAAX0B
            AgMABBEFEiExQQYTUWEHInEUMoGRoQgjQrHBFVLR8CQzYnKCCQoWFxgZGiUmJygpKjQ1Njc4OTpDREVGR0hJSlNUVVZXWFla
            Y2RlZmdoaWpzdHV2d3h5eoOEhYaHiImKkpOUlZaXmJmaoqOkpaanqKmqsrO0tba3uLm6wsPExcbHyMnK0tPU1dbX2Nna4eLj
            5OXm5+jp6vHy8/T19vf4+fr/xAAfAQADAQEBAQEBAQEBAAAAAAAAAQIDBAUGBwgJCgv/xAC1EQACAQIEBAMEBwUEBAABAncA
            AQIDEQQFITEGEkFRB2FxEyIygQgUQpGhscEJIzNS8BVictEKFiQ04SXxFxgZGiYnKCkqNTY3ODk6Q0RFRkdISUpTVFVWV1hZ
            WmNkZWZnaGlqc3R1dnd4eXqCg4SFhoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1tre4ubrCw8TFxsfIycrS09TV1tfY2dri
            4+Tl5ufo6ery8/T19vf4+fr/2gAMAwEAAhEDEQA/AOYttLyNqr8vc1q22lhh93CD9a37bTVYYAAQdfetW201WG4gBB0FRVx9
            1/Vrf/Ir8TDLc021OcXTm2jbGMdsiiu0XTmKgjAHpxRXJ/aL7y+5f5n1KzPTc//Z
            """
    )

    /// 23x3 GIF87a with an 8-colour palette, 92 bytes.
    static let gif = FixtureImage(
        name: "gif.gif", format: "gif", width: 23, height: 3, contentType: "image/gif",
        base64: """
            R0lGODdhFwADAIIAAL//bdx/dpZ/bDn/dzl/atwAdpYAezkAXCwAAAAAFwADAAAIKQAPCBxogKCBgwcLKFxYgIDDhw8FSJwo
            IIDFiwEGaNzIUSOAjyBDAggIADs=
            """
    )

    /// 29x21 simple-format WebP, lossy (VP8), 284 bytes.
    static let webpLossy = FixtureImage(
        name: "webp-lossy.webp", format: "webp", width: 29, height: 21, contentType: "image/webp",
        base64: """
            UklGRhQBAABXRUJQVlA4IAgBAAAQBwCdASodABUAPtFWpk0oJKOiMBgIAQAaCWwAnTKEdeCt8mwx9t/4+X7EADH9zdcBeLdK
            GZH6F/AZ56KYBOkwQAD+8zeiNuia00Pz4Oj9c6NDdMAYSbs15ku3CVdpmqRUmINvcVOD+jYCL0w1zKC7Ovh5PV6gwaIJHyZ8
            xDb9RXNUOR3dQt8j5aLraWMzkmWEJ7l9nYfCfi0g5A6/H8KJIMQqp/bruphConhRz9xydH4Q/S/lnkXH/mdjifPCWixae/8W
            MVcdR6PmWeUbGrmSncJPtRd29XkfwkptoIhJLW4/5TGDrlgj7+P+0i+6+tw0dMG88a/P/+hjGAkwHbPbqkmUk75oAAA=
            """
    )

    /// 31x13 simple-format WebP, lossless (VP8L), 76 bytes.
    static let webpLossless = FixtureImage(
        name: "webp-lossless.webp", format: "webp", width: 31, height: 13, contentType: "image/webp",
        base64: """
            UklGRkQAAABXRUJQVlA4TDgAAAAvHgADAM1lRP9jETHg/Y8Ig6K2baCSaPnT3b1nJSRIIVEFAilGeIlCYdo2THZ7ihEslnRv
            SE95Gw==
            """
    )

    /// 37x25 extended-format WebP (VP8X) with an alpha channel (ALPH) and a lossy VP8 frame, 418 bytes.
    static let webpExtended = FixtureImage(
        name: "webp-extended.webp", format: "webp", width: 37, height: 25, contentType: "image/webp",
        base64: """
            UklGRpoBAABXRUJQVlA4WAoAAAAQAAAAJAAAGAAAQUxQSCIAAAABD/Cg/4iIoLht2yh32m9n8DJez3v3H9H/HlDgA4UrUPUb
            VlA4IFIBAABwCQCdASolABkAPtFYokyoJSMiKqwBABoJbDyFGMeQs7PsfmCVr+37WiSyEvhU3oAxs/2Gf3A/Zn2hwI3uRTcu
            ZGKRSJzqOUkFzz/eZ4NcjcWbpwAA/vMzj/b3QMuFi9T2GfsfKvwtUQ3gsLrkGRtVW9IUhXfWMF9Ex0O4HtmDbk+jMDToc+yc
            qcXUzERlXD2wevLECOEj7a1LRSwK/tmCXn1Q26zylGdELzGyKEI82/JswfVEN78lmp/aGvA4aHVCx4eQ14F3sybm5y9wiFCy
            pVKt24J+s7r8MibejwITh78K3NwerB1uu04WCT8jzlw1X/d8H/uabrWF9DLkogPmIHJNBVltxT4cd5l5NPJSopVMI7D6ROYz
            U8+IBe9qv8TvwZu40Y+EHOX1hNyZx7VE8AL0kWJwK+bZ9TYonVSJT3Zz5sU+z/XLOhCI+bS6qUAAAA==
            """
    )

    /// 11x6 BMP with a BITMAPINFOHEADER, 24-bit, bottom-up, 270 bytes.
    static let bmp = FixtureImage(
        name: "bmp.bmp", format: "bmp", width: 11, height: 6, contentType: "image/bmp",
        base64: """
            Qk0OAQAAAAAAADYAAAAoAAAACwAAAAYAAAABABgAAAAAANgAAADEDgAAxA4AAAAAAAAAAAAAuf8A3v8ZA/8zKP9MTf9mcv9/
            l/+ZvP+y4f/MBv/lK///AAAAlMwAucwZ3swzA8xMKMxmTcx/csyZl8yyvMzM4czlBsz/AAAAb5kAlJkZuZkz3plMA5lmKJl/
            TZmZcpmyl5nMvJnl4Zn/AAAASmYAb2YZlGYzuWZM3mZmA2Z/KGaZTWaycmbMl2blvGb/AAAAJTMASjMZbzMzlDNMuTNm3jN/
            AzOZKDOyTTPMcjPllzP/AAAAAAAAJQAZSgAzbwBMlABmuQB/3gCZAwCyKADMTQDlcgD/AAAA
            """
    )

    /// 41x2 little-endian (II) TIFF, uncompressed, one strip, 510 bytes.
    static let tiffLittle = FixtureImage(
        name: "tiff-little.tif", format: "tiff", width: 41, height: 2, contentType: "image/tiff",
        base64: """
            SUkqAP4AAAAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAA
            gIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAA
            gIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAA
            gIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAAgIAPAAABAwABAAAAKQAAAAEBAwABAAAAAgAAAAIBAwADAAAAuAEAAAMBAwABAAAA
            AQAAAAYBAwABAAAAAgAAAAoBAwABAAAAAQAAABEBBAABAAAACAAAABIBAwABAAAAAQAAABUBAwABAAAAAwAAABYBAwABAAAAAgAA
            ABcBBAABAAAA9gAAABwBAwABAAAAAQAAACkBAwACAAAAAAABAD4BBQACAAAA7gEAAD8BBQAGAAAAvgEAAAAAAAAIAAgACACF61EA
            AACAAMP1qAAAAAACzcxMAAAAAAHNzEwAAACAAM3MTAAAAAACj8L1AAAAABA3GqAAAAAAAiuHCgAAACAA
            """
    )

    /// 43x4 big-endian (MM) TIFF, LZW, with orientation 8 (displayed 4x43), 324 bytes.
    static let tiffBig = FixtureImage(
        name: "tiff-big.tif", format: "tiff", width: 43, height: 4, orientation: 8, contentType: "image/tiff",
        base64: """
            SUkqADgAAACAIBAACCQWDQeEQmFQuGQ2HQ+IRGEwKJRWLReMRmJRSNR2PR+QQiOSGSSWTQ2AgAAQAAABAwABAAAAKwAAAAEBAwAB
            AAAABAAAAAIBAwADAAAA/gAAAAMBAwABAAAABQAAAAYBAwABAAAAAgAAAAoBAwABAAAAAQAAABEBBAABAAAACAAAABIBAwABAAAA
            CAAAABUBAwABAAAAAwAAABYBAwABAAAABAAAABcBBAABAAAALwAAABwBAwABAAAAAQAAACkBAwACAAAAAAABAD0BAwABAAAAAgAA
            AD4BBQACAAAANAEAAD8BBQAGAAAABAEAAAAAAAAIAAgACACF61EAAACAAMP1qAAAAAACzcxMAAAAAAHNzEwAAACAAM3MTAAAAAAC
            j8L1AAAAABA3GqAAAAAAAiuHCgAAACAA
            """
    )

    /// ICO holding a 47x8 and a 12x12 BMP image; the larger one is the image, 2310 bytes.
    static let ico = FixtureImage(
        name: "ico.ico", format: "ico", width: 47, height: 8, contentType: "image/x-icon",
        base64: """
            AAABAAIALwgAAAEAIABIBgAAJgAAAAwMAAABACAAmAIAAG4GAAAoAAAALwAAABAAAAABACAAAAAAAOAFAAAAAAAAAAAAAAAAAAAA
            AAAAgAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/
            gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA
            /4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AA
            AP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+A
            AAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/
            gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA
            /4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AA
            AP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+A
            AAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/
            gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA
            /4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AA
            AP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+A
            AAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/
            gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA
            /4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AA
            AP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+A
            AAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/
            gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA
            /4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AA
            AP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+AAAD/gAAA/4AAAP+A
            AAD/gAAA/wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAoAAAA
            DAAAABgAAAABACAAAAAAAEACAAAAAAAAAAAAAAAAAAAAAAAAAACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA
            /wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAA
            gP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8A
            AID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/
            AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA
            /wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAA
            gP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8A
            AID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/AACA/wAAgP8AAID/
            AACA/wAAgP8AAID/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            """
    )

    /// 53x10 CUR (a cursor: type 2, hotspot 1,2), 2262 bytes.
    static let cur = FixtureImage(
        name: "cur.cur", format: "cur", width: 53, height: 10, contentType: "image/x-icon",
        base64: """
            AAACAAEANQoAAAEAAgDACAAAFgAAACgAAAA1AAAAFAAAAAEAIAAAAAAASAgAAAAAAAAAAAAAAAAAAAAAAACAAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/
            gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA
            /4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AA
            gP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+AAID/gACA/4AAgP+A
            AID/gACA/wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
            AAAAAAAAAAAAAAAA
            """
    )

    /// 59x12 HEIC from heif-enc (a grid item of HEVC tiles; the size is the primary item's ispe), 500 bytes.
    static let heic = FixtureImage(
        name: "heic.heic", format: "heic", width: 59, height: 12, contentType: "image/heic",
        base64: """
            AAAAGGZ0eXBoZWljAAAAAG1pZjFoZWljAAABrW1ldGEAAAAAAAAAIWhkbHIAAAAAAAAAAHBpY3QAAAAAAAAAAAAAAAAAAAAADnBp
            dG0AAAAAAAIAAAAQaWRhdAAAAAAAOwAMAAAAOGlsb2MBAAAAREAAAgABAAAAAAAAAc0AAQAAAAAAAAAnAAIAAQAAAAAAAAABAAAA
            AAAAAAgAAAA4aWluZgAAAAAAAgAAABVpbmZlAgAAAQABAABodmMxAAAAABVpbmZlAgAAAAACAABncmlkAAAAANhpcHJwAAAAtmlw
            Y28AAAB2aHZjQwEDcAAAAAAAAAAAAB7wAPz9+PgAAA8DIAABABhAAQwB//8DcAAAAwCQAAADAAADAB66AkAhAAEAKkIBAQNwAAAD
            AJAAAAMAAAMAHqAggQWW6q6a5uBAQMCAAAADAIAAAAMAhCIAAQAGRAHBc8GJAAAAFGlzcGUAAAAAAAAAQAAAAEAAAAAUaXNwZQAA
            AAAAAAA7AAAADAAAABBwaXhpAAAAAAMICAgAAAAaaXBtYQAAAAAAAAACAAECgQIAAgIDhAAAABppcmVmAAAAAAAAAA5kaW1nAAIA
            AQABAAAAL21kYXQAAAAjKAGvBBITjOD46cJoC1eT/oplUYvJ+0CrK+NJn3exGJKp/6A=
            """
    )

    /// 61x14 AVIF still from avifenc, 314 bytes.
    static let avif = FixtureImage(
        name: "avif.avif", format: "avif", width: 61, height: 14, contentType: "image/avif",
        base64: """
            AAAAIGZ0eXBhdmlmAAAAAGF2aWZtaWYxbWlhZk1BMUEAAADybWV0YQAAAAAAAAAoaGRscgAAAAAAAAAAcGljdAAAAAAAAAAAAAAA
            AGxpYmF2aWYAAAAADnBpdG0AAAAAAAEAAAAeaWxvYwAAAABEAAABAAEAAAABAAABGgAAACAAAAAoaWluZgAAAAAAAQAAABppbmZl
            AgAAAAABAABhdjAxQ29sb3IAAAAAamlwcnAAAABLaXBjbwAAABRpc3BlAAAAAAAAAD0AAAAOAAAAEHBpeGkAAAAAAwgICAAAAAxh
            djFDgSAAAAAAABNjb2xybmNseAABAA0ABoAAAAAXaXBtYQAAAAAAAAABAAEEAQKDBAAAAChtZGF0EgAKCDgU/NYQENBpMhIeAD//
            /8QA6VheIc7NSNI0SNE=
            """
    )

    /// 67x16 AVIF sequence (avis) of 2 frames from avifenc, 1850 bytes.
    static let avifSequence = FixtureImage(
        name: "avif-sequence.avif", format: "avif", width: 67, height: 16, frames: 2, contentType: "image/avif",
        base64: """
            AAAALGZ0eXBhdmlzAAAAAGF2aWZhdmlzbXNmMWlzbzhtaWYxbWlhZk1BMUEAAAGNbWV0YQAAAAAAAAAoaGRscgAAAAAAAAAAcGlj
            dAAAAAAAAAAAAAAAAGxpYmF2aWYAAAAADnBpdG0AAAAAAAEAAAAsaWxvYwAAAABEAAACAAEAAAABAAAG6wAAAC4AAgAAAAEAAAa8
            AAAAHgAAAEJpaW5mAAAAAAACAAAAGmluZmUCAAAAAAEAAGF2MDFDb2xvcgAAAAAaaW5mZQIAAAAAAgAAYXYwMUFscGhhAAAAABpp
            cmVmAAAAAAAAAA5hdXhsAAIAAQABAAAAw2lwcnAAAACdaXBjbwAAABRpc3BlAAAAAAAAAEMAAAAQAAAAEHBpeGkAAAAAAwgICAAA
            AAxhdjFDgSAAAAAAABNjb2xybmNseAABAA0ABoAAAAAOcGl4aQAAAAABCAAAAAxhdjFDgQAcAAAAADhhdXhDAAAAAHVybjptcGVn
            Om1wZWdCOmNpY3A6c3lzdGVtczphdXhpbGlhcnk6YWxwaGEAAAAAHmlwbWEAAAAAAAAAAgABBAECgwQAAgQBBYYHAAAE+21vb3YA
            AAB4bXZoZAEAAAAAAAAA5yoO5AAAAADnKg7kAAAAHgAAAAAAAAACAAEAAAEAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAQAA
            AAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIAAAIhdHJhawAAAGh0a2hkAQAAAQAAAADnKg7kAAAA
            AOcqDuQAAAABAAAAAAAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAQAAAAAAAAAAAAAAAAAAQAAAAABD
            AAAAEAAAAAABsW1kaWEAAAAsbWRoZAEAAAAAAAAA5yoO5AAAAADnKg7kAAAAHgAAAAAAAAACVcQAAAAAAChoZGxyAAAAAAAAAABw
            aWN0AAAAAAAAAAAAAAAAbGliYXZpZgAAAAFVbWluZgAAABR2bWhkAAAAAQAAAAAAAAAAAAAAJGRpbmYAAAAcZHJlZgAAAAAAAAAB
            AAAADHVybCAAAAABAAABFXN0YmwAAAAUc3RjbwAAAAAAAAABAAAG6wAAABxzdHNjAAAAAAAAAAEAAAABAAAAAgAAAAEAAAAcc3Rz
            egAAAAAAAAAAAAAAAgAAAC4AAAAhAAAAFHN0c3MAAAAAAAAAAQAAAAEAAAAYc3R0cwAAAAAAAAABAAAAAgAAAAEAAACVc3RzZAAA
            AAAAAAABAAAAhWF2MDEAAAAAAAAAAQAAAAAAAAAAAAAAAAAAAAAAQwAQAEgAAABIAAAAAAAAAAEKQU9NIENvZGluZwAAAAAAAAAA
            AAAAAAAAAAAAAAAAAAAY//8AAAAMYXYxQ4EgAAAAAAATY29scm5jbHgAAQANAAaAAAAAEGNjc3QAAAAAfAAAAAAAAlp0cmFrAAAA
            aHRraGQBAAABAAAAAOcqDuQAAAAA5yoO5AAAAAIAAAAAAAAAAAAAAAIAAAAAAAAAAAAAAAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAB
            AAAAAAAAAAAAAAAAAABAAAAAAEMAAAAQAAAAAAAUdHJlZgAAAAxhdXhsAAAAAQAAAdZtZGlhAAAALG1kaGQBAAAAAAAAAOcqDuQA
            AAAA5yoO5AAAAB4AAAAAAAAAAlXEAAAAAAAoaGRscgAAAAAAAAAAYXV4dgAAAAAAAAAAAAAAAGxpYmF2aWYAAAABem1pbmYAAAAU
            dm1oZAAAAAEAAAAAAAAAAAAAACRkaW5mAAAAHGRyZWYAAAAAAAAAAQAAAAx1cmwgAAAAAQAAATpzdGJsAAAAFHN0Y28AAAAAAAAA
            AQAABrwAAAAcc3RzYwAAAAAAAAABAAAAAQAAAAIAAAABAAAAHHN0c3oAAAAAAAAAAAAAAAIAAAAeAAAAEQAAABRzdHNzAAAAAAAA
            AAEAAAABAAAAGHN0dHMAAAAAAAAAAQAAAAIAAAABAAAAunN0c2QAAAAAAAAAAQAAAKphdjAxAAAAAAAAAAEAAAAAAAAAAAAAAAAA
            AAAAAEMAEABIAAAASAAAAAAAAAABCkFPTSBDb2RpbmcAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGP//AAAADGF2MUOBABwAAAAAEGNj
            c3QAAAAAfAAAAAAAADhhdXhpAAAAAHVybjptcGVnOm1wZWdCOmNpY3A6c3lzdGVtczphdXhpbGlhcnk6YWxwaGEAAAAAhm1kYXQS
            AAoKAAAAAxwvNr5KgDIOEACAAO75gBcZ7dVFVZASADINMAOAgP34RoACAOha8xIACg0gAAADHC82vkgIaDSAMhsQALIAppppFj50
            6U8SNxwf5M0/ygKFlRsVTJASADIdMAOAgP34BraAssssFiJtAOlJ5wlMNj2rV5bgBRc=
            """
    )

    /// 71x17 JPEG XL bare codestream from cjxl, 80 bytes.
    static let jxlCodestream = FixtureImage(
        name: "jxl-codestream.jxl", format: "jxl", width: 71, height: 17, contentType: "image/jxl",
        base64: """
            /wqAAIyAhMq9VQQBABOIBgD0ANNBCQCACpVRxg1ezvV8+aHDYtrGdYa22rawhLHZXhgkBEDdyFjGGNk4Ug0AgJWSnFk6khcwioAQ
            uF9RSQI=
            """
    )

    /// 73x18 JPEG XL in its box container from cjxl --container=1, 129 bytes.
    static let jxlContainer = FixtureImage(
        name: "jxl-container.jxl", format: "jxl", width: 73, height: 18, contentType: "image/jxl",
        base64: """
            AAAADEpYTCANCocKAAAAFGZ0eXBqeGwgAAAAAGp4bCAAAABhanhsY/8KiACQgITKvVUEAQATiAYAGAHTQQkAgAqVUcYNXs71fPmh
            w2LaxnWGttq2AAAAAB7AvhLGZnthkBAAdSNZMkY2laSdANhlDgSsEM/UY/sANNRZBcIrKkkA
            """
    )

    /// 79x19 APNG of 2 frames from apngasm, 309 bytes.
    static let apng = FixtureImage(
        name: "apng.png", format: "png", width: 79, height: 19, frames: 2, contentType: "image/png",
        base64: """
            iVBORw0KGgoAAAANSUhEUgAAAE8AAAATCAMAAADmpqA4AAAACGFjVEwAAAACAAAAAPONk3AAAAAJUExURQICAgAA//8AABiy5Q4A
            AAABdFJOUwBA5thmAAAAGmZjVEwAAAAAAAAATwAAABMAAAAAAAAAAAABAAoAAG/u5LAAAAAiSURBVDjL7cwxAQAACAOguf6hLeHh
            AQGY5lTj8/l8vo/fAoKeAChkfg3YAAAAGmZjVEwAAAABAAAATwAAABMAAAAAAAAAAAABAAoAAPSdDmQAAAAkZmRBVAAAAAI4y+3M
            MQEAAAwCoNm/9Ep4eEAALl0+n8/n2/webwcF3iZiB60AAAAcdEVYdFNvZnR3YXJlAEFQTkcgQXNzZW1ibGVyIDIuOTH+/Sr4AAAA
            AElFTkSuQmCC
            """
    )

    /// 83x20 GIF89a of 2 frames, 225 bytes.
    static let gifAnimated = FixtureImage(
        name: "gif-animated.gif", format: "gif", width: 83, height: 20, frames: 2, contentType: "image/gif",
        base64: """
            R0lGODlhUwAUAPAAAP8AAAAAACH5BAAKAAAAIf8LTkVUU0NBUEUyLjADAQAAACH/C0ltYWdlTWFnaWNrDWdhbW1hPTAuNDU0NTUA
            LAAAAABTABQAAAIohI+py+0Po5y02ouz3rz7D4biSJbmiabqyrbuC8fyTNf2jef6zvdLAQAh+QQACgAAACH/C0ltYWdlTWFnaWNr
            DWdhbW1hPTAuNDU0NTUALAAAAABTABQAgAAA/wAAAAIohI+py+0Po5y02ouz3rz7D4biSJbmiabqyrbuC8fyTNf2jef6zvdLAQA7
            """
    )

    /// 89x22 GIF whose trailer byte (0x3B) is missing, as CPython's idlelib icons shipped; browsers show it, 113 bytes.
    static let gifNoTrailer = FixtureImage(
        name: "gif-no-trailer.gif", format: "gif", width: 89, height: 22, contentType: "image/gif",
        base64: """
            R0lGODlhWQAWAPAAAP//AAAAACH5BAAAAAAAIf8LSW1hZ2VNYWdpY2sNZ2FtbWE9MC40NTQ1NQAsAAAAAFkAFgAAAiyEj6nL7Q+j
            nLTai7PevPsPhuJIluaJpurKtu4Lx/JM1/aN5/rO9/4PDAoTBQA=
            """
    )

    /// 97x24 animated WebP (VP8X, ANIM, 2 ANMF frames) from img2webp, 152 bytes.
    static let webpAnimated = FixtureImage(
        name: "webp-animated.webp", format: "webp", width: 97, height: 24, frames: 2, contentType: "image/webp",
        base64: """
            UklGRpAAAABXRUJQVlA4WAoAAAACAAAAYAAAFwAAQU5JTQYAAAD/////AABBTk1GLgAAAAAAAAAAAGAAABcAAGQAAAJWUDhMFQAA
            AC9gwAUABxD9j/4HgITwf70Y0f/UBgBBTk1GLgAAAAAAAAAAAGAAABcAAGQAAABWUDhMFQAAAC9gwAUABxDR//4HgITwf70Y0f/U
            BgA=
            """
    )

    /// 101x26 JPEG with EXIF orientation 6 (displayed 26x101), 344 bytes.
    static let jpegOrientation = FixtureImage(
        name: "jpeg-orientation.jpg", format: "jpeg", width: 101, height: 26, orientation: 6, contentType: "image/jpeg",
        base64: """
            /9j/4QAiRXhpZgAATU0AKgAAAAgAAQESAAMAAAABAAYAAAAAAAD/4AAQSkZJRgABAQAAAQABAAD/2wBDABsSFBcUERsXFhceHBsg
            KEIrKCUlKFE6PTBCYFVlZF9VXVtqeJmBanGQc1tdhbWGkJ6jq62rZ4C8ybqmx5moq6T/2wBDARweHigjKE4rK06kbl1upKSkpKSk
            pKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKSkpKT/wAARCAAaAGUDASIAAhEBAxEB/8QAFQABAQAAAAAA
            AAAAAAAAAAAAAAT/xAAUEAEAAAAAAAAAAAAAAAAAAAAA/8QAFgEBAQEAAAAAAAAAAAAAAAAAAAQG/8QAFBEBAAAAAAAAAAAAAAAA
            AAAAAP/aAAwDAQACEQMRAD8AvAWM0AAAAAAAAAAAAAAAAAAAAAAAAAA//9k=
            """
    )
}
