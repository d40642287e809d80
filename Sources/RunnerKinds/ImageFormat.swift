/// An image format the runner accepts: what `UIImage(data:)` decodes.
public enum ImageFormat: String, Sendable, CaseIterable {
    case png, jpeg, gif, webp, bmp, tiff, ico, cur, heic, avif, jxl

    /// The file extension a payload of this format is written with.
    public var fileExtension: String {
        switch self {
        case .jpeg: "jpg"
        default: rawValue
        }
    }

    /// The name people write: "PNG", "JPEG", "WebP", "HEIC", "JPEG XL", …
    public var displayName: String {
        switch self {
        case .png: "PNG"
        case .jpeg: "JPEG"
        case .gif: "GIF"
        case .webp: "WebP"
        case .bmp: "BMP"
        case .tiff: "TIFF"
        case .ico: "ICO"
        case .cur: "CUR"
        case .heic: "HEIC"
        case .avif: "AVIF"
        case .jxl: "JPEG XL"
        }
    }

    /// The media types an `Accept` header names for this format, most specific first.
    public var mediaTypes: [String] {
        switch self {
        case .png: ["image/apng", "image/png"]
        case .jpeg: ["image/jpeg"]
        case .gif: ["image/gif"]
        case .webp: ["image/webp"]
        case .bmp: ["image/bmp"]
        case .tiff: ["image/tiff"]
        case .ico: ["image/x-icon", "image/vnd.microsoft.icon"]
        case .cur: ["image/x-icon"]
        case .heic: ["image/heic", "image/heif"]
        case .avif: ["image/avif"]
        case .jxl: ["image/jxl"]
        }
    }

    /// The format a job's `formats` field names: the raw value, or "jpg", "tif", "heif".
    public init?(name: String) {
        switch name.lowercased() {
        case "jpg": self = .jpeg
        case "tif": self = .tiff
        case "heif": self = .heic
        case let other: self.init(rawValue: other)
        }
    }
}
