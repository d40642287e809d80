import Foundation

/// A real image file that the fixture server serves under `/images/<name>`.
public struct FixtureImage: Sendable {
    /// The file name it is served under, such as "png.png" or "jpeg-progressive.jpg".
    public let name: String
    /// The format its bytes are in: "png", "jpeg", "gif", "webp", "bmp", "tiff", "ico", "cur",
    /// "heic", "avif" or "jxl".
    public let format: String
    /// Its width in pixels, as its header records it.
    public let width: Int
    /// Its height in pixels, as its header records it.
    public let height: Int
    /// Its frames (more than 1 for an animation).
    public let frames: Int
    /// Its EXIF orientation, 1 (as stored) to 8.
    public let orientation: Int
    /// The Content-Type it is served with.
    public let contentType: String
    /// The whole file.
    public let bytes: [UInt8]

    public init(
        name: String, format: String, width: Int, height: Int, frames: Int = 1, orientation: Int = 1,
        contentType: String, bytes: [UInt8]
    ) {
        self.name = name
        self.format = format
        self.width = width
        self.height = height
        self.frames = frames
        self.orientation = orientation
        self.contentType = contentType
        self.bytes = bytes
    }

    /// An image whose bytes are given as base64 text (line breaks allowed).
    init(
        name: String, format: String, width: Int, height: Int, frames: Int = 1, orientation: Int = 1,
        contentType: String, base64: String
    ) {
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
            preconditionFailure("the fixture image \(name) is not valid base64")
        }
        self.init(
            name: name, format: format, width: width, height: height, frames: frames, orientation: orientation,
            contentType: contentType, bytes: [UInt8](data)
        )
    }
}
