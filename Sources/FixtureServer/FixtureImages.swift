// Real image files of every supported format, small and each with a distinct width and height.
// They were encoded once with an ordinary image library and are kept here as base64 text, so the
// package needs no resources and no tools at build time.

import Foundation

extension FixtureCatalog {
    /// One image of each kind the sniffer must handle, in the order `/images.json` lists them.
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
    ]
}

/// The encoded fixture images.
enum FixtureImages {
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
}
